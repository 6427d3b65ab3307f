"""The TeamStore contract, method by method, on both stores (the memory one and the SQLite one)."""

from __future__ import annotations

import pytest

from subagents.teams.model import (
    LEAD,
    ClaimRefused,
    MemberRecord,
    MemberStatus,
    TaskStatus,
    TeamError,
    TeamRecord,
)
from subagents.teams.store import TeamStore

# -- teams ----------------------------------------------------------------------------------------


def test_teams_are_created_read_and_listed_oldest_first(ts: TeamStore) -> None:
    assert ts.list_teams() == []
    assert ts.create_team("beta", "run-1", 2.0, "second") == TeamRecord("beta", "run-1", 2.0, "second")
    ts.create_team("alpha", "", 1.0)
    assert ts.get_team("beta") == TeamRecord("beta", "run-1", 2.0, "second")
    assert ts.get_team("nope") is None
    assert [t.name for t in ts.list_teams()] == ["alpha", "beta"]


def test_a_team_name_is_taken_once(ts: TeamStore) -> None:
    ts.create_team("t", "", 1.0)
    with pytest.raises(TeamError, match="a team named 't' already exists; choose another name"):
        ts.create_team("t", "", 2.0)


@pytest.mark.parametrize("bad", ["", "Team", "has space", "-dash", "x" * 49, "é"])
def test_bad_team_and_member_names_are_refused(ts: TeamStore, bad: str) -> None:
    with pytest.raises(TeamError, match=f"bad team name {bad!r}: use 1-48 lower-case letters"):
        ts.create_team(bad, "", 1.0)
    ts.create_team("t", "", 1.0)
    with pytest.raises(TeamError, match=f"bad member name {bad!r}"):
        ts.add_member(MemberRecord("t", bad, "general"))


def test_a_team_is_deleted_only_once_every_member_is_shut_down(team: TeamStore) -> None:
    team.create_task("t", "x")
    team.send("t", "a", ["b"], "hi", 3.0)
    team.update_member("t", "a", status=MemberStatus.SHUT_DOWN)
    with pytest.raises(TeamError) as e:
        team.delete_team("t")
    assert str(e.value) == ("team 't' still has members that are not shut down: b (working); shut them down first "
                            "(team_shutdown), then delete the team")
    assert team.get_team("t") is not None
    team.update_member("t", "b", status=MemberStatus.SHUT_DOWN)
    team.delete_team("t")
    assert team.get_team("t") is None
    with pytest.raises(TeamError, match="there is no team 't'"):
        team.tasks("t")
    team.create_team("t", "", 9.0)  # the name is free again, with an empty board and mailbox
    assert team.create_task("t", "fresh").id == 1
    assert team.members("t") == []
    assert team.mail("t") == []


def test_operations_on_an_unknown_team_say_so(ts: TeamStore) -> None:
    msg = r"there is no team 'ghost'; create it first \(team_create\)"
    calls = [
        lambda: ts.delete_team("ghost"), lambda: ts.add_member(MemberRecord("ghost", "a", "general")),
        lambda: ts.update_member("ghost", "a", status=MemberStatus.IDLE), lambda: ts.members("ghost"),
        lambda: ts.create_task("ghost", "x"), lambda: ts.tasks("ghost"), lambda: ts.claim("ghost", 1, LEAD, 1.0),
        lambda: ts.claim_next("ghost", LEAD, 1.0), lambda: ts.update_task("ghost", 1, by=LEAD, note="n"),
        lambda: ts.release_tasks("ghost", "a", 1.0), lambda: ts.send("ghost", LEAD, ["a"], "x", 1.0),
        lambda: ts.unread("ghost", LEAD), lambda: ts.mark_read("ghost", LEAD, 1), lambda: ts.mail("ghost"),
    ]
    for call in calls:
        with pytest.raises(TeamError, match=msg):
            call()
    assert ts.member("ghost", "a") is None
    assert ts.task("ghost", 1) is None


# -- members --------------------------------------------------------------------------------------


