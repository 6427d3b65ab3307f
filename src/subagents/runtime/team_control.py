"""``TeamTools``: the :class:`~subagents.tools.control.TeamControl` the model's team tools call (issue 14).

It checks who may do what (only a lead creates a team and spawns teammates; only members use the board and
the mail), runs the ``TaskCreated`` / ``TaskCompleted`` hooks, publishes the team events, and renders short
text for the model.  Refusals are :class:`~subagents.exceptions.ToolError`\\ s the model reads.
"""

from __future__ import annotations

import json
import weakref
from typing import TYPE_CHECKING

from ..exceptions import SpawnError, ToolError
from ..teams.model import LEAD, MemberStatus, TaskRecord, TaskStatus, TeamError, TeamRecord, check_name
from . import team_board as board
from .teams import Role, TeamService, team_service

if TYPE_CHECKING:
    from .manager import AgentManager
    from .node import AgentNode

__all__ = ["BOARD_CHARS", "MAX_BLOCKERS", "MAX_MESSAGE_CHARS", "MAX_OPEN_TASKS", "MAX_SUBJECT_CHARS", "MAX_TEXT_CHARS",
           "MAX_UNREAD_FROM", "TeamTools", "render_board", "render_task", "team_tools"]

MAX_MESSAGE_CHARS = 20_000  # one message (send_message, broadcast)
MAX_UNREAD_FROM = 50        # messages from one sender that one recipient has not read yet
MAX_SUBJECT_CHARS = 200     # a task's subject (one line), a team's description
MAX_TEXT_CHARS = 20_000     # a task's description, a note
MAX_OPEN_TASKS = 1_000      # tasks of a team not completed yet (task_create refuses more)
MAX_BLOCKERS = 50           # ids in one task's blocked_by
BOARD_CHARS = 40_000        # what task_list shows at most (open tasks first): below the tools' output cap


