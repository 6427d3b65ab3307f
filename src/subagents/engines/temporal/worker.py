"""The worker side: a Temporal worker that runs agent workflows and their activities.

The worker holds a :class:`~subagents.runtime.runtime.Runtime` built with the same configuration a local
run would have (workdir, ``.subagents/config.toml``, store, model, Python tools); it never enters it
(the workflows, not the runtime, own the runs: no recovery, no sweeper).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import PollerBehaviorAutoscaling, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ...models.base import Model
from ...runtime.runtime import Runtime
from .activities import AgentActivities
from .connection import connect
from .target import TemporalTarget
from .workflow import AgentWorkflow

__all__ = ["build_worker", "serve"]


def build_worker(client: Client, rt: Runtime, task_queue: str, *, max_concurrent: int = 100) -> Worker:
    """A worker for ``task_queue`` whose activities run with ``rt``'s configuration."""
    restrictions = SandboxRestrictions.default.with_passthrough_modules("subagents")
    return Worker(
        client, task_queue=task_queue, workflows=[AgentWorkflow],
        activities=AgentActivities(rt, f"temporal:{task_queue}").activities(),
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        max_concurrent_activities=max_concurrent,
        # a fan-out is hundreds of short workflow and activity tasks: poll for them as fast as they come
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        # a worker that died leaves its cached workflows: another one picks them up after this delay
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
    )


async def serve(target: TemporalTarget, *, model: Model | str | None, workdir: str = ".",
                store: str | None = None, tools: Sequence[Any] = (), stop: asyncio.Event | None = None,
                **runtime_args: Any) -> None:
    """Run a worker until ``stop`` is set (or the task is cancelled)."""
    # engine="": the agents run here, even where the project's config names an engine URL (the clients' setting)
    rt = Runtime(model=model, workdir=workdir, store=store, tools=tools, engine="", **runtime_args)
    try:
        client = await connect(target)
        async with build_worker(client, rt, target.task_queue):
            if stop is None:
                await asyncio.Event().wait()
            else:
                await stop.wait()
    finally:
        await rt.aclose()
