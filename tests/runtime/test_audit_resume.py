"""Seed 001 resume_agent, "the agent's full context is preserved": what a run carries besides its transcript —
its output schema, its todo list — survives a new process (the records of docs/seed-audit.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.messages import Message
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.structured import REMINDER

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def runtime(db: Path, fn: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=db.parent, store=f"sqlite:///{db}")


async def test_a_structured_run_resumed_in_a_new_process_must_still_end_with_a_valid_result(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with runtime(db, lambda req: ModelResponse(tool_calls=[ToolCall("final_result", {"n": 1})])) as rt:
        first = await rt.run("count", output_schema=SCHEMA)
    assert first.text == '{"n": 1}'
    seen: list[tuple[ModelRequest, list[Message]]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append((req, list(req.messages)))  # the request's list grows as the run goes on: keep a copy
        if len(seen) == 1:
            return ModelResponse(text="two")  # plain text is no result
        if len(seen) == 2:
            return ModelResponse(tool_calls=[ToolCall("final_result", {"n": "two"})])  # does not validate
        return ModelResponse(tool_calls=[ToolCall("final_result", {"n": 2})])

    async with runtime(db, fn) as rt:  # a new process: the run comes back from the store
        h = await rt.resume(first.id, "add one")
        r = (await rt.wait([h.id]))[h.id]
    assert "final_result" in seen[0][0].tool_names
    assert "call the `final_result` tool" in seen[0][0].system
    assert seen[0][1][-1].text == "add one"
    assert seen[1][1][-1].text == REMINDER
    assert "the result does not match the schema" in seen[2][1][-1].tool_results[0].content
    assert (r.text, r.output) == ('{"n": 2}', {"n": 2})


async def test_a_todo_list_comes_back_with_its_agent_in_a_new_process(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    plan = [{"content": "read the code", "status": "completed"}, {"content": "fix the bug", "status": "in_progress"}]

    def first(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("todo_write", {"todos": plan}),
                                             ToolCall("todo_write", {"todos": [{"content": "", "status": "x"}]})])
        return ModelResponse(text="half done")

    async with runtime(db, first) as rt:
        r = await rt.run("fix it")
    read: list[str] = []

    def second(req: ModelRequest) -> ModelResponse:
        if req.messages[-1].text == "go on":
            return ModelResponse(tool_calls=[ToolCall("todo_read", {})])
        read.append(req.messages[-1].tool_results[0].content)
        return ModelResponse(text="done")

    async with runtime(db, second) as rt:
        h = await rt.resume(r.id, "go on")
        await rt.wait([h.id])
    assert read == ["Your todo list (2 items: 1 completed, 1 in progress, 0 pending):\n[x] 1. read the code\n"
                    "[~] 2. fix the bug"]  # the failed second call changed nothing, then or now
