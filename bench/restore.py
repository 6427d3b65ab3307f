"""(4) restore: open a store of many finished runs and some open ones (one tree), timed; see ``bench/ours.py``."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BARE_TEXT, CHILD_TEXT, peak_rss_mb, sqlite_available

from subagents import Runtime
from subagents.models import FunctionModel

__all__ = ["generate_store", "restore"]

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
