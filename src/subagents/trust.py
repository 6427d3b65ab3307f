"""Trusted projects: which project settings may widen what agents can do.

A project's ``.subagents/config.toml``, its ``.mcp.json`` and its agent definitions come with the
project, which may be a repository cloned a minute ago, or a subdirectory an agent wrote them into.  From a
project that is not trusted, the settings that would widen what agents may do, where data goes or what runs
outside the sandbox are **ignored**, each named in a warning: the rest (limits, ``deny``/``ask`` rules,
``protect``, ``deny_read``, a narrower permission mode...) still apply.  Which keys need trust, and when,
is the ``trust`` column of :data:`subagents.config_keys.KEYS` (see :data:`WHEN`); also every project
``[[hooks.*]]``, every project ``[mcp.servers.*]`` and ``.mcp.json`` server, and the inline MCP servers of
the project's agent definitions.

A project is trusted when its directory is listed in ``trusted-projects`` in the user's config directory
(one absolute path per line; ``subagents trust`` adds the current one) or when the code says so
(``Runtime(trust_project=True)``).  Trust is per directory, not per tree: a subdirectory with settings of its
own is a project of its own.  The user's own config file needs no trust.

>>> from pathlib import Path
>>> needs_trust("sandbox.mode", "off"), needs_trust("sandbox.mode", "bwrap")
(True, False)
>>> needs_trust("permissions.mode", "yolo"), needs_trust("permissions.mode", "plan")
(True, False)
>>> needs_trust("agents.max_threads", 64)
False
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .authority.names import canonical_mode
from .config_keys import KEYS
from .exceptions import ConfigError

__all__ = ["TRUST_FILE", "WHEN", "add_trusted", "is_trusted", "mcp_json_ignored", "needs_trust", "remove_trusted",
           "trusted_projects", "untrusted_note"]

TRUST_FILE = "trusted-projects"
"""The file in the user's config directory that lists the trusted project directories."""


def _wider_mode(value: Any) -> bool:
    try:
        return canonical_mode(str(value)) in ("autoEdit", "yolo")
    except ValueError:
        return False  # not a mode at all: the loader's error says so


WHEN: dict[str, Callable[[Any], bool]] = {
    "always": lambda v: v is not None,
    "true": lambda v: v is True,
    "non-empty": lambda v: bool(v),
    "off": lambda v: v == "off",
    "wider mode": _wider_mode,
    "base URL": lambda v: isinstance(v, str) and "@" in v,
}
"""A key's ``trust`` condition (:attr:`subagents.config_keys.Key.trust`) -> whether a project value needs trust."""

_TRUST = {k.dotted: WHEN[k.trust] for k in KEYS if k.trust is not None}


def needs_trust(dotted: str, value: Any) -> bool:
    """Whether a project file's ``value`` for ``dotted`` (``sandbox.mode``, ``providers.openai.base_url``) is
    applied only in a trusted project."""
    if dotted.startswith("providers."):
        dotted = "providers.*." + dotted.rsplit(".", 1)[1]
    test = _TRUST.get(dotted)
    return test is not None and test(value)


def _file(config_dir: Path) -> Path:
    return config_dir / TRUST_FILE


def trusted_projects(config_dir: Path) -> list[Path]:
    """The directories listed in ``config_dir``'s trust file (``#`` starts a comment; blank lines skipped)."""
    path = _file(config_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e}); fix its permissions or remove it") from None
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(Path(os.path.expanduser(line)))
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def is_trusted(workdir: Path, config_dir: Path) -> bool:
    """Whether ``workdir`` is one of the trusted directories (the same directory, not one below it)."""
    return any(_same(workdir, p) for p in trusted_projects(config_dir))


def add_trusted(workdir: Path, config_dir: Path) -> bool:
    """List ``workdir`` (resolved) as trusted; ``False`` when it already was."""
    if is_trusted(workdir, config_dir):
        return False
    path = _file(config_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else \
        "# Projects whose settings may widen what agents can do (subagents trust); one directory per line.\n"
    if old and not old.endswith("\n"):
        old += "\n"
    _write(path, old + f"{workdir.resolve()}\n")
    return True


def remove_trusted(workdir: Path, config_dir: Path) -> bool:
    """Stop trusting ``workdir``; ``False`` when it was not listed."""
    path = _file(config_dir)
    if not path.exists():
        return False
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [ln for ln in lines
            if not (ln.split("#", 1)[0].strip() and _same(Path(os.path.expanduser(ln.split("#", 1)[0].strip())),
                                                          workdir))]
    if len(kept) == len(lines):
        return False
    _write(path, "".join(kept))
    return True


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def mcp_json_ignored(path: Path) -> dict[str, str]:
    """The servers of an untrusted project's ``.mcp.json``, as :attr:`~subagents.config.Settings.ignored` lists
    them (not started; a file that cannot be read is named whole)."""
    if not path.is_file():
        return {}
    try:
        servers = json.loads(path.read_text(encoding="utf-8")).get("mcpServers", {})
        names = [n for n, c in servers.items() if not (isinstance(c, dict) and c.get("disabled") is True)]
    except (OSError, ValueError, AttributeError):
        return {"the MCP servers of .mcp.json": str(path)}
    return {f"MCP server {n!r}": str(path) for n in names}


def untrusted_note(project: Path, ignored: Mapping[str, str]) -> str:
    """The warning for settings an untrusted project asked for: what was ignored and how to apply it."""
    by_file: dict[str, list[str]] = {}
    for what, where in ignored.items():
        by_file.setdefault(where, []).append(what)
    shown = "; ".join(f"from {where}: {', '.join(whats)}" for where, whats in by_file.items())
    return (f"the project {project} is not trusted, so these of its settings were ignored ({shown}). "
            "If you have read them and trust this project, run `subagents trust` in it (or pass "
            "trust_project=True) to apply them")
