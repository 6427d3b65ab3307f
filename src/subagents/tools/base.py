"""The tool protocol, the ``@tool`` decorator, the per-agent ``ToolRegistry`` and its fence.

A tool is anything with ``name``, ``description``, ``parameters`` (a JSON schema), ``category``
and an async ``call(arguments, ctx) -> str``.  :func:`tool` builds one from a typed Python
function: the schema comes from the type hints, the descriptions from the docstring.

>>> @tool(category="read")
... def shout(text: str, times: int = 1) -> str:
...     '''Repeat text in capitals.
...
...     Args:
...         text: what to shout.
...         times: how often.
...     '''
...     return " ".join([text.upper()] * times)
>>> shout.parameters["required"], shout.parameters["properties"]["times"]["default"]
(['text'], 1)
"""

from __future__ import annotations

import enum
import inspect
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any, Protocol, overload, runtime_checkable

from .._threads import call_in_thread
from ..exceptions import StoreError, ToolError
from ..messages import ToolResultBlock, ToolUseBlock
from ..models.base import INVALID_ARGUMENTS_KEY, ToolSpec
from .context import ToolContext
from .schema import check_schema, schema_for_function, validate

__all__ = [
    "MAX_TOOL_OUTPUT",
    "FunctionTool",
    "Tool",
    "ToolCategory",
    "ToolContext",
    "ToolRegistry",
    "denied_names",
    "tool",
    "truncate_output",
]

MAX_TOOL_OUTPUT = 50_000


class ToolCategory(enum.StrEnum):
    """What a tool does; used for fences (read-only agents) and for parallel execution."""

    READ = "read"
    EDIT = "edit"
    EXECUTE = "execute"
    AGENT = "agent"
    TEAM = "team"


@runtime_checkable
class Tool(Protocol):
    """The tool protocol."""

    name: str
    description: str
    parameters: dict[str, Any]
    category: ToolCategory

    @property
    def parallel_safe(self) -> bool:
        """May run concurrently with other parallel-safe calls of the same turn."""
        ...

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str: ...


