"""Run status (a closed enum with ``is_final``) and outcome."""

from __future__ import annotations

import enum

__all__ = ["Outcome", "Status"]


class Status(enum.StrEnum):
    """Lifecycle of one agent: ``pending_init → running → completed | errored | shutdown``.

    ``not_found`` is only ever an answer to "what is the status of this id?".
    """

    PENDING_INIT = "pending_init"
    RUNNING = "running"
    COMPLETED = "completed"
    ERRORED = "errored"
    SHUTDOWN = "shutdown"
    NOT_FOUND = "not_found"

    def is_final(self) -> bool:
        return self in _FINAL


_FINAL = frozenset({Status.COMPLETED, Status.ERRORED, Status.SHUTDOWN})


class Outcome(enum.StrEnum):
    """Why a run ended; computed by the runtime, never taken from the model."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    LIMIT = "limit"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    def status(self) -> Status:
        """The final status that goes with this outcome."""
        if self is Outcome.OK:
            return Status.COMPLETED
        if self is Outcome.CANCELLED:
            return Status.SHUTDOWN
        return Status.ERRORED
