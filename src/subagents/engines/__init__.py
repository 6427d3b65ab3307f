"""Engines: where agent runs execute.

The runtime hands every agent run to an :class:`~subagents.engines.base.Executor`; it never creates
tasks itself.  :class:`~subagents.engines.local.LocalExecutor` (the default) runs each agent as an
asyncio task in this process.  A durable engine (Temporal, see the scale-out issue) implements the
same protocol.
"""

from .base import Executor, RunHandle
from .local import LocalExecutor

__all__ = ["Executor", "LocalExecutor", "RunHandle"]