def test_members_are_listed_in_the_order_they_joined_and_read_back_whole(ts: TeamStore) -> None:
    ts.create_team("t", "", 1.0)
    z = MemberRecord("t", "zed", "explore", agent_id="r1", model="m", mode="plan", status=MemberStatus.IDLE,
                     require_plan_approval=True, plan_approved=False, joined_at=5.0)
    ts.add_member(z)
    ts.add_member(MemberRecord("t", "amy", "general", joined_at=6.0))
    assert [m.name for m in ts.members("t")] == ["zed", "amy"]
    assert ts.member("t", "zed") == z
    assert ts.member("t", "nobody") is None


def test_a_member_name_is_taken_once_per_team_and_lead_is_reserved(team: TeamStore) -> None:
    with pytest.raises(TeamError, match="team 't' already has a member named 'a'; choose another name"):
        team.add_member(MemberRecord("t", "a", "general"))
    with pytest.raises(TeamError, match="'lead' is the team lead's name"):
        team.add_member(MemberRecord("t", LEAD, "general"))
    team.create_team("u", "", 1.0)
    team.add_member(MemberRecord("u", "a", "general"))  # another team: the same name is fine
    assert [m.name for m in team.members("u")] == ["a"]


def test_update_member_changes_only_what_is_given(team: TeamStore) -> None:
    m = team.update_member("t", "a", status=MemberStatus.IDLE)
    assert (m.status, m.agent_id, m.plan_approved) == (MemberStatus.IDLE, "run-a", False)
    m = team.update_member("t", "a", agent_id="run-a2", plan_approved=True)
    assert (m.status, m.agent_id, m.plan_approved) == (MemberStatus.IDLE, "run-a2", True)
    assert team.member("t", "a") == m
    assert team.update_member("t", "a", status="stopping").status is MemberStatus.STOPPING  # type: ignore[arg-type]
    with pytest.raises(TeamError, match="team 't' has no member 'zz'; its members are 'lead', 'a', 'b'"):
        team.update_member("t", "zz", status=MemberStatus.IDLE)
    with pytest.raises(TeamError, match="unknown member status 'asleep'"):
        team.update_member("t", "a", status="asleep")  # type: ignore[arg-type]


# -- the task board -------------------------------------------------------------------------------


def test_tasks_get_increasing_ids_and_keep_their_blockers(team: TeamStore) -> None:
    one = team.create_task("t", "one", "the first", at=3.0)
    assert (one.id, one.status, one.owner, one.blocked_by, one.created_at) == (1, TaskStatus.PENDING, None, (), 3.0)
    team.create_task("t", "two")
    three = team.create_task("t", "three", blocked_by=[2, 1, 2])
    assert (three.id, three.blocked_by) == (3, (1, 2))
    assert team.task("t", 3) == three
    assert team.task("t", 4) is None
    assert [t.id for t in team.tasks("t")] == [1, 2, 3]
    assert team.tasks("t") == [one, team.task("t", 2), three]


def test_create_task_refuses_unknown_blockers_and_empty_subjects(team: TeamStore) -> None:
    team.create_task("t", "one")
    with pytest.raises(TeamError, match="team 't' has no task 7 to be blocked by"):
        team.create_task("t", "two", blocked_by=[1, 7])
    with pytest.raises(TeamError, match="a task needs a subject"):
        team.create_task("t", "  ")
    with pytest.raises(TeamError, match="blocked_by takes task ids"):
        team.create_task("t", "two", blocked_by=["1"])  # type: ignore[list-item]
    assert [t.id for t in team.tasks("t")] == [1]  # nothing half-made


def test_claim_gives_a_task_to_one_member(team: TeamStore) -> None:
    team.create_task("t", "one")
    got = team.claim("t", 1, "a", 5.0)
    assert (got.status, got.owner, got.updated_at) == (TaskStatus.IN_PROGRESS, "a", 5.0)
    assert team.claim("t", 1, "a", 6.0) == got  # one's own task: unchanged
    with pytest.raises(ClaimRefused) as e:
        team.claim("t", 1, "b", 7.0)
    assert (e.value.reason, e.value.owner) == ("owned", "a")
    assert str(e.value) == "task 1 is already claimed by 'a'; claim another task"
    assert team.task("t", 1) == got


