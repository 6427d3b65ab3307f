"""``call_in_thread``: sync user code in daemon threads; a stuck call holds up nothing."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from subagents import _threads
from subagents._threads import call_in_thread, cancelled
from subagents.messages import Message
from subagents.models import AgentInfo, FunctionModel, ModelRequest, ModelResponse

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


async def test_result_exception_and_context() -> None:
    VAR.set("caller")
    assert await call_in_thread(lambda a, b=0: (a + b, VAR.get()), 1, b=2) == (3, "caller")
    with pytest.raises(ZeroDivisionError):
        await call_in_thread(lambda: 1 / 0)
    name, daemon = await call_in_thread(lambda: (threading.current_thread().name, threading.current_thread().daemon))
    assert name.startswith("subagents-call-")
    assert daemon


@pytest.mark.timeout(10)
async def test_cancel_returns_at_once_and_flags_the_call() -> None:
    started, seen = threading.Event(), threading.Event()

    def loop_until_cancelled() -> None:
        started.set()
        while not cancelled():
            time.sleep(0.001)
        seen.set()

    task = asyncio.create_task(call_in_thread(loop_until_cancelled))
    await asyncio.to_thread(started.wait, 5)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < 0.5
    assert await asyncio.to_thread(seen.wait, 5)
    assert not cancelled()  # outside a call: never


@pytest.mark.timeout(10)
async def test_a_stuck_call_does_not_hold_up_the_next_ones() -> None:
    release = threading.Event()
    stuck = asyncio.create_task(call_in_thread(release.wait))
    await asyncio.sleep(0.01)
    t0 = time.monotonic()
    assert await asyncio.gather(*(call_in_thread(lambda i=i: i * i) for i in range(8))) == [i * i for i in range(8)]
    assert time.monotonic() - t0 < 2
    release.set()
    assert await stuck is True


async def test_workers_are_reused_and_idle_ones_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "_pool", _threads._Pool())
    monkeypatch.setattr(_threads, "IDLE_S", 0.05)
    idents = {await call_in_thread(threading.get_ident) for _ in range(20)}
    assert len(idents) == 1  # one at a time: one worker, reused
    deadline = time.monotonic() + 5
    while _threads._pool.idle and time.monotonic() < deadline:  # noqa: ASYNC110 - polling another thread's state
        await asyncio.sleep(0.02)
    assert _threads._pool.idle == 0  # it ended after IDLE_S without work
    assert await call_in_thread(lambda: 7) == 7  # and a new one starts when needed


async def test_sync_function_model_runs_off_the_loop_and_streams_to_it() -> None:
    loop_thread = threading.get_ident()
    deltas: list[tuple[str, int]] = []

    def script(req: ModelRequest) -> ModelResponse:
        assert req.on_text is not None
        req.on_text("par")
        req.on_text("tial")
        return ModelResponse(f"thread {threading.get_ident() != loop_thread}")

    req = ModelRequest(AgentInfo("a", "a", "general-purpose"), "", [Message.user("x")], [],
                       lambda d: deltas.append((d, threading.get_ident())))
    assert (await FunctionModel(script).request(req)).text == "thread True"
    assert deltas == [("par", loop_thread), ("tial", loop_thread)]  # on_text ran on the loop, in order
    inline = FunctionModel(lambda r: f"thread {threading.get_ident() != loop_thread}", inline=True)
    assert (await inline.request(req)).text == "thread False"
