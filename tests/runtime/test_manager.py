"""Sub-agents: spawn pipeline, limits, fences, isolation, foreground/background, steering tools."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from procutil import marked, marker, none_marked
from subagents import Limits, Outcome, Runtime, SpawnError, Status, Usage
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.runtime.prompts import DEFAULT_BASE_PROMPT


def spawn(agent_type: str, prompt: str, *, background: bool = False, **kw: Any) -> ToolCall:
    return ToolCall("spawn_agent", {"agent_type": agent_type, "prompt": prompt, "description": prompt[:20],
                                    "background": background, **kw})


def task_of(req: ModelRequest) -> str:
    return req.messages[0].text


def last_results(req: ModelRequest) -> list[str]:
    return [r.content for r in req.messages[-1].tool_results]


def runtime(workdir: Path, fn: Any, **kw: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://", **kw)


async def test_foreground_child_sees_only_its_prompt_and_parent_only_the_compressed_result(workdir: Path) -> None:
    child_views: list[list[str]] = []
    parent_views: list[list[str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            child_views.append([m.text for m in req.messages])
            if len(req.messages) == 1:
                return ModelResponse(text="child thinking", tool_calls=[ToolCall("list_dir", {})])
            return ModelResponse(text="the answer is 42", usage=Usage(7, 3))
        parent_views.append([m.role for m in req.messages])
        if len(req.messages) == 1:
            return ModelResponse(text="SECRET parent musing", tool_calls=[spawn("explore", "find the answer")])
        return ModelResponse(text="parent: " + last_results(req)[0])

    async with runtime(workdir, fn) as rt:
        r = await rt.run("delegate this")
    assert child_views[0] == ["find the answer"]  # nothing of the parent's conversation
    assert all("SECRET" not in t for view in child_views for t in view)
    assert parent_views == [["user"], ["user", "assistant", "user"]]  # no child turns leaked in
    header, body = r.text.removeprefix("parent: ").split("\n", 1)
    assert body == "the answer is 42"
    assert header.startswith("[agent explore-ada · id ")
    assert "· explore · status completed · outcome ok · runtime " in header
    assert header.endswith(" • tokens 10 (in 7 / out 3) • est n/a]")
    assert "turn" not in header  # seed 000: the parent never sees how many turns the child took


async def test_depth_limit_default_two(workdir: Path) -> None:
    tools_at: dict[int, list[str]] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        d = req.agent.depth
        tools_at[d] = req.tool_names
        if len(req.messages) == 1:
            if d < 2:
                return ModelResponse(tool_calls=[spawn("general-purpose", f"level {d + 1}")])
            return ModelResponse(tool_calls=[spawn("general-purpose", "level 3")])  # forced, not offered
        return ModelResponse(text=f"d{d}<" + last_results(req)[0].splitlines()[-1] + ">")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("level 0")
    assert "spawn_agent" in tools_at[0]
    assert "spawn_agent" in tools_at[1]
    assert not {"spawn_agent", "wait", "send_input", "close_agent", "resume_agent", "list_agents"} & set(tools_at[2])
    assert r.text == ("d0<d1<d2<tool 'spawn_agent' is not available to agent type 'general-purpose': it is outside "
                      "this agent's tool fence and was not run. Use one of: " + ", ".join(tools_at[2]) + ">>>")


async def test_max_depth_error_message_from_the_python_api(workdir: Path) -> None:
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        await gate.wait()
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, max_depth=1) as rt:
        root = await rt.spawn("root task")
        child = await rt.spawn("child task", parent=root.id)
        with pytest.raises(SpawnError) as e:
            await rt.spawn("grandchild", parent=child.id)
        assert str(e.value) == (
            f"max_depth=1 reached: agent '{child.nickname}' at depth 1 cannot spawn a sub-agent (it would be at "
            "depth 2); do the work directly, or raise [agents] max_depth / Runtime(max_depth=...)")
        gate.set()


async def test_fifty_concurrent_spawns_never_exceed_max_threads(workdir: Path) -> None:
    running = 0
    peak = 0
    release = asyncio.Event()
    outputs: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        nonlocal running, peak
        if req.agent.depth == 1:
            running += 1
            peak = max(peak, running)
            await release.wait()
            running -= 1
            return ModelResponse(text="child done")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", f"part {i}", background=True) for i in range(50)])
        if len(req.messages) == 3:
            outputs.extend(last_results(req))
            release.set()
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        return ModelResponse(text="collected")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("fan out")
        assert rt.manager.running_slots == 0  # every slot came back
    accepted = [o for o in outputs if o.startswith("{")]
    refused = [o for o in outputs if not o.startswith("{")]
    assert (len(accepted), len(refused), peak, r.outcome) == (4, 46, 4, Outcome.OK)
    assert refused[0].startswith("max_threads=4 reached: 4 sub-agents are running (explore-ada (explore, depth 1, ")
    assert refused[0].endswith("wait for one to finish (wait) or close one (close_agent), "
                               "or raise [agents] max_threads / Runtime(max_threads=...)")


async def test_slot_released_after_completion_and_after_a_failed_spawn(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    async with runtime(workdir, fn, max_threads=1) as rt:
        root = await rt.spawn("root")
        for _ in range(3):  # one slot, reused after each completion
            h = await rt.spawn("child", parent=root.id, agent="explore")
            await rt.wait([h.id])
            assert rt.manager.running_slots == 0
        with pytest.raises(SpawnError, match="unknown agent type 'nope'"):
            await rt.spawn("child", parent=root.id, agent="nope")
        with pytest.raises(SpawnError, match="agent type 'explore': unknown model provider 'bogus'"):
            await rt.spawn("child", parent=root.id, agent="explore", model="bogus:x")
        with pytest.raises(SpawnError, match="the prompt is empty"):
            await rt.spawn("   ", parent=root.id)
        assert rt.manager.running_slots == 0
        h = await rt.spawn("child", parent=root.id)
        assert (await rt.wait([h.id]))[h.id].outcome is Outcome.OK


async def test_explore_cannot_write(workdir: Path) -> None:
    offered: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.agent_type == "explore":
            offered[:] = req.tool_names
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[ToolCall("write_file", {"path": "pwned.txt", "content": "x"})])
            return ModelResponse(text=last_results(req)[0])
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "try to write")])
        return ModelResponse(text=last_results(req)[0].split("\n", 1)[1])

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
    assert sorted(offered) == ["glob", "grep", "list_dir", "read_file", "repo_map"]
    assert r.text == ("tool 'write_file' is not available to agent type 'explore': it is outside this agent's "
                      "tool fence and was not run. Use one of: read_file, list_dir, glob, grep, repo_map")
    assert not (workdir / "pwned.txt").exists()


async def test_background_announcement_injected_at_next_tool_boundary(workdir: Path) -> None:
    child_done = asyncio.Event()
    seen_texts: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            child_done.set()
            return ModelResponse(text="background findings")
        n = len(req.messages)
        if n == 1:
            return ModelResponse(tool_calls=[spawn("explore", "scan", background=True)])
        if n == 3:
            await child_done.wait()
            await asyncio.sleep(0)  # let the child's task finish and announce
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        seen_texts.append(req.messages[-1].text)
        return ModelResponse(text="ok")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
    assert len(seen_texts) == 1
    t = seen_texts[0]
    assert t.startswith('<subagent-notification>\nA background task "scan" (explore-ada, id ')
    assert "just completed successfully.\n\nFindings:\nbackground findings\n\nStats: runtime " in t


async def test_announcement_queued_as_followup_when_parent_idle(workdir: Path) -> None:
    gate = asyncio.Event()
    prompts: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await gate.wait()
            return ModelResponse(text="late findings")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "slow scan", background=True)])
        prompts.append(req.last_user_text)
        return ModelResponse(text="parent done")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
        assert r.outcome is Outcome.OK
        child = next(a for a in rt.agents() if a.depth == 1)
        gate.set()
        await rt.wait([child.id])
        root = rt.manager.nodes[r.id]
        assert len(root.followups) == 1  # parent idle: queued, not lost
        await rt.resume(r.id, "what came back?")
        r2 = await rt.wait([r.id])
        assert r2[r.id].outcome is Outcome.OK
        assert root.followups == []
    assert prompts[-1].startswith("<subagent-notification>")
    assert "late findings" in prompts[-1]
    assert prompts[-1].endswith("what came back?")


async def test_wait_collects_results_and_withdraws_their_announcements(workdir: Path) -> None:
    texts: list[str] = []

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await asyncio.sleep(0.01)
            return ModelResponse(text=f"result of {task_of(req)}")
        n = len(req.messages)
        if n == 1:
            return ModelResponse(tool_calls=[spawn("explore", f"t{i}", background=True) for i in range(3)])
        if n == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        if n == 5:
            texts.append(last_results(req)[0])
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        texts.append(req.messages[-1].text)  # no duplicate announcements after wait delivered them
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
    assert texts[0].startswith("[wait: 3 finished, 0 still running; timed_out=false]")
    assert all(f"result of t{i}" in texts[0] for i in range(3))
    assert texts[1] == ""


async def test_wait_timeout_reports_running_ids(workdir: Path) -> None:
    out: list[str] = []
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            await gate.wait()
            return ModelResponse(text="finally")
        n = len(req.messages)
        if n == 1:
            return ModelResponse(tool_calls=[spawn("explore", "slow", background=True)])
        if n == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {"timeout_s": 0.05})])
        out.append(last_results(req)[0])
        gate.set()
        return ModelResponse(text="done")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
        child = next(a for a in rt.agents() if a.depth == 1)
        res = await rt.wait([child.id], timeout=5)
        assert res[child.id].text == "finally"
    assert out[0] == (f"[wait: 0 finished, 1 still running (timed out after 0.05s): {child.nickname} ({child.id}); "
                      "timed_out=true]")


async def test_python_wait_timeout_leaves_unfinished_absent(workdir: Path) -> None:
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if "slow" in task_of(req):
            await gate.wait()
        return ModelResponse(text="x")

    async with runtime(workdir, fn) as rt:
        fast = await rt.spawn("fast")
        slow = await rt.spawn("slow")
        done = await rt.wait([fast.id, slow.id], timeout=0.2)
        assert list(done) == [fast.id]
        assert rt.status(slow.id) is Status.RUNNING
        gate.set()


async def test_send_input_arrives_mid_run(workdir: Path) -> None:
    started = asyncio.Event()
    proceed = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        n = len(req.messages)
        if n == 1:
            started.set()
            await proceed.wait()
            return ModelResponse(tool_calls=[ToolCall("list_dir", {})])
        return ModelResponse(text="saw: " + req.messages[-1].text)

    async with runtime(workdir, fn) as rt:
        h = await rt.spawn("work")
        await started.wait()
        await rt.send_input(h.id, "also check tests")
        proceed.set()
        r = (await rt.wait([h.id]))[h.id]
        assert r.text == "saw: <message from user>\nalso check tests\n</message>"
        with pytest.raises(SpawnError) as e:
            await rt.send_input(h.id, "more")
        assert str(e.value) == (f"agent {h.nickname} ({h.id}) has already finished (status completed); "
                                "use resume_agent(agent_id, message) to give it more work")


async def test_close_cascades_to_grandchildren_and_kills_bash(workdir: Path) -> None:
    mark = marker()  # inside the sandbox $$ is not a host PID: find the processes by command line
    ready = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        d = req.agent.depth
        if d == 0:
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[spawn("general-purpose", "middle", background=True)])
            return ModelResponse(text="root idle")
        if d == 1:
            return ModelResponse(tool_calls=[spawn("general-purpose", "leaf")])  # foreground: blocks
        if len(req.messages) == 1:
            ready.set()
            return ModelResponse(text="leaf partial", tool_calls=[
                ToolCall("bash", {"command": f"sleep {mark}"})])
        return ModelResponse(text="never")

    async with runtime(workdir, fn, permission_mode="yolo") as rt:
        root = await rt.run("go")
        await ready.wait()
        for _ in range(500):
            if marked(mark):
                break
            await asyncio.sleep(0.01)
        assert marked(mark)
        middle = next(a for a in rt.agents() if a.depth == 1)
        leaf = next(a for a in rt.agents() if a.depth == 2)
        r = await rt.close(middle.id)
        assert (r.status, r.outcome, r.truncated) == (Status.SHUTDOWN, Outcome.CANCELLED, True)
        assert rt.status(leaf.id) is Status.SHUTDOWN
        assert rt.result(leaf.id) is not None
        assert rt.result(leaf.id).text == "leaf partial"
        assert rt.manager.running_slots == 0
        assert root.outcome is Outcome.OK
    assert none_marked(mark)



async def test_resume_keeps_the_full_conversation(workdir: Path) -> None:
    def fn(req: ModelRequest) -> ModelResponse:
        return ModelResponse(text=" / ".join(m.text for m in req.messages))

    async with runtime(workdir, fn) as rt:
        h = await rt.spawn("first task")
        await rt.wait([h.id])
        await rt.resume(h.id, "second task")
        r = (await rt.wait([h.id]))[h.id]
    assert r.text == "first task / first task / second task"


async def test_budgets_are_carved_from_the_parent_and_charged_to_it_as_they_go(workdir: Path) -> None:
    root_calls: list[int] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="spent", tool_calls=[ToolCall("list_dir", {})], usage=Usage(300, 0))
        root_calls.append(len(req.messages))
        return ModelResponse(tool_calls=[spawn("explore", "spend")], usage=Usage(100, 0))

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go", limits=Limits(max_tokens=1000))
        child = next(n for n in rt.manager.nodes.values() if n.depth == 1)
        root = rt.manager.nodes[r.id]
    assert child.limits.max_tokens == 900  # the root had spent 100 of 1000 when it spawned
    assert child.result is not None
    assert child.result.outcome is Outcome.LIMIT
    assert child.result.error == "Used up max_tokens=900 (tokens=900): no budget left for another model call"
    assert root.core.budget is not None
    assert root.core.budget.tokens == 100 + 900
    assert root_calls == [1]  # the tree's budget is spent: the root makes no call it cannot pay for
    assert r.outcome is Outcome.LIMIT
    assert r.error.startswith("Used up max_tokens=1000 (tokens=1000)")


@pytest.mark.parametrize(
    ("limits", "outcome", "limit"),
    [(Limits(max_turns=2), Outcome.LIMIT, "max_turns"), (Limits(timeout_s=0.05), Outcome.TIMEOUT, "timeout_s")],
)
async def test_child_limits(workdir: Path, limits: Limits, outcome: Outcome, limit: str) -> None:
    async def fn(req: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0.02)
        return ModelResponse(text=f"turn {len(req.messages)}", tool_calls=[ToolCall("list_dir", {})])

    async with runtime(workdir, fn) as rt:
        root = await rt.spawn("root", background=False)
        h = await rt.spawn("child", parent=root.id, limits=limits)
        r = (await rt.wait([h.id]))[h.id]
        await rt.close(root.id)
    assert (r.outcome, r.limit, r.truncated, r.status) == (outcome, limit, True, Status.ERRORED)
    assert r.text.startswith("turn ")


async def test_result_text_capped_for_the_parent(workdir: Path) -> None:
    big = "x" * 30_000
    got: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text=big)
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "big")])
        got.append(last_results(req)[0])
        return ModelResponse(text="ok")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
        child = next(a for a in rt.agents() if a.depth == 1)
        full = rt.result(child.id)
    assert full is not None
    assert full.text == big
    body = got[0].split("\n", 1)[1]
    assert body.startswith("x" * 20_000 + "\n[... result truncated: 30,000 characters in all, the first 20,000 shown")
    assert f"rt.result('{child.id}')" in body


async def test_system_prompt_layers_and_shared_prefix(workdir: Path) -> None:
    systems: dict[int, str] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        systems[req.agent.depth] = req.system
        if req.agent.depth == 0 and len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "look")])
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, system_prompt="BASE PROMPT: project facts.") as rt:
        rt.brief("The user wants short answers.")
        rt.note("tests live in tests/")
        await rt.run("go")
        explore_instr = rt.definitions.get("explore").system_prompt
    parent, child = systems[0], systems[1]
    assert parent.startswith("BASE PROMPT: project facts.\n\n")
    assert child.startswith("BASE PROMPT: project facts.\n\n" + explore_instr + "\n\nWorking directory")
    assert "# Briefing from the parent\nThe user wants short answers." in child
    assert child.endswith("# Shared notepad (latest entries)\n- tests live in tests/")
    assert DEFAULT_BASE_PROMPT not in child


async def test_events_in_order_with_agent_ids(workdir: Path) -> None:
    events: list[Event] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 0 and len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "look")])
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, on_event=events.append) as rt:
        r = await rt.run("go")
    child = [e for e in events if e.depth == 1]
    assert [e.kind for e in child] == ["subagent_spawned", "subagent_status_changed", "run_start", "turn_start",
                                       "assistant_text", "model_end", "run_end", "subagent_status_changed",
                                       "subagent_completed"]
    spawn_call = next(e for e in events if e.kind == "tool_start" and e.depth == 0)
    assert child[0].data["call_id"] == spawn_call.data["call_id"]  # the call that spawned it
    assert all(e.parent_id == r.id for e in child)
    assert child[-1].data["outcome"] == "ok"
    assert child[-2].data["status"] == "completed"


async def test_events_async_iterator(workdir: Path) -> None:
    async with runtime(workdir, lambda req: "hi") as rt:
        kinds: list[str] = []

        async def consume() -> None:
            async for e in rt.events():
                kinds.append(e.kind)
                if e.kind == "subagent_completed":
                    return

        task = asyncio.create_task(consume())
        await asyncio.sleep(0)
        await rt.run("go")
        await asyncio.wait_for(task, 2)
    assert kinds[0] == "subagent_spawned"
    assert kinds[-1] == "subagent_completed"


async def test_nicknames_unique_among_live_agents(workdir: Path) -> None:
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        await gate.wait()
        return ModelResponse(text="x")

    async with runtime(workdir, fn) as rt:
        hs = [await rt.spawn(f"t{i}", agent="explore") for i in range(100)]
        nicks = [h.nickname for h in hs]
        assert len(set(nicks)) == 100
        assert nicks[:2] == ["explore-ada", "explore-grace"]
        gate.set()


async def test_model_override_for_future_spawns(workdir: Path) -> None:
    used: list[str] = []
    other = FunctionModel(lambda req: (used.append("other"), "from other")[1], name="other")

    def fn(req: ModelRequest) -> ModelResponse:
        used.append("main")
        return ModelResponse(text="from main")

    async with runtime(workdir, fn) as rt:
        rt.set_model_override("explore", other)
        a = await rt.spawn("x", agent="explore")
        b = await rt.spawn("y", agent="plan")
        res = await rt.wait([a.id, b.id])
    assert (res[a.id].text, res[b.id].text) == ("from other", "from main")


async def test_status_of_unknown_id(workdir: Path) -> None:
    async with runtime(workdir, lambda req: "x") as rt:
        assert rt.status("no-such-agent") is Status.NOT_FOUND


async def test_list_agents_shows_tree_and_capacity(workdir: Path) -> None:
    listing: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[ToolCall("list_agents", {})])
            listing.append(last_results(req)[0])
            return ModelResponse(text="listed")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("general-purpose", "list")])
        return ModelResponse(text="ok")

    async with runtime(workdir, fn) as rt:
        await rt.run("go")
    lines = listing[0].splitlines()
    assert lines[0].startswith("- general-purpose-ada (")
    assert "status=running depth=0 parent=-" in lines[0]
    assert lines[1].startswith("  - general-purpose-grace (")
    assert lines[1].endswith("parent=general-purpose-ada [you]")
    assert lines[2] == "capacity: 3 of 4 thread slots free; you are at depth 1, 1 more level(s) of sub-agents allowed"


async def test_spawn_tool_refusal_is_a_tool_error_not_a_crash(workdir: Path) -> None:
    got: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("no-such-type", "x"), spawn("explore", "")])
        got.extend(last_results(req))
        return ModelResponse(text="ok")

    async with runtime(workdir, fn) as rt:
        r = await rt.run("go")
    assert r.outcome is Outcome.OK
    assert got[0].startswith("unknown agent type 'no-such-type'; known types: coordinator, explore, general-purpose")
    assert got[1] == "the prompt is empty; give the agent a task to do"


def test_background_spawn_returns_id_at_once(workdir: Path) -> None:
    outs: list[dict[str, Any]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text="bg")
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[spawn("explore", "bg", background=True)])
        outs.append(json.loads(last_results(req)[0]))
        return ModelResponse(text="ok")

    rt = runtime(workdir, fn)
    rt.run_sync("go")
    assert set(outs[0]) == {"agent_id", "nickname", "status", "permission_mode", "note"}
    assert outs[0]["nickname"] == "explore-ada"


async def test_many_parents_spawning_at_once_never_exceed_max_threads(workdir: Path) -> None:
    running = 0
    peak = 0
    refused = 0
    release = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        nonlocal running, peak, refused
        if req.agent.depth == 2:
            running += 1
            peak = max(peak, running)
            await release.wait()
            running -= 1
            return ModelResponse(text="leaf")
        if req.agent.depth == 1:
            if len(req.messages) == 1:
                return ModelResponse(tool_calls=[spawn("explore", f"leaf {i}", background=True) for i in range(10)])
            refused += sum(1 for r in last_results(req) if r.startswith("max_threads="))
            return ModelResponse(text="mid done")
        return ModelResponse(text="root")

    async with runtime(workdir, fn, max_threads=6) as rt:
        root = await rt.spawn("root", background=False)
        mids = [await rt.spawn(f"mid {i}", parent=root.id) for i in range(3)]  # 3 slots
        await rt.wait([m.id for m in mids])
        assert peak == 3  # 6 slots minus the 3 held by the middle agents while they spawned
        release.set()
        await rt.wait()
        assert rt.manager.running_slots == 0
    assert refused == 27


async def test_wait_any_returns_when_one_is_already_done(workdir: Path) -> None:
    gate = asyncio.Event()

    async def fn(req: ModelRequest) -> ModelResponse:
        if "slow" in task_of(req):
            await gate.wait()
        return ModelResponse(text="x")

    async with runtime(workdir, fn) as rt:
        fast = await rt.spawn("fast")
        await rt.wait([fast.id])
        slow = await rt.spawn("slow")
        results, running, timed_out = await rt.manager.wait([fast.id, slow.id], 5, any_=True)
        assert (list(results), running, timed_out) == ([fast.id], [slow.id], False)
        gate.set()


@pytest.mark.parametrize(("n", "full", "hidden"), [(20, True, 0), (200, False, 0), (400, False, 119)])
async def test_wait_fits_many_results_into_one_tool_output(workdir: Path, n: int, full: bool, hidden: int) -> None:
    got: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        if req.agent.depth == 1:
            return ModelResponse(text=f"finding {task_of(req)} " + "z" * 300)
        k = len(req.messages)
        if k == 1:
            return ModelResponse(tool_calls=[spawn("explore", f"p{i}", background=True) for i in range(n)])
        if k == 3:
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        got.append(last_results(req)[0])
        return ModelResponse(text="ok")

    async with runtime(workdir, fn, max_threads=n) as rt:
        await rt.run("fan out")
    out = got[0]
    assert out.startswith(f"[wait: {n} finished, 0 still running; timed_out=false]")
    assert len(out) <= 50_000  # never cut by the tool output cap
    assert ("[agent explore-" in out) is full
    assert out.count("finding p") == n - hidden
    if hidden:
        assert out.endswith(f"[{hidden} more finished results not shown; call wait(agent_ids=[...]) with their ids "
                            "(from list_agents) to read them]")
