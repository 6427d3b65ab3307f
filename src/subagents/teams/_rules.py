"""The rules both team stores apply, and the wording of their errors (one place, so both say the same).

A store reads what a rule needs, asks these functions, and writes the outcome in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .model import LEAD, ClaimRefused, MemberStatus, TaskRecord, TaskStatus, TeamError

__all__ = [
    "as_member_status",
    "as_task_status",
    "check_blockers",
    "check_party",
    "check_subject",
    "delete_refused",
    "duplicate_member",
    "duplicate_team",
    "plan_update",
    "refused",
    "unknown_member",
    "unknown_task",
    "unknown_team",
]


def unknown_team(name: str) -> TeamError:
    return TeamError(f"there is no team {name!r}; create it first (team_create), or see 'subagents team list'")


def duplicate_team(name: str) -> TeamError:
    return TeamError(f"a team named {name!r} already exists; choose another name, or delete that team first")


def unknown_member(team: str, name: str, members: Iterable[str]) -> TeamError:
    known = ", ".join(repr(m) for m in (LEAD, *members))
    return TeamError(f"team {team!r} has no member {name!r}; its members are {known}")


def duplicate_member(team: str, name: str) -> TeamError:
    return TeamError(f"team {team!r} already has a member named {name!r}; choose another name")


def unknown_task(team: str, task_id: int) -> TeamError:
    return TeamError(f"team {team!r} has no task {task_id}; task_list shows its tasks and their ids")


def check_party(team: str, name: str, members: Sequence[str]) -> None:
    """``name`` may send, receive and own tasks in ``team``: the lead or one of ``members``."""
    if name != LEAD and name not in members:
        raise unknown_member(team, name, members)


def check_subject(subject: str) -> str:
    if not isinstance(subject, str) or not subject.strip():
        raise TeamError("a task needs a subject: one short line saying what is to be done")
    return subject


def check_blockers(team: str, blocked_by: Sequence[int], existing: Iterable[int]) -> tuple[int, ...]:
    """The blocker ids, each once and sorted; :class:`TeamError` for one that is not a task of the team."""
    known = set(existing)
    ids: set[int] = set()
    for b in blocked_by:
        if isinstance(b, bool) or not isinstance(b, int):
            raise TeamError(f"blocked_by takes task ids (integers), not {b!r}")
        if b not in known:
            raise TeamError(f"team {team!r} has no task {b} to be blocked by; task_list shows the task ids")
        ids.add(b)
    return tuple(sorted(ids))


def as_task_status(value: str) -> TaskStatus:
    try:
        return TaskStatus(value)
    except ValueError:
        raise TeamError(f"unknown task status {value!r}; use 'pending', 'in_progress' or 'completed'") from None


def as_member_status(value: str) -> MemberStatus:
    try:
        return MemberStatus(value)
    except ValueError:
        raise TeamError(f"unknown member status {value!r}; use one of "
                        f"{', '.join(repr(s.value) for s in MemberStatus)}") from None


def refused(team: str, task_id: int, task: TaskRecord | None, open_blockers: Sequence[int]) -> ClaimRefused:
    """Why ``task`` (as read after a claim of it changed nothing) cannot be claimed."""
    if task is None:
        return ClaimRefused(f"team {team!r} has no task {task_id}; task_list shows its tasks and their ids",
                            "unknown")
    if task.status == TaskStatus.COMPLETED:
        return ClaimRefused(f"task {task_id} is already completed (by {task.owner!r}); claim another task",
                            "completed", task.owner)
    if task.owner is not None:
        return ClaimRefused(f"task {task_id} is already claimed by {task.owner!r}; claim another task",
                            "owned", task.owner)
    blockers = tuple(open_blockers)
    return ClaimRefused(f"task {task_id} is blocked by unfinished task(s) {', '.join(map(str, blockers))}; "
                        "claim it once they are completed, or claim another task", "blocked", blockers=blockers)


def plan_update(task: TaskRecord, by: str, status: TaskStatus | None, note: str | None = None
                ) -> tuple[TaskStatus, str | None, bool]:
    """What ``update_task(by=by, status=status, note=note)`` does to ``task``: ``(new status, new owner, claim
    first)``.

    *Claim first* is set when a pending task is moved on (to ``in_progress`` or ``completed``): the store
    claims it for ``by`` — atomically, refused while a blocker is unfinished — before the change.  The note of a
    task nobody holds (the one its last owner left when releasing it) is the lead's to change, or its next owner's.
    """
    if task.owner is not None and by not in (task.owner, LEAD):
        raise TeamError(f"task {task.id} belongs to {task.owner!r}; only {task.owner!r} or the lead can update it")
    if (task.owner is None and by != LEAD and note is not None and task.status == TaskStatus.PENDING
            and status in (None, TaskStatus.PENDING)):
        raise TeamError(f"task {task.id} is not claimed: only the lead changes its note; claim it first "
                        "(task_update with status='in_progress'), then note what you did")
    if status is None or status == task.status:
        return task.status, task.owner, False
    if task.status == TaskStatus.COMPLETED:
        raise TeamError(f"task {task.id} is completed and cannot be reopened; create a new task for the "
                        "remaining work")
    if status == TaskStatus.PENDING:  # released: back on the board, unowned
        return TaskStatus.PENDING, None, False
    if task.status == TaskStatus.PENDING:
        return status, by, True
    return TaskStatus.COMPLETED, task.owner, False  # in_progress -> completed: the owner stays


def delete_refused(team: str, live: Sequence[tuple[str, str]]) -> TeamError:
    who = ", ".join(f"{name} ({status})" for name, status in live)
    return TeamError(f"team {team!r} still has members that are not shut down: {who}; shut them down first "
                     "(team_shutdown), then delete the team")
