"""How one hook runs: a command (its input, process, time limit, exit code and output) or a Python callback.

Internal to :mod:`subagents.authority.hooks`, whose docstring describes the protocol.  Nothing here
knows the public hook types: :func:`run_command` returns a :class:`Reply` (or ``None``: go on),
:func:`run_callback` the callback's own answer, and both raise :class:`HookFailure` for anything
that counts as a hook error.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import secrets
import signal
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from .._threads import call_in_thread
from ..exceptions import ConfigError
from ..sandbox.env import scrubbed_env
from ..sandbox.procs import TAG_VAR, kill_tagged, reap
from .hook_types import STOP_EVENTS, HookResult, ProcessLauncher

__all__ = ["REASON_CAP", "HookFailure", "Reply", "callback_reply", "is_async", "parse_reply",
           "run_callback", "run_command", "spec_fields"]

SHELL = "/bin/sh"
STDOUT_CAP = 1_000_000
"""Bytes of a hook's stdout that are kept (the rest is read and dropped, so the hook never blocks)."""
STDERR_CAP = 64_000
REASON_CAP = 2_000
"""Characters of an exit-2 hook's stderr that go back to the model as the reason."""
CONTEXT_CAP = 10_000
"""Characters of plain stdout that become context (UserPromptSubmit, PostToolUse), and the most a reason
or a context given in JSON (or by a Python hook) may hold: the rest is cut, so no hook floods the model."""
DETAIL_CAP = 500
"""Characters of stderr quoted in a hook error."""
PIPE_GRACE_S = 0.5
"""After the hook exits, how long background processes may hold its pipes before they are killed."""
_HAVE_PROC = os.path.isdir("/proc")  # where processes that leave the group can be found (see kill_tagged)

_TEXT_CONTEXT = frozenset({"UserPromptSubmit", "PostToolUse"})
_DECISIONS: dict[str, Literal["block", "allow"] | None] = {
    "block": "block", "deny": "block", "allow": "allow", "approve": "allow", "ask": None, "defer": None}


class HookFailure(Exception):
    """A hook error: the message names the hook, the event and what happened."""

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class Reply(NamedTuple):
    """What a hook said, in the runner's terms (see :class:`~subagents.authority.hooks.HookResult`)."""

    decision: Literal["block", "allow"] | None = None
    reason: str = ""
    arguments: dict[str, Any] | None = None
    context: str = ""
    stop: bool = False
    ask: bool = False  # Claude Code's "ask": have the person confirm; it outranks "allow"


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)


def _decision(value: Any, key: str, label: str) -> Literal["block", "allow"] | None:
    if isinstance(value, str) and value.lower() in _DECISIONS:
        return _DECISIONS[value.lower()]
    raise HookFailure(f"{label} answered {key} = {value!r}, which is not one of "
                      f"{', '.join(repr(k) for k in _DECISIONS)}")


