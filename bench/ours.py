"""The workloads on ``subagents`` itself (instant ``FunctionModel``; durable SQLite store by default).

    python bench/ours.py seq [--iters 2000] [--warmup 200]   # (1) delegation cycle + bare run, µs
    python bench/ours.py fanout N                           # (2) one parent turn, N background children
    python bench/ours.py fanout N --max-threads M --when-full queue   # ... M at a time, the others queued
    python bench/ours.py wakeup [--reps 500]                # (3) child completion -> waiter resumes, µs
    python bench/ours.py restore [--finished 100000 --open 1000]   # (4) open a big store
    ... restore --max-tokens 1000000000                     # ... whose root has a token limit (charged on restore)
    ... [--store sqlite|memory]

Each sub-command prints ONE JSON line.  Every run asserts its final output: the parent's model
checks it received exactly the children's results (each equal to the child's text) before it
answers, and the run's final text must be the parent's text.  The same coroutines are used by
``tests/bench/test_bench_smoke.py`` with tiny sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BARE_TEXT,
    CHILD_TEXT,
    PARENT_TEXT,
    peak_rss_mb,
    rss_now_mb,
    store_url,
    summ_us,
)
from restore import restore  # ((4): its own module)

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

SPAWN = "spawn_agent"
WAIT_CHUNK = 100


def _wait_results(content: str) -> dict[str, str]:
    """{child id: text} from a ``wait`` result: full compressed results, or one line each when many."""
    head, *parts = content.split("\n\n")
    n = int(head.removeprefix("[wait: ").split(" ", 1)[0])
    assert " 0 still running" in head, head
    out: dict[str, str] = {}
    if parts and parts[0].startswith("(many results"):
        for line in parts[1].splitlines():
            m = re.match(r"^- \S+ \((\S+)\) completed/ok: (.*)$", line)
            assert m, line
            out[m.group(1)] = m.group(2)
    else:
        for p in parts:
            header, body = _split_compressed(p)
            out[header.split(" · id ", 1)[1].split(" ", 1)[0]] = body
    assert len(out) == n, (len(out), n)
    return out


def _split_compressed(content: str) -> tuple[str, str]:
    """A compressed result is ``[agent ...]`` header line + the child's text."""
    header, _, body = content.partition("\n")
    assert header.startswith("[agent "), header
    assert header.endswith("]"), header
    return header, body


def _turn(req: ModelRequest) -> int:
    return sum(1 for m in req.messages if m.role == "assistant")


