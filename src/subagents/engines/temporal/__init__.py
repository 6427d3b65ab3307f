"""The Temporal engine: every agent run is a durable workflow on Temporal workers.

Mapping (see docs/scale-out.md): an agent run is the workflow ``subagents.Agent`` whose id is the run
id (:mod:`.workflow`); a model call and a tool call are activities (:mod:`.activities`, with timeouts
and retries); a child agent is a child workflow (:mod:`.agent_tools`); a background child's result
reaches its parent as an ``announce`` signal carrying its idempotency key (delivered once);
``send_input`` is a signal and ``close`` a cancellation.  Status, transcripts and results are written to
the run store by the activities, so ``subagents runs`` works unchanged.

:class:`~.client.TemporalEngine` is the client side; :func:`~.worker.serve` runs a worker.  The
modules are imported on use (``temporalio`` is the ``temporal`` extra).
"""

from __future__ import annotations

from .target import TemporalTarget, find_cli, load_object

__all__ = ["TemporalTarget", "find_cli", "load_object"]
