"""``Workspace``: the directory an agent may touch, and the paths inside and outside it that it may not.

One object answers "what may this agent touch" for every tool: the file tools resolve and check
paths through it, the shell sandbox turns its lists into read-only and hidden mounts.

- ``protected``: paths no agent tool may write or delete (``.subagents``, ``.git``, ``.claude``,
  ``.qwen``, ``.mcp.json``, the same settings entries of each trusted project below the root (see
  :meth:`Workspace._trusted_settings`), plus ``[sandbox] protect``, minus ``unprotect`` from the user's
  own config);
- ``hidden``: paths no agent tool may read (the run store's files, credential locations in
  ``$HOME``, the user config dir of ``subagents``, plus ``[sandbox] deny_read``);
- ``shell_readonly``: what the shell sandbox binds read-only inside the writable workspace (the
  protected paths; with ``allow_git`` the shell may write ``.git`` except its hooks, config and
  ``modules``).

>>> import tempfile
>>> ws = Workspace(tempfile.mkdtemp())
>>> ws.is_protected(ws.root / ".subagents" / "config.toml"), ws.is_protected(ws.root / "src" / "a.py")
(True, False)
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..exceptions import ToolError
from ..trust import SETTINGS_ENTRIES, projects_within, trusted_within
from . import access
from .home import home_reads, private_home, toolchain_dirs, toolchain_secrets
from .policy import CREDENTIAL_PATHS, DEFAULT_HIDDEN, DEFAULT_PROTECTED, SandboxPolicy

__all__ = ["Workspace"]


_PREFIXES: dict[int, tuple[tuple[Path, ...], frozenset[str], tuple[str, ...]]] = {}



def _with_real(paths: Iterable[Path]) -> tuple[Path, ...]:
    """``paths``, each followed by where it really is when a directory on the way is a link (``~/.config ->
    ~/dotfiles/config``): a file there is reached, and must be refused, by either name."""
    out: dict[Path, None] = {}
    for p in paths:
        out[p] = None
        real = Path(os.path.realpath(p))
        if real != p:
            out[real] = None
    return tuple(out)

def _prefixes(roots: tuple[Path, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The roots as strings, and as directory prefixes (``/a/b/``), for :func:`_under`.

    Cached per tuple object (a workspace's lists are tuples that are replaced, never changed).
    """
    hit = _PREFIXES.get(id(roots))
    if hit is None or hit[0] is not roots:
        names = [str(r) for r in roots]
        if len(_PREFIXES) > 512:
            _PREFIXES.clear()
        hit = _PREFIXES[id(roots)] = (roots, frozenset(names), tuple(n if n.endswith("/") else n + "/" for n in names))
    return hit[1], hit[2]


def _under(p: Path | str, roots: tuple[Path, ...]) -> Path | None:
    """The first of ``roots`` that is ``p`` or one of its ancestors (paths are absolute and normalized)."""
    s = str(p)
    exact, dirs = _prefixes(roots)
    if s not in exact and not s.startswith(dirs):  # the common case: one C-level test for all of them
        return None
    for r, d in zip(roots, dirs, strict=True):
        if s == str(r) or s.startswith(d):
            return r
    return None  # pragma: no cover - exact/dirs said one matches


