"""A machine that dies, on PostgreSQL: a runtime in another process runs an agent on a shared database, is
killed with SIGKILL, and only its owner lease tells the others (its process identity is withheld, as for
a runtime on another machine): its run is not orphaned while the lease holds, is orphaned once it expires,
and another Runtime then takes it over and finishes it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.models import FunctionModel
from subagents.runtime.recovery import is_orphaned
from subagents.store.postgres import PostgresStore

LEASE_S = 2.0

MACHINE_A = """
import asyncio, sys
from subagents.store import _writer, postgres
_writer.process_identity = postgres.process_identity = lambda pid=None: ""  # another machine: no PID to check
from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse

async def slow(req: ModelRequest) -> ModelResponse:
    print("STARTED", req.agent.id, flush=True)
    await asyncio.sleep(3600)  # killed long before
    return ModelResponse(text="never")

async def main(url: str, workdir: str, lease_s: float) -> None:
    store = postgres.PostgresStore(url, lease_s=lease_s, renew_s=lease_s / 10)
    async with Runtime(model=FunctionModel(slow), store=store, workdir=workdir, builtin_tools=False) as rt:
        await rt.spawn("long work")
        await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


async def finish_elsewhere(url: str, workdir: Path, run_id: str) -> None:
    """Another machine's Runtime: it restores the orphan at open and finishes it."""
    async with Runtime(model=FunctionModel(lambda req: "finished by another machine"), store=url,
                       workdir=workdir, builtin_tools=False) as rt:
        done = await rt.wait([run_id], timeout=20)
        assert done[run_id].text == "finished by another machine"
        rt.store.flush()
        got = rt.store.get_run(run_id)
        assert got is not None
        assert (got.owner, got.status) == (rt.store.owner, "completed")


@pytest.mark.timeout(60)
def test_a_killed_runtimes_run_is_taken_over_only_after_its_lease_expires(pg_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    a = subprocess.Popen([sys.executable, "-c", MACHINE_A, pg_url, str(tmp_path), str(LEASE_S)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert a.stdout is not None
        line = a.stdout.readline()
        assert line.startswith("STARTED "), (line, a.stderr.read() if a.stderr else "")
        run_id = line.split()[1]
        b = PostgresStore(pg_url)
        try:
            rec = b.get_run(run_id)
            assert rec is not None
            owner = rec.owner
            time.sleep(LEASE_S * 1.5)  # A renews its lease: its run stays its own
            assert not is_orphaned(b, rec, time.time())
            a.send_signal(signal.SIGKILL)
            a.wait(10)
            killed = time.time()
            lease = b.lease(owner)
            assert lease is not None
            assert lease.process == ""  # nothing but the lease can tell
            assert not is_orphaned(b, rec, killed)  # the lease still holds for up to LEASE_S
            assert lease.expires_at <= killed + LEASE_S
            while not is_orphaned(b, rec, time.time()):
                assert time.time() < killed + LEASE_S + 1, "the lease of a dead runtime never expired"
                time.sleep(0.05)
        finally:
            b.close()
        asyncio.run(finish_elsewhere(pg_url, tmp_path, run_id))
    finally:
        if a.poll() is None:
            a.kill()
        a.communicate()