class Script:
    """The scripted models of every workload (one ``FunctionModel`` function, sync)."""

    def __init__(self) -> None:
        self.n = 1                     # children per fan-out
        self.calls = {"parent": 0, "child": 0, "bare": 0}
        self.ids: list[str] = []

    def __call__(self, req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0:
            self.calls["child"] += 1
            return ModelResponse(text=CHILD_TEXT)
        first = req.messages[0].text
        if first == "hello":
            self.calls["bare"] += 1
            return ModelResponse(text=BARE_TEXT)
        self.calls["parent"] += 1
        if first == "fanout":
            return self._fanout(req)
        return self._cycle(req)

    @staticmethod
    def _cycle(req: ModelRequest) -> ModelResponse:
        last = req.messages[-1]
        results = last.tool_results
        if not results:
            assert SPAWN in req.tool_names, req.tool_names
            return ModelResponse(tool_calls=[ToolCall(SPAWN, {"agent_type": "general-purpose", "prompt": "task 0",
                                                              "description": "child"}, id="call_0")])
        assert len(results) == 1, len(results)
        assert not results[0].is_error, results[0].content
        _, body = _split_compressed(results[0].content)
        assert body == CHILD_TEXT, body
        return ModelResponse(text=PARENT_TEXT)

    def _fanout(self, req: ModelRequest) -> ModelResponse:
        n, turn, last = self.n, _turn(req), req.messages[-1]
        if turn == 0:
            return ModelResponse(tool_calls=[
                ToolCall(SPAWN, {"agent_type": "general-purpose", "prompt": f"task {i}", "description": f"c{i}",
                                 "background": True}, id=f"call_{i}") for i in range(n)])
        if turn == 1:
            spawned = last.tool_results
            assert len(spawned) == n, (len(spawned), n)
            for r in spawned:
                assert not r.is_error, r.content
            self.ids = [json.loads(r.content)["agent_id"] for r in spawned]
            # wait for all of them, in chunks: one wait shows up to ~280 results (one line each when
            # many; runtime.control.WAIT_BUDGET), so a fan-out of 10,000 waits in chunks of 100
            return ModelResponse(tool_calls=[
                ToolCall("wait", {"agent_ids": self.ids[i:i + WAIT_CHUNK]}, id=f"wait_{i}")
                for i in range(0, n, WAIT_CHUNK)])
        got: dict[str, str] = {}
        for res in last.tool_results:
            assert not res.is_error, res.content
            got.update(_wait_results(res.content))
        assert sorted(got) == sorted(self.ids), (len(got), n)
        assert all(body == CHILD_TEXT for body in got.values())
        return ModelResponse(text=PARENT_TEXT)


def make_runtime(model: FunctionModel, workdir: str, store: str, **kw: Any) -> Runtime:
    return Runtime(model=model, workdir=workdir, store=store, **kw)


# --------------------------------------------------------------------------------------------
# (1) delegation cycle + bare run
async def seq(workdir: str, store: str, iters: int, warmup: int) -> dict[str, Any]:
    script = Script()
    pc = time.perf_counter
    async with make_runtime(FunctionModel(script, inline=True), workdir, store) as rt:
        for _ in range(warmup):
            assert (await rt.run("do the thing")).text == PARENT_TEXT
            assert (await rt.run("hello")).text == BARE_TEXT
        before = dict(script.calls)
        cyc = []
        for _ in range(iters):
            t0 = pc()
            r = await rt.run("do the thing")
            cyc.append(pc() - t0)
            assert r.text == PARENT_TEXT, r.text
        bare = []
        for _ in range(iters):
            t0 = pc()
            r = await rt.run("hello")
            bare.append(pc() - t0)
            assert r.text == BARE_TEXT, r.text
        assert script.calls["child"] - before["child"] == iters
        assert script.calls["parent"] - before["parent"] == 2 * iters
        assert script.calls["bare"] - before["bare"] == iters
    return {"cycle": summ_us(cyc), "bare": summ_us(bare), "model_calls": script.calls}


# --------------------------------------------------------------------------------------------
# (2) fan-out
async def fanout(workdir: str, store: str, n: int, warmup_n: int = 10, max_threads: int | None = None,
                 when_full: str = "refuse") -> dict[str, Any]:
    """One parent turn spawns ``n`` background children, then waits for them (in chunks of 100).

    ``max_threads`` (default: room for all) with ``when_full="queue"``: the children beyond it wait for a
    slot (first in, first out)."""
    script = Script()
    threads = max_threads if max_threads is not None else max(n, warmup_n) + 16
    async with make_runtime(FunctionModel(script, inline=True), workdir, store,
                            max_threads=threads, when_full=when_full) as rt:
        assert (await rt.run("do the thing")).text == PARENT_TEXT
        script.n = warmup_n
        assert (await rt.run("fanout")).text == PARENT_TEXT
        script.n = n
        before = script.calls["child"]
        rss0 = rss_now_mb()
        c0, t0 = time.process_time(), time.perf_counter()
        r = await rt.run("fanout")
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert r.text == PARENT_TEXT, (r.outcome, r.error, r.text)
        assert script.calls["child"] - before == n
        t1 = time.perf_counter()
    close_s = time.perf_counter() - t1
    floor = await _fanout_floor(n, threads)
    return {"n": n, "max_threads": threads, "when_full": when_full,
            "wall_ms": dt * 1e3, "cpu_ms": cpu * 1e3, "per_child_us": dt / n * 1e6, "floor_per_child_us": floor * 1e6,
            "x_floor": round(dt / n / floor, 1), "rss_before_mb": rss0,
            "peak_rss_mb": peak_rss_mb(), "close_ms": close_s * 1e3, "model_calls": script.calls}


async def _fanout_floor(n: int, threads: int) -> float:
    """Plain asyncio: ``n`` tasks, ``threads`` at a time, the next one started when one ends (first in, first
    out, as the slot queue does); seconds per task.  (Not ``asyncio.Semaphore``: its wake-up is quadratic in
    the waiters on Python 3.11.)"""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [n]
    started = [0]

    async def child() -> str:
        await asyncio.sleep(0)
        return CHILD_TEXT

    def ended(t: asyncio.Task[str]) -> None:
        assert t.result() == CHILD_TEXT
        left[0] -= 1
        if started[0] < n:
            start()
        elif left[0] == 0:
            done.set_result(None)

    def start() -> None:
        started[0] += 1
        loop.create_task(child()).add_done_callback(ended)

    t0 = time.perf_counter()
    for _ in range(min(threads, n)):
        start()
    await done
    return (time.perf_counter() - t0) / n


# --------------------------------------------------------------------------------------------
# (3) wait wake-up latency
class WakeScript:
    """Parent: spawn one background child, then ``wait``; the child's model blocks until released.

    Latency = the parent's model being called again (the wait tool returned into its loop)
    minus the instant the child's model returned its final text.
    """

    def __init__(self) -> None:
        self.ev: asyncio.Event | None = None
        self.t_child = 0.0
        self.lat: list[float] = []
        self.root_ev: asyncio.Event | None = None

    async def __call__(self, req: ModelRequest) -> ModelResponse:
        if req.agent.depth > 0 or req.messages[0].text == "root-child":
            ev = self.ev if req.agent.depth > 0 else self.root_ev
            assert ev is not None
            await ev.wait()
            self.t_child = time.perf_counter()
            return ModelResponse(text=CHILD_TEXT)
        turn = _turn(req)
        if turn == 0:
            self.ev = asyncio.Event()
            return ModelResponse(tool_calls=[ToolCall(SPAWN, {"agent_type": "general-purpose", "prompt": "wake",
                                                              "description": "w", "background": True})])
        if turn == 1:
            # release the child once this agent is parked in wait (2 ms is ample; not part of the figure)
            asyncio.get_running_loop().call_later(0.002, self.ev.set)  # type: ignore[union-attr]
            return ModelResponse(tool_calls=[ToolCall("wait", {})])
        t = time.perf_counter()
        self.lat.append(t - self.t_child)
        (res,) = req.messages[-1].tool_results
        head, part = res.content.split("\n\n")
        assert head.startswith("[wait: 1 finished, 0 still running"), head
        assert _split_compressed(part)[1] == CHILD_TEXT
        return ModelResponse(text=PARENT_TEXT)


async def wakeup(workdir: str, store: str, reps: int, warmup: int = 20) -> dict[str, Any]:
    script = WakeScript()
    api_lat: list[float] = []
    async with make_runtime(FunctionModel(script, inline=True), workdir, store) as rt:
        for _ in range(warmup):
            assert (await rt.run("wake parent")).text == PARENT_TEXT
        script.lat.clear()
        for _ in range(reps):
            assert (await rt.run("wake parent")).text == PARENT_TEXT
        # the same through the public API: rt.wait() from outside, on a background root agent
        loop = asyncio.get_running_loop()
        for i in range(reps + warmup):
            script.root_ev = asyncio.Event()
            h = await rt.spawn("root-child", background=True)
            loop.call_later(0.002, script.root_ev.set)
            done = await rt.wait([h.id])
            t = time.perf_counter()
            assert done[h.id].text == CHILD_TEXT
            if i >= warmup:
                api_lat.append(t - script.t_child)
    return {"wait_tool": summ_us(script.lat), "rt_wait": summ_us(api_lat)}


# --------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("seq")
    s.add_argument("--iters", type=int, default=2000)
    s.add_argument("--warmup", type=int, default=200)
    f = sub.add_parser("fanout")
    f.add_argument("n", type=int)
    f.add_argument("--warmup-n", type=int, default=10)
    f.add_argument("--max-threads", type=int, default=None, help="default: room for every child")
    f.add_argument("--when-full", choices=["refuse", "queue"], default="refuse")
    w = sub.add_parser("wakeup")
    w.add_argument("--reps", type=int, default=500)
    r = sub.add_parser("restore")
    r.add_argument("--finished", type=int, default=100_000)
    r.add_argument("--open", type=int, default=1_000)
    r.add_argument("--cache-dir", default=None)
    r.add_argument("--max-tokens", type=int, default=None, help="a token limit on the tree's root")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as d:
        url, label = store_url(a.store, d)
        res: dict[str, Any] = {"framework": "subagents", "cmd": a.cmd, "store": label,
                               "python": sys.version.split()[0]}
        if a.cmd == "seq":
            res.update(asyncio.run(seq(d, url, a.iters, a.warmup)))
        elif a.cmd == "fanout":
            res.update(asyncio.run(fanout(d, url, a.n, a.warmup_n, a.max_threads, a.when_full)))
        elif a.cmd == "wakeup":
            res.update(asyncio.run(wakeup(d, url, a.reps)))
        else:
            res["store"] = "sqlite"
            res.update(asyncio.run(restore(d, a.finished, a.open, a.cache_dir, a.max_tokens)))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
