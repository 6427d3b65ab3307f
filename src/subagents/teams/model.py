"""The records of a team: the team, its members, its task board and its mail (issue 14).

A **team** has a name, a lead (the agent that created it; in the mail it is called ``lead``) and
teammates: long-lived named agents that go *idle* between pieces of work instead of ending.  The
**task board** holds tasks with dependencies (``blocked_by``); a task is claimed by exactly one
member.  The **mailbox** holds messages in the order they were sent (``seq``, one counter per team).

These are plain frozen records; :class:`~subagents.teams.store.TeamStore` keeps them durable.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..exceptions import SubagentsError
from ..markup import quote_text

__all__ = [
    "LEAD",
    "MAIL_BUDGET",
    "ClaimRefused",
    "MailRecord",
    "MemberRecord",
    "MemberStatus",
    "TaskRecord",
    "TaskStatus",
    "TeamError",
    "TeamRecord",
    "check_name",
    "mail_batch",
    "mail_prompt",
    "one_line",
    "quote_text",
    "waiting_note",
]

#: What the lead is called in the mail, in ``owner`` fields and by ``send_message(to="lead")``.
LEAD = "lead"

#: Characters of team mail one delivery hands to an agent (a prompt, or its inbox between two tool calls): three
#: messages of the most a model may send.  The rest stays unread and comes next (:func:`mail_batch`).
MAIL_BUDGET = 60_000

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")


class TeamError(SubagentsError):
    """A team operation that cannot be done (unknown team/member/task, duplicate name, bad input); the
    message says what to do.  Model-facing tools return it to the model as a tool error."""


class ClaimRefused(TeamError):
    """A task could not be claimed: it is unknown, owned by someone else, blocked, or completed.

    ``reason`` is one of ``"unknown"``, ``"owned"``, ``"blocked"``, ``"completed"``; ``owner`` and
    ``blockers`` say by whom / by which unfinished tasks."""

    def __init__(self, message: str, reason: str, owner: str | None = None,
                 blockers: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.reason, self.owner, self.blockers = reason, owner, blockers


class TaskStatus(enum.StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class MemberStatus(enum.StrEnum):
    WORKING = "working"          # its agent is running a turn
    IDLE = "idle"                # waiting for mail (or a task)
    STOPPING = "stopping"        # asked to shut down; finishes its current work first
    SHUT_DOWN = "shut_down"      # gone; the team can be deleted when every member is


def check_name(kind: str, name: str) -> str:
    """``name`` if it is a valid team or member name (lower-case letters, digits, ``-``, ``_``; 1-48
    characters, starting with a letter or digit), else :class:`TeamError` saying so."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):  # (match: "$" also before a final newline)
        raise TeamError(f"bad {kind} name {name!r}: use 1-48 lower-case letters, digits, '-' or '_', "
                        "starting with a letter or digit")
    if kind == "member" and name == LEAD:
        raise TeamError(f"{LEAD!r} is the team lead's name; choose another name for the teammate")
    return name


@dataclass(frozen=True, slots=True)
class TeamRecord:
    name: str
    lead_id: str                 # the lead agent's run id ("" when the team was created from Python/CLI)
    created_at: float
    description: str = ""


@dataclass(frozen=True, slots=True)
class MemberRecord:
    team: str
    name: str                    # unique in the team, never "lead"
    agent_type: str
    agent_id: str | None = None  # the teammate's run id once spawned
    model: str = ""
    mode: str = ""               # its permission mode (never more than the lead's)
    status: MemberStatus = MemberStatus.WORKING
    require_plan_approval: bool = False
    plan_approved: bool = False
    joined_at: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskRecord:
    team: str
    id: int                      # 1, 2, 3 ... per team
    subject: str
    description: str = ""
    status: TaskStatus = TaskStatus.PENDING
    owner: str | None = None     # member name (or "lead") while in progress / after completion
    blocked_by: tuple[int, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    note: str = ""               # the last note given with task_update (e.g. what was done)


@dataclass(frozen=True, slots=True)
class MailRecord:
    team: str
    seq: int                     # one increasing counter per team: the order messages were sent in
    sender: str                  # member name or "lead"
    recipient: str               # member name or "lead" (a broadcast is one record per recipient)
    text: str
    at: float
    kind: str = "message"        # "message" | "broadcast" | "idle" (a teammate's idle notice) | "shutdown"
    read: bool = False

    def as_prompt(self) -> str:
        """How the message reads in the recipient's conversation."""
        if self.kind == "idle":
            return f"<teammate-idle team=\"{self.team}\" name=\"{self.sender}\">\n{self.text}\n</teammate-idle>"
        return (f"<team-message team=\"{self.team}\" from=\"{self.sender}\" kind=\"{self.kind}\">\n{self.text}\n"
                "</team-message>")


def one_line(text: str) -> str:
    """``text`` quoted (:func:`quote_text`) on one line: a task subject cannot fake more lines of a board."""
    return " ".join(quote_text(text).split())


def mail_batch(mail: Sequence[MailRecord], used: int = 0, budget: int = MAIL_BUDGET) -> list[MailRecord]:
    """The oldest of ``mail`` that fit in ``budget`` characters of which ``used`` are taken already (by mail handed
    over but not yet read): whole messages, in order, and always the first one when nothing is taken.  What is
    left stays unread: the next delivery hands it over (:func:`waiting_note` tells the agent it waits)."""
    out: list[MailRecord] = []
    for m in mail:
        n = len(m.as_prompt()) + 2
        if used + n > budget and (out or used):
            break
        out.append(m)
        used += n
    return out


def waiting_note(team: str, rest: Sequence[MailRecord]) -> str:
    """What an agent reads of the mail :func:`mail_batch` left for its next delivery: how many, from whom."""
    by = Counter(m.sender for m in rest)
    who = ", ".join(f"{n} from {sender}" for sender, n in list(by.items())[:10]) + (", ..." if len(by) > 10 else "")
    return (f"<team-mail-waiting team=\"{team}\">{len(rest)} more message{'' if len(rest) == 1 else 's'} wait for you "
            f"({who}): too much to hand over at once, they reach you as your next prompt when this turn ends."
            "</team-mail-waiting>")


def mail_prompt(team: str, mail: Sequence[MailRecord]) -> tuple[str, int]:
    """The prompt handing ``mail`` (unread, oldest first) to its recipient, and the last ``seq`` it carries: at most
    :data:`MAIL_BUDGET` characters of it (:func:`mail_batch`), then a note of what waits for the next one."""
    batch = mail_batch(mail)
    parts = [m.as_prompt() for m in batch]
    if len(batch) < len(mail):
        parts.append(waiting_note(team, mail[len(batch):]))
    return "\n\n".join(parts), batch[-1].seq
