"""Landlock: the shell sandbox's second backend, for kernels where user namespaces are not allowed.

Landlock (Linux 5.13+) lets an unprivileged process give up file-system and network access for
itself and its children.  The ruleset is built in the runtime (:func:`build_ruleset`: opens paths,
adds rules), then applied by the small function that :meth:`Ruleset.confiner` returns: dropping
every capability (a root runtime would otherwise hand ``CAP_SYS_ADMIN``/``CAP_SYS_MODULE``... to the
command), ``PR_SET_NO_NEW_PRIVS``, the seccomp filter of :mod:`.seccomp` (network off),
``landlock_restrict_self``.  Everything it calls is resolved beforehand.

Where it runs: all of these act on the calling *thread*, so the runner applies them in a fresh
thread of the runtime that then starts the command with ``vfork`` and ends (:mod:`.spawnthread`).
Applying them in a ``preexec_fn`` instead forces a real ``fork`` of the whole runtime, which costs
about 13 ms per command at 90 MB of memory (measured); that path is kept only as the fallback, and
it alone sets ``PR_SET_PDEATHSIG`` (which would reach only the command's first process anyway; the
runner kills whole process groups at exit).

What a confined command gets (Landlock is an allowlist: nothing is denied, only granted):

- read, list and execute everything except the hidden paths: the grant is placed on the siblings
  along the way to each hidden path instead of on ``/``; a private ``$HOME`` is not granted but for what
  commands need (:mod:`.home`), ``/tmp`` and ``/run`` (other commands'
  files, sockets, ``/run/secrets``) are not granted either, nor ``/dev`` but for ``null``, ``zero``,
  ``full``, ``random``, ``urandom`` (not the user's terminal).  A grant covers all beneath it, so
  the directories along the way cannot be *listed* (``ls /``, ``ls ~`` fail; ``ls /usr`` works);
  the workspace can, whole (the names of hidden files in it included, never their content);
- write in the workspace except the protected paths: the grant is placed on the workspace's
  top-level entries other than the protected ones, so **a command cannot create, delete or rename
  an entry directly in the workspace root** (it can edit existing top-level files in place, and do
  anything inside the top-level directories) — a limit of an allowlist without mount namespaces;
- write in a private temp dir (``TMPDIR``) and on ``/dev/null``-like devices; nothing else;
- in read-only mode (plan mode) only the temp dir is writable;
- no TCP bind/connect unless ``network`` (ABI ≥ 4) and, with the network off, no new socket at
  all (the seccomp filter: UDP, raw sockets and UNIX sockets outside are out of Landlock's reach); with
  it on, no new UNIX socket (``connect`` to ``/run/docker.sock``, the D-Bus session bus, an X server's
  abstract socket is out of Landlock's reach: the seccomp filter refuses ``socket(AF_UNIX)``);
- no truncation of what it may not write (ABI ≥ 3; before, ``truncate(2)`` by path is refused by the
  seccomp filter: Landlock did not check it at all);
- signals and abstract UNIX sockets scoped to the sandbox (ABI ≥ 6): a command cannot signal the
  runtime nor reach an abstract socket outside.  ``/proc/<pid>`` of processes outside the sandbox
  is not readable (Landlock's ptrace restriction), so neither is the runtime's environment;
- ``chmod``, ``chown``, times and extended attributes only where it may write: Landlock has no right for them
  (``chmod 000 ~``, a key made world-readable by its mode or an ACL — ``setxattr(system.posix_acl_access)`` — or
  given to a shared group, or, a root runtime's command, ``chmod 666 /etc/shadow``), so every ``chmod``,
  ``fchmod``, ``fchmodat(2)``, ``(l|f)chown(at)``, ``utimensat`` and ``(l|f)setxattr``/``(l|f)removexattr`` goes
  to the command's reaper, which opens the target itself, checks what it opened against
  :attr:`Ruleset.write_areas` and acts on that (:mod:`.signals`, :mod:`.supervisor`): ~60 µs a call; ``chattr`` is
  refused (:mod:`.signals`).

Not covered (use bubblewrap where user namespaces are allowed): UNIX sockets of its own (a local server on a socket
in ``$TMPDIR``: the filter cannot tell them from the host's); processes that leave the command's process group
(``setsid``) survive it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import signal
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["MASKED", "Ruleset", "abi_version", "build_ruleset", "scope_ruleset"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (WRITE_FILE | TRUNCATE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
         | MAKE_SYM | REFER)

MASKED: tuple[str, ...] = ("/tmp", "/run", "/var/run", "/dev")
"""Never granted as a whole: shared temp files, sockets and secrets of other programs, and devices
(``/dev/pts/N`` is the user's terminal: readable by its owner, so a command could read keystrokes)."""
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
"""Devices commands may read and write (``/dev/tty`` fails anyway: a command has no terminal)."""
_READ_DEVICES = ("/dev/random", "/dev/urandom")
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 24, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64))


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _syscall(*args: object) -> int:
    res: int = _libc().syscall(*args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return res


@cache
def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled (cached)."""
    try:
        return _syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0


def _expand(path: str, access: int, exclude: frozenset[str], out: dict[str, int]) -> None:
    """Grant ``access`` on ``path`` or, when an excluded path lies beneath it, on its children.

    Paths are absolute, normalized strings (pathlib's ``parents`` is too slow for this loop).
    Symlinks are skipped (a grant follows them, and one could lead into a hidden path); reaching
    a file through a symlink needs no right on the link itself.
    """
    if path in exclude:
        return
    prefix = path if path.endswith("/") else path + "/"
    if not any(e.startswith(prefix) for e in exclude):
        out[path] = out.get(path, 0) | access
        return
    for child in _children(path):
        _expand(child, access, exclude, out)


def _children(path: str) -> list[str]:
    """The entries of a directory that are not symlinks (none when it cannot be listed)."""
    try:
        with os.scandir(path) as it:
            return [e.path for e in it if not e.is_symlink()]
    except OSError:
        return []


@dataclass(slots=True)
class Ruleset:
    """A Landlock ruleset ready to be applied in a child (``fd`` is closed by :meth:`close`)."""

    fd: int
    abi: int
    seccomp: Callable[[], None] | None = None
    # where a command may change metadata (its reaper carries out its chmod, chown, utimensat and xattr calls,
    # :mod:`.signals`): its temp dir, the workspace (``""``: not writable) but its root, and the paths in it that
    # are not written (nor their parents)
    write_areas: tuple[str, ...] = ()

    def close(self) -> None:
        """Close the ruleset's file descriptor (the child got its own copy at fork)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def confiner(self, *, in_child: bool, drop_caps: bool = True) -> Callable[[], None]:
        """A function that confines the calling thread and what it starts from then on.

        ``in_child=True``: for a ``preexec_fn`` (between fork and exec), with ``PR_SET_PDEATHSIG``;
        ``in_child=False``: for a short-lived thread of the runtime that then starts the command
        (see :mod:`.spawnthread`): every call below acts on the calling thread only.  Everything
        is resolved here, before the call.  ``drop_caps=False``: a root runtime's capabilities stay (what is
        started is bubblewrap, which drops them itself).
        """
        libc = _libc()
        prctl, syscall, capset = libc.prctl, libc.syscall, libc.capset
        fd, parent = self.fd, os.getpid()
        last_cap = _last_cap()
        header = _CapHeader(_CAP_VERSION_3, 0)
        data = (_CapData * 2)()
        seccomp, sigkill = self.seccomp, int(signal.SIGKILL)

        def confine() -> None:  # between fork and exec: no allocation-heavy work, no locks
            if in_child:
                prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
                if os.getppid() != parent:  # the runtime died before the line above
                    os._exit(1)
            if drop_caps and (os.geteuid() == 0 or os.getuid() == 0):
                for cap in range(last_cap + 1):
                    prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
                prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
                if capset(ctypes.byref(header), data) != 0:
                    raise OSError(ctypes.get_errno(), "capset")
            if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
            if seccomp is not None:
                seccomp()
            if syscall(_RESTRICT_SELF, fd, 0) != 0:
                raise OSError(ctypes.get_errno(), "landlock_restrict_self")

        return confine


def scope_ruleset() -> Ruleset | None:
    """A ruleset that scopes abstract UNIX sockets and nothing else (ABI ≥ 6; ``None`` before, or when it cannot be
    made): for bubblewrap with the network on, whose command shares the host's network namespace, and so its
    abstract sockets (an X server's, containerd's shims'), which this domain cannot reach; its own it can."""
    abi = abi_version()
    if abi < 6:
        return None
    attr = _RulesetAttr(0, 0, _SCOPE_ABSTRACT_UNIX)
    try:
        return Ruleset(_syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(_RulesetAttr), 0), abi)
    except OSError:
        return None


@cache
def _last_cap() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 63


def _add_path(fd: int, path: str, access: int, handled: int) -> None:
    try:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # vanished since it was listed: nothing to grant
    try:
        is_dir = stat.S_ISDIR(os.fstat(pfd).st_mode)
        allowed = access & handled & (~0 if is_dir else _FILE_RIGHTS)
        if allowed:
            attr = _PathBeneath(allowed, pfd)
            _syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(attr), 0)
    finally:
        os.close(pfd)


