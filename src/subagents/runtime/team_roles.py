"""An agent's :class:`Role` in a team, and how a team's agents keep it across a crash, a signal and a resume.

:class:`RoleKeeper` is the part of :class:`~.teams.TeamService` that hands roles back:

- **A restore** (a new Runtime on the store): before it, :meth:`~RoleKeeper.expect_restored` notes the role of
  every lead and live teammate by run id; a run the restore brings back takes its role again
  (:meth:`~RoleKeeper.adopt`); after it, a teammate whose run stays ended (``on_restart = "mark_interrupted"``,
  a run that could not be re-created) is shown ``idle`` — it is resumable and its mail waits for it — or, if it
  was asked to stop, shut down (:meth:`~RoleKeeper.after_restore`).
- **A signal** (``Runtime.interrupting``): a teammate's run is left unfinished in the store, as a crash leaves it
  (:meth:`~RoleKeeper.outlives`), so the next Runtime on the store resumes it with its role, its team tools and
  its tasks.  A lead's run ends ``interrupted``, resumable like any run.
- **A resume** of an ended lead or teammate (``rt.resume``, ``subagents chat --resume``, ``runs resume``): it
  takes its role back as it starts, if the team store still lists it (:meth:`~RoleKeeper.rejoin`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..teams.model import LEAD, MemberRecord, MemberStatus
from ..teams.store import TeamStore
from .node import AgentNode
from .result import RunResult
from .status import Outcome

if TYPE_CHECKING:
    from .manager import AgentManager

__all__ = ["Role", "RoleKeeper"]


@dataclass(slots=True)
class Role:
    """An agent's place in a team (``name`` is ``"lead"`` for the lead)."""

    team: str
    name: str
    mode: str = "default"        # the mode granted at spawn (a plan-approval teammate runs in plan until approved)
    wake: asyncio.Event | None = None  # set while the agent waits for mail
    reminded: bool = False       # the lead was told its teammates are idle
    seen: int = 0                # the last mail seq handed to the agent (marked read once committed)
    turning: bool = False        # its model's turn runs: new mail goes into its inbox (else: its next prompt)
    inboxed: dict[str, int] = field(default_factory=dict)  # inbox key -> characters: mail put there, maybe not read
    kept_busy: int = 0           # TeammateIdle hooks that sent it back in a row (bounded as Stop hooks are)


class RoleKeeper:
    """The roles of a :class:`~.teams.TeamService` across restores, signals and resumes (see the module docstring)."""

    mgr: AgentManager
    store: TeamStore
    roles: dict[str, Role]           # agent id -> role
    resumed_idle: set[str]           # restored agents whose transcript ends idle (no model call)
    expected: dict[str, Role]        # roles of runs a restore or a resume may bring back

    if TYPE_CHECKING:  # (TeamService's)
        def bind(self, node: AgentNode, role: Role) -> None: ...
        def _gone(self, team: str, m: MemberRecord) -> None: ...

    def expect_restored(self) -> None:
        """Before a restore: the roles of every lead and live teammate, by run id (see :meth:`adopt`)."""
        for t in self.store.list_teams():
            if t.lead_id:
                self.expected[t.lead_id] = Role(t.name, LEAD)
            for m in self.store.members(t.name):
                if m.agent_id and m.status is not MemberStatus.SHUT_DOWN:
                    self.expected[m.agent_id] = Role(t.name, m.name, m.mode)

    def adopt(self, node: AgentNode, *, idle: bool = False) -> bool:
        """A restored agent takes its role back; ``idle``: its transcript ends in an answer (it waited for
        mail: it waits again, with no model call).  ``False``: it has no role."""
        role = self.expected.pop(node.id, None)
        if role is None:
            return False
        self.bind(node, role)
        if idle:
            self.resumed_idle.add(node.id)
        return True

    def after_restore(self) -> None:
        """After a restore: a teammate whose run stays ended is ``idle`` (resumable; mail waits for it), or shut
        down if it was asked to stop — never ``working`` with nothing behind it (``Team.wait_idle`` would wait
        forever).  A run that another live process drives is left alone."""
        runs = self.mgr.store
        for agent_id, role in list(self.expected.items()):
            m = self.store.member(role.team, role.name) if role.name != LEAD else None
            if m is None or m.agent_id != agent_id or m.status in (MemberStatus.IDLE, MemberStatus.SHUT_DOWN):
                continue
            rec = runs.get_run(agent_id)
            if rec is not None and not rec.is_final:
                continue
            if m.status is MemberStatus.STOPPING or rec is None:
                self._gone(role.team, m)
            else:
                self.store.update_member(role.team, role.name, status=MemberStatus.IDLE)

    def rejoin(self, node: AgentNode) -> None:
        """As an agent without a role starts: an ended lead or teammate that is resumed takes its role back (its
        team tools, its mail), if the team store still lists it.  (A dict lookup for any other agent.)"""
        role = self.expected.pop(node.id, None) if node.id not in self.roles else None
        if role is None:
            return
        if role.name == LEAD:
            team = self.store.get_team(role.team)
            if team is None or team.lead_id != node.id:
                return
        else:
            m = self.store.member(role.team, role.name)
            if m is None or m.agent_id != node.id or m.status is MemberStatus.SHUT_DOWN:
                return
            self.store.update_member(role.team, role.name, status=MemberStatus.WORKING)
        self.bind(node, role)

    def outlives(self, node: AgentNode, result: RunResult) -> bool:
        """Whether ``node``'s end is left out of the store: a teammate stopped by a signal (``Runtime.interrupting``)
        stays a member with its run unfinished, as a crash leaves it, so the next Runtime on the store resumes it."""
        role = self.roles.get(node.id)
        return (role is not None and role.name != LEAD and result.outcome is Outcome.INTERRUPTED
                and self.mgr.stop_as[0] is Outcome.INTERRUPTED)

    def set_mode(self, node: AgentNode, mode: str) -> None:
        """Switch a (not yet started, or plan-approved) teammate's permission mode."""
        node.mode = mode
        if node.core.guard is not None:
            node.core.guard.mode = mode  # type: ignore[attr-defined]
        node.core.ctx.shell_writable = mode != "plan"
        self.mgr.recorder.update(node, {"permission_mode": mode})
