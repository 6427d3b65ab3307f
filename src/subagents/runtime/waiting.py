"""Waiting for agents to end: ``wait`` on many (all or the first), and the foreground path on one.

Waiters are callbacks a node calls when it ends (``AgentNode.waiters``): nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from .node import AgentNode
from .result import RunResult

__all__ = ["wait_all", "wait_one"]


async def wait_all(nodes: list[AgentNode], timeout: float | None, *, any_: bool = False
                   ) -> tuple[dict[str, RunResult], list[str], bool]:
    """Wait for all (or, with ``any_``, the first) of ``nodes``; ``(results, still_running, timed_out)``."""
    pending = [n for n in nodes if not n.status.is_final()]
    timed_out = False
    if pending and not (any_ and len(pending) < len(nodes)):
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        left = [1 if any_ else len(pending)]

        def on_done(_: AgentNode) -> None:
            left[0] -= 1
            if left[0] <= 0 and not fut.done():
                fut.set_result(None)

        for n in pending:
            n.waiters.append(on_done)
        try:
            if timeout is None:
                await fut
            else:
                try:
                    await asyncio.wait_for(fut, timeout)
                except TimeoutError:
                    timed_out = True
        finally:
            for n in pending:
                with contextlib.suppress(ValueError):
                    n.waiters.remove(on_done)
    results = {n.id: n.result for n in nodes if n.result is not None and n.status.is_final()}
    running = [n.id for n in nodes if not n.status.is_final()]
    return results, running, timed_out


async def wait_one(node: AgentNode, close: Callable[[str], Awaitable[RunResult]]) -> RunResult:
    """Wait for one agent to end (the foreground path); cancelling the waiter closes the agent."""
    if node.result is not None and node.status.is_final():
        return node.result
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_done(_: AgentNode) -> None:
        if not fut.done():
            fut.set_result(None)

    node.waiters.append(on_done)
    try:
        await fut
    except asyncio.CancelledError:
        if not node.status.is_final():
            await asyncio.shield(close(node.id))
        raise
    assert node.result is not None
    return node.result
