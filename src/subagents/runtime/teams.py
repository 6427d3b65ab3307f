"""``TeamService``: teams on top of the sub-agent runtime (issue 14) — roles, mail delivery, idle and wake-up.

A **teammate** is a background agent (a child of its lead, or a root for a team made from Python) with a
*role* (team, name).  When its model ends a turn it does not finish: :meth:`TeamService.run` marks it
``idle``, tells the lead (an idle notice in the lead's mail, the ``TeammateIdle`` hooks first: exit 2 gives it
more to do), and waits for mail; a message wakes it and becomes its next prompt.  It ends when it is asked
to shut down (or fails).  The **lead** (the agent that called ``team_create``) does not end its run while a
teammate works: it waits for their messages and idle notices, which arrive as its next prompt.  When every
teammate is idle and no mail waits, the lead is reminded once to give more work or shut them down; if it ends
anyway, its idle teammates are shut down.

Mail is durable (:class:`~subagents.teams.store.TeamStore`) and delivered at the recipient's next turn
boundary: into the inbox of an agent that is running a turn, as the prompt of one that waits.  A message
counts as read once the transcript message carrying it is committed (so a crash delivers it again rather
than never).  Only this module (with :mod:`.team_roles`: roles across restarts, signals and resumes) and
:mod:`.team_control` (the model's tools) change teams while agents run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..models.base import AgentInfo
from ..teams.model import (
    LEAD,
    MailRecord,
    MemberRecord,
    MemberStatus,
    TeamError,
    TeamRecord,
    mail_batch,
    mail_prompt,
    one_line,
    waiting_note,
)
from ..teams.store import TeamStore
from ..tools.team import MEMBER_TOOLS, TEAM_TOOLS
from .events import Event
from .loop import MAX_STOP_HOOK_TURNS, Final
from .node import AgentNode
from .result import RunResult
from .status import Outcome, Status
from .team_roles import Role, RoleKeeper

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["Role", "TeamService", "restore_teams", "team_service"]

IDLE_SUMMARY_CHARS = 600


class TeamService(RoleKeeper):
    """The runtime's teams (one per runtime, made on first use; see the module docstring; roles across restarts,
    signals and resumes: :class:`~.team_roles.RoleKeeper`)."""

    def __init__(self, mgr: AgentManager, store: TeamStore) -> None:
        # weakly: the manager holds the service (no reference cycle; tests/runtime/test_gc.py)
        self.mgr: AgentManager = mgr if isinstance(mgr, weakref.ProxyTypes) else weakref.proxy(mgr)
        self.store = store
        self.roles: dict[str, Role] = {}           # agent id -> role
        self.tools: Any = None                     # its TeamTools (the model's team tools), made on first use
        self.resumed_idle: set[str] = set()        # restored agents whose transcript ends idle (no model call)
        self.handed: dict[tuple[str, str], int] = {}  # (team, recipient) -> last seq handed over, maybe not marked
        self.expected: dict[str, Role] = {}        # roles of runs a restore or a resume may bring back

    # -- who is who -----------------------------------------------------------------------------------
    def has(self, agent_id: str) -> bool:
        return agent_id in self.roles

    def role(self, agent_id: str) -> Role | None:
        return self.roles.get(agent_id)

    def team(self, name: str) -> TeamRecord:
        t = self.store.get_team(name)
        if t is None:
            known = ", ".join(x.name for x in self.store.list_teams()) or "none"
            raise TeamError(f"no team named {name!r} (teams: {known}); create it first")
        return t

    def create_team(self, name: str, lead_id: str, description: str) -> TeamRecord:
        """A new team; no read marks of an earlier team of its name carry over (``Team.inbox`` would hide its mail)."""
        team = self.store.create_team(name, lead_id, time.time(), description)
        for key in [k for k in self.handed if k[0] == team.name]:
            del self.handed[key]
        return team

    def agent_of(self, team: TeamRecord, name: str) -> str | None:
        """The run id of ``name`` in ``team`` (``lead``: the lead's)."""
        if name == LEAD:
            return team.lead_id or None
        m = self.store.member(team.name, name)
        return m.agent_id if m is not None else None

    def bind(self, node: AgentNode, role: Role) -> None:
        """Give ``node`` its role (a new or restored member, or a lead): its team tools join its fence, and mail its
        inbox delivers is acknowledged."""
        self.roles[node.id] = role
        ctx = node.core.ctx  # seed 001's context fields: what tools and hooks see of the role
        ctx.team_name, ctx.is_team_lead = role.team, role.name == LEAD
        ctx.agent_name = node.info.agent_type if role.name == LEAD else role.name
        node.core.registry = node.core.registry.extended(TEAM_TOOLS if role.name == LEAD else MEMBER_TOOLS)
        inner = node.core.inbox.on_deliver
        service = weakref.proxy(self)

        def delivered(keys: list[str], inner: Callable[[list[str]], None] | None = inner) -> None:
            seqs = [int(k.rsplit(":", 1)[1]) for k in keys if k.startswith("mail:")]
            if seqs:
                service.read_later(role.team, role.name, max(seqs))
            if inner is not None:
                inner(keys)

        node.core.inbox.on_deliver = delivered

    # -- events and hooks ------------------------------------------------------------------------------
    def emit(self, agent_id: str | None, kind: str, **data: Any) -> None:
        node = self.mgr.nodes.get(agent_id) if agent_id else None
        if node is not None:
            self.mgr.recorder.emit(node, kind, data)
        elif self.mgr.bus.active:
            self.mgr.bus.publish(Event(kind, agent_id or "", None, 0, data))

    async def hook(self, event: str, agent_id: str | None, **extra: Any) -> str | None:
        """Run ``event``'s hooks; the reason when one blocks (exit 2), else ``None``."""
        auth = self.mgr.authority
        if auth is None or not auth.has_hooks(event) or auth.hooks is None:
            return None
        from ..authority.hooks import HookInput

        node = self.mgr.nodes.get(agent_id) if agent_id else None
        info = node.info if node is not None else AgentInfo("", LEAD, LEAD, 0, None)
        inp = HookInput.for_agent(event, info, cwd=auth.root, permission_mode=node.mode if node else "default",
                                  extra=extra)
        out = await auth.hooks.run(event, inp, match=extra.get("teammate_name") or extra.get("team_name"))
        for e in out.errors:
            self.emit(agent_id, "hook_error", event=event, message=e.message)
        if out.decision == "block":
            return out.reason or f"a {event} hook refused without a reason"
        return None

    # -- mail -----------------------------------------------------------------------------------------
    def send(self, team: TeamRecord, sender: str, recipients: Sequence[str], text: str, kind: str = "message",
             ) -> list[MailRecord]:
        """Store the mail, then hand it to each recipient that can take it now (see :meth:`deliver`)."""
        if not isinstance(text, str) or not text.strip():
            raise TeamError("the message is empty; write what you want to say")
        sent = self.store.send(team.name, sender, list(recipients), text, time.time(), kind)
        for m in sent:
            self.emit(self.agent_of(team, sender), "message_sent", team=team.name, sender=sender, recipient=m.recipient,
                      seq=m.seq, mail_kind=kind)
            self.deliver(team, m.recipient)
        return sent

    def deliver(self, team: TeamRecord, recipient: str) -> None:
        """Wake ``recipient`` if it waits for mail; if it is running a turn, put its unread mail in its inbox."""
        agent_id = self.agent_of(team, recipient)
        role = self.roles.get(agent_id) if agent_id else None
        node = self.mgr.nodes.get(agent_id) if agent_id else None
        if role is None or node is None or node.status is not Status.RUNNING:
            return  # kept unread: delivered when it runs again
        if role.wake is not None:  # working from now (wait_idle right after a send), unless it is shutting down
            me = self.store.member(team.name, recipient) if role.name != LEAD else None
            if me is not None and me.status is not MemberStatus.STOPPING:
                self.store.update_member(team.name, recipient, status=MemberStatus.WORKING)
            role.wake.set()
            return
        if not role.turning:  # between turns (an idle hook runs): the mail is its next prompt, not lost in its inbox
            return
        keys = set(node.core.inbox.keys())  # mail in its inbox not read yet counts against one delivery's budget
        role.inboxed = {k: n for k, n in role.inboxed.items() if k in keys}
        mail = self.new_mail(role)
        batch = mail_batch(mail, sum(role.inboxed.values()))
        for m in batch:
            text = m.as_prompt()
            node.core.inbox.put(text, key=f"mail:{m.seq}")
            role.inboxed[f"mail:{m.seq}"] = len(text) + 2
            role.seen = m.seq
        if len(batch) < len(mail):  # the rest stays unread: its next prompt (one note, updated)
            node.core.inbox.put(waiting_note(team.name, mail[len(batch):]), key=f"mail-waiting:{team.name}")

    def new_mail(self, role: Role) -> list[MailRecord]:
        """``role``'s unread mail not yet handed to its agent."""
        return [m for m in self.store.unread(role.team, role.name) if m.seq > role.seen]

    def read_later(self, team: str, recipient: str, up_to: int) -> None:
        """Mark ``recipient``'s mail up to ``up_to`` read once what the store holds now is committed."""
        loop, key = asyncio.get_running_loop(), (team, recipient)
        self.handed[key] = max(self.handed.get(key, 0), up_to)  # (read already, for Team.inbox)

        def mark() -> None:
            with contextlib.suppress(Exception):  # else the mail stays unread and comes again: never lost
                self.store.mark_read(team, recipient, up_to)

        def later() -> None:  # after the transcript message carrying the mail was handed to the store
            def committed() -> None:  # on the store's writer thread
                loop.call_soon_threadsafe(mark)

            if not self.mgr.store.on_commit(committed):
                mark()

        loop.call_soon(later)

    # -- the turn loop of members and leads -----------------------------------------------------------
    async def run(self, node: AgentNode, prompt: str | None) -> RunResult:
        """What the manager runs instead of ``node.core.run`` for an agent with a role (or once teams exist)."""
        self.rejoin(node)  # an ended lead or teammate that is resumed takes its role back
        role = self.roles.get(node.id)
        me = self.store.member(role.team, role.name) if role is not None and role.name != LEAD else None
        if me is not None and prompt is not None and me.status in (MemberStatus.STOPPING, MemberStatus.SHUT_DOWN):
            result = node.core.result(Final("asked to shut down before it started"))  # (no model call, no tool)
        elif prompt is None and node.id in self.resumed_idle:  # restored while idle: no model call, wait for mail
            self.resumed_idle.discard(node.id)
            last = node.core.messages[-1]
            result = node.core.result(Final(last.text))
        else:
            try:
                result = await self._turn(node, prompt)
            except asyncio.CancelledError:
                self._closed(node)
                raise
        return await self.keep_going(node, result)

    async def _turn(self, node: AgentNode, prompt: str | None) -> RunResult:
        role = self.roles.get(node.id)
        if role is not None:
            role.turning = True
        try:
            return await node.core.run(prompt)
        finally:
            if role is not None:
                role.turning = False

    async def keep_going(self, node: AgentNode, result: RunResult) -> RunResult:
        """After ``node``'s model ended a turn: a member goes idle until mail, a lead waits for its teammates."""
        began = node.core.started  # the result's duration covers every turn since this run began
        try:
            result = await self._keep_going(node, result)
            result.duration_s = time.monotonic() - began
            return result
        except asyncio.CancelledError:
            self._closed(node)
            raise

    def _closed(self, node: AgentNode) -> None:
        """A teammate closed (``close_agent``, ``rt.close``, its lead closed, the runtime closed) leaves the team:
        its run is over.  One *interrupted* (the process is stopped by a signal) stays a member and its run is left
        unfinished in the store (:meth:`outlives`), as after a crash: the next Runtime on the store resumes it."""
        role = self.roles.get(node.id)
        if role is not None and role.name != LEAD and self.mgr.stop_as[0] is not Outcome.INTERRUPTED:
            m = self.store.member(role.team, role.name)
            if m is not None:
                self._gone(role.team, m)
            self.roles.pop(node.id, None)

    async def _keep_going(self, node: AgentNode, result: RunResult) -> RunResult:
        while (role := self.roles.get(node.id)) is not None and result.outcome is Outcome.OK:
            nxt = await (self._lead_next(node, role) if role.name == LEAD else self._member_next(node, role, result))
            if nxt is None:
                break
            prompt_text, up_to = nxt
            result = await self._turn(node, prompt_text)
            if up_to:
                self.read_later(role.team, role.name, up_to)
        role = self.roles.get(node.id)
        if role is not None and role.name != LEAD:
            self._member_ended(node, role, result)
        return result

    async def _wait_mail(self, role: Role, node: AgentNode) -> None:
        role.wake = asyncio.Event()
        if self.new_mail(role):
            role.wake = None
            return
        try:
            await role.wake.wait()
        finally:
            role.wake = None

    async def _member_next(self, node: AgentNode, role: Role, result: RunResult) -> tuple[str, int] | None:
        team = self.team(role.team)
        me = self.store.member(team.name, role.name)
        if me is None or me.status in (MemberStatus.STOPPING, MemberStatus.SHUT_DOWN):
            return None
        more = (await self.hook("TeammateIdle", node.id, team_name=team.name, teammate_name=role.name)
                if role.kept_busy < MAX_STOP_HOOK_TURNS else None)  # (then it goes idle: mail wakes it)
        if more is not None:
            role.kept_busy += 1
            return f"<teammate-idle-hook>\n{more}\n</teammate-idle-hook>", 0
        role.kept_busy = 0
        while True:
            mail = self.new_mail(role)
            if mail:
                break
            if self.store.member(team.name, role.name).status is not MemberStatus.IDLE:  # type: ignore[union-attr]
                self.store.update_member(team.name, role.name, status=MemberStatus.IDLE)
                summary = one_line(result.text)[:IDLE_SUMMARY_CHARS] or "(no output)"  # quoted: no fake mail
                self.emit(node.id, "teammate_idle", team=team.name, name=role.name)
                self.send(team, role.name, [LEAD], f"{role.name} is idle. Its last words: {summary}", kind="idle")
            await self._wait_mail(role, node)
            me = self.store.member(team.name, role.name)
            if me is None or me.status in (MemberStatus.STOPPING, MemberStatus.SHUT_DOWN):
                return None
        self.store.update_member(team.name, role.name, status=MemberStatus.WORKING)
        if any(m.kind == "shutdown" for m in mail):
            role.seen = mail[-1].seq
            return None
        text, role.seen = mail_prompt(team.name, mail)  # at most MAIL_BUDGET of it: the rest comes next
        return text, role.seen

    async def _lead_next(self, node: AgentNode, role: Role) -> tuple[str, int] | None:
        while True:
            team = self.store.get_team(role.team)
            if team is None or team.lead_id != node.id:  # deleted (and maybe another made under its name)
                return None
            mail = self.new_mail(role)
            if mail:
                text, role.seen = mail_prompt(team.name, mail)
                return text, role.seen
            live = [m for m in self.store.members(team.name) if m.status is not MemberStatus.SHUT_DOWN]
            busy = [m for m in live if m.status in (MemberStatus.WORKING, MemberStatus.STOPPING)]
            if not busy:
                if live and not role.reminded:
                    role.reminded = True
                    names = ", ".join(m.name for m in live)
                    return (f"<team-status team=\"{team.name}\">Your teammates are idle: {names}. Give them more work "
                            "(send_message, task_create), or shut them down with team_shutdown before you finish; "
                            "if you end your turn now, they are shut down.</team-status>", 0)
                if live:
                    self.request_shutdown(team, None, by=LEAD)
                return None
            await self._wait_mail(role, node)

    # -- membership ----------------------------------------------------------------------------------
    def request_shutdown(self, team: TeamRecord, name: str | None, *, by: str) -> list[str]:
        """Ask one teammate (or all) to shut down: an idle one ends now, a working one after its turn."""
        asked = []
        for m in self.store.members(team.name):
            if (name is not None and m.name != name) or m.status in (MemberStatus.SHUT_DOWN, MemberStatus.STOPPING):
                continue
            self.store.update_member(team.name, m.name, status=MemberStatus.STOPPING)
            asked.append(m.name)
            role = self.roles.get(m.agent_id or "")
            node = self.mgr.nodes.get(m.agent_id or "")
            if role is not None and role.wake is not None:
                role.wake.set()
            elif node is not None and node.status is Status.RUNNING:
                node.core.inbox.put(f"<team-message team=\"{team.name}\" from=\"{by}\" kind=\"shutdown\">\nYou are "
                                    "asked to shut down: finish your current step, give back tasks you cannot finish "
                                    "(task_update status=pending), and end your turn with a short summary.\n"
                                    "</team-message>")
            elif node is None or node.status.is_final():
                self._gone(team.name, m)
        return asked

    def _member_ended(self, node: AgentNode, role: Role, result: RunResult) -> None:
        m = self.store.member(role.team, role.name)
        if m is not None:
            self._gone(role.team, m)
            if result.outcome is not Outcome.OK or m.status is not MemberStatus.STOPPING:
                team = self.store.get_team(role.team)
                if team is not None:
                    why = result.error or str(result.outcome)
                    self.send(team, role.name, [LEAD], f"{role.name} stopped ({why}); its in-progress tasks were "
                              "given back to the board", kind="idle")
        self.roles.pop(node.id, None)

    def _gone(self, team: str, m: MemberRecord) -> None:
        released = self.store.release_tasks(team, m.name, time.time())
        self.store.update_member(team, m.name, status=MemberStatus.SHUT_DOWN)
        self.emit(m.agent_id, "teammate_shutdown", team=team, name=m.name, released=released)
        t = self.store.get_team(team)  # its lead may be waiting for it to stop
        lead = self.roles.get(t.lead_id) if t is not None and t.lead_id else None
        if lead is not None and lead.wake is not None:
            lead.wake.set()


def restore_teams(mgr: AgentManager) -> None:
    """Before a restore: if the store holds teams, make the team service and expect their agents back."""
    from ..teams.open import open_team_store

    if mgr.teams is not None or open_team_store(mgr.store).list_teams():
        team_service(mgr).expect_restored()


def team_service(mgr: AgentManager) -> TeamService:
    """The runtime's team service, made on first use (until then agents' turns pay nothing for teams)."""
    if mgr.teams is None:
        from ..teams.open import open_team_store

        mgr.teams = TeamService(mgr, open_team_store(mgr.store))
    svc: TeamService = mgr.teams
    return svc