def _mapping(value: Any, key: str, label: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HookFailure(f"{label} answered {key} = {_cap(repr(value), 100)}, but it must be a JSON object")
    return value


def _stronger(a: Literal["block", "allow"] | None, b: Literal["block", "allow"] | None
              ) -> Literal["block", "allow"] | None:
    return "block" if "block" in (a, b) else a or b


def _bounded(reply: Reply, event: str) -> Reply:
    """``reply`` with its reason and context cut to :data:`CONTEXT_CAP` characters.  ``stop`` (Claude Code's
    ``"continue": false``) outranks the decision: it blocks, except on Stop events, where it lets the agent end."""
    decision: Literal["block", "allow"] | None = reply.decision
    if reply.stop:
        decision = None if event in STOP_EVENTS else "block"
    return reply._replace(decision=decision, reason=_cap(reply.reason, CONTEXT_CAP),
                          context=_cap(reply.context, CONTEXT_CAP))


def _asks(*values: Any) -> bool:
    return any(isinstance(v, str) and v.lower() == "ask" for v in values)


def parse_reply(data: Mapping[str, Any], event: str, label: str) -> Reply:
    """Our JSON and Claude Code's, read into one :class:`Reply`; a block anywhere in it wins."""
    decision = _decision(data["decision"], "decision", label) if data.get("decision") is not None else None
    reason = _text(data.get("reason"))
    arguments = _mapping(data["arguments"], "arguments", label) if data.get("arguments") is not None else None
    context = _text(data.get("context"))
    stop = data.get("continue") is False
    if stop:
        reason = _text(data.get("stopReason")) or reason
    ask = _asks(data.get("decision"))
    specific = data.get("hookSpecificOutput")
    if specific is not None:
        specific = _mapping(specific, "hookSpecificOutput", label)
        ask = ask or _asks(specific.get("permissionDecision"))
        if specific.get("permissionDecision") is not None:
            decision = _stronger(decision, _decision(specific["permissionDecision"], "permissionDecision", label))
        reason = _text(specific.get("permissionDecisionReason")) or reason
        if specific.get("updatedInput") is not None:
            arguments = _mapping(specific["updatedInput"], "updatedInput", label)
        context = "\n".join(c for c in (context, _text(specific.get("additionalContext"))) if c)
        if specific.get("decision") is not None:  # PermissionRequest: {"behavior": "allow" | "deny", ...}
            verdict = _mapping(specific["decision"], "hookSpecificOutput.decision", label)
            decision = _stronger(decision, _decision(verdict.get("behavior"), "decision.behavior", label))
            ask = ask or _asks(verdict.get("behavior"))
            reason = _text(verdict.get("message")) or reason
            if verdict.get("updatedInput") is not None:
                arguments = _mapping(verdict["updatedInput"], "updatedInput", label)
    if ask and decision == "allow":  # Claude Code's order: deny > ask > allow
        decision = None
    return _bounded(Reply(decision, reason, arguments, context, stop, ask), event)


def _stdout_reply(out: str, event: str, label: str, cut: bool = False) -> Reply | None:
    text = out.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            why = f"; its stdout was longer than {STDOUT_CAP:,} bytes and was cut there" if cut else ""
            raise HookFailure(f"{label} printed output that looks like JSON but is not valid JSON "
                              f"({e.msg} at line {e.lineno} column {e.colno}{why}): {_cap(text, 200)!r}") from None
        except RecursionError:
            raise HookFailure(f"{label} printed JSON nested too deeply to read: {_cap(text, 200)!r}") from None
        if isinstance(data, dict):
            return parse_reply(data, event, label)
    if event in _TEXT_CONTEXT:
        return Reply(context=_cap(text, CONTEXT_CAP))
    return None


def interpret(code: int, out: str, err: str, *, event: str, label: str, out_cut: bool = False) -> Reply | None:
    """Claude Code's exit codes: 0 = go on (stdout may answer), 2 = block (stderr is the reason), else an error.

    ``out_cut``: stdout was longer than :data:`STDOUT_CAP` and ``out`` is its beginning.
    """
    if code == 0:
        return _stdout_reply(out, event, label, out_cut)
    if code == 2:
        return Reply("block", _cap(err.strip(), REASON_CAP))
    detail = _cap(err.strip(), DETAIL_CAP) or "nothing on stderr"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        raise HookFailure(f"{label} was killed by {name}: {detail}", code)
    hint = {126: " (the command is not executable: check its permissions, e.g. chmod +x)",
            127: " (the command was not found: check its path, relative to the workspace root)"}.get(code, "")
    raise HookFailure(f"{label} exited with code {code}: {detail}{hint}", code)


def _kill_group(pid: int, tag: str | None) -> None:
    """SIGKILL the hook's process group and, given its ``tag``, what left the group (``setsid``, daemons)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if tag is not None:
        kill_tagged(tag, pid)


class _Capture(asyncio.Protocol):
    """Collects the first ``cap`` bytes of a pipe (the rest is read and dropped, so the hook never blocks)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.cut = False
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        room = self.cap - len(self.data)
        if len(data) > room:
            self.cut = True
        if room > 0:
            self.data += data[:room]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


async def _collect(proc: asyncio.subprocess.Process, captures: list[_Capture], timeout_s: float,
                   tag: str | None) -> bool:
    """Wait for the hook and the end of its output; ``True`` if it ran past ``timeout_s`` (its group is killed).

    The pipes are ours, not asyncio's, so the wait ends when the hook exits even if a background
    process keeps its output open; such leftovers get :data:`PIPE_GRACE_S`, then die with the group.
    """
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid, tag)
            await reap(proc)
        ends = [c.closed for c in captures]
        _, pending = await asyncio.wait(ends, timeout=PIPE_GRACE_S)
        if pending:
            _kill_group(proc.pid, tag)
            await asyncio.wait(pending, timeout=PIPE_GRACE_S)
    except asyncio.CancelledError:
        _kill_group(proc.pid, tag)
        await reap(proc)
        raise
    return timed_out


async def _spawn(argv: tuple[str, ...], *, cwd: Path, launcher: ProcessLauncher | None, env_extra: Mapping[str, str],
                 stdin: int, stdout: int, stderr: int, tag: str | None) -> asyncio.subprocess.Process:
    if launcher is None:  # tagged, as the sandbox does, so that what leaves the group can be found and killed
        env = scrubbed_env(extra={**env_extra, **({TAG_VAR: tag} if tag else {})})
        return await asyncio.create_subprocess_exec(*argv, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                                    start_new_session=True, env=env)
    return await launcher.spawn(argv, writable=True, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                env_extra=env_extra)