def test_a_blocked_task_cannot_be_claimed_until_its_blockers_are_completed(team: TeamStore) -> None:
    for s in ("one", "two"):
        team.create_task("t", s)
    team.create_task("t", "three", blocked_by=[1, 2])
    with pytest.raises(ClaimRefused) as e:
        team.claim("t", 3, "a", 1.0)
    assert (e.value.reason, e.value.blockers) == ("blocked", (1, 2))
    assert str(e.value) == ("task 3 is blocked by unfinished task(s) 1, 2; claim it once they are completed, "
                            "or claim another task")
    team.claim("t", 1, "a", 2.0)
    team.update_task("t", 1, by="a", status=TaskStatus.COMPLETED)
    with pytest.raises(ClaimRefused) as e:
        team.claim("t", 3, "a", 3.0)
    assert e.value.blockers == (2,)
    team.claim("t", 2, "b", 4.0)
    team.update_task("t", 2, by="b", status=TaskStatus.COMPLETED)
    assert team.claim("t", 3, "a", 5.0).owner == "a"


def test_claim_refuses_completed_and_unknown_tasks_and_unknown_claimants(team: TeamStore) -> None:
    team.create_task("t", "one")
    team.claim("t", 1, "a", 1.0)
    team.update_task("t", 1, by="a", status=TaskStatus.COMPLETED)
    with pytest.raises(ClaimRefused) as e:
        team.claim("t", 1, "a", 2.0)
    assert (e.value.reason, str(e.value)) == ("completed", "task 1 is already completed (by 'a'); claim another task")
    with pytest.raises(ClaimRefused) as e:
        team.claim("t", 9, "a", 2.0)
    assert e.value.reason == "unknown"
    with pytest.raises(TeamError, match="team 't' has no member 'zed'") as e2:
        team.claim_next("t", "zed", 2.0)
    assert not isinstance(e2.value, ClaimRefused)


def test_claim_next_takes_the_oldest_claimable_task(team: TeamStore) -> None:
    team.create_task("t", "one")
    team.create_task("t", "two", blocked_by=[1])
    team.create_task("t", "three")
    assert team.claim_next("t", "a", 1.0).id == 1  # type: ignore[union-attr]
    assert team.claim_next("t", "b", 1.0).id == 3  # type: ignore[union-attr]  (2 waits for 1)
    assert team.claim_next("t", "b", 1.0) is None
    team.update_task("t", 1, by="a", status=TaskStatus.COMPLETED)
    got = team.claim_next("t", LEAD, 2.0)
    assert got is not None
    assert (got.id, got.owner) == (2, LEAD)
    assert team.claim_next("t", "a", 3.0) is None


def test_only_the_owner_or_the_lead_updates_a_claimed_task(team: TeamStore) -> None:
    team.create_task("t", "one")
    team.claim("t", 1, "a", 1.0)
    with pytest.raises(TeamError, match="task 1 belongs to 'a'; only 'a' or the lead can update it"):
        team.update_task("t", 1, by="b", status=TaskStatus.COMPLETED)
    with pytest.raises(TeamError, match="task 1 belongs to 'a'"):
        team.update_task("t", 1, by="b", note="me too")
    t = team.update_task("t", 1, by="a", note="half way", at=2.0)
    assert (t.status, t.note, t.updated_at) == (TaskStatus.IN_PROGRESS, "half way", 2.0)
    t = team.update_task("t", 1, by=LEAD, status=TaskStatus.COMPLETED, at=3.0)
    assert (t.status, t.owner, t.note) == (TaskStatus.COMPLETED, "a", "half way")  # the lead completes; owner stays
    assert team.task("t", 1) == t


def test_a_completed_task_cannot_be_reopened(team: TeamStore) -> None:
    team.create_task("t", "one")
    team.claim("t", 1, "a", 1.0)
    team.update_task("t", 1, by="a", status=TaskStatus.COMPLETED, note="done")
    for status in (TaskStatus.PENDING, TaskStatus.IN_PROGRESS):
        for by in ("a", LEAD):
            with pytest.raises(TeamError, match="task 1 is completed and cannot be reopened"):
                team.update_task("t", 1, by=by, status=status)
    t = team.update_task("t", 1, by="a", status=TaskStatus.COMPLETED, note="done, and checked")
    assert (t.status, t.note) == (TaskStatus.COMPLETED, "done, and checked")


