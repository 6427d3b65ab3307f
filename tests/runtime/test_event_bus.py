"""The event bus's gates: events published behind a closed gate wait, in order, until every gate before them opened
(what the SQLite store's commit callbacks do in bursts), and delivery survives callbacks that change the bus."""

from __future__ import annotations

import pytest

from subagents.runtime.events import Event, EventBus


def ev(kind: str) -> Event:
    return Event(kind, "a", None, 0, {}, 0.0, "nick")


async def test_events_behind_gates_come_out_in_order_once_every_earlier_gate_opened() -> None:
    bus, got = EventBus(), []
    bus.on(lambda e: got.append(e.kind))
    bus.publish(ev("e1"))
    g1 = bus.gate()
    bus.publish(ev("e2"))
    g2 = bus.gate()
    bus.publish(ev("e3"))
    assert got == ["e1"]
    bus.open(g2)  # a later gate opened first: e2 still waits behind g1, and e3 behind e2
    assert got == ["e1"]
    bus.open(g1)
    assert got == ["e1", "e2", "e3"]
    bus.publish(ev("e4"))  # nothing held any more: at once
    assert got == ["e1", "e2", "e3", "e4"]


async def test_a_callback_that_unsubscribes_another_mid_burst_stops_it_from_the_next_event_on() -> None:
    bus, first, second = EventBus(), [], []
    off_second: list[object] = []

    def one(e: Event) -> None:
        first.append(e.kind)
        if e.kind == "e1":
            off_second[0]()  # type: ignore[operator]

    bus.on(one)
    off_second.append(bus.on(lambda e: second.append(e.kind)))
    g = bus.gate()
    for k in ("e1", "e2", "e3"):
        bus.publish(ev(k))
    bus.open(g)
    assert first == ["e1", "e2", "e3"]
    assert second == ["e1"]  # it had this one's turn already; none after


async def test_a_failing_callback_is_logged_and_the_burst_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    """(It used to fail the opener — the store's commit callback — and hold the rest of the burst back.)"""
    bus, got = EventBus(), []

    def picky(e: Event) -> None:
        if e.kind == "bad":
            raise ValueError("listener broke")
        got.append(e.kind)

    bus.on(picky)
    g1 = bus.gate()
    bus.publish(ev("bad"))
    bus.publish(ev("ok1"))
    g2 = bus.gate()
    bus.publish(ev("ok2"))
    bus.open(g1)
    assert got == ["ok1"]  # the failing event was taken, the rest of its burst delivered; the next gate holds
    (rec,) = caplog.records
    assert rec.name == "subagents.events"
    assert "raised on a bad event" in rec.getMessage()
    bus.open(g2)
    assert got == ["ok1", "ok2"]
