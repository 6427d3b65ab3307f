"""A lone surrogate (JSON ``"\\ud800"`` in a model's tool call) in a task, a note, mail or a team description: it
stopped the SQLite and PostgreSQL team stores with a ``UnicodeEncodeError``; it is stored as U+FFFD, as the run store
does (each test runs against every team store: ``ts`` in conftest.py)."""

from __future__ import annotations

import pytest

from subagents.teams.model import MemberRecord
from subagents.teams.store import TeamStore

SURROGATE = "a\ud800b"


@pytest.fixture
def seeded(ts: TeamStore) -> TeamStore:
    ts.create_team("t", "lead-run", 1.0, "a team")
    ts.add_member(MemberRecord("t", "a", "general", agent_id="run-a", joined_at=2.0))
    return ts


def test_a_lone_surrogate_in_a_task_is_stored_and_read_back_as_created(seeded: TeamStore) -> None:
    t = seeded.create_task("t", "subject " + SURROGATE, "description " + SURROGATE, [], 1.0)
    got = seeded.task("t", t.id)
    assert got is not None
    assert (got.subject, got.description) == (t.subject, t.description)


def test_a_lone_surrogate_in_a_team_description_is_stored(seeded: TeamStore) -> None:
    made = seeded.create_team("u", "lead-run", 1.0, "team " + SURROGATE)
    got = seeded.get_team("u")
    assert got is not None
    assert got.description == made.description


def test_a_lone_surrogate_in_a_note_and_in_mail_is_stored(seeded: TeamStore) -> None:
    t = seeded.create_task("t", "job", "", [], 1.0)
    updated = seeded.update_task("t", t.id, by="lead", note="note " + SURROGATE, at=2.0)
    sent = seeded.send("t", "lead", ["a"], "hi " + SURROGATE, 3.0)
    assert [m.text for m in seeded.unread("t", "a")] == [sent[0].text]
    assert seeded.task("t", t.id).note == updated.note  # type: ignore[union-attr]


