"""``subagents runs tree``: each agent's duration, turns, tokens and cost, aligned under a header, and a total."""

from __future__ import annotations

from subagents.cli.runs_text import tree_lines
from subagents.store import RunRecord

ROOT = "019ab000-0000-7000-8000-0000aaaa1111"
KID = "019ab000-0001-7000-8000-0000bbbb2222"
GRANDKID = "019ab000-0002-7000-8000-0000cccc3333"
LATE = "019ab000-0003-7000-8000-0000dddd4444"
NOW = 1000.0


def rec(run_id: str, nickname: str, parent: str | None, **kw: object) -> RunRecord:
    d: dict[str, object] = {"agent_type": "explore", "task": "t", "status": "completed", "outcome": "ok",
                            "root_id": ROOT, "parent_id": parent, "started_at": 900.0, "ended_at": 912.5,
                            "turns": 3, "usage": {"input_tokens": 1500, "output_tokens": 300},
                            "cost_usd": 0.0123, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=nickname, **d)  # type: ignore[arg-type]


def test_columns_nesting_and_total() -> None:
    root = rec(ROOT, "boss", None, agent_type="general-purpose", label="the root", started_at=880.0, ended_at=1005.0)
    recs = [root,
            rec(KID, "scout", ROOT, label="docs", cost_usd=0.5, turns=12),
            rec(GRANDKID, "deep", KID, status="running", outcome=None, ended_at=None, started_at=995.5,
                usage={"input_tokens": 20, "output_tokens": 0}, cost_usd=0.0),
            rec(LATE, "late", ROOT, status="pending_init", outcome=None, started_at=None, ended_at=None, turns=0,
                usage={}, cost_usd=None)]
    assert tree_lines(root, recs, NOW) == [
        "AGENT                                ID         TIME  TURNS    TOKENS     COST  LABEL",
        "boss [general-purpose] completed/ok  aaaa1111  2m05s      3  1.5k/300  $0.0123  the root",
        "  scout [explore] completed/ok       bbbb2222  12.5s     12  1.5k/300  $0.5000  docs",
        "    deep [explore] running           cccc3333  4.5s+      3      20/0  $0.0000",
        "  late [explore] pending_init        dddd4444      -      0       0/0  est n/a",
        "total: 4 agents · 2m05s wall · 18 turns · tokens 3.0k/600 (in/out) · est n/a",
    ]


def test_a_subtree_and_a_known_total_cost() -> None:
    kid = rec(KID, "scout", ROOT)
    lines = tree_lines(kid, [rec(ROOT, "boss", None), kid, rec(GRANDKID, "deep", KID, cost_usd=0.01)], NOW)
    assert [ln.split()[0] for ln in lines[1:-1]] == ["scout", "deep"]  # the subtree only
    assert lines[-1] == "total: 2 agents · 12.5s wall · 6 turns · tokens 3.0k/600 (in/out) · $0.0223"


def test_long_durations_read_in_hours_and_days() -> None:
    recs = [rec(ROOT, "boss", None, started_at=0.0, ended_at=3 * 3600 + 7 * 60 + 5),
            rec(KID, "scout", ROOT, started_at=NOW - 2 * 86400 - 5 * 3600, ended_at=None, status="running")]
    assert [ln.split()[4] for ln in tree_lines(recs[0], recs, NOW)[1:3]] == ["3h07m", "2d05h+"]


def test_a_cycle_of_parent_ids_is_shown_once_not_for_ever() -> None:
    # A store that came with a project (or was damaged) can say a run is its own parent, or its child's child.
    root = rec(ROOT, "boss", ROOT)
    kid = rec(KID, "scout", GRANDKID)
    grandkid = rec(GRANDKID, "deep", KID)
    lines = tree_lines(root, [root, kid, grandkid], NOW)
    assert [ln.split()[0] for ln in lines[1:-1]] == ["boss"]
    lines = tree_lines(kid, [root, kid, grandkid], NOW)
    assert [ln.split()[0] for ln in lines[1:-1]] == ["scout", "deep"]


def test_descendants_stop_at_a_cycle() -> None:
    from subagents.cli.runs_text import descendants

    kid, grandkid = rec(KID, "scout", GRANDKID), rec(GRANDKID, "deep", KID)

    class Store:
        def list_runs(self, **_: object) -> list[RunRecord]:
            return [rec(ROOT, "boss", None), kid, grandkid]

    assert [r.nickname for r in descendants(Store(), kid)] == ["deep"]  # type: ignore[arg-type]