def test_the_note_of_an_unclaimed_task_is_the_leads_or_its_next_owners(team: TeamStore) -> None:
    # A member who released a task leaves a note for the next one ("half done, see branch x"): another member cannot
    # overwrite it without taking the task on.
    team.create_task("t", "one")
    team.claim("t", 1, "a", 1.0)
    team.update_task("t", 1, by="a", status=TaskStatus.PENDING, note="half done, see branch x")
    for status in (None, TaskStatus.PENDING):
        with pytest.raises(TeamError, match="task 1 is not claimed: only the lead changes its note; claim it first"):
            team.update_task("t", 1, by="b", status=status, note="nothing to do here")
    assert team.task("t", 1).note == "half done, see branch x"  # type: ignore[union-attr]
    assert team.update_task("t", 1, by=LEAD, note="see branch x, then y").note == "see branch x, then y"
    t = team.update_task("t", 1, by="b", status=TaskStatus.IN_PROGRESS, note="taking it")  # claimed, then noted
    assert (t.owner, t.note) == ("b", "taking it")


def test_setting_pending_releases_a_task(team: TeamStore) -> None:
    team.create_task("t", "one")
    team.claim("t", 1, "a", 1.0)
    t = team.update_task("t", 1, by="a", status=TaskStatus.PENDING, note="gave up")
    assert (t.status, t.owner, t.note) == (TaskStatus.PENDING, None, "gave up")
    assert team.claim("t", 1, "b", 2.0).owner == "b"


def test_moving_a_pending_task_on_claims_it_first(team: TeamStore) -> None:
    team.create_task("t", "one")
    team.create_task("t", "two", blocked_by=[1])
    t = team.update_task("t", 1, by="b", status="in_progress")  # type: ignore[arg-type]
    assert (t.status, t.owner) == (TaskStatus.IN_PROGRESS, "b")
    with pytest.raises(ClaimRefused) as e:
        team.update_task("t", 2, by="a", status=TaskStatus.COMPLETED)
    assert e.value.reason == "blocked"
    assert team.task("t", 2).status is TaskStatus.PENDING  # type: ignore[union-attr]
    team.update_task("t", 1, by="b", status=TaskStatus.COMPLETED)
    t = team.update_task("t", 2, by=LEAD, status=TaskStatus.COMPLETED)  # straight to completed, by the lead
    assert (t.status, t.owner) == (TaskStatus.COMPLETED, LEAD)


def test_update_task_refuses_unknown_tasks_statuses_and_members(team: TeamStore) -> None:
    team.create_task("t", "one")
    with pytest.raises(TeamError, match="team 't' has no task 5; task_list shows"):
        team.update_task("t", 5, by="a", status=TaskStatus.COMPLETED)
    with pytest.raises(TeamError, match="unknown task status 'done'; use 'pending', 'in_progress' or 'completed'"):
        team.update_task("t", 1, by="a", status="done")  # type: ignore[arg-type]
    with pytest.raises(TeamError, match="team 't' has no member 'zed'"):
        team.update_task("t", 1, by="zed", note="x")


def test_tasks_filters_by_status(team: TeamStore) -> None:
    for s in ("one", "two", "three"):
        team.create_task("t", s)
    team.claim("t", 2, "a", 1.0)
    team.claim("t", 3, "b", 1.0)
    team.update_task("t", 3, by="b", status=TaskStatus.COMPLETED)
    assert [t.id for t in team.tasks("t", TaskStatus.PENDING)] == [1]
    assert [t.id for t in team.tasks("t", TaskStatus.IN_PROGRESS)] == [2]
    assert [t.id for t in team.tasks("t", TaskStatus.COMPLETED)] == [3]


