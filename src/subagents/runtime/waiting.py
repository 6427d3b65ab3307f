"""Waiting for agents to end: ``wait`` on many (all or the first), and the foreground path on one.

Waiters are callbacks a node calls when it ends (``AgentNode.waiters``): nothing polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ..engines.inline import InlineRun
from ..store import RunRecord, Store
from ..store._lease import process_gone
from .node import AgentNode
from .result import RunResult

STORE_POLL_S = 0.2
"""How often :func:`wait_stored` looks at runs another process is running."""

__all__ = ["wait_all", "wait_one", "wait_stored"]


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
            n.add_waiter(on_done)
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
                n.remove_waiter(on_done)
    results = {n.id: n.result for n in nodes if n.result is not None and n.status.is_final()}
    running = [n.id for n in nodes if not n.status.is_final()]
    return results, running, timed_out


async def wait_one(node: AgentNode, close: Callable[[str], Awaitable[RunResult]], *, settle: bool = True) -> RunResult:
    """Wait for one agent to end (the foreground path); cancelling the waiter closes the agent.

    A run this waiter runs itself (:class:`~subagents.engines.inline.InlineRun`) may end without ever waiting (an
    instant model): with ``settle`` the waiter then yields once to the event loop, as a waiter woken by its end
    would — what the end started runs first, and a loop of such runs cannot hold the event loop.  A parent's
    ``spawn_agent`` call passes ``settle=False``: its turn goes on (the next real model call waits anyway), and
    its root's waiter yields as the whole run ends (one loop turn less per foreground child: ~6% of a cycle's
    opcodes, ``bench/opcodes.py``)."""
    if node.result is not None and node.status.is_final():
        return node.result
    run = node.task
    if isinstance(run, InlineRun) and run.fresh:  # spawned for this waiter to run (no task of its own)
        try:
            ended, result = await run.run_here()
        except asyncio.CancelledError:  # this task was cancelled: its run ended cancelled, close the rest
            await asyncio.shield(close(node.id))
            raise
        if ended and isinstance(result, RunResult):
            if settle:
                await asyncio.sleep(0)
            return result
        if node.result is not None and node.status.is_final():
            return node.result
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_done(_: AgentNode) -> None:
        if not fut.done():
            fut.set_result(None)

    node.add_waiter(on_done)
    try:
        await fut
    except asyncio.CancelledError:
        if not node.status.is_final():
            await asyncio.shield(close(node.id))
        raise
    assert node.result is not None
    return node.result


async def wait_stored(store: Store, ids: list[str], deadline: float | None,
                      record_result: Callable[[RunRecord], RunResult]) -> dict[str, RunResult]:
    """Runs this process does not hold: finished ones at once, the others (another process runs
    them) once the store says they ended, until ``deadline`` (loop time); unfinished ones are absent.
    ``record_result`` reads a finished record (``recovery.record_result``).

    A run nobody will finish is not waited for (it is absent, as an unfinished one): its owner is gone (the
    process died while it ran: no live lease, seen twice in a row) or its record was deleted.  Without a deadline
    such a wait would never return."""
    results: dict[str, RunResult] = {}
    given_up: set[str] = set()
    orphaned: dict[str, int] = {}
    loop = asyncio.get_running_loop()
    while True:
        now = time.time()
        for run_id in ids:
            if run_id in results or run_id in given_up:
                continue
            rec = store.get_run(run_id)
            if rec is None:
                given_up.add(run_id)
            elif rec.is_final:
                results[run_id] = record_result(rec)
            elif _ownerless(store, rec, now):
                orphaned[run_id] = orphaned.get(run_id, 0) + 1
                if orphaned[run_id] >= 2:
                    given_up.add(run_id)
            else:
                orphaned.pop(run_id, None)
        if len(results) + len(given_up) >= len(ids) or (deadline is not None and loop.time() >= deadline):
            return results
        await asyncio.sleep(STORE_POLL_S if deadline is None else min(STORE_POLL_S, max(deadline - loop.time(), 0)))


def _ownerless(store: Store, rec: RunRecord, now: float) -> bool:
    """Whether ``rec``'s owning runtime is gone (``recovery.is_orphaned``'s test, which this module cannot import:
    recovery imports the manager, which imports this module)."""
    if rec.owner == store.owner or rec.owner.startswith("temporal:"):
        return False  # ours, or driven by the Temporal engine's workers
    lease = store.lease(rec.owner) if rec.owner else None
    return lease is None or lease.expires_at <= now or process_gone(lease.process)
