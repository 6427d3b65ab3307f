"""``InlineRun``: a run driven by the task that waits for it; cancelled from another task it behaves as a task
would, and it never swallows a cancellation meant for the task it runs in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from subagents.engines.inline import InlineRun


def sleeper(started: asyncio.Event, *, closed: str | None = None) -> Callable[[], Coroutine[Any, Any, str]]:
    """A body that sleeps an hour; cancelled, it returns ``closed`` (as a closed agent's drive returns its
    cancelled result), or lets the CancelledError out when ``closed`` is None."""

    async def body() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if closed is None:
                raise
            return closed
        return "slept"

    return body


async def _awaited(run: InlineRun[str]) -> str:
    return await run


async def _hosted(run: InlineRun[str]) -> tuple[bool, str | None]:
    return await run.run_here()


async def test_it_runs_in_the_waiting_task_and_others_can_await_its_result() -> None:
    seen: list[asyncio.Task[object] | None] = []

    async def body() -> str:
        seen.append(asyncio.current_task())
        await asyncio.sleep(0.01)
        return "done"

    run = InlineRun(body)
    other = asyncio.ensure_future(_awaited(run))
    assert run.fresh
    assert not run.done()
    assert await run.run_here() == (True, "done")
    assert seen == [asyncio.current_task()]
    assert run.done()
    assert not run.cancelled()
    assert not run.fresh
    assert await other == "done"
    assert await run == "done"  # awaited after it ended
    with pytest.raises(RuntimeError, match="runs once"):
        await run.run_here()


async def test_cancelled_before_it_starts_it_never_runs() -> None:
    ran: list[int] = []

    async def body() -> str:
        ran.append(1)
        return "x"

    run = InlineRun(body)
    assert run.cancel() is True
    assert run.cancel() is False  # once
    assert run.done()
    assert run.cancelled()
    assert not run.fresh
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not ran


async def test_cancelled_while_it_runs_the_body_ends_and_the_host_goes_on() -> None:
    started = asyncio.Event()
    run = InlineRun(sleeper(started, closed="closed"))

    async def closer() -> str:
        await started.wait()
        assert run.cancel() is True
        return await run

    c = asyncio.ensure_future(closer())
    assert await run.run_here() == (True, "closed")
    host = asyncio.current_task()
    assert host is not None
    assert host.cancelling() == 0  # the cancellation was taken back: this task is not cancelled
    await asyncio.sleep(0.01)  # and it can go on awaiting
    assert await c == "closed"


async def test_a_body_that_ends_by_the_cancel_reports_it_did_not_finish_here() -> None:
    started = asyncio.Event()
    run = InlineRun(sleeper(started))

    async def closer() -> None:
        await started.wait()
        run.cancel()

    c = asyncio.ensure_future(closer())
    assert await run.run_here() == (False, None)
    assert run.cancelled()
    await c
    await asyncio.sleep(0.01)


async def test_the_hosts_own_cancel_is_never_swallowed() -> None:
    started = asyncio.Event()
    run = InlineRun(sleeper(started, closed="closed"))
    host = asyncio.ensure_future(_hosted(run))
    await started.wait()
    run.cancel()  # the handle's cancel ...
    host.cancel()  # ... and the host's own, before the host runs again: one CancelledError serves both
    with pytest.raises(asyncio.CancelledError):
        await host
    assert await run == "closed"


async def test_a_cancel_of_the_host_alone_propagates_and_reaches_those_awaiting_the_run() -> None:
    started = asyncio.Event()
    run = InlineRun(sleeper(started))
    host = asyncio.ensure_future(_hosted(run))
    await started.wait()
    other = asyncio.ensure_future(_awaited(run))
    await asyncio.sleep(0)
    host.cancel()
    with pytest.raises(asyncio.CancelledError):
        await host
    with pytest.raises(asyncio.CancelledError):
        await other
    assert run.done()
    assert run.cancel() is False


async def test_an_error_in_the_body_reaches_the_host_and_the_awaiters() -> None:
    async def body() -> str:
        await asyncio.sleep(0)
        raise ValueError("boom")

    run = InlineRun(body)
    other = asyncio.ensure_future(_awaited(run))
    with pytest.raises(ValueError, match="boom"):
        await run.run_here()
    with pytest.raises(ValueError, match="boom"):
        await other