def test_release_tasks_puts_an_owners_open_tasks_back(team: TeamStore) -> None:
    for s in ("one", "two", "three", "four"):
        team.create_task("t", s)
    for i, who in ((1, "a"), (2, "a"), (3, "b"), (4, "a")):
        team.claim("t", i, who, 1.0)
    team.update_task("t", 4, by="a", status=TaskStatus.COMPLETED)
    assert team.release_tasks("t", "a", 2.0) == [1, 2]
    assert [(t.id, t.status.value, t.owner) for t in team.tasks("t")] == [
        (1, "pending", None), (2, "pending", None), (3, "in_progress", "b"), (4, "completed", "a")]
    assert team.task("t", 1).updated_at == 2.0  # type: ignore[union-attr]
    assert team.release_tasks("t", "a", 3.0) == []


# -- the mailbox ----------------------------------------------------------------------------------


def test_mail_keeps_the_order_it_was_sent_in(team: TeamStore) -> None:
    for i in range(3):
        team.send("t", "a", ["b"], f"a{i}", 10.0 + i)
        team.send("t", LEAD, ["b"], f"l{i}", 10.5 + i)
    got = team.unread("t", "b")
    assert [m.text for m in got] == ["a0", "l0", "a1", "l1", "a2", "l2"]
    assert [m.seq for m in got] == sorted(m.seq for m in got)
    assert [m.text for m in got if m.sender == "a"] == ["a0", "a1", "a2"]
    assert (got[0].team, got[0].sender, got[0].recipient, got[0].at, got[0].kind, got[0].read) == (
        "t", "a", "b", 10.0, "message", False)
    assert team.unread("t", "a") == []


def test_a_broadcast_reaches_every_member_once(team: TeamStore) -> None:
    team.add_member(MemberRecord("t", "c", "general"))
    everyone = [m.name for m in team.members("t")] + [LEAD]
    sent = team.send("t", "a", [n for n in everyone if n != "a"] + ["b"], "all hands", 5.0, kind="broadcast")
    assert [m.recipient for m in sent] == ["b", "c", LEAD]  # each once, in the order given
    assert len({m.seq for m in sent}) == 3
    for name in ("b", "c", LEAD):
        assert [(m.text, m.kind) for m in team.unread("t", name)] == [("all hands", "broadcast")]
    assert team.unread("t", "a") == []


def test_mark_read_marks_up_to_a_seq(team: TeamStore) -> None:
    seqs = [team.send("t", "a", [LEAD], f"m{i}", float(i))[0].seq for i in range(4)]
    team.send("t", "a", ["b"], "for b", 9.0)
    team.mark_read("t", LEAD, seqs[1])
    assert [m.text for m in team.unread("t", LEAD)] == ["m2", "m3"]
    assert [m.text for m in team.unread("t", "b")] == ["for b"]
    team.mark_read("t", LEAD, seqs[3])
    assert team.unread("t", LEAD) == []
    assert [(m.text, m.read) for m in team.mail("t")] == [
        ("m0", True), ("m1", True), ("m2", True), ("m3", True), ("for b", False)]


def test_mail_shows_the_latest_messages_oldest_first(team: TeamStore) -> None:
    for i in range(6):
        team.send("t", "a", ["b"], f"m{i}", float(i))
    assert [m.text for m in team.mail("t", limit=3)] == ["m3", "m4", "m5"]
    assert [m.text for m in team.mail("t")] == [f"m{i}" for i in range(6)]
    assert team.mail("t", limit=0) == []


def test_send_refuses_unknown_parties_and_a_bare_string(team: TeamStore) -> None:
    with pytest.raises(TeamError, match="team 't' has no member 'zed'; its members are 'lead', 'a', 'b'"):
        team.send("t", "a", ["b", "zed"], "x", 1.0)
    with pytest.raises(TeamError, match="team 't' has no member 'zed'"):
        team.send("t", "zed", ["b"], "x", 1.0)
    with pytest.raises(TeamError, match="recipients is a list of names"):
        team.send("t", "a", "b", "x", 1.0)
    with pytest.raises(TeamError, match="team 't' has no member 'zed'"):
        team.unread("t", "zed")
    assert team.mail("t") == []  # nothing half-sent
    assert team.send("t", "a", [], "x", 1.0) == []
