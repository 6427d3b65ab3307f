"""``SweepOrder`` (the memory store's sweep index): pages in key order, a run under one key at a time."""

from __future__ import annotations

import random

from subagents.store._sweep import SweepOrder


def test_pages_walk_the_due_runs_in_key_order_once() -> None:
    rnd = random.Random(4)
    order, keys = SweepOrder(), {}
    for i in range(500):
        rid = f"r{i:03d}"
        keys[rid] = (float(rnd.randrange(0, 100)), rid)
        order.set(rid, keys[rid])
    for rid in list(keys)[::3]:  # moved, or gone
        if rnd.random() < 0.5:
            order.set(rid, None)
            del keys[rid]
        else:
            keys[rid] = (float(rnd.randrange(0, 100)), rid)
            order.set(rid, keys[rid])
    due = [k[1] for k in sorted(keys.values()) if k[0] <= 60.0]
    seen: list[str] = []
    after = None
    while True:
        page = order.page(60.0, 7, after)
        seen += page
        if len(page) < 7:
            break
        after = keys[page[-1]]
    assert seen == due
    assert len(order) == len(keys)
    assert sorted(order.ids()) == sorted(keys)


def test_a_run_leaves_its_old_place_at_once() -> None:
    order = SweepOrder()
    order.set("a", (1.0, "a"))
    order.set("b", (2.0, "b"))
    order.set("a", (3.0, "a"))
    assert order.page(10.0, 10) == ["b", "a"]
    order.set("b", None)
    order.set("b", None)  # (already gone: nothing happens)
    assert order.page(10.0, 10) == ["a"]
    assert order.page(2.9, 10) == []
    assert order.page(3.0, 10, (3.0, "a")) == []