async def run_command(command: str, payload: bytes, *, event: str, label: str, timeout_s: float, cwd: Path,
                      launcher: ProcessLauncher | None, env_extra: Mapping[str, str]) -> Reply | None:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd``, ``payload`` on stdin, in its own process group."""
    loop = asyncio.get_running_loop()
    captures = [_Capture(STDOUT_CAP), _Capture(STDERR_CAP)]
    fds: list[tuple[int, int]] = []
    try:
        for _ in range(2):  # stdout, stderr
            fds.append(os.pipe())
    except OSError as e:  # out of descriptors: close the pipe that was made
        for fd in (fd for pair in fds for fd in pair):
            os.close(fd)
        raise HookFailure(f"{label} could not be started: {e}") from e
    readers = [os.fdopen(r, "rb", buffering=0) for r, _ in fds]
    transports: list[asyncio.BaseTransport] = []
    tag = secrets.token_hex(8) if launcher is None and _HAVE_PROC else None
    try:
        try:
            with tempfile.TemporaryFile() as stdin:  # a file, not a pipe: a hook that does not read it never blocks
                stdin.write(payload)
                stdin.seek(0)
                proc = await _spawn((SHELL, "-c", command), cwd=cwd, launcher=launcher, env_extra=env_extra,
                                    stdin=stdin.fileno(), stdout=fds[0][1], stderr=fds[1][1], tag=tag)
        except Exception as e:  # no process, no temporary file (a full disk), ...
            raise HookFailure(f"{label} could not be started: {e}") from e
        finally:
            for _, w in fds:
                os.close(w)
        try:
            for capture, reader in zip(captures, readers, strict=True):
                transport, _ = await loop.connect_read_pipe(lambda c=capture: c, reader)  # type: ignore[misc]
                transports.append(transport)
        except BaseException:  # cancelled before the wait began: the hook must not outlive it
            _kill_group(proc.pid, tag)
            await reap(proc)
            raise
        timed_out = await _collect(proc, captures, timeout_s, tag)
    finally:
        for t in transports:
            t.close()
        for reader in readers[len(transports):]:
            reader.close()
    if timed_out:
        raise HookFailure(f"{label} did not finish within {timeout_s:g} s and was killed, with every process "
                          "it started")
    assert proc.returncode is not None
    return interpret(proc.returncode, captures[0].text(), captures[1].text(), event=event, label=label,
                     out_cut=captures[0].cut)


def is_async(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine (async functions, partials of them, async ``__call__``)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


_LEFT_BEHIND: set[asyncio.Task[Any]] = set()
"""Async callbacks that ran past their timeout and ignored being cancelled: held until they end."""


async def _call(fn: Callable[[Any], Any], arg: Any, is_async: bool, label: str) -> Any:
    try:
        value = fn(arg) if is_async else await call_in_thread(fn, arg)  # a daemon thread: never holds up exit
        if inspect.isawaitable(value):
            value = await value
    except asyncio.CancelledError:
        raise  # the caller's cancellation, or the callback's own (:func:`run_callback` tells them apart)
    except BaseException as e:  # KeyboardInterrupt, SystemExit...: asyncio would re-raise them out of the loop
        raise HookFailure(f"{label} raised {type(e).__name__}: {e}") from e
    return value


async def run_callback(fn: Callable[[Any], Any], arg: Any, *, is_async: bool, timeout_s: float, label: str) -> Any:
    """``fn(arg)`` under ``timeout_s``: awaited if async, else in a worker thread so the loop runs on.

    The call runs in its own task: its answer is dropped once ``timeout_s`` has passed even if it
    ignores being cancelled, and nothing it raises (not even ``CancelledError``) ends the caller.
    """
    task = asyncio.ensure_future(_call(fn, arg, is_async, label))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        _LEFT_BEHIND.add(task)
        task.add_done_callback(_forget)
        left = "" if is_async else " (its thread is left to finish in the background)"
        raise HookFailure(f"{label} did not finish within {timeout_s:g} s{left}")
    if task.cancelled():  # not by us: the callback raised CancelledError itself
        raise HookFailure(f"{label} raised CancelledError")
    return task.result()


def _forget(task: asyncio.Task[Any]) -> None:
    _LEFT_BEHIND.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" warning


def callback_reply(value: Any, event: str, label: str) -> Reply | None:
    """A callback's answer, checked, as a :class:`Reply`."""
    if value is None:
        return None
    if isinstance(value, HookResult):
        if value.decision not in (None, "block", "allow"):
            raise HookFailure(f"{label} returned decision = {value.decision!r}; use \"block\", \"allow\" or None")
        if value.arguments is not None and not isinstance(value.arguments, dict):
            raise HookFailure(f"{label} returned arguments = {value.arguments!r}; they must be a dict")
        return _bounded(Reply(value.decision, str(value.reason or ""), value.arguments, str(value.context or ""),
                              bool(value.stop)), event)
    if isinstance(value, Mapping):
        return parse_reply(value, event, label)
    raise HookFailure(f"{label} returned a {type(value).__name__}; a hook returns a HookResult, a dict in the "
                      "JSON form of command hooks, or None")


def spec_fields(event: str, entry: Any, source: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The HookSpec fields of one ``[[hooks.<Event>]]`` table or a dict given in Python."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{source}: each [[hooks.{event}]] entry must be a table, got {entry!r}")
    unknown = [k for k in entry if k not in keys]
    if unknown:
        raise ConfigError(f"{source}: [[hooks.{event}]] has unknown key {unknown[0]!r}; known keys: {', '.join(keys)}")
    return {"matcher": entry.get("matcher"), "command": entry.get("command"), "callback": entry.get("callback"),
            "timeout_s": entry.get("timeout_s", 30.0), "on_error": entry.get("on_error", "allow"),
            "source": entry.get("source", source)}
