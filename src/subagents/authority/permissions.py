"""Permission modes, the rule sets and the decision for one tool call; how a child's mode narrows.

The mode table (enforced at tool-execute time; ``READ`` tools are always allowed):

============  ==========  ==================  ================================  ===========================
mode          read tools  edits (workspace)   shell (``bash``) / other tools     spawn
============  ==========  ==================  ================================  ===========================
``plan``      allowed     denied              bash read-only (sandboxed) /      read-only agent types only
                                              other execute tools denied
``default``   allowed     ask                 ask                               allowed
``autoEdit``  allowed     allowed             ask                               allowed
``yolo``      allowed     allowed             allowed                           allowed
============  ==========  ==================  ================================  ===========================

Rules beat the mode: deny > "allow always" answers > ask > allow > mode — except that ``plan`` is a
ceiling no allow rule lifts.  A child's mode is its definition's mode when that is no wider than its parent's, else the
parent's; a ``yolo`` parent makes every child ``yolo`` (seed 004: "parent bypass takes precedence").

>>> p = Permissions.from_texts(allow=["bash(git status*)"], deny=["read_file(.env)"])
>>> p.decide("default", "bash", "execute", {"command": "git status"}).action
'allow'
>>> p.decide("yolo", "read_file", "read", {"path": ".env"}).action
'deny'
>>> narrow_mode("default", "yolo")
('default', "its definition asks for permission mode 'yolo', wider than the parent's 'default': it runs in 'default'")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .names import MODES, canonical_mode
from .rules import Rule, parse_rule

__all__ = ["MODE_PROMPTS", "Permissions", "Verdict", "mode_rank", "narrow_mode"]

Action = Literal["allow", "ask", "deny"]

_RANK = {m: i for i, m in enumerate(MODES)}

MODE_PROMPTS = {
    "plan": ("Permission mode: plan. Study and produce a plan; change nothing. File edits are refused, the shell "
             "sees the workspace read-only, and you may delegate only to read-only agent types."),
    "default": ("Permission mode: default. File edits and shell commands ask the user for approval first; if a "
                "call is denied, adapt your approach instead of repeating it."),
    "autoEdit": ("Permission mode: autoEdit. File edits in the workspace are allowed; shell commands ask the user "
                 "for approval first; if a call is denied, adapt your approach instead of repeating it."),
    "yolo": "",
}
"""The line the model reads in its system prompt for each mode."""


def mode_rank(mode: str) -> int:
    """plan 0 < default 1 < autoEdit 2 < yolo 3."""
    return _RANK[mode]


def narrow_mode(parent: str, wanted: str | None) -> tuple[str, str | None]:
    """The child's effective mode and, when it differs from ``wanted``, a note saying why."""
    if parent == "yolo":
        return "yolo", None
    if wanted is None:
        return parent, None
    wanted = canonical_mode(wanted)
    if _RANK[wanted] <= _RANK[parent]:
        return wanted, None
    return parent, (f"its definition asks for permission mode {wanted!r}, wider than the parent's {parent!r}: "
                    f"it runs in {parent!r}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision for one call: ``allow``, ``ask`` (a person decides) or ``deny``, and why."""

    action: Action
    reason: str
    rule: Rule | None = None


_ALLOW_READ = Verdict("allow", "read-only tool")
_ALLOW_AGENT = Verdict("allow", "agent and team tools are allowed")
_ALLOW_MODE = {m: Verdict("allow", f"permission mode {m!r} allows it") for m in MODES}


class Permissions:
    """The configured rules plus the rules people added with "allow always", per run tree.

    Shared by every agent of a runtime: a child's rules are its parent's (deny rules always apply).
    """

    __slots__ = ("_session", "allow", "ask", "deny", "plain", "shell_confined")

    def __init__(self, *, allow: Sequence[Rule] = (), ask: Sequence[Rule] = (), deny: Sequence[Rule] = (),
                 shell_confined: bool = True) -> None:
        self.allow = tuple(allow)
        self.ask = tuple(ask)
        self.deny = tuple(deny)
        self.shell_confined = shell_confined  # a sandbox backs bash: plan mode gets a read-only shell
        self._session: dict[str, list[Rule]] = {}
        self.plain = not (self.allow or self.ask or self.deny)

    @classmethod
    def from_texts(cls, *, allow: Iterable[str] = (), ask: Iterable[str] = (), deny: Iterable[str] = (),
                   source: str = "", shell_confined: bool = True) -> Permissions:
        return cls(allow=[parse_rule(t, source) for t in allow], ask=[parse_rule(t, source) for t in ask],
                   deny=[parse_rule(t, source) for t in deny], shell_confined=shell_confined)

    def add_session_rule(self, root_id: str, rule: Rule) -> None:
        """"Allow always": ``rule`` allows matching calls for the rest of this run tree."""
        self._session.setdefault(root_id, []).append(rule)

    def session_rules(self, root_id: str) -> list[Rule]:
        return list(self._session.get(root_id, ()))

    def forget(self, root_id: str) -> None:
        self._session.pop(root_id, None)

    def decide(self, mode: str, tool: str, category: str, arguments: dict[str, Any], *,
               root_id: str = "", root: str | None = None) -> Verdict:
        """The verdict for one call by an agent in ``mode`` (``category``: the tool's ToolCategory value)."""
        session = self._session.get(root_id) if self._session else None
        if self.plain and not session:
            return self._by_mode(mode, tool, category)
        for r in self.deny:
            if r.matches(tool, arguments, allow=False, root=root):
                return Verdict("deny", f"denied by the rule {r.text!r}{_where(r)}", r)
        ceiling = self._by_mode("plan", tool, category) if mode == "plan" else None
        if ceiling is not None and ceiling.action == "deny":
            return ceiling
        for r in session or ():  # "allow always" answers outrank the configured ask rules
            if r.matches(tool, arguments, allow=True, root=root):
                return Verdict("allow", f"allowed for this run by the rule {r.text!r}{_where(r)}", r)
        for r in self.ask:
            if r.matches(tool, arguments, allow=False, root=root):
                return Verdict("ask", f"the rule {r.text!r}{_where(r)} asks for approval", r)
        for r in self.allow:
            if r.matches(tool, arguments, allow=True, root=root):
                return Verdict("allow", f"allowed by the rule {r.text!r}{_where(r)}", r)
        return self._by_mode(mode, tool, category)

    def _by_mode(self, mode: str, tool: str, category: str) -> Verdict:
        if category == "read":
            return _ALLOW_READ
        if category in ("agent", "team"):
            return _ALLOW_AGENT
        if mode == "yolo":
            return _ALLOW_MODE[mode]
        if category == "edit":
            if mode == "plan":
                return Verdict("deny", "permission mode 'plan' refuses file edits: produce a plan instead")
            if mode == "autoEdit":
                return _ALLOW_MODE[mode]
            return Verdict("ask", "permission mode 'default' asks before file edits")
        if mode == "plan":
            if tool == "bash" and self.shell_confined:
                return Verdict("allow", "permission mode 'plan' runs the shell with the workspace read-only")
            why = ("no sandbox backs the shell ([sandbox] mode = \"off\"), so it cannot be made read-only"
                   if tool == "bash" else "it may change things")
            return Verdict("deny", f"permission mode 'plan' refuses {tool!r}: {why}")
        return Verdict("ask", f"permission mode {mode!r} asks before running {tool!r}")


def _where(r: Rule) -> str:
    return f" ({r.source})" if r.source else ""