def truncate_output(text: str, limit: int = MAX_TOOL_OUTPUT) -> str:
    """Cap tool output at ``limit`` characters with a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return (
        text[:limit]
        + f"\n\n[... output truncated: {len(text):,} characters in all, the first {limit:,} shown."
        " Narrow the request (offset/limit, a more specific pattern) to see the rest ...]"
    )


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


class FunctionTool:
    """A tool backed by a Python function.

    A sync function runs in a daemon worker thread (:func:`subagents._threads.call_in_thread`) unless
    ``inline``: a call that blocks or never returns holds up neither the event loop nor the end of the
    run (``timeout_s``, cancellation) nor the exit of the process; it is left behind in its thread.
    """

    __slots__ = ("_async", "_wants_ctx", "category", "description", "fn", "inline", "name", "parameters")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        category: ToolCategory | str = ToolCategory.EXECUTE,
        parameters: dict[str, Any] | None = None,
        inline: bool = False,
    ) -> None:
        params = inspect.signature(fn).parameters
        first = next(iter(params), None)
        self._wants_ctx = first is not None and (
            first == "ctx" or params[first].annotation in (ToolContext, "ToolContext")
        )
        skip = (first,) if self._wants_ctx and first else ()
        desc, schema = schema_for_function(fn, skip=skip) if parameters is None else ("", parameters)
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description or desc or self.name
        self.parameters = parameters or schema
        self.category = ToolCategory(category)
        self.inline = inline
        self._async = inspect.iscoroutinefunction(fn)

    @property
    def parallel_safe(self) -> bool:
        return self.category in (ToolCategory.READ, ToolCategory.AGENT)

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        args = (ctx,) if self._wants_ctx else ()
        if self._async:
            out = await self.fn(*args, **arguments)
        elif self.inline:
            out = self.fn(*args, **arguments)
        else:
            out = await call_in_thread(self.fn, *args, **arguments)
        return _render(out)

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.category})>"


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    category: ToolCategory | str = ToolCategory.EXECUTE,
    inline: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    category: ToolCategory | str = ToolCategory.EXECUTE,
    inline: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a typed function into a :class:`FunctionTool` (usable bare or with options).

    A first parameter named ``ctx`` (or typed :class:`ToolContext`) receives the tool context and
    is not part of the schema.  Raise :class:`~subagents.ToolError` to return an error to the model.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, name=name, description=description, category=category, inline=inline)

    return wrap(fn) if fn is not None else wrap


def denied_names(deny: Collection[str], names: Iterable[str]) -> set[str]:
    """``deny`` and the names of ``names`` that a pattern in it matches (``write_*``, ``edit_fil?``: shell-style,
    case-sensitive); the patterns stay in it (another registry may match them against tools added later).

    >>> sorted(denied_names(["write_*", "bash"], ["read_file", "write_file", "write_todo", "bash", "grep"]))
    ['bash', 'write_*', 'write_file', 'write_todo']
    """
    out = set(deny)
    patterns = [p for p in deny if any(c in p for c in "*?[")]
    if patterns:
        out.update(n for n in names if any(fnmatchcase(n, p) for p in patterns))
    return out


class ToolRegistry:
    """The tools of one agent instance: an allowlist and a denylist over a set of known tools.

    The fence is computed once (``allowed``) and checked again in :meth:`execute`: a call to a tool
    outside it returns a tool error naming the tool and the agent type, and the tool never runs.

    ``hold`` names tools the agent may hand to its sub-agents without calling them itself (a
    delegator's ``delegate_tools``): they are in ``grantable`` (what a child's fence is cut from),
    not in ``allowed`` (what its model sees and may call).
    """

    __slots__ = ("_specs", "agent_type", "allowed", "grantable", "known", "max_output")

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        allow: Collection[str] | None = None,
        deny: Collection[str] = (),
        agent_type: str = "agent",
        max_output: int = MAX_TOOL_OUTPUT,
        hold: Collection[str] = (),
    ) -> None:
        self.known: dict[str, Tool] = {}
        for t in tools:
            check_schema(t.parameters, tool=t.name)  # any Tool object; a dict lookup once compiled
            self.known[t.name] = t
        # no allowlist: every tool but the team tools, which an agent gets by name (its definition's tools:)
        # or by joining a team (extended)
        names = ([n for n, t in self.known.items() if t.category is not ToolCategory.TEAM] if allow is None
                 else [n for n in allow if n in self.known])
        deny_set = denied_names(deny, self.known)
        self.allowed: dict[str, Tool] = {n: self.known[n] for n in names if n not in deny_set}
        held = [n for n in hold if n in self.known and n not in deny_set and n not in self.allowed]
        self.grantable: dict[str, Tool] = (
            {**self.allowed, **{n: self.known[n] for n in held}} if held else self.allowed)
        self.agent_type = agent_type
        self.max_output = max_output
        self._specs: list[ToolSpec] | None = None

    def clone(self) -> ToolRegistry:
        """A new registry instance with the same fence (the fence data is immutable, so it is shared)."""
        twin = ToolRegistry.__new__(ToolRegistry)
        twin.known, twin.allowed, twin.grantable, twin.agent_type, twin.max_output = (
            self.known, self.allowed, self.grantable, self.agent_type, self.max_output)
        twin._specs = self.specs()
        return twin

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A new registry: this fence plus ``tools`` (a teammate's team tools; the lead's once its team exists)."""
        extra = [t for t in tools if t.name not in self.allowed]
        if not extra:
            return self
        known = {**self.known, **{t.name: t for t in extra}}
        return ToolRegistry(known.values(), allow=[*self.allowed, *(t.name for t in extra)],
                            agent_type=self.agent_type, max_output=self.max_output, hold=self.held)

    @property
    def held(self) -> list[str]:
        """The tools this agent may hand to its sub-agents but not call itself."""
        return [n for n in self.grantable if n not in self.allowed]

    def specs(self) -> list[ToolSpec]:
        """The tools as the model sees them (only those inside the fence), in cache order.

        The order is the runtime's (that of the known tools, the same for every agent of a runtime) with
        the agent and team tools last, so agents whose fences share tools send byte-identical tool
        prefixes and read each other's prompt cache, whatever order their allowlists name them in."""
        if self._specs is None:
            allowed, last = self.allowed, (ToolCategory.AGENT, ToolCategory.TEAM)
            ordered = [t for n, t in self.known.items() if n in allowed and t.category not in last]
            ordered += [t for n, t in self.known.items() if n in allowed and t.category in last]
            self._specs = [ToolSpec(t.name, t.description, t.parameters, str(t.category)) for t in ordered]
        return self._specs

    def __contains__(self, name: object) -> bool:
        return name in self.allowed

    def __len__(self) -> int:
        return len(self.allowed)

    @property
    def names(self) -> list[str]:
        return list(self.allowed)

    def get(self, name: str) -> Tool | None:
        return self.allowed.get(name)

    def check(self, call: ToolUseBlock) -> tuple[Tool | None, str | None]:
        """Return ``(tool, None)`` if the call may run, else ``(None, error message for the model)``."""
        t = self.allowed.get(call.name)
        if t is None:
            available = ", ".join(self.allowed) or "none"
            if call.name in self.known:
                return None, (
                    f"tool {call.name!r} is not available to agent type {self.agent_type!r}: it is outside "
                    f"this agent's tool fence and was not run. Use one of: {available}"
                )
            return None, f"unknown tool {call.name!r}; the tools available to this agent are: {available}"
        raw_args: object = call.arguments
        if not isinstance(raw_args, dict):
            return None, f"invalid arguments for tool {call.name!r}: arguments must be a JSON object"
        if INVALID_ARGUMENTS_KEY in raw_args:
            raw = str(raw_args[INVALID_ARGUMENTS_KEY])[:500]
            return None, (f"the arguments of tool {call.name!r} were not valid JSON: {raw!r}; "
                          "resend the call with the arguments as one JSON object")
        err = validate(call.arguments, t.parameters)
        if err:
            return None, f"invalid arguments for tool {call.name!r}: {err}. Fix the arguments and call it again."
        return t, None

    def invalid_arguments(self, t: Tool, arguments: object) -> str | None:
        """Why ``arguments`` do not fit ``t``'s schema (``None``: they do)."""
        if not isinstance(arguments, dict):
            return "arguments must be a JSON object"
        return validate(arguments, t.parameters)

    async def execute(self, call: ToolUseBlock, ctx: ToolContext) -> ToolResultBlock:
        """Run one call inside the fence; every failure becomes an ``is_error`` result for the model."""
        t, err = self.check(call)
        if t is None:
            return ToolResultBlock(call.id, err or "", True)
        return await self.run(t, call, ctx)

    async def run(self, t: Tool, call: ToolUseBlock, ctx: ToolContext) -> ToolResultBlock:
        """Run a call :meth:`check` accepted; every failure becomes an ``is_error`` result for the model."""
        try:
            out = await t.call(call.arguments, ctx)
        except ToolError as e:
            return ToolResultBlock(call.id, truncate_output(str(e), self.max_output), True)
        except StoreError:
            raise  # the runtime's own record failed: not the model's to work around
        except Exception as e:  # a tool's bug (AttributeError, MemoryError of a deep parse...) is the model's news
            msg = f"tool {call.name!r} failed: {type(e).__name__}: {e}"
            return ToolResultBlock(call.id, truncate_output(msg, self.max_output), True)
        return ToolResultBlock(call.id, truncate_output(out, self.max_output), False)

    def narrowed(self, *, allow: Collection[str] | None = None, deny: Collection[str] = (),
                 agent_type: str | None = None) -> ToolRegistry:
        """A new registry over the same known tools with a tighter fence."""
        base = list(self.allowed) if allow is None else [n for n in allow if n in self.allowed]
        return ToolRegistry(self.known.values(), allow=base, deny=deny,
                            agent_type=agent_type or self.agent_type, max_output=self.max_output)


def as_tools(items: Iterable[Tool | Callable[..., Any]] | Mapping[str, Tool]) -> list[Tool]:
    """Accept tools or plain functions (wrapped with :func:`tool`)."""
    seq = items.values() if isinstance(items, Mapping) else items
    out: list[Tool] = []
    for it in seq:
        if isinstance(it, Tool):
            out.append(it)
        elif callable(it):
            out.append(FunctionTool(it))
        else:
            raise TypeError(f"not a tool: {it!r}; pass a Tool or a typed function")
    return out
