"""Hooks: commands and Python callbacks that see, and may stop or change, what agents do.

The protocol is Claude Code's.  A hook is configured for an event (``[[hooks.PreToolUse]]`` in
``.subagents/config.toml``, or ``Runtime(hooks={"PreToolUse": [fn]})``) with an optional ``matcher``:
a regular expression matched in full against the tool name (``"bash|write_file"``,
``"mcp__github__.*"``; Claude Code's ``Bash``, ``Write``, ``Edit``... name our tools too) or, for
``SubagentStart`` / ``SubagentStop``, against the agent type; none, ``""`` or ``"*"`` match everything.
Matching hooks run one after the other in configuration order; the first ``block`` ends the chain.
An ``allow`` holds for the arguments its hook saw: a later PreToolUse hook that replaces them without
allowing them itself takes it back.  Claude Code's ``"ask"`` outranks every ``allow`` of the chain
(deny > ask > allow): the guard then asks a person even where the rules or the mode would allow the
call (:attr:`HookOutcome.ask` says a hook asked).

A command hook runs with ``/bin/sh -c`` in the workspace root, in its own process group, with a
scrubbed environment plus ``SUBAGENTS_HOOK_EVENT``, ``SUBAGENTS_PROJECT_DIR`` and ``CLAUDE_PROJECT_DIR``,
and reads one JSON object on stdin (:meth:`HookInput.to_dict`).  Its exit code decides:

* 0: go on.  Stdout may answer in JSON: ``{"decision": "block" | "allow", "reason": ...}``;
  ``{"hookSpecificOutput": {"permissionDecision": "allow" | "deny" | "ask", "permissionDecisionReason":
  ..., "updatedInput": {...}, "additionalContext": ...}}``; ``{"continue": false, "stopReason": ...}``;
  ``{"arguments": {...}}``; ``{"context": ...}``.  Plain text is context on UserPromptSubmit and
  PostToolUse and ignored elsewhere.  Stdout past 1 MB is dropped; a reason or context past 10,000
  characters is cut.  ``"continue": false`` blocks (on Stop / SubagentStop: lets the agent end).
  Replacement arguments count on PreToolUse only; a PermissionRequest answer that carries them is
  a hook error (the person is asked instead).
* 2: block; stderr is the reason, and the model reads it.
* anything else, JSON that does not parse, running past ``timeout_s`` (the process group is killed),
  failing to start: a hook error, kept in :attr:`HookOutcome.errors`.  ``on_error = "allow"`` goes on
  (Claude Code's behaviour); ``on_error = "block"`` fails closed.

What a block means is the caller's: the call is not run (PreToolUse), refused without asking
(PermissionRequest), the reason is added to the result (PostToolUse), the prompt is refused
(UserPromptSubmit, SubagentStart), the agent keeps working with the reason as its instruction
(Stop, SubagentStop).

.. warning::
   A matcher selects tool *names*: ``write_file|edit_file`` never sees ``bash -c 'echo x > f'``.
   Protected paths are enforced by the sandbox, not by hooks; a guard on writes must match ``bash``
   too, and no hook can understand every shell command.

A Python callback takes the :class:`HookInput` and returns a :class:`HookResult` or ``None``.  A sync
one runs in a worker thread; an async one runs on the event loop and must not block it.  Past its
``timeout_s`` its answer is dropped even if it ignores being cancelled, and whatever it raises
(``KeyboardInterrupt``, ``CancelledError``...) is a hook error:

>>> import asyncio
>>> def no_rm(inp: HookInput) -> HookResult | None:
...     if "rm -rf" in (inp.arguments or {}).get("command", ""):
...         return HookResult("block", "rm -rf is not allowed here; delete files one by one")
...     return None
>>> hooks = Hooks.from_python({"PreToolUse": [{"matcher": "bash", "callback": no_rm}]})
>>> hooks.has("PreToolUse"), hooks.has("Stop")
(True, False)
>>> call = HookInput("PreToolUse", "agent-1", tool="bash", arguments={"command": "rm -rf build"})
>>> out = asyncio.run(hooks.run("PreToolUse", call, match="bash"))
>>> out.decision, out.reason
('block', 'rm -rf is not allowed here; delete files one by one')
>>> asyncio.run(hooks.run("PreToolUse", call, match="read_file")).decision is None
True
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..exceptions import ConfigError
from ._hook_run import HookFailure, Reply, callback_reply, is_async, run_callback, run_command, spec_fields
from .hook_types import Decision, HookInput, HookResult, ProcessLauncher
from .names import HOOK_EVENTS

__all__ = ["CLAUDE_TOOL_NAMES", "HookCallback", "HookEntry", "HookError", "HookInput", "HookOutcome", "HookResult",
           "HookSpec", "Hooks", "ProcessLauncher"]

HookCallback = Callable[["HookInput"], "HookResult | Mapping[str, Any] | Awaitable[Any] | None"]
"""A Python hook: sync (run in a worker thread) or async; returns a HookResult, a dict in the JSON form
of command hooks, or ``None`` (go on)."""

HookEntry: TypeAlias = "HookCallback | HookSpec | Mapping[str, Any]"
"""One item of ``Runtime(hooks={event: [...]})``: a function, a HookSpec, or ``{"matcher": ..., "callback": fn}``."""

CLAUDE_TOOL_NAMES = {"bash": "Bash", "write_file": "Write", "edit_file": "Edit", "read_file": "Read",
                     "glob": "Glob", "grep": "Grep", "list_dir": "LS", "spawn_agent": "Task",
                     "todo_write": "TodoWrite", "team_create": "TeamCreate", "team_delete": "TeamDelete",
                     "task_create": "TaskCreate", "task_list": "TaskList", "task_get": "TaskGet",
                     "task_update": "TaskUpdate", "send_message": "SendMessage"}
"""Our tools by Claude Code's names: a matcher copied from Claude Code (``"Bash"``) matches them too."""

