"""Gaps of the PostgreSQL store that the SQLite one had closed: a lone surrogate in a tool's text (the batch is
written with U+FFFD, the store goes on), a claim that met a row another session keeps locked (it waited forever;
now for the store's ``timeout``, then a StoreError saying so), and a dead server behind a network cut without a
reset (noticed by TCP after ~2 h; the connections now carry libpq keepalive and ``tcp_user_timeout`` settings)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from subagents import Outcome, Runtime, ToolCategory, tool
from subagents.exceptions import StoreError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.store import RunRecord
from subagents.store.postgres import PostgresStore


def run(run_id: str, owner: str = "") -> RunRecord:
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=f"nick-{run_id}", agent_type="general-purpose",
                     task="do it", status="running", owner=owner, root_id=run_id, runs=1, created_at=1.0)


async def test_a_tool_result_with_a_lone_surrogate_is_stored_and_the_store_goes_on(pg_url: str,
                                                                                   workdir: Path) -> None:
    @tool(category=ToolCategory.READ)
    def legacy() -> str:
        """Read a Latin-1 file the old way."""
        return b"caf\xe9 au lait".decode("utf-8", "surrogateescape")

    def model(req: ModelRequest) -> ModelResponse:
        if req.messages[-1].tool_results:
            return ModelResponse("read it")
        return ModelResponse(tool_calls=[ToolCall("legacy", {})])

    async with Runtime(model=FunctionModel(model, inline=True), workdir=workdir, store=pg_url,
                       tools=[legacy], builtin_tools=False) as rt:
        first = await rt.run("go")
        second = await rt.run("again")  # the store still writes after that batch
    assert first.outcome == Outcome.OK
    assert second.outcome == Outcome.OK
    s = PostgresStore(pg_url)
    try:
        for r in (first, second):
            rec = s.get_run(r.id)
            assert rec is not None
            assert rec.status == "completed", rec.status
            results = [b.content for m in s.transcript(r.id) for b in m.tool_results]
            assert results == ["caf\ufffd au lait"], results
    finally:
        s.close()


def test_lone_surrogates_in_an_audit_entry_and_a_request_are_written_as_u_fffd(pg_url: str) -> None:
    s = PostgresStore(pg_url)
    try:
        s.create_run(run("r1", owner=s.owner))
        s.add_audit("r1", "note", {"path": "caf\udce9"}, 2.0)
        s.add_request("r1", "message", "h\udcffi", 3.0)
        s.flush()
        s.create_run(run("r2", owner=s.owner))  # and the store goes on
        s.flush()
        assert s.get_run("r2") is not None
        assert [q.message for q in s.take_requests(s.owner, 4.0)] == ["h\ufffdi"]
    finally:
        s.close()
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT data FROM audit WHERE run_id = 'r1'").fetchall() == [('{"path": "caf\ufffd"}',)]


def test_a_claim_meeting_a_row_locked_by_another_session_fails_after_the_timeout(pg_url: str) -> None:
    first = PostgresStore(pg_url)
    try:
        first.create_run(run("r1", owner="gone"))
        first.flush()
    finally:
        first.close()
    s = PostgresStore(pg_url, timeout=1.0)
    holder = psycopg.connect(pg_url)  # a transaction left open on the run's row
    try:
        holder.execute("SELECT run_id FROM runs WHERE run_id = 'r1' FOR UPDATE")
        outcome: list[object] = []

        def claim() -> None:
            try:
                outcome.append(s.claim_runs({"r1": "gone"}))
            except StoreError as e:
                outcome.append(e)

        t = threading.Thread(target=claim, daemon=True)
        start = time.monotonic()
        t.start()
        t.join(15)
        waited = time.monotonic() - start
        holder.rollback()  # (lets a claim still waiting on the old code end)
        t.join(15)
        assert waited < 10, "the claim waited on the locked row without a bound"
        assert len(outcome) == 1
        assert isinstance(outcome[0], StoreError), outcome
        assert "locked by another session" in str(outcome[0])
        assert s.claim_runs({"r1": "gone"}) == {"r1"}  # once the lock is gone, the claim works
    finally:
        holder.close()
        s.close()


_KEEPALIVE = {"keepalives": "1", "keepalives_idle": "15", "keepalives_interval": "5", "keepalives_count": "3",
              "tcp_user_timeout": "30000"}


def _keepalive(conn: psycopg.Connection[object]) -> dict[str, str]:
    params = conn.info.get_parameters()
    return {k: params.get(k, "") for k in _KEEPALIVE}


@pytest.mark.parametrize("which", ["writer", "reader", "writer after a reconnect"])
def test_the_store_connections_notice_a_dead_server_within_a_minute(pg_url: str, which: str) -> None:
    s = PostgresStore(pg_url)
    try:
        if which == "writer after a reconnect":
            with psycopg.connect(pg_url, autocommit=True) as c:
                c.execute("SELECT pg_terminate_backend(%s, 5000)", (s._w.pg.info.backend_pid,))  # (waits: gone)
            s.create_run(run("r1"))
            s.flush()
            assert s._w.reconnects == 1
        conn = s._reader.conn if which == "reader" else s._w.pg
        assert _keepalive(conn) == _KEEPALIVE
    finally:
        s.close()


def test_the_keepalive_settings_give_way_to_the_url_s_own(pg_url: str) -> None:
    sep = "&" if "?" in pg_url else "?"
    s = PostgresStore(f"{pg_url}{sep}keepalives_idle=60&tcp_user_timeout=0")
    try:
        params = s._w.pg.info.get_parameters()
        assert params.get("keepalives_idle") == "60"
        assert params.get("tcp_user_timeout", "0") == "0"
        assert params.get("keepalives_count") == "3"
    finally:
        s.close()
