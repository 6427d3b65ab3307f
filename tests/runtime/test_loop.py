"""AgentCore: multi-turn tool use, parallel read-only calls, limits, timeouts, bad model output."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from procutil import marked, marker, none_marked
from subagents import Limits, Outcome, Status, Usage, tool
from subagents.messages import Message, ToolResultBlock
from subagents.models import AgentInfo, FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.models.pricing import Prices
from subagents.runtime.events import Event, EventBus
from subagents.runtime.loop import AgentCore
from subagents.tools.base import ToolCategory, ToolContext, ToolRegistry
from subagents.tools.builtin import builtin_tools
from subagents.tools.paths import Workspace

INFO = AgentInfo("a1", "tester", "general-purpose")


def make_core(fn: Any, workdir: Path, *, tools: list[Any] | None = None, limits: Limits | None = None,
              allow: list[str] | None = None, bus: EventBus | None = None, model: Any = None) -> AgentCore:
    registry = ToolRegistry(tools if tools is not None else builtin_tools(), allow=allow, agent_type="general-purpose")
    ctx = ToolContext(agent=INFO, workspace=Workspace(workdir))
    return AgentCore(info=INFO, model=model or FunctionModel(fn), system="sys", registry=registry, ctx=ctx,
                     limits=limits, bus=bus)


def results_of(req: ModelRequest) -> list[ToolResultBlock]:
    return req.messages[-1].tool_results


async def test_multi_turn_tool_use_reads_real_files(workdir: Path) -> None:
    (workdir / "notes.txt").write_text("alpha\nbeta\n")
    seen: list[list[str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append([m.role for m in req.messages])
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="c1")])
        if len(req.messages) == 3:
            body = results_of(req)[0].content
            assert "beta" in body
            return ModelResponse(tool_calls=[ToolCall("write_file", {"path": "out.txt", "content": "seen beta"})])
        return ModelResponse(text="wrote out.txt", usage=Usage(10, 5))

    core = make_core(fn, workdir)
    r = await core.run("summarise notes.txt")
    assert (r.status, r.outcome, r.text, r.turns, r.tool_calls) == (Status.COMPLETED, Outcome.OK, "wrote out.txt", 3, 2)
    assert (workdir / "out.txt").read_text() == "seen beta"
    assert seen == [["user"], ["user", "assistant", "user"], ["user", "assistant", "user", "assistant", "user"]]
    assert core.messages[2].tool_results[0].tool_use_id == "c1"
    assert r.usage == Usage(10, 5)
    assert r.cost_usd is None  # a scripted model has no price: unknown, not free


async def test_parallel_read_only_calls_run_concurrently(workdir: Path) -> None:
    running = 0
    peak = 0

    @tool(category=ToolCategory.READ)
    async def probe(n: int) -> str:
        """Probe."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return f"p{n}"

    @tool(category=ToolCategory.EDIT)
    async def mutate(n: int) -> str:
        """Mutate."""
        nonlocal running, peak
        running += 1
        peak_before = peak
        await asyncio.sleep(0.01)
        running -= 1
        return f"m{n} {peak_before}"

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("probe", {"n": i}) for i in range(4)]
                                 + [ToolCall("mutate", {"n": 9})])
        return ModelResponse(text=",".join(r.content.split()[0] for r in results_of(req)))

    core = make_core(fn, workdir, tools=[probe, mutate])
    r = await core.run("go")
    assert r.text == "p0,p1,p2,p3,m9"  # results keep the order of the calls
    assert peak == 4  # the four read-only calls overlapped; the edit ran alone after them


async def test_unknown_tool_and_bad_arguments_go_back_to_the_model(workdir: Path) -> None:
    flags: list[bool] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("nope", {}), ToolCall("read_file", {"path": 3}),
                                             ToolCall("read_file", {"path": "x", "bogus": 1})])
        flags.extend(r.is_error for r in results_of(req))
        return ModelResponse(text=" | ".join(r.content for r in results_of(req)))

    r = await make_core(fn, workdir, allow=["read_file", "list_dir"]).run("go")
    assert r.outcome is Outcome.OK
    assert r.text == (
        "unknown tool 'nope'; the tools available to this agent are: read_file, list_dir | "
        "invalid arguments for tool 'read_file': arguments.path must be string, got integer. "
        "Fix the arguments and call it again. | "
        "invalid arguments for tool 'read_file': arguments has an unexpected property 'bogus' "
        "(allowed: path, offset, limit). Fix the arguments and call it again."
    )
    assert flags == [True, True, True]


async def test_fence_enforced_at_execute_time(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        assert req.tool_names == ["read_file"]  # write_file is not even offered
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "no"})])
        res = results_of(req)[0]
        return ModelResponse(text=f"{res.is_error}: {res.content}")

    r = await make_core(fn, workdir, allow=["read_file"]).run("go")
    assert r.text == ("True: tool 'write_file' is not available to agent type 'general-purpose': it is outside "
                      "this agent's tool fence and was not run. Use one of: read_file")
    assert not (workdir / "x.txt").exists()