_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PermissionRequest"})
_CONFIG_KEYS = ("matcher", "command", "timeout_s", "on_error")
_PYTHON_KEYS = (*_CONFIG_KEYS, "callback", "source")
_CACHE_MAX = 4096


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One configured hook: its event, matcher, and either a shell ``command`` or a Python ``callback``."""

    event: str
    matcher: str | None = None
    command: str | None = None
    callback: HookCallback | None = None
    timeout_s: float = 30.0
    on_error: Literal["allow", "block"] = "allow"
    source: str = "python"
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _async: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"the {self.event} hook from {self.source}"
        if self.event not in HOOK_EVENTS:
            raise ConfigError(f"{self.source}: {self.event!r} is not a hook event; known events: "
                              f"{', '.join(HOOK_EVENTS)}")
        if (self.command is None) == (self.callback is None):
            raise ConfigError(f"{where} needs exactly one of a command (a shell command to run) or a callback "
                              f"(a Python function); it has {'both' if self.command is not None else 'neither'}.")
        if self.command is not None and (not isinstance(self.command, str) or not self.command.strip()):
            raise ConfigError(f"{where} has command = {self.command!r}; give the program to run, e.g. "
                              "\"./guard.sh\".")
        if self.callback is not None and not callable(self.callback):
            raise ConfigError(f"{where} has callback = {self.callback!r}, which is not a function.")
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, int | float) or not (t > 0 and math.isfinite(t)):
            raise ConfigError(f"{where} has timeout_s = {t!r}; it must be a positive number of seconds.")
        if self.on_error not in ("allow", "block"):
            raise ConfigError(f"{where} has on_error = {self.on_error!r}; use \"allow\" (go on when the hook "
                              "fails) or \"block\" (refuse when it fails).")
        if self.matcher is not None and not isinstance(self.matcher, str):
            raise ConfigError(f"{where} has matcher = {self.matcher!r}; it must be a string (a regular expression).")
        pattern = None
        if self.matcher not in (None, "", "*"):
            try:
                pattern = re.compile(self.matcher)
            except re.error as e:
                raise ConfigError(f"{where} has matcher {self.matcher!r}, which is not a valid regular expression "
                                  f"({e}); write a Python regex matched against the whole name, e.g. "
                                  "\"bash|write_file\" or \"mcp__github__.*\".") from None
        object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_async", is_async(self.callback))

    @property
    def name(self) -> str:
        """The command, or the callback's name: how messages refer to this hook."""
        if self.command is not None:
            return self.command
        return str(getattr(self.callback, "__qualname__", None) or getattr(self.callback, "__name__", None)
                   or repr(self.callback))

    def matches(self, target: str) -> bool:
        """Whether the matcher matches all of ``target`` (a tool name or an agent type)."""
        return self._pattern is None or self._pattern.fullmatch(target) is not None


@dataclass(frozen=True, slots=True)
class HookError:
    """What went wrong with one hook (it failed; it did not decide): a sentence a person understands."""

    spec: HookSpec
    message: str
    exit_code: int | None = None

    def __str__(self) -> str:
        return self.message


