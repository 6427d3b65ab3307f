"""``subagents runs show``: the prompt-cache hit ratio of a run and of its tree, from the providers' usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore

ROOT = "019ab000-0000-7000-8000-0000aaaa1111"
KID = "019ab000-0001-7000-8000-0000bbbb2222"
KID2 = "019ab000-0001-7000-8000-0000bbbb3333"


def rec(run_id: str, nickname: str, usage: dict[str, int], **kw: object) -> RunRecord:
    d: dict[str, object] = {"agent_type": "explore", "task": "scan it", "status": "completed", "outcome": "ok",
                            "root_id": ROOT, "created_at": 1.0, "started_at": 1.0, "ended_at": 3.0, "turns": 2,
                            "result_text": "done", "usage": usage, **kw}
    return RunRecord(run_id=run_id, agent_id=run_id, nickname=nickname, **d)  # type: ignore[arg-type]


@pytest.fixture
def db(isolated: Path) -> Path:
    path = isolated / "runs.db"
    s = SQLiteStore(path)
    # the root: 10,000 input tokens, 2,000 of them read from the cache, 6,000 written
    s.create_run(rec(ROOT, "general-purpose-ada", {"input_tokens": 10_000, "output_tokens": 500,
                                                   "cache_read_tokens": 2_000, "cache_write_tokens": 6_000},
                     agent_type="general-purpose"))
    s.create_run(rec(KID, "explore-ada", {"input_tokens": 5_000, "output_tokens": 100, "cache_read_tokens": 4_500},
                     parent_id=ROOT, depth=1))
    # a provider that reports no cache (a compatible server): counts in the tree's input, adds no hit
    s.create_run(rec(KID2, "explore-grace", {"input_tokens": 1_000, "output_tokens": 50}, parent_id=ROOT, depth=1))
    s.close()
    return path


def show(db: Path, *args: str) -> int:
    return main(["runs", "--store", f"sqlite:///{db}", "show", *args])


def test_show_prints_the_hit_ratio_of_the_run_and_its_tree(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert show(db, "general-purpose-ada") == 0
    lines = capsys.readouterr().out.splitlines()
    cache = [ln for ln in lines if ln.startswith("cache hits:")]
    assert cache == ["cache hits:            20.0% (2.0k of 10.0k) of input tokens read from cache, 6.0k written"
                     " · tree of 3 runs: 40.6% (6.5k of 16.0k)"]
    stats = next(ln for ln in lines if ln.startswith("stats:"))
    assert "cache r 6.5k (41% hit) w 6.0k" in stats  # the tree's cache tokens in the stats line too

    assert show(db, "explore-grace") == 0
    cache = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("cache hits:")]
    assert cache == ["cache hits:            0.0% (0 of 1.0k) of input tokens read from cache"
                     " (the provider reported no cached tokens)"]


def test_show_json_has_the_ratios(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert show(db, "general-purpose-ada", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cache_hit_ratio"] == pytest.approx(0.2)
    assert out["tree_cache_hit_ratio"] == pytest.approx(6_500 / 16_000)
    assert show(db, "explore-ada", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["cache_hit_ratio"], out["tree_cache_hit_ratio"]) == (pytest.approx(0.9), pytest.approx(0.9))