class Workspace:
    """The directory an agent may touch.  ``resolve`` refuses anything that lands outside it.

    Relative paths are taken from the root; absolute paths are accepted only when they lie inside
    it.  Symlinks are resolved (for a path that does not exist yet, through its nearest existing
    parent), so a link that points outside is refused too.

    The file tools do not use :meth:`resolve` (a resolved path can change before it is opened): they
    call :meth:`open_file`, :meth:`open_dir`, :meth:`lookup`, :meth:`walk` and :meth:`write_atomic`,
    which resolve and open in one step beneath a descriptor of the root (opened on first use, closed
    by :meth:`close`) and check what was actually opened (see :mod:`.access`).
    """

    __slots__ = ("_fd", "_lock", "_root_id", "hidden", "home", "home_reads", "policy", "private_home", "protected",
                 "root", "shell_readonly", "trusted_links", "trusted_settings")

    def __init__(self, root: str | os.PathLike[str], policy: SandboxPolicy | None = None, *,
                 store_files: Iterable[str | os.PathLike[str]] = (), home: str | os.PathLike[str] | None = None,
                 trusted: Iterable[str | os.PathLike[str]] | None = None) -> None:
        self._fd: int | None = None
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(f"workspace root {self.root} is not a directory")
        st = os.stat(self.root)
        self._root_id = (st.st_dev, st.st_ino)
        self._lock = threading.Lock()
        self.policy = policy or SandboxPolicy()
        self.home = Path(home if home is not None else os.path.expanduser("~")).resolve()
        unprotect = {self._absolute(p) for p in self.policy.unprotect}
        protected = [self._absolute(p) for p in (*DEFAULT_PROTECTED, *self.policy.protect)]
        dirs = trusted_within(self.root, self._user_config_dir()) if trusted is None else projects_within(
            self.root, trusted)  # (the trusted list is read once, here: bash calls use what it left below the root)
        settings, links = self._trusted_settings(dirs)
        self.trusted_settings: tuple[Path, ...] = tuple(dict.fromkeys(settings))
        self.trusted_links: tuple[Path, ...] = tuple(dict.fromkeys(links))
        protected += self.trusted_settings
        protected = [p for p in protected if p not in unprotect]
        protected += self._link_targets(protected)
        self.protected: tuple[Path, ...] = tuple(dict.fromkeys(protected))
        git = self.root / ".git"
        if self.policy.allow_git and git in self.protected:
            # what can make git run code or reach elsewhere stays read-only: hooks, configs, submodules' gitdirs
            shell = [p for p in self.protected if p != git] + [git / "hooks", git / "config", git / "modules"]
            shell += [p for p in (git / "config.worktree",) if p.exists()]
        else:
            shell = list(self.protected)
        self.shell_readonly: tuple[Path, ...] = tuple(shell)
        hidden = [self._absolute(p) for p in (*DEFAULT_HIDDEN, *CREDENTIAL_PATHS, *self.policy.deny_read)]
        hidden.append(self._user_config_dir())
        self.hidden: tuple[Path, ...] = _with_real(hidden)
        self.add_hidden(store_files)
        # the shell sees none of home but what commands need (sandbox/home.py); the file tools never leave the root
        self.private_home = private_home(self.home, self.root, self.policy.private_home)
        spelled = Path(os.path.abspath(home if home is not None else os.path.expanduser("~")))  # (/home -> /var/home)
        self.home_reads: tuple[Path, ...] = ()
        if self.private_home is not None:
            path_env = os.environ.get("PATH", "")
            self.home_reads = home_reads(self.home, path_env, self.policy.home_read, aliases=(spelled,))
            # tokens a toolchain read back whole keeps inside it (npm's global npmrc, .condarc, ~/.gem/credentials)
            self.hidden = _with_real((*self.hidden, *toolchain_secrets(toolchain_dirs(self.home, path_env,
                                                                                      (spelled,)))))

    def _trusted_settings(self, dirs: Iterable[Path]) -> tuple[list[Path], list[Path]]:
        """``(settings, links)`` of the trusted projects ``dirs`` below the root.  ``settings``: their
        :data:`~subagents.trust.SETTINGS_ENTRIES`; where the way to one is missing (or a file), its first missing
        component, whole: an agent that made it a directory with settings in it, or a link to a directory of its
        own, would get them applied as trusted by the next run there.  ``links``: the symlinks on the way to one
        (a list written by hand): the way on is left to the path it resolves to (``dirs`` has both), and the shell
        runner puts a link a command replaced back (a read-only bind would land on its target, not the link)."""
        settings: list[Path] = []
        links: list[Path] = []
        for d in dirs:
            cur = self.root
            for name in d.relative_to(self.root).parts:
                cur = cur / name
                if cur.is_symlink():
                    links.append(cur)
                    break
                if not cur.is_dir():
                    settings.append(cur)
                    break
            else:
                settings += [cur / name for name in SETTINGS_ENTRIES]
        return settings, links

    def _link_targets(self, paths: Iterable[Path]) -> list[Path]:
        """Where the protected paths that are symlinks lead inside the workspace (``.mcp.json`` kept as a link to
        a shared file): the shell's sandboxes check what a write reaches, not the name it went through."""
        out = []
        for p in paths:
            if os.path.islink(p) and (real := Path(os.path.realpath(p))) != self.root and self.root in real.parents:
                out.append(real)
        return out

    def _user_config_dir(self) -> Path:
        base = os.environ.get("XDG_CONFIG_HOME") or str(self.home / ".config")
        return Path(base).resolve() / "subagents"

    def _absolute(self, p: str | os.PathLike[str]) -> Path:
        raw = os.fspath(p)
        if raw.startswith("~"):
            raw = str(self.home) + raw[1:]
        path = Path(raw)
        return Path(os.path.normpath(path if path.is_absolute() else self.root / path))

    def add_hidden(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Hide more files (the runtime adds the SQLite store it opened, with its -wal/-shm/-journal)."""
        extra: list[Path] = []
        for p in paths:
            a = self._absolute(p)
            extra += [a, a.with_name(a.name + "-wal"), a.with_name(a.name + "-shm"), a.with_name(a.name + "-journal")]
        if extra:
            self.hidden = _with_real((*self.hidden, *extra))

    # -- questions --------------------------------------------------------------------------------
    def is_protected(self, real: Path | str) -> bool:
        """Whether ``real`` (an absolute, resolved path) is or lies under a protected path."""
        return _under(real, self.protected) is not None

    def is_hidden(self, real: Path | str) -> bool:
        """Whether ``real`` is or lies under a hidden path (the store, credentials, ``deny_read``)."""
        return _under(real, self.hidden) is not None

    def check_write(self, real: Path | str, raw: str) -> None:
        """Raise :class:`ToolError` if an agent may not write or delete ``real``."""
        hit = _under(real, self.protected)
        if hit is not None and hit in self.trusted_settings:
            what = ("holds (or could hold) the settings of a trusted project" if hit.name in SETTINGS_ENTRIES else
                    "is on the way to a trusted project directory that does not exist (settings put there would be "
                    "trusted)")
            raise ToolError(
                f"{raw!r} is inside {self.relative(hit)}, which {what}: the next run there would apply them, so no "
                "agent tool may write or delete it, in any permission mode. Write somewhere else, or ask the user.")
        if hit is not None:
            raise ToolError(
                f"{raw!r} is inside {self.relative(hit)}, which holds the runtime's own state or version "
                "control and is protected: no agent tool may write or delete it, in any permission mode. "
                "Write somewhere else in the workspace.")
        self.check_read(real, raw)

    def check_read(self, real: Path | str, raw: str) -> None:
        """Raise :class:`ToolError` if an agent may not read ``real``."""
        hit = _under(real, self.hidden)
        if hit is not None:
            raise ToolError(
                f"{raw!r} is hidden from agents ({self.relative(hit)} holds the run store or credentials, or "
                "is listed in [sandbox] deny_read); it cannot be read or written by any tool.")

    # -- race-free access (the file tools) --------------------------------------------------------
    def anchor(self) -> int:
        """The root's directory descriptor (opened on first use, kept until :meth:`close`)."""
        fd = self._fd
        if fd is None:
            with self._lock:
                if self._fd is None:
                    self._fd = access.open_root(self.root, self._root_id)
                fd = self._fd
        return fd

    def close(self) -> None:
        """Close the root's descriptor (it is opened again if the workspace is used again)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            with contextlib.suppress(Exception):  # nothing to do about it in a finalizer (e.g. at exit)
                os.close(fd)

    @property
    def root_device(self) -> int:
        """``st_dev`` of the root directory."""
        return self._root_id[0]

    def lookup(self, raw: str) -> access.Opened:
        """Open what ``raw`` names (``O_PATH``), refusing paths that lead outside or to hidden files."""
        return access.lookup(self, raw)

    def open_file(self, raw: str) -> tuple[int, str, os.stat_result]:
        """``(read-only descriptor, path for display, fstat)`` of the regular file ``raw`` names."""
        return access.open_file(self, raw)

    def open_dir(self, raw: str) -> tuple[int, str]:
        """``(read-only descriptor, path for display)`` of the directory ``raw`` names."""
        return access.open_dir(self, raw)

    def write_atomic(self, raw: str, data: bytes, *, expect: tuple[int, int] | None = None) -> tuple[str, bool]:
        """Replace or create the file ``raw`` with ``data`` atomically; ``(path for display, existed)``."""
        return access.write_atomic(self, raw, data, expect=expect)

    def walk(self, dirfd: int, display_path: str, *, skip: frozenset[str] = frozenset(),
             recurse: bool = True, links_out: bool = False) -> Iterator[tuple[str, str]]:
        """``(path, kind)`` for every entry under the open directory ``dirfd`` (see :func:`access.walk`)."""
        return access.walk(self, dirfd, display_path, skip=skip, recurse=recurse, links_out=links_out)

    # -- paths ----------------------------------------------------------------------------------
    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real, absolute path for ``path``; :class:`ToolError` if it escapes the root."""
        raw = os.fspath(path)
        if "\x00" in raw:
            raise ToolError(f"path {raw!r} contains a NUL byte")
        p = Path(raw)
        candidate = p if p.is_absolute() else self.root / p
        real = candidate.resolve(strict=False)
        if real != self.root and self.root not in real.parents:
            raise ToolError(
                f"path {raw!r} resolves to {real}, outside the workspace {self.root}; "
                "use a path inside the workspace"
            )
        return real

    def relative(self, p: Path) -> str:
        """``p`` relative to the root, for display."""
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            return str(p)
        return str(rel) or "."

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"