def _text(what: str, text: str | None, limit: int, *, line: bool = False) -> str:
    """``text`` a model gave, quoted (:func:`~.team_board.quote_text`); a :class:`ToolError` past ``limit``."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ToolError(f"the {what} must be text")
    if len(text) > limit:
        raise ToolError(f"the {what} is {len(text):,} characters, more than the {limit:,} allowed; "
                        f"{'say it in a few words' if line else 'shorten it, or put the details in a file'}")
    return board.one_line(text) if line else board.quote_text(text)


def render_task(t: TaskRecord, *, full: bool = False) -> str:
    line = f"#{t.id} [{t.status}] {t.subject}"
    if t.owner:
        line += f" — owner {t.owner}"
    if t.blocked_by:
        line += f" — blocked by {', '.join(f'#{b}' for b in t.blocked_by)}"
    if full:
        parts = [line, t.description or "(no description)"]
        if t.note:
            parts.append(f"note: {t.note}")
        return "\n".join(parts)
    return line


def render_board(team: str, tasks: list[TaskRecord], budget: int = BOARD_CHARS) -> str:
    """The board by id; one too long for ``budget`` characters shows its open tasks first, then the latest completed
    ones, and says how many it leaves out (else the tools' output cap cut the newest, open tasks off)."""
    if not tasks:
        return f"team {team}: the task board is empty (task_create adds one)"
    done = [t for t in tasks if t.status is TaskStatus.COMPLETED]
    head = f"team {team}: {len(tasks)} tasks, {len(done)} completed"
    lines = [render_task(t) for t in tasks]
    if sum(len(x) + 1 for x in lines) + len(head) <= budget:
        return "\n".join([head, *lines])
    shown: list[str] = []
    used = len(head) + 200  # (room for the note)
    open_ = [t for t in tasks if t.status is not TaskStatus.COMPLETED]
    for t in [*open_, *reversed(done)]:
        line = render_task(t)
        if used + len(line) + 1 > budget:
            break
        shown.append(line)
        used += len(line) + 1
    n_open = min(len(shown), len(open_))
    left_open, left_done = len(open_) - n_open, len(done) - (len(shown) - n_open)
    note = (f"(the board is too long to show whole: open tasks first, then the latest completed; not shown: "
            f"{left_open} open, {left_done} completed — task_get(task_id) shows any task)")
    return "\n".join([head, *shown[:n_open], *reversed(shown[n_open:]), note])


class TeamTools:
    """The team service as the model's tools see it (one per runtime)."""

    __slots__ = ("__weakref__", "svc")

    def __init__(self, svc: TeamService) -> None:
        self.svc: TeamService = weakref.proxy(svc)  # the service holds this: no reference cycle

    # -- who is calling ---------------------------------------------------------------------------------
    def _node(self, caller_id: str) -> AgentNode:
        node = self.svc.mgr.nodes.get(caller_id)
        if node is None:
            raise ToolError(f"the calling agent {caller_id!r} is not known to the runtime")
        return node

    def _member(self, caller_id: str) -> tuple[Role, TeamRecord]:
        role = self.svc.role(caller_id)
        if role is None:
            raise ToolError("you are not in a team: a lead creates one with team_create, and teammates are spawned "
                            "into it with spawn_agent(..., team=..., name=...)")
        try:
            team = self.svc.team(role.team)
        except TeamError as e:
            raise ToolError(str(e)) from None
        if not self._holds(caller_id, role, team):
            self._leave(caller_id)
            raise ToolError(f"you are no longer in team {team.name!r}: your team was deleted, and the team of that "
                            "name now is another one; team_create makes you the lead of a new team")
        return role, team

    def _holds(self, caller_id: str, role: Role, team: TeamRecord) -> bool:
        """``caller_id`` still has ``role`` in ``team``: the team's lead, or the member of that name (its team was not
        deleted and another made under the same name since)."""
        if role.name == LEAD:
            return team.lead_id == caller_id
        m = self.svc.store.member(team.name, role.name)
        return m is not None and m.agent_id == caller_id

    def _leave(self, caller_id: str) -> None:
        """``caller_id`` is in no team any more: no role, and its tools and hooks no longer see one."""
        self.svc.roles.pop(caller_id, None)
        node = self.svc.mgr.nodes.get(caller_id)
        if node is not None:  # (seed 001's context fields)
            node.core.ctx.team_name, node.core.ctx.is_team_lead = None, False

    # -- the team -------------------------------------------------------------------------------------
    async def team_create(self, caller_id: str, name: str, description: str) -> str:
        node = self._node(caller_id)
        role = self.svc.role(caller_id)
        mine = self.svc.store.get_team(role.team) if role is not None else None
        if role is not None and (mine is None or not self._holds(caller_id, role, mine)):
            self._leave(caller_id)  # its team was deleted (from Python or the CLI): it may lead anew
        elif role is not None:
            raise ToolError(f"you are already in team {role.team!r}; an agent leads or joins one team")
        try:
            team = self.svc.create_team(check_name("team", name), node.id,
                                        _text("team description", description, MAX_SUBJECT_CHARS, line=True))
        except TeamError as e:
            raise ToolError(str(e)) from None
        self.svc.bind(node, Role(team.name, LEAD, node.mode))
        self.svc.emit(node.id, "team_created", team=team.name, lead=node.id)
        return (f"team {team.name} created; you are its lead. Spawn teammates with spawn_agent(agent_type, prompt, "
                f"team={team.name!r}, name=...), add work with task_create, and talk with send_message/broadcast. "
                "Their messages and idle notices reach you automatically; shut them down with team_shutdown.")

    async def team_delete(self, caller_id: str, name: str | None) -> str:
        role, team = self._member(caller_id)
        if role.name != LEAD or (name is not None and name != team.name):
            raise ToolError("only the lead can delete its team")
        try:
            self.svc.store.delete_team(team.name)
        except TeamError as e:
            raise ToolError(str(e)) from None
        self._leave(caller_id)  # no longer a lead
        self.svc.emit(caller_id, "team_deleted", team=team.name)
        return f"team {team.name} deleted"

    async def spawn_teammate(self, caller_id: str, team: str | None, name: str, agent_type: str, prompt: str,
                             model: str | None, require_plan_approval: bool) -> str:
        role, rec = self._member(caller_id)
        if role.name != LEAD or (team is not None and team != rec.name):
            raise ToolError(f"only the lead of team {team or rec.name!r} can spawn its teammates")
        try:
            node = board.spawn_member(self.svc, rec, name, agent_type, prompt, parent_id=caller_id, model=model,
                                         require_plan_approval=require_plan_approval)
        except (SpawnError, TeamError) as e:
            raise ToolError(str(e)) from None
        return json.dumps({"teammate": name, "agent_id": node.id, "team": rec.name, "permission_mode": node.mode,
                           "note": "works in the background; its messages and idle notices reach you automatically"})

    # -- the board ------------------------------------------------------------------------------------
    async def task_create(self, caller_id: str, subject: str, description: str, blocked_by: list[int]) -> str:
        role, team = self._member(caller_id)
        subject = _text("task subject", subject, MAX_SUBJECT_CHARS, line=True)
        description = _text("task description", description, MAX_TEXT_CHARS)
        if len(set(blocked_by)) > MAX_BLOCKERS:
            raise ToolError(f"a task waits for at most {MAX_BLOCKERS} others (blocked_by); split the work, or block "
                            "it on one task that waits for the rest")
        if sum(t.status is not TaskStatus.COMPLETED for t in self.svc.store.tasks(team.name)) >= MAX_OPEN_TASKS:
            raise ToolError(f"team {team.name} already has {MAX_OPEN_TASKS:,} open tasks; complete some (or give "
                            "bigger ones) before you add more")
        try:
            t = await board.add_task(self.svc, team, role.name, subject, description, blocked_by)
        except TeamError as e:
            raise ToolError(str(e)) from None
        return f"created {render_task(t)}"

    async def task_list(self, caller_id: str) -> str:
        _, team = self._member(caller_id)
        return render_board(team.name, self.svc.store.tasks(team.name))

    async def task_get(self, caller_id: str, task_id: int) -> str:
        _, team = self._member(caller_id)
        t = self.svc.store.task(team.name, task_id)
        if t is None:
            raise ToolError(f"no task #{task_id} in team {team.name}; task_list shows the board")
        return render_task(t, full=True)

    async def task_claim(self, caller_id: str, task_id: int | None) -> str:
        role, team = self._member(caller_id)
        self._one_at_a_time(role, team, task_id)
        try:
            t = board.claim(self.svc, team, role.name, task_id)
        except TeamError as e:
            raise ToolError(str(e)) from None
        if t is None:
            return "no task is free and unblocked right now; wait for a message, or end your turn to go idle"
        return f"you own {render_task(t, full=True)}"

    def _one_at_a_time(self, role: Role, team: TeamRecord, task_id: int | None) -> None:
        """A teammate works on one task at a time (its first prompt says so): it cannot hoard the board; and one
        asked to shut down takes no new task (it would start work that is given back when it ends)."""
        if role.name == LEAD:
            return
        me = self.svc.store.member(team.name, role.name)
        if me is not None and me.status in (MemberStatus.STOPPING, MemberStatus.SHUT_DOWN):
            raise ToolError("you are asked to shut down: take no new task; finish your current step, give back what "
                            "you cannot finish (task_update status=\"pending\") and end your turn")
        mine = [t.id for t in self.svc.store.tasks(team.name, TaskStatus.IN_PROGRESS)
                if t.owner == role.name and t.id != task_id]
        if mine:
            raise ToolError(f"you already own task #{mine[0]} (in_progress); one task at a time: complete it "
                            f"(task_update status=\"completed\") or give it back (status=\"pending\") first")

    async def task_update(self, caller_id: str, task_id: int, status: str | None, note: str | None) -> str:
        role, team = self._member(caller_id)
        try:
            st = TaskStatus(status) if status is not None else None
        except ValueError:
            raise ToolError(f"unknown status {status!r}; use pending, in_progress or completed") from None
        note = None if note is None else _text("note", note, MAX_TEXT_CHARS)
        if st is not None and st is not TaskStatus.PENDING:
            cur = self.svc.store.task(team.name, task_id)
            if cur is not None and cur.status is TaskStatus.PENDING:  # moving a pending task on claims it
                self._one_at_a_time(role, team, task_id)
        try:
            t = await board.update_task(self.svc, team, role.name, task_id, st, note)
        except TeamError as e:
            raise ToolError(str(e)) from None
        return f"updated {render_task(t)}"

    # -- mail -----------------------------------------------------------------------------------------
    async def send_message(self, caller_id: str, to: str, text: str, approve_plan: bool) -> str:
        role, team = self._member(caller_id)
        if to == role.name:
            raise ToolError("you cannot send a message to yourself")
        text = _text("message", text, MAX_MESSAGE_CHARS)
        if not text.strip():  # (before a plan is approved with it)
            raise ToolError("the message is empty; write what you want to say")
        self._not_flooded(team, role.name, [to])
        member = self.svc.store.member(team.name, to) if to != LEAD else None
        if member is not None and member.status in (MemberStatus.SHUT_DOWN, MemberStatus.STOPPING):
            state = "has shut down" if member.status is MemberStatus.SHUT_DOWN else "is shutting down"
            raise ToolError(f"teammate {to!r} {state} and reads no more messages; spawn a new teammate "
                            f"(spawn_agent with team={team.name!r} and another name) for more work")
        if approve_plan:
            if role.name != LEAD:
                raise ToolError("only the lead approves plans")
            try:
                board.approve_plan(self.svc, team, to)
            except TeamError as e:
                raise ToolError(str(e)) from None
        try:
            self.svc.send(team, role.name, [to], text)
        except TeamError as e:
            raise ToolError(str(e)) from None
        return f"message sent to {to}" + (" (plan approved: it may now make changes)" if approve_plan else "")

    def _not_flooded(self, team: TeamRecord, sender: str, to: list[str]) -> None:
        """A :class:`ToolError` when a recipient has not read :data:`MAX_UNREAD_FROM` messages of ``sender`` yet."""
        for name in to:
            try:
                unread = self.svc.store.unread(team.name, name)
            except TeamError:
                continue  # an unknown recipient: the send says so
            if sum(1 for m in unread if m.sender == sender) >= MAX_UNREAD_FROM:
                raise ToolError(f"{name} has not read your last {MAX_UNREAD_FROM} messages yet; wait for its answer "
                                "before you write again")

    async def broadcast(self, caller_id: str, text: str) -> str:
        role, team = self._member(caller_id)
        to = [m.name for m in self.svc.store.members(team.name)
              if m.name != role.name and m.status not in (MemberStatus.SHUT_DOWN, MemberStatus.STOPPING)]
        if role.name != LEAD:
            to.append(LEAD)
        if not to:
            raise ToolError("nobody else is in the team to hear it")
        text = _text("message", text, MAX_MESSAGE_CHARS)
        if not text.strip():
            raise ToolError("the message is empty; write what you want to say")
        self._not_flooded(team, role.name, to)
        try:
            self.svc.send(team, role.name, to, text, kind="broadcast")
        except TeamError as e:
            raise ToolError(str(e)) from None
        return f"broadcast to {len(to)}: {', '.join(to)}"

    async def team_shutdown(self, caller_id: str, name: str | None) -> str:
        role, team = self._member(caller_id)
        if role.name != LEAD:
            if name not in (None, role.name):
                raise ToolError("a teammate can shut down only itself; ask the lead to stop others")
            self.svc.store.update_member(team.name, role.name, status=MemberStatus.STOPPING)
            return "you will shut down when you end this turn"
        if name is not None and self.svc.store.member(team.name, name) is None:
            raise ToolError(f"no teammate {name!r} in team {team.name}")
        asked = self.svc.request_shutdown(team, name, by=LEAD)
        if not asked:
            return "no teammate left to shut down"
        return f"asked to shut down: {', '.join(asked)} (each finishes its current step first)"



def team_tools(mgr: AgentManager) -> TeamTools:
    """The model's team tools of ``mgr``'s runtime (the team service is made on first use)."""
    svc = team_service(mgr)
    if svc.tools is None:
        svc.tools = TeamTools(svc)
    tools: TeamTools = svc.tools
    return tools
