"""Models named by import path: ``--model package.module:attribute``.

Besides ``provider:model`` strings (``anthropic:…``, ``openai:…``), a command may name a Python object:
``mypkg.models:scripted`` imports ``mypkg.models`` and takes its ``scripted`` attribute, which is a model
(anything with an async ``request``, e.g. a :class:`~subagents.models.FunctionModel`) or a function of no
arguments that returns one.  This is how a server runs with a local or scripted model, and how tests drive
``subagents serve`` in a subprocess.

A spec is an import path only when its part before ``:`` is not a provider name and names a module that
can be found; anything else is left to the provider resolution (and its error messages).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import Any

from ..exceptions import ConfigError
from ..models.base import Model

__all__ = ["is_import_path", "load_model_ref"]

_PROVIDERS = frozenset({"anthropic", "openai"})
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def is_import_path(spec: str) -> bool:
    """Whether ``spec`` reads ``module.path:attribute`` with a module that exists (not ``provider:model``)."""
    module, sep, attr = spec.strip().partition(":")
    if not sep or module.lower() in _PROVIDERS or not _DOTTED.fullmatch(module) or not _DOTTED.fullmatch(attr):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or is not a package
        return False


def load_model_ref(spec: str) -> Model:
    """The model ``module.path:attribute`` names; :class:`ConfigError` saying why when it names none."""
    module_name, _, attr = spec.strip().partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # the user's module: any failure is reported
        raise ConfigError(f"cannot import {module_name!r} for the model {spec!r}: {type(e).__name__}: {e}; "
                          "check the module (and that its directory is on PYTHONPATH)") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{module_name!r} has no attribute {attr!r} for the model {spec!r}; name a model "
                              "object or a function that returns one")
        obj = getattr(obj, part)
    if not hasattr(obj, "request") and callable(obj):
        try:
            obj = obj()
        except Exception as e:  # the factory is the user's code
            raise ConfigError(f"the model factory {spec!r} failed: {type(e).__name__}: {e}") from None
    if not hasattr(obj, "request"):
        raise ConfigError(f"{spec!r} is a {type(obj).__name__}, not a model; it must be an object with an async "
                          "request() (e.g. subagents.models.FunctionModel) or a function that returns one")
    model: Model = obj
    return model
