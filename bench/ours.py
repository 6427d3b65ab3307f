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
import shutil
import sqlite3
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
    sqlite_available,
    store_url,
    summ_us,
)

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
# (4) restore
GONE = "bench-generator:999999999:gone"  # a dead process of this user's: its runs are orphans to take over


def generate_store(path: Path, finished: int, open_: int) -> None:
    """Write ``finished`` completed runs and ``open_`` running ones through the Store API."""
    from subagents.owner_key import tag_owner
    from subagents.store import RunRecord, open_store

    store = open_store(f"sqlite:///{path}", path.parent)
    now = time.time()
    root = "00000000-0000-4000-8000-000000000000"
    for i in range(finished + open_):
        rid = f"{i:08d}-0000-4000-8000-{i:012d}"
        rec = RunRecord(run_id=rid, agent_id=rid, nickname=f"n{i}", agent_type="general-purpose",
                        task=f"task {i}", parent_id=None if i == 0 else root, root_id=root, depth=0 if i == 0 else 1,
                        label=f"task {i}", model="function", status="running", created_at=now + i * 1e-6,
                        started_at=now, system_prompt="You are an agent.",
                        owner=tag_owner(GONE))  # tagged with this user's key: recovery takes them over
        store.create_run(rec)
        if i < finished:
            store.finish_run(rid, {"status": "completed", "outcome": "ok", "ended_at": now, "turns": 1,
                                   "result_text": CHILD_TEXT, "usage": {"input_tokens": 1, "output_tokens": 1}},
                             None)
    store.flush()
    store.close()


def _prepare_store(cache_dir: str, workdir: Path, finished: int, open_: int) -> tuple[Path, float]:
    """Generate (once, cached) the big store and copy it to ``workdir/state.db``; not timed."""
    from subagents.owner_key import tag_owner

    tag = tag_owner(GONE).rsplit(":", 1)[-1]  # (a store made under another key would be another user's runs)
    cache = Path(cache_dir).resolve() / f"restore-{finished}-{open_}-{tag}.db"
    t0 = time.perf_counter()
    if not cache.exists():
        generate_store(cache, finished, open_)
    gen_s = time.perf_counter() - t0
    db = workdir / "state.db"
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(cache) + suffix)
        if src.exists():
            shutil.copyfile(src, str(db) + suffix)
    return db, gen_s


async def _open(workdir: str, url: str) -> tuple[float, Runtime]:
    t0 = time.perf_counter()
    rt = Runtime(model=FunctionModel(lambda req: BARE_TEXT, inline=True), workdir=workdir, store=url)
    await rt.__aenter__()
    return time.perf_counter() - t0, rt


async def restore(workdir: str, finished: int, open_: int, cache_dir: str | None = None,
                  max_tokens: int | None = None) -> dict[str, Any]:
    """Open the big store (one tree); ``max_tokens``: the root's limit, so its budget is charged with the tree's."""
    if not sqlite_available():
        return {"pending": "subagents.store.sqlite does not exist yet (another engineer is writing it)"}
    db, gen_s = _prepare_store(cache_dir or workdir, Path(workdir), finished, open_)
    if max_tokens is not None:  # (on the copy: the cached store stays as generated)
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("UPDATE runs SET limits = ? WHERE parent_id IS NULL",
                         (json.dumps({"max_tokens": max_tokens}),))
        conn.close()
    open_s, rt = await _open(workdir, f"sqlite:///{db}")
    try:
        runs = rt.runs(include_archived=True)
        assert len(runs) == finished + open_, len(runs)
        still_open = [r for r in runs if r.status in ("running", "pending_init")]
        taken_over = [r for r in still_open if r.owner == rt.store.owner]  # resumed here, live tasks again
        root = rt.manager.nodes.get(next((r.run_id for r in runs if r.parent_id is None), ""))  # (open_ > 0: adopted)
        charged = root.core.budget.tokens if root is not None and root.core.budget is not None else 0
        if max_tokens is not None and open_:
            assert charged == 2 * finished, charged  # every finished run of the tree spent 1 + 1 tokens
        r = await rt.run("hello")
        assert r.text == BARE_TEXT
    finally:
        await rt.aclose()
    return {"finished": finished, "open": open_, "max_tokens": max_tokens, "open_ms": open_s * 1e3,
            "generate_s": gen_s, "left_non_final_after_open": len(still_open), "taken_over": len(taken_over),
            "root_charged_tokens": charged, "peak_rss_mb": peak_rss_mb()}


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