@dataclass(slots=True)
class HookOutcome:
    """The combined answer of an event's hooks.

    ``arguments`` is ``None`` unless a PreToolUse hook replaced them (then: the last replacement);
    ``context`` joins every hook's context; ``blocked_by`` is the hook that blocked, if one did;
    ``ask``: a hook answered Claude Code's ``"ask"``, which outranks every ``allow`` of the chain.
    """

    decision: Decision | None = None
    reason: str = ""
    arguments: dict[str, Any] | None = None
    context: str = ""
    errors: list[HookError] = field(default_factory=list)
    blocked_by: HookSpec | None = None
    stop: bool = False
    ask: bool = False


class Hooks:
    """The hooks of one runtime: :meth:`has` (one dict lookup) and :meth:`run` (never raises for a hook)."""

    __slots__ = ("_by_event", "_cache", "cwd", "env", "launcher", "specs")

    def __init__(self, specs: Iterable[HookSpec], *, cwd: str | Path, launcher: ProcessLauncher | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        """``env``: variables added to every command hook's environment (over the scrubbed one)."""
        self.specs = tuple(specs)
        by_event: dict[str, list[HookSpec]] = {}
        for spec in self.specs:
            if not isinstance(spec, HookSpec):
                raise ConfigError(f"Hooks takes HookSpec objects, got {spec!r}; use Hooks.from_python for functions.")
            by_event.setdefault(spec.event, []).append(spec)
        self._by_event = {event: tuple(group) for event, group in by_event.items()}
        self._cache: dict[tuple[str, str], tuple[HookSpec, ...]] = {}
        self.cwd = Path(cwd)
        self.launcher = launcher
        self.env = dict(env or {})

    def __len__(self) -> int:
        return len(self.specs)

    def __repr__(self) -> str:
        counts = ", ".join(f"{event}: {len(group)}" for event, group in self._by_event.items())
        return f"Hooks({{{counts}}}, cwd={str(self.cwd)!r})"

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, settings_hooks: Mapping[str, Sequence[Mapping[str, Any]]], *,
                    sources: Mapping[str, str] | None = None, source_map: Mapping[str, str] | None = None,
                    cwd: str | Path = ".", launcher: ProcessLauncher | None = None,
                    env: Mapping[str, str] | None = None) -> Hooks:
        """Hooks from ``Settings.hooks``; ``sources`` (or ``source_map``) maps ``hooks.<Event>[i]`` to its file."""
        where = {**(source_map or {}), **(sources or {})}
        specs = [HookSpec(event, **spec_fields(event, entry, where.get(f"hooks.{event}[{i}]", "config"), _CONFIG_KEYS))
                 for event, entries in settings_hooks.items() for i, entry in enumerate(entries)]
        return cls(specs, cwd=cwd, launcher=launcher, env=env)

    @classmethod
    def from_python(cls, mapping: Mapping[str, HookEntry | Sequence[HookEntry]], *,
                    source: str = "python", cwd: str | Path = ".", launcher: ProcessLauncher | None = None,
                    env: Mapping[str, str] | None = None) -> Hooks:
        """Hooks from ``{event: [fn, HookSpec(...), {"matcher": ..., "callback": fn | "command": ...}]}``."""
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"hooks must map an event name to a list of hooks, e.g. {{'PreToolUse': [check]}}; "
                              f"got {mapping!r}")
        specs: list[HookSpec] = []
        for event, entries in mapping.items():
            items: Any = [entries] if callable(entries) or isinstance(entries, HookSpec | Mapping) else entries
            if isinstance(items, str) or not isinstance(items, Iterable):
                raise ConfigError(f"hooks[{event!r}] must be a list of hooks, got {entries!r}")
            for item in items:
                if isinstance(item, HookSpec):
                    if item.event != event:
                        raise ConfigError(f"hooks[{event!r}] holds a HookSpec for {item.event}; list it under "
                                          f"{item.event!r}.")
                    specs.append(item)
                elif isinstance(item, Mapping):
                    specs.append(HookSpec(event, **spec_fields(event, item, source, _PYTHON_KEYS)))
                elif callable(item):
                    specs.append(HookSpec(event, callback=item, source=source))
                else:
                    raise ConfigError(f"hooks[{event!r}] holds {item!r}; give a function, a HookSpec, or a dict "
                                      "such as {'matcher': 'bash', 'callback': check}.")
        return cls(specs, cwd=cwd, launcher=launcher, env=env)

    @classmethod
    def combine(cls, *parts: Hooks | Iterable[HookSpec], cwd: str | Path, launcher: ProcessLauncher | None = None,
                env: Mapping[str, str] | None = None) -> Hooks:
        """One runner for several sources, in the order given (e.g. the config files' hooks, then Python's)."""
        specs = [spec for part in parts for spec in (part.specs if isinstance(part, Hooks) else part)]
        return cls(specs, cwd=cwd, launcher=launcher, env=env)

    # -- running ----------------------------------------------------------------------------------
    def has(self, event: str) -> bool:
        """Whether any hook is configured for ``event`` (one dict lookup: call it before building an input)."""
        return event in self._by_event

    def matching(self, event: str, match: str | None = None) -> tuple[HookSpec, ...]:
        """The hooks of ``event`` whose matcher matches ``match`` (all of them when ``match`` is None)."""
        specs = self._by_event.get(event, ())
        if match is None or not specs:
            return specs
        key = (event, match)
        hit = self._cache.get(key)
        if hit is None:
            alias = CLAUDE_TOOL_NAMES.get(match) if event in _TOOL_EVENTS else None
            hit = tuple(s for s in specs if s.matches(match) or (alias is not None and s.matches(alias)))
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    async def run(self, event: str, inp: HookInput, *, match: str | None = None) -> HookOutcome:
        """Run the matching hooks of ``event`` in order; every failure becomes a :class:`HookError`."""
        out = HookOutcome()
        contexts: list[str] = []
        for spec in self.matching(event, match):
            reply, error = await self._run_one(spec, event, inp)
            if (reply is not None and event == "PermissionRequest" and reply.decision != "block"
                    and reply.arguments is not None and reply.arguments != inp.arguments):
                reply, error = None, HookError(spec, f"hook `{spec.name}` for PermissionRequest answered with "
                                               "replacement arguments (updatedInput), which PermissionRequest "
                                               "cannot apply, so its answer was not used; replace arguments in "
                                               "a PreToolUse hook")
            if error is not None:
                out.errors.append(error)
                if spec.on_error == "block":
                    out.decision, out.blocked_by = "block", spec
                    out.reason = (f"{error.message}. The hook is set to fail closed (on_error = \"block\"), so "
                                  "this was blocked.")
                    break
                continue
            if reply is None:
                continue
            if reply.context:
                contexts.append(reply.context)
            if _fold(out, reply, event, spec, inp.arguments):
                break
            if reply.arguments is not None and event == "PreToolUse":
                inp = dataclasses.replace(inp, arguments=reply.arguments)
        out.context = "\n\n".join(contexts)
        return out

    async def _run_one(self, spec: HookSpec, event: str, inp: HookInput) -> tuple[Reply | None, HookError | None]:
        try:
            if spec.command is not None:
                cwd = str(self.cwd)
                env = {**self.env, "SUBAGENTS_HOOK_EVENT": event, "SUBAGENTS_PROJECT_DIR": cwd,
                       "CLAUDE_PROJECT_DIR": cwd}
                reply = await run_command(spec.command, inp.to_json().encode("utf-8", "replace"), event=event,
                                          label=f"hook `{spec.command}` for {event}", timeout_s=spec.timeout_s,
                                          cwd=self.cwd, launcher=self.launcher, env_extra=env)
            else:
                assert spec.callback is not None
                label = f"Python hook `{spec.name}` for {event}"
                if inp.arguments is not None:  # a callback must not change the call behind the guard's back
                    inp = dataclasses.replace(inp, arguments=copy.deepcopy(inp.arguments))
                value = await run_callback(spec.callback, inp, is_async=spec._async, timeout_s=spec.timeout_s,
                                           label=label)
                reply = callback_reply(value, event, label)
        except HookFailure as e:
            return None, HookError(spec, e.message, e.exit_code)
        except (Exception, SystemExit) as e:  # a hook never crashes a run
            return None, HookError(spec, f"hook `{spec.name}` for {event} failed: {type(e).__name__}: {e}")
        return reply, None


def _fold(out: HookOutcome, reply: Reply, event: str, spec: HookSpec, seen: dict[str, Any] | None) -> bool:
    """Add one hook's answer to ``out`` (``seen``: the arguments it saw); ``True`` when it blocked."""
    out.stop = out.stop or reply.stop
    if reply.arguments is not None and event == "PreToolUse":
        if reply.decision != "allow" and reply.arguments != seen:
            out.decision, out.reason = None, ""  # an earlier allow was for the arguments it saw, not these
        out.arguments = reply.arguments
    if reply.decision == "block":
        out.decision, out.reason, out.blocked_by = "block", reply.reason, spec
        return True
    if reply.ask:  # Claude Code's order: deny > ask > allow, across the chain
        out.ask, out.reason = True, reply.reason or out.reason
        if out.decision == "allow":
            out.decision = None
    elif reply.decision == "allow" and not out.ask:
        out.decision, out.reason = "allow", reply.reason or out.reason
    return False
