"""Exceptions of ``subagents``, split by who must act.

::

    SubagentsError
    ├── UserError            the developer misused the API or the configuration: fix the call or the file
    │   ├── ConfigError      a settings file or environment variable is wrong (names file, key, expected type)
    │   └── DefinitionError  an agent definition is malformed or unknown
    ├── ModelError           a model provider failed (names provider, status and the server's message)
    ├── StoreError           the run store cannot be opened or written (names the file and what to do)
    └── LimitExceeded        a limit stopped a run (control flow inside the loop; becomes a RunResult)

Errors a *model* causes (unknown tool, bad arguments) are not exceptions: they go back to the model
as tool errors (:class:`ToolError` is how a tool says so).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "DefinitionError",
    "LimitExceeded",
    "ModelError",
    "SpawnError",
    "StoreError",
    "SubagentsError",
    "ToolError",
    "UnconfinedShellWarning",
    "UntrustedProjectWarning",
    "UserError",
]


class SubagentsError(Exception):
    """Base class of every error raised by ``subagents``."""


class UserError(SubagentsError):
    """The developer misused the API or the configuration."""


class ConfigError(UserError):
    """A settings file, environment variable or argument has a bad value."""


class DefinitionError(UserError):
    """An agent definition is malformed or names an unknown agent type."""


class SpawnError(SubagentsError):
    """A spawn was refused (unknown type, empty prompt, max_depth or max_threads reached)."""


class ModelError(SubagentsError):
    """A model provider failed in a way retries did not fix."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable


class StoreError(SubagentsError):
    """The run store cannot be opened, read or written."""


class LimitExceeded(SubagentsError):
    """A limit was reached: ``Exceeded max_turns=30 (turns=31)``."""

    def __init__(self, limit: str, value: Any, seen: Any) -> None:
        super().__init__(f"Exceeded {limit}={value} ({limit.removeprefix('max_').removesuffix('_s')}={seen})")
        self.limit = limit
        self.value = value
        self.seen = seen


class UnconfinedShellWarning(UserWarning):
    """Warned by every ``Runtime`` whose shell runs unconfined (``[sandbox] mode = "off"``)."""


class UntrustedProjectWarning(UserWarning):
    """Warned when settings of a project that is not trusted were ignored (see :mod:`subagents.trust`)."""


class ToolError(SubagentsError):
    """Raised by a tool to return an error message to the model (the run goes on)."""