def build_ruleset(*, root: Path, writable: bool, readonly: Sequence[Path], hidden: Iterable[Path],
                  temp_dir: Path, network: bool, extra_read: Iterable[Path] = (), home: Path | None = None,
                  home_read: Iterable[Path] = ()) -> Ruleset:
    """Build the ruleset for one command (see the module docstring for what it grants).

    ``root`` is the workspace, ``readonly`` the paths in it the shell may not write, ``hidden``
    the paths no process may read, ``temp_dir`` the command's private writable temp dir,
    ``extra_read`` paths to grant read on even under :data:`MASKED` (``resolv.conf``'s target); ``home`` a private
    home directory (nothing under it is granted but the workspace and ``home_read``, see :mod:`.home`).
    Raises :class:`OSError` when Landlock is not available.
    """
    abi = abi_version()
    if abi < 1:
        raise OSError(errno.EOPNOTSUPP, "Landlock is not available in this kernel")
    handled = _FS_BY_ABI.get(abi, (1 << 16) - 1)
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 and not network else 0
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, net, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16
    fd = _syscall(_CREATE_RULESET, ctypes.byref(attr), size, 0)
    try:
        grants: dict[str, int] = {}
        hidden_set = frozenset(str(h) for h in hidden)
        masked = frozenset(m for m in MASKED if os.path.isdir(m) and not os.path.islink(m))
        ws = str(root)
        private = frozenset((str(home),)) if home is not None else frozenset()
        _expand("/", READ, hidden_set | masked | private, grants)
        _expand(ws, READ, hidden_set, grants)  # the workspace may itself live under /tmp (or home)
        for p in (*extra_read, *(Path(os.path.realpath(r)) for r in home_read if home is not None)):
            _expand(str(p), READ, hidden_set, grants)
        no_write = hidden_set | frozenset(str(p) for p in readonly)
        if writable:  # never the root itself: new top-level names could be protected ones
            for child in _children(ws):
                _expand(child, WRITE, no_write, grants)
        grants[ws] = grants.get(ws, 0) | READ_DIR  # list all of the workspace, the store's names included
        for dev in _DEVICES:
            grants[dev] = grants.get(dev, 0) | WRITE_FILE | TRUNCATE | READ_FILE | IOCTL_DEV
        for dev in _READ_DEVICES:
            grants[dev] = grants.get(dev, 0) | READ_FILE | IOCTL_DEV
        tmp = str(temp_dir)
        grants[tmp] = grants.get(tmp, 0) | READ | READ_DIR | WRITE
        for path, access in grants.items():
            _add_path(fd, path, access, handled)
    except BaseException:
        os.close(fd)
        raise
    inside = sorted(p for p in no_write if p.startswith(ws.rstrip("/") + "/")) if writable else ()
    return Ruleset(fd, abi, write_areas=(os.path.realpath(tmp), ws if writable else "", *inside))
