"""git's user configuration as the shell sees it: the identity and plain preferences, never the whole file.

``~/.gitconfig`` is where tokens end up: ``[url "https://x-access-token:ghp_...@github.com/"] insteadOf``,
``[http] extraHeader = Authorization: Bearer ...``, a credential helper's command line, an ``[include]`` of a
secrets file.  So a private home (:mod:`.home`) never reads it back.  A command still gets what ``git commit``
needs: the runtime asks the host's git for the user's global settings (``git config --global --includes
--list``, ``~/.config/git/config`` and included files resolved), keeps only the keys in :data:`KEYS` (who you are
and how git behaves: ``user.name``, ``init.defaultBranch``, ``pull.rebase``...), and gives a command that as its
global configuration (:func:`identity_text`):

- bubblewrap: bound read-only at ``~/.gitconfig`` in the command's empty home;
- Landlock and Seatbelt: named by ``GIT_CONFIG_GLOBAL`` (a file the runtime keeps for the process; under
  Seatbelt a copy in the command's private temp dir).

A repository's own settings (``.git/config``) still come first, as they always do.  Everything else stays behind:
credentials, URL rewrites, HTTP headers, aliases and every key that names a command to run (``core.sshCommand``,
``core.pager``, ``core.fsmonitor``, filter and diff drivers).  ``[sandbox] home_read = ["~/.gitconfig"]`` in the
user's config reads the file back whole instead.

>>> render([("user.name", 'Ann "the dev"'), ("user.email", "ann@example.com"), ("pull.rebase", "true")])
'[user]\\n\\tname = "Ann \\\\"the dev\\\\""\\n\\temail = "ann@example.com"\\n[pull]\\n\\trebase = "true"\\n'
>>> kept(["user.name\\nAnn", "url.https://t0k@github.com/.insteadof\\nhttps://github.com/", "credential.helper\\nx"])
[('user.name', 'Ann')]
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["KEYS", "bound", "identity_text", "kept", "place", "render"]

KEYS = frozenset({
    "user.name", "user.email", "author.name", "author.email", "committer.name", "committer.email",
    "init.defaultbranch", "core.autocrlf", "core.eol", "core.safecrlf", "core.quotepath", "core.filemode",
    "core.ignorecase", "core.precomposeunicode", "core.whitespace", "core.abbrev", "core.commentchar",
    "pull.rebase", "pull.ff", "push.default", "push.autosetupremote", "fetch.prune", "rebase.autosquash",
    "rebase.autostash", "rebase.updaterefs", "merge.conflictstyle", "merge.ff", "diff.algorithm", "diff.colormoved",
    "diff.renames", "diff.mnemonicprefix", "color.ui", "column.ui", "branch.sort", "tag.sort", "log.date",
    "status.short", "status.branch", "status.showuntrackedfiles", "commit.verbose", "help.autocorrect",
    "rerere.enabled", "advice.detachedhead",
})
"""The global git settings a command sees (lower case, as ``git config --list`` spells them): the identity and
preferences that hold no secret and run nothing."""

_TIMEOUT_S = 5.0
_cache: dict[tuple[object, ...], tuple[str | None, tuple[str, ...], tuple[tuple[object, ...], ...]]] = {}


def kept(entries: Iterable[str]) -> list[tuple[str, str]]:
    """The ``key\\nvalue`` entries of ``git config --list -z`` whose key is in :data:`KEYS`, in order (a key given
    twice: its last value, as git reads it)."""
    out: dict[str, str] = {}
    for e in entries:
        key, sep, value = e.partition("\n")
        if sep and key.lower() in KEYS:
            out.pop(key.lower(), None)
            out[key.lower()] = value
    return list(out.items())


def render(entries: Iterable[tuple[str, str]]) -> str:
    """A gitconfig file holding ``entries`` (``section.key``, value), every value quoted so git reads it back
    exactly."""
    sections: dict[str, list[str]] = {}
    for key, value in entries:
        section, _, name = key.partition(".")
        quoted = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
                  .replace("\b", "\\b"))
        sections.setdefault(section, []).append(f'\t{name} = "{quoted}"\n')
    return "".join(f"[{s}]\n" + "".join(lines) for s, lines in sections.items())


def _stat(path: str) -> tuple[object, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return (path,)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


def _sources(root: Path, home: str, env: Mapping[str, str]) -> tuple[object, ...]:
    """Where git reads the global configuration from, each file with its size and time, and the workspace's
    ``.git/HEAD`` (an ``[includeIf "onbranch:..."]`` follows a switch of branch): the cache's key."""
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    named = env.get("GIT_CONFIG_GLOBAL")
    files = [named] if named else [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    files.append(os.path.join(root, ".git", "HEAD"))
    return (str(root), home, xdg, named, env.get("PATH"), *(_stat(f) for f in files))


def _read(root: Path, env: Mapping[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """Ask git, in the workspace (an ``[includeIf "gitdir:..."]`` picks the project's identity): (the gitconfig
    text, the files it came from)."""
    try:
        proc = subprocess.run(["git", "config", "--global", "--includes", "--show-origin", "--null", "--list"],
                              cwd=root, env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None, ()
    if proc.returncode != 0:
        return None, ()
    parts = proc.stdout.split(b"\0")
    origins: dict[str, None] = {}
    entries: list[str] = []
    for origin, entry in zip(parts[0::2], parts[1::2], strict=False):
        try:
            o, e = origin.decode(), entry.decode()
        except UnicodeDecodeError:
            continue  # (not UTF-8: left out rather than mangled)
        if o.startswith("file:"):
            origins[o[5:]] = None
        entries.append(e)
    found = kept(entries)
    return (render(found) if found else None), tuple(origins)


def identity_text(root: Path, home: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The gitconfig a command in ``root`` gets (see the module docstring), read from ``home``: ``None`` when the
    user has none of :data:`KEYS` set, git is not installed, or it cannot read the configuration.  Asked again
    once a file it was read from (included files too) changed."""
    env = os.environ if env is None else env
    key = _sources(root, str(home), env)
    hit = _cache.get(key)
    if hit is not None and tuple(_stat(f) for f in hit[1]) == hit[2]:
        return hit[0]
    text, origins = _read(root, {**env, "HOME": str(home)})
    if len(_cache) > 8:
        _cache.clear()
    _cache[key] = (text, origins, tuple(_stat(f) for f in origins))
    return text


def _applies(ws: Workspace) -> bool:
    """Home is private and the user did not read git's own configuration back whole (``home_read``)."""
    if ws.private_home is None:
        return False
    home = str(ws.private_home)
    files = (home + "/.gitconfig/", home + "/.config/git/config/")  # (strings: this runs before every command)
    return not any(f.startswith(str(r) + "/") and str(r) != home for r in ws.home_reads for f in files)


def place(ws: Workspace, temp_dir: Path, env: dict[str, str], *, copy: bool) -> None:
    """Landlock and Seatbelt: name the command's gitconfig in ``GIT_CONFIG_GLOBAL``: the file :func:`bound` made
    (Landlock grants reading it: :func:`granted`), or with ``copy`` (Seatbelt) a copy in the command's private
    ``temp_dir``; ``/dev/null`` when there is nothing to give."""
    if not _applies(ws):
        return
    made = bound(ws)
    if made is not None and copy:
        p = temp_dir / ".gitconfig"
        shutil.copyfile(made, p)
        made = str(p)
    env["GIT_CONFIG_GLOBAL"] = made or os.devnull  # (never the hidden files: git would fail reading them)


def granted(ws: Workspace) -> list[Path]:
    """Landlock: the file to grant reading for the ``GIT_CONFIG_GLOBAL`` :func:`place` names (none or one)."""
    made = bound(ws)
    return [] if made is None else [Path(made)]


_DIR: list[str] = []


def bound(ws: Workspace) -> str | None:
    """The file holding a command's gitconfig (``None``: nothing to give), one per content for the process's life:
    bubblewrap binds it read-only at ``~/.gitconfig``, Landlock grants reading it."""
    if not _applies(ws):
        return None
    assert ws.private_home is not None
    text = identity_text(ws.root, ws.private_home)
    if text is None:
        return None
    if not _DIR:
        _DIR.append(tempfile.mkdtemp(prefix="subagents-git-"))
        atexit.register(shutil.rmtree, _DIR[0], True)
    p = os.path.join(_DIR[0], hashlib.sha256(text.encode()).hexdigest()[:32] + ".gitconfig")
    if not os.path.exists(p):
        os.makedirs(_DIR[0], mode=0o700, exist_ok=True)  # (a cleaner of /tmp may have removed it meanwhile)
        tmp = p + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    return p
