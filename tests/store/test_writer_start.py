"""A runtime starts its SQLite store's writer process as it opens (store/sqlite.py ``start_writer``): the writer
takes ~50-100 ms to be ready, and a runtime that starts working at once had its first ~200 delegation cycles
wait for it (36-74 ms of back-pressure in all, measured); a store opened on its own still starts no process
until its first write.
"""

from __future__ import annotations

import time
from pathlib import Path

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse
from subagents.store.base import RunRecord
from subagents.store.sqlite import SQLiteStore


def _answer(req: ModelRequest) -> ModelResponse:
    return ModelResponse(text="ok")


async def test_a_runtime_starts_the_writer_as_it_opens_and_it_is_ready_by_the_first_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    assert store._w.proc is None
    rt = Runtime(FunctionModel(_answer), workdir=tmp_path, store=store)
    try:
        proc = store._w.proc
        assert proc is not None  # started by the constructor, before any write
        assert proc.poll() is None
        deadline = time.monotonic() + 10
        while store._w.stats()["pid"] != proc.pid:  # it answers: ready
            assert time.monotonic() < deadline
        r = await rt.run("hi")
        assert r.text == "ok"
        assert store._w.proc is proc  # the same process took the writes
        store.flush()
        assert store.get_run(r.id) is not None
    finally:
        await rt.aclose()
    assert proc.poll() is not None  # reaped at close


def test_start_writer_is_idempotent_and_does_nothing_once_closed(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "a.db")
    s.start_writer()
    proc = s._w.proc
    assert proc is not None
    s.start_writer()
    assert s._w.proc is proc
    s.create_run(RunRecord(run_id="r", agent_id="r", nickname="n", agent_type="t", task="x"))
    s.flush()
    s.close()
    assert proc.poll() is not None
    s2 = SQLiteStore(tmp_path / "b.db")
    s2.close()
    s2.start_writer()
    assert s2._w.proc is None  # a closed store starts nothing