def _looping(req: ModelRequest) -> ModelResponse:
    n = len(req.messages)
    return ModelResponse(text=f"step {n}", tool_calls=[ToolCall("list_dir", {})], usage=Usage(100, 50))


@pytest.mark.parametrize(
    ("limits", "limit", "error"),
    [
        (Limits(max_turns=3), "max_turns", "Exceeded max_turns=3 (turns=4)"),
        (Limits(max_tokens=400), "max_tokens", "Exceeded max_tokens=400 (tokens=450)"),
        (Limits(max_cost_usd=0.0004), "max_cost_usd", "Exceeded max_cost_usd=0.0004 (cost_usd=0.00045)"),
    ],
)
async def test_limits_stop_with_partial_text(workdir: Path, limits: Limits, limit: str, error: str) -> None:
    model = FunctionModel(_looping, prices=Prices(1.0, 1.0))  # 150 tokens = $0.00015 per turn
    r = await make_core(None, workdir, limits=limits, model=model).run("loop forever")
    assert (r.status, r.outcome, r.limit, r.truncated, r.error) == (Status.ERRORED, Outcome.LIMIT, limit, True, error)
    assert r.text.startswith("step ")  # the last assistant text is kept as partial work


async def test_timeout_kills_a_hanging_bash_and_its_process_group(workdir: Path) -> None:
    mark = marker()  # inside the sandbox $$ and $! are not host PIDs: find the processes by command line

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            cmd = f"sleep {mark} & wait"
            return ModelResponse(text="starting", tool_calls=[ToolCall("bash", {"command": cmd, "timeout_s": 600})])
        return ModelResponse(text="unreachable")

    t0 = time.monotonic()
    task = asyncio.create_task(make_core(fn, workdir, limits=Limits(timeout_s=1.0)).run("hang"))
    while not marked(mark) and not task.done():  # noqa: ASYNC110 - polling the process table
        await asyncio.sleep(0.01)
    assert marked(mark)  # the command really ran
    r = await task
    assert time.monotonic() - t0 < 5
    assert (r.outcome, r.limit, r.text, r.truncated) == (Outcome.TIMEOUT, "timeout_s", "starting", True)
    assert none_marked(mark)



async def test_timeout_while_the_model_hangs(workdir: Path) -> None:
    async def fn(req: ModelRequest) -> ModelResponse:
        await asyncio.sleep(60)
        return ModelResponse(text="late")

    r = await make_core(fn, workdir, limits=Limits(timeout_s=0.1)).run("hang")
    assert (r.outcome, r.status, r.text) == (Outcome.TIMEOUT, Status.ERRORED, "")


@pytest.mark.parametrize("exc", [ValueError, IndexError, AssertionError, KeyError])
async def test_model_failure_ends_the_run_with_an_error(workdir: Path, exc: type[Exception]) -> None:
    """A model (an adapter of one's own) that raises ends the run with an error naming it — an IndexError or an
    AssertionError too (they escaped the run as an internal error)."""
    def fn(req: ModelRequest) -> ModelResponse:
        raise exc("scripted failure")

    r = await make_core(fn, workdir).run("x")
    why = exc("scripted failure")
    assert (r.outcome, r.error) == (Outcome.ERROR, f"model 'function' failed: {exc.__name__}: {why}")


async def test_events_for_every_step(workdir: Path) -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.on(seen.append)

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(text="look", tool_calls=[ToolCall("list_dir", {}, id="c9")])
        return ModelResponse(text="done")

    await make_core(fn, workdir, bus=bus).run("go")
    kinds = [(e.kind, e.data.get("tool") or e.data.get("text") or e.data.get("turn") or "") for e in seen]
    assert kinds == [("run_start", ""), ("turn_start", 1), ("assistant_text", "look"), ("model_end", ""),
                     ("tool_start", "list_dir"), ("tool_end", "list_dir"), ("turn_start", 2),
                     ("assistant_text", "done"), ("model_end", ""), ("run_end", "")]
    ends = [e.data for e in seen if e.kind == "model_end"]
    assert [d["tool_calls"] for d in ends] == [1, 0]
    assert seen[0].data["prompt"] == "go"
    assert all(e.agent_id == "a1" and e.depth == 0 for e in seen)


async def test_inbox_is_delivered_at_the_next_tool_boundary(workdir: Path) -> None:
    core_box: list[AgentCore] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            core_box[0].inbox.put("please also count files")
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        last = req.messages[-1]
        return ModelResponse(text=f"{len(last.tool_results)} result + {last.text!r}")

    core = make_core(fn, workdir)
    core_box.append(core)
    r = await core.run("go")
    assert r.text == "1 result + 'please also count files'"


async def test_conversation_continues_on_a_second_run(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        return ModelResponse(text=f"{len(req.messages)} messages; last: {req.last_user_text}")

    core = make_core(fn, workdir)
    await core.run("one")
    r = await core.run("two")
    assert r.text == "3 messages; last: two"
    assert [m.role for m in core.messages] == ["user", "assistant", "user", "assistant"]
    assert isinstance(core.messages[0], Message)
