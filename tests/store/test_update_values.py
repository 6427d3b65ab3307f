"""Values of a run update reach the SQLite store as they are, even those JSON cannot carry.

Updates travel to SQLite as one JSON array; a float JSON cannot spell (``inf``, a cost that overflowed) made
the batch's statement fail and with it the store for good (reported as a corrupt file).  Such rows now go
as bound values and are stored like any float.
"""

from __future__ import annotations

import math
from pathlib import Path

from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore


async def test_updates_keep_their_values_and_types(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "state.db")
    try:
        s.create_run(RunRecord(run_id="r", agent_id="r", nickname="r", agent_type="explore", task="t"))
        s.flush()  # committed: what follows is an UPDATE, not folded into the INSERT
        s.update_run("r", {"started_at": 1795452591.1546094, "runs": 2, "truncated": True})
        s.finish_run("r", {"status": "completed", "ended_at": 1795452591.1566036, "cost_usd": math.inf,
                           "usage": {"input_tokens": 3}, "limit": None, "result_text": "ok"}, None)
        s.flush()
        rec = s.get_run("r")
        assert rec is not None
        assert (rec.started_at, rec.ended_at) == (1795452591.1546094, 1795452591.1566036)
        assert (rec.runs, rec.truncated, rec.status) == (2, True, "completed")
        assert rec.cost_usd == math.inf
        assert (rec.usage, rec.limit, rec.result_text) == ({"input_tokens": 3}, None, "ok")
        s.update_run("r", {"turns": 4})  # the store still works
        s.flush()
        assert s.get_run("r").turns == 4  # type: ignore[union-attr]
    finally:
        s.close()
