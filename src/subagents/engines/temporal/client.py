"""The client side: :class:`TemporalEngine` starts root agents as workflows and steers them.

>>> # doctest: +SKIP
>>> engine = await TemporalEngine.connect("temporal://localhost:7233?task_queue=subagents")
>>> result = await engine.run("Find where settings are parsed", agent="explore")

Runs execute on workers (``subagents worker``); this side needs no model, no tools: it asks the
workers by task queue.  Results, status and transcripts are in the run store as with the local engine.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import asdict
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from ...authority.approvals import Decision
from ...exceptions import SpawnError, UserError
from ...limits import Limits
from ...runtime.result import RunResult
from .connection import connect
from .shapes import WORKFLOW_NAME, ActivityOptions, AgentJob, AgentOutcome, AgentStart, ResumeStart
from .target import TemporalTarget

__all__ = ["TemporalEngine"]

_STATUS = {WorkflowExecutionStatus.RUNNING: "running", WorkflowExecutionStatus.COMPLETED: "completed",
           WorkflowExecutionStatus.FAILED: "errored", WorkflowExecutionStatus.TIMED_OUT: "errored",
           WorkflowExecutionStatus.TERMINATED: "shutdown", WorkflowExecutionStatus.CANCELED: "shutdown"}


class TemporalEngine:
    """Root agents as Temporal workflows (see the module docstring)."""

    name = "temporal"

    def __init__(self, client: Client, target: TemporalTarget, options: ActivityOptions | None = None) -> None:
        self.client = client
        self.target = target
        self.options = options or ActivityOptions()

    @classmethod
    async def connect(cls, url: str, options: ActivityOptions | None = None) -> TemporalEngine:
        """Connect to the server of the engine URL ``temporal://host:port?namespace=...&task_queue=...``."""
        target = TemporalTarget.parse(url)
        return cls(await connect(target), target, options)

    async def start(self, prompt: str, agent: str = "general-purpose", *, limits: Limits | None = None,
                    model: str | None = None, label: str = "", background: bool = False) -> str:
        """Start a root agent; returns its run id (the workflow id) at once (``background``: recorded so)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise SpawnError("the prompt is empty; give the agent a task to do")
        if model is not None and not isinstance(model, str):
            raise UserError("on the Temporal engine a model is named by a string (the workers resolve it), "
                            f"not passed as an object; got {type(model).__name__}")
        run_id = str(uuid.uuid4())
        start = AgentStart(run_id, agent, prompt, label, model, asdict(limits) if limits else {}, self.options,
                           background=background)
        await self.client.start_workflow(WORKFLOW_NAME, AgentJob(start=start), id=run_id,
                                         task_queue=self.target.task_queue)
        return run_id

    async def result(self, run_id: str) -> RunResult:
        """Wait for the run ``run_id`` to end and return its result."""
        handle: WorkflowHandle[Any, AgentOutcome] = self.client.get_workflow_handle(run_id, result_type=AgentOutcome)
        try:
            out = await handle.result()
        except RPCError as e:
            raise SpawnError(f"no agent run {run_id!r} on the Temporal engine ({e.message})") from None
        except WorkflowFailureError as e:
            cause: BaseException = e
            while getattr(cause, "cause", None) is not None:  # the activity's own error, under the wrappers
                cause = cause.cause  # type: ignore[attr-defined]
            raise SpawnError(f"agent run {run_id} failed on the Temporal engine: "
                             f"{getattr(cause, 'message', None) or cause}") from None
        return RunResult.from_dict(out.result)

    async def run(self, prompt: str, agent: str = "general-purpose", *, limits: Limits | None = None,
                  model: str | None = None) -> RunResult:
        """Run a root agent to its end (on the workers) and return its result."""
        return await self.result(await self.start(prompt, agent, limits=limits, model=model))

    async def send_input(self, run_id: str, message: str) -> None:
        """Deliver ``message`` to a running agent at its next tool boundary (a signal)."""
        try:
            await self.client.get_workflow_handle(run_id).signal("send_input", message)
        except RPCError as e:  # ended (or never existed): the server refuses the signal
            raise SpawnError(f"agent run {run_id} is not running on the Temporal engine ({e.message}); "
                             "resume it to give it more work") from None

    async def close(self, run_id: str) -> RunResult:
        """Close a run and its descendants (cancellation); returns its partial result (its result when it
        had already ended)."""
        with contextlib.suppress(RPCError):  # it has ended already (or never existed: result() says so)
            await self.client.get_workflow_handle(run_id).cancel()
        return await self.result(run_id)

    async def approvals(self, run_id: str) -> list[dict[str, Any]]:
        """The calls of run ``run_id`` waiting for a person (``ApprovalRequest.to_dict()`` fields, ``id`` = the
        call id); ``[]`` when the run has ended or is unknown."""
        try:
            pending: list[dict[str, Any]] = await self.client.get_workflow_handle(run_id).query(
                "approvals", result_type=list)
        except (RPCError, WorkflowQueryFailedError):
            return []
        return pending

    async def decide(self, run_id: str, call_id: str, decision: Decision, *, created_at: float | None = None) -> str:
        """Answer the approval the call ``call_id`` of run ``run_id`` waits for (an update); returns what was
        decided (``allowed once`` / ``allowed always`` / ``denied``).  Refused (:class:`UserError`) when that
        call is not waiting for a decision (unknown, decided already, or its run has ended), or when
        ``created_at`` (the request's, from :meth:`approvals`) names another request than the one waiting.

        Without ``created_at`` the answer goes to whatever waits under ``call_id``: a model may give a later
        turn's call the id of an earlier one (some OpenAI-compatible servers number each answer's calls from 0),
        so pass the ``created_at`` of the request the answer was decided on."""
        fields: dict[str, Any] = {"behavior": decision.behavior, "always": decision.always, "rule": decision.rule,
                                  "message": decision.message, "decided_by": decision.decided_by}
        if created_at is not None:
            fields["created_at"] = created_at
        try:
            out: str = await self.client.get_workflow_handle(run_id).execute_update(
                "decide", args=[call_id, fields], result_type=str)
        except WorkflowUpdateFailedError as e:
            why = getattr(e.cause, "message", None) or str(e.cause or e)
            raise UserError(f"agent run {run_id}: the decision was refused: {why}") from None
        except RPCError as e:
            raise UserError(f"agent run {run_id} is not running on the Temporal engine ({e.message}); "
                            "there is nothing to approve") from None
        return out

    async def resume(self, run_id: str, message: str, *, limits: Limits | None = None) -> None:
        """Reopen the finished run ``run_id`` with its conversation and ``message`` (a new workflow execution
        with the same id); its result comes from :meth:`result`."""
        job = AgentJob(resume=ResumeStart(run_id, message, asdict(limits) if limits else {}, self.options))
        try:
            await self.client.start_workflow(WORKFLOW_NAME, job, id=run_id, task_queue=self.target.task_queue)
        except WorkflowAlreadyStartedError:
            raise SpawnError(f"agent run {run_id} is still running; use send_input to give it more instructions, "
                             "or wait for it") from None

    async def status(self, run_id: str) -> str:
        """``running`` / ``completed`` / ``errored`` / ``shutdown``, or ``not_found``."""
        try:
            desc = await self.client.get_workflow_handle(run_id).describe()
        except RPCError:
            return "not_found"
        if desc.status == WorkflowExecutionStatus.COMPLETED:
            out = await self.client.get_workflow_handle(run_id, result_type=AgentOutcome).result()
            return str(out.result.get("status", "completed"))
        return _STATUS.get(desc.status, "running") if desc.status is not None else "not_found"
