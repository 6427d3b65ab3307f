"""A listener that raises is the listener's bug, not the run's: the run goes on exactly as if it were not there.

Before, the exception went to whoever published the event — the agent loop (its run ended in ``error``), the
recorder (``rt.run`` raised it), the store's commit callback (SQLite), a team's idle hand-off: there a lead whose
teammate's ``teammate_idle`` or ``message_sent`` event failed waited forever.  Now the bus logs it (logger
``subagents.events``, the first ten failures of each callback with their traceback) and delivers on.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.models import FunctionModel
from subagents.runtime.events import Event, EventBus

from .team_scripts import LeadAndWorkers
from .test_events_cycle import CYCLE, script


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["teammate_idle", "message_sent"])
async def test_a_listener_failing_on_a_team_event_does_not_hang_the_lead(workdir: Path, kind: str,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    def listener(e: Event) -> None:
        if e.kind == kind:
            raise RuntimeError("listener bug")

    caplog.set_level(logging.ERROR, logger="subagents.events")
    async with Runtime(model=FunctionModel(LeadAndWorkers(2, 2)), workdir=workdir, store="memory",
                       on_event=listener) as rt:
        r = await asyncio.wait_for(rt.run("split", agent="coordinator"), 30)  # (it waited forever)
        assert r.text == "lead done"
        assert str(r.outcome) == "ok"
        teammates = [n for n in rt.manager.nodes.values() if n.info.depth > 0]
        assert teammates
        assert all(str(n.status) != "errored" for n in teammates)
    failures = [rec for rec in caplog.records if rec.name == "subagents.events"]
    assert failures
    assert kind in failures[0].getMessage()
    assert failures[0].exc_info is not None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_listener_failing_on_every_event_changes_nothing_the_others_see(
        workdir: Path, store: str, caplog: pytest.LogCaptureFixture) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{workdir.parent}/state.db"
    heard: list[Event] = []

    def broken(e: Event) -> None:
        raise ValueError(f"cannot handle {e.kind}")

    caplog.set_level(logging.ERROR, logger="subagents.events")
    async with Runtime(model=FunctionModel(script), workdir=workdir, store=url, builtin_tools=False,
                       on_event=broken) as rt:
        rt.bus.on(heard.append)  # after the broken one: it hears every event all the same
        for _ in range(2):
            r = await rt.run("hi")
            assert r.text == "parent done"
            assert str(r.outcome) == "ok"
        await asyncio.wait_for(rt.events_delivered(), 10)
        runs = rt.store.list_runs()
    assert [(e.depth, (e.kind, sorted(e.data))) for e in heard] == CYCLE * 2
    assert len(runs) == 4
    assert all(x.status == "completed" for x in runs)
    logged = [rec for rec in caplog.records if rec.name == "subagents.events"]
    assert len(logged) == 11  # ten failures with their traceback, then one line: the rest are not logged
    assert all(rec.exc_info is not None for rec in logged[:10])
    assert "cannot handle subagent_spawned" in str(logged[0].exc_info[1])  # type: ignore[index]
    assert "not logged" in logged[10].getMessage()
    assert logged[10].exc_info is None


def test_each_failing_callback_has_its_own_ten_lines(caplog: pytest.LogCaptureFixture) -> None:
    bus, got = EventBus(), []

    def a(e: Event) -> None:
        raise ValueError("a")

    def b(e: Event) -> None:
        if e.kind == "bad":
            raise KeyError("b")
        got.append(e.kind)

    caplog.set_level(logging.ERROR, logger="subagents.events")
    bus.on(a)
    bus.on(b)
    bus.publish(Event("bad", "x", None, 0))
    for _ in range(3):
        bus.publish(Event("ok", "x", None, 0))
    assert got == ["ok", "ok", "ok"]
    lines = [rec.getMessage() for rec in caplog.records]
    assert len(lines) == 5  # a: 4 failures, b: 1
    assert sum("bad" in line for line in lines) == 2


def test_a_base_exception_is_not_swallowed() -> None:
    bus = EventBus()

    def stop(e: Event) -> None:
        raise KeyboardInterrupt

    bus.on(stop)
    with pytest.raises(KeyboardInterrupt):
        bus.publish(Event("k", "x", None, 0))
