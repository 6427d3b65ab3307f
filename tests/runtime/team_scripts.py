"""Scripted models for the team tests (also imported by the restart test's child process)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.teams.model import MailRecord, TaskRecord

NAME = re.compile(r'^You are "([a-z0-9_-]+)", a teammate in team "([a-z0-9_-]+)"')


def member_name(req: ModelRequest) -> str | None:
    """The teammate's name, from its first prompt (``None``: not a teammate)."""
    first = req.messages[0].text if req.messages else ""
    m = NAME.match(first)
    return m.group(1) if m else None


def turns(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.role == "assistant")


def call(name: str, args: dict[str, Any], i: int = 0) -> ToolCall:
    return ToolCall(name, args, id=f"{name}_{i}")


class LeadAndWorkers:
    """The lead (a coordinator root) makes team ``t``, ``n_tasks`` tasks and ``n_workers`` teammates; each teammate
    claims tasks until none is left, completes each with a note and tells the lead; the lead collects the messages."""

    def __init__(self, n_workers: int = 3, n_tasks: int = 3) -> None:
        self.n_workers, self.n_tasks = n_workers, n_tasks
        self.lead_prompts: list[str] = []  # what reached the lead after it set things up

    def __call__(self, req: ModelRequest) -> ModelResponse:
        me = member_name(req)
        if me is None:
            return self.lead(req)
        return self.worker(req, me)

    def lead(self, req: ModelRequest) -> ModelResponse:
        n = turns(req)
        if n == 0:
            return ModelResponse(tool_calls=[call("team_create", {"name": "t"})])
        if n == 1:
            return ModelResponse(tool_calls=[
                *(call("task_create", {"subject": f"job {i}"}, i) for i in range(self.n_tasks)),
                *(call("spawn_agent", {"agent_type": "general-purpose", "prompt": "do the jobs", "team": "t",
                                       "name": f"w{i}"}, i) for i in range(self.n_workers))])
        last = req.messages[-1]
        self.lead_prompts.append(last.text or "\n".join(r.content for r in last.tool_results))
        return ModelResponse(text="lead done")

    def worker(self, req: ModelRequest, me: str) -> ModelResponse:
        last = req.messages[-1]
        results = last.tool_results
        if not results or last.text.startswith("<team-message"):
            return ModelResponse(tool_calls=[call("task_claim", {})])
        content = results[0].content
        if content.startswith("you own #"):
            tid = int(content.split("#", 1)[1].split(" ", 1)[0])
            return ModelResponse(tool_calls=[
                call("task_update", {"task_id": tid, "status": "completed", "note": f"{me} did {tid}"}),
                call("send_message", {"to": "lead", "text": f"{me} did {tid}"})])
        if content.startswith(("updated", "message sent")):
            return ModelResponse(tool_calls=[call("task_claim", {}, turns(req))])
        return ModelResponse(text=f"{me}: nothing left")


class Script:
    """``ann`` makes ``calls`` one per turn, then ends its turn; ``bob`` records each prompt it gets and goes idle."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.results: list[tuple[bool, str]] = []  # ann's tool results: (is_error, content)
        self.bob: list[str] = []

    def __call__(self, req: ModelRequest) -> ModelResponse:
        last = req.messages[-1]
        if member_name(req) == "bob":
            self.bob.append(last.text)
            return ModelResponse(text="bob idle")
        self.results.extend((r.is_error, r.content) for r in last.tool_results)
        n = sum(1 for m in req.messages if m.role == "assistant" and m.tool_uses)
        if n < len(self.calls):
            return ModelResponse(tool_calls=[call(*self.calls[n], n)])
        return ModelResponse(text="ann done")


async def drive(workdir: Path, calls: list[tuple[str, dict[str, Any]]], tasks: int = 0, completed: int = 0,
                subject: str = "job") -> tuple[Script, list[MailRecord], list[TaskRecord]]:
    """A Python-led team ``t``: ``tasks`` tasks on the board (the first ``completed`` of them completed by the lead),
    ``bob`` idle, then ``ann`` runs ``calls``."""
    s = Script(calls)
    async with Runtime(model=FunctionModel(s), workdir=workdir, store="memory") as rt:
        team = rt.create_team("t")
        for i in range(tasks):
            await team.add_task(f"{i} {subject}")
        for i in range(completed):
            await team.complete_task(i + 1, "done")
        team.spawn("bob", "wait for mail")
        assert await team.wait_idle(timeout=5)
        team.spawn("ann", "go")
        assert await team.wait_idle(timeout=10)
        mail, board = team.mail(1000), team.tasks
        team.shutdown()
    return s, mail, board
