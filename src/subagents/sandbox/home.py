"""The shell's view of the user's home directory: none of it but what commands need to work.

A home directory holds far more secrets than the credential paths a list can name: ``~/.config/gh``'s
token, shell histories with ``export OPENAI_API_KEY=...``, other projects' ``.env`` files and run stores,
password stores, browser profiles.  So the shell sandbox hides all of ``$HOME`` (``[sandbox] private_home``,
on by default; bubblewrap mounts an empty tmpfs there, Landlock grants nothing under it) and lets a command
read back only :func:`home_reads`:

- the workspace, when it lies under home (it is bound writable as before);
- the toolchains on ``PATH``: each ``PATH`` directory under home, widened to the first directory below home
  when that is a dot directory (``~/.pyenv`` for ``~/.pyenv/shims``: pyenv's shims run its versions;
  ``~/.nvm``, ``~/.cargo``...), or to the installation a ``bin`` directory is in (``~/miniconda3`` for
  ``~/miniconda3/bin``: its programs need its ``lib``; ``~/bin`` stays ``~/bin``, and Go's ``~/go/bin`` too: ``~/go``
  is a workspace of other projects' sources, its module cache is a :data:`CACHES` entry), except in the shared data
  directories :data:`DATA_DIRS` (``~/.local/bin`` stays ``~/.local/bin``; in ``~/.local/share``, the tool's own
  directory: ``~/.local/share/mise`` for ``~/.local/share/mise/shims``); with their companions
  (:data:`COMPANIONS`: rustup's toolchains beside ``~/.cargo``, user-installed Python packages beside
  ``~/.local/bin``);
- git's ignore and attributes files (:data:`GIT_CONFIG`); its configuration is not read back but given, with the
  identity and plain preferences only (:mod:`.gitident`: ``~/.gitconfig`` is where tokens end up);
- package caches an offline build reads (:data:`CACHES`: ``~/go/pkg/mod``, ``~/.m2/repository``, ``~/.cache/pip``...);
- what the user lists in ``[sandbox] home_read`` (user config file only: a cloned project cannot open home).

The credential paths and ``deny_read`` stay hidden inside all of these, and the tokens a toolchain keeps in itself
(:data:`TOOL_SECRETS`: npm's global ``etc/npmrc``, ``~/.gem/credentials``...).  When the workspace is home itself,
or contains it, nothing is hidden this way (the workspace is the project the agent works on).

>>> from pathlib import Path
>>> home = Path("/home/u")
>>> [str(p) for p in toolchain_dirs(home, "/home/u/.pyenv/shims:/usr/bin:/home/u/bin:/home/u/miniconda3/bin")]
['/home/u/.pyenv', '/home/u/bin', '/home/u/miniconda3']
>>> [str(p) for p in toolchain_dirs(Path("/var/home/u"), "/home/u/.nvm/v20/bin", aliases=[home])]
['/var/home/u/.nvm']
>>> [str(p) for p in home_reads(home, "/home/u/.cargo/bin", ["~/.m2", "/etc/x", "~/../other"])][:4]
['/home/u/.cargo', '/home/u/.rustup', '/home/u/.config/git/ignore', '/home/u/.config/git/attributes']
>>> [str(p) for p in home_reads(home, "", ["~/.m2", "/etc/x", "~/../other"])][-1]
'/home/u/.m2'
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CACHES", "COMPANIONS", "DATA_DIRS", "GIT_CONFIG", "TOOL_SECRETS", "TOOL_SECRETS_IN", "home_reads",
           "private_home", "reachable", "toolchain_dirs", "toolchain_secrets"]

DATA_DIRS = frozenset({".local", ".config", ".cache", ".var"})
"""Dot directories of home that many programs share (keyrings, browser profiles, caches): a ``PATH`` entry in
one of them is read back alone, never the whole directory."""

COMPANIONS: dict[str, tuple[str, ...]] = {
    ".cargo": (".rustup",),
    ".local/bin": (".local/lib", ".local/share/uv", ".local/share/pipx", ".local/pipx"),
}
"""What a toolchain directory needs beside it (relative to home): rustup's proxies in ``~/.cargo/bin`` run the
toolchains in ``~/.rustup``; ``pip install --user`` puts scripts in ``~/.local/bin`` and their packages in
``~/.local/lib``, ``uv tool install`` and ``pipx`` links in ``~/.local/bin`` to the tools' environments (and uv's
Pythons) in ``~/.local/share/uv`` and ``~/.local/share/pipx`` (older pipx: ``~/.local/pipx``)."""

CACHES: tuple[str, ...] = (
    ".local/lib", "go/pkg/mod", ".cache/go-build", ".m2/repository", ".gradle/caches", ".gradle/wrapper",
    ".npm/_cacache", ".cache/pip", ".cache/uv", ".cache/pypoetry", ".cargo/registry", ".cargo/git", ".rustup",
    ".cache/yarn", ".yarn/berry/cache", ".local/share/pnpm/store", ".nuget/packages",
)
"""Package caches and libraries builds read (relative to home; read back when they exist): with the network off,
an offline build needs what is already downloaded.  Only the package directories, never the tools' settings beside
them (``~/.m2/settings.xml``, ``~/.gradle/gradle.properties``, ``~/.npmrc`` can hold passwords)."""

TOOL_SECRETS: tuple[str, ...] = (
    "etc/npmrc", "versions/node/*/etc/npmrc", "installs/nodejs/*/etc/npmrc", "installs/node/*/etc/npmrc",
    "node-versions/*/installation/etc/npmrc", "tools/image/node/*/etc/npmrc", ".npmrc",
    ".condarc", "condarc", "condarc.d", ".condarc.d", "pip.conf", "versions/*/pip.conf", "envs/*/pip.conf",
    "installs/python/*/pip.conf", "credentials", "credentials.toml", "credentials.json", "auth.json",
)
"""Where a toolchain directory read back whole keeps its tokens (globs relative to it), hidden inside it: npm's
global configuration (``$PREFIX/etc/npmrc``, where ``npm config set --global`` writes ``_authToken``: a prefix such
as ``~/.npm-global``, and each Node of nvm, asdf, mise, fnm, volta), conda's ``.condarc`` (channel tokens), pip's
site configuration (``$PREFIX/pip.conf``: an index URL with a password; pyenv's and conda's environments),
RubyGems' ``~/.gem/credentials``, Composer's ``~/.composer/auth.json``; and per directory
(:data:`TOOL_SECRETS_IN`) what is a secret in that toolchain only."""

TOOL_SECRETS_IN: dict[str, tuple[str, ...]] = {".cabal": ("config",)}
"""Secrets of one toolchain directory (by its name): cabal's ``config`` holds the Hackage upload password (a
``config`` elsewhere, as cargo's, is what builds read)."""

GIT_CONFIG: tuple[str, ...] = (".config/git/ignore", ".config/git/attributes")
"""git's user-wide ignore and attributes files, read back as they are.  Its configuration files (``~/.gitconfig``,
``~/.config/git/config``) are not: a command gets the identity and preferences in them (:mod:`.gitident`), never
the tokens and commands they can hold; its credential store stays hidden."""


def private_home(home: Path, root: Path, enabled: bool) -> Path | None:
    """The home directory to hide from the shell (``None``: nothing hidden this way).

    ``home`` and ``root`` (the workspace) are resolved paths.  Nothing is hidden when the setting is off, when home
    is ``/`` or not a directory, or when the workspace is home or contains it."""
    if not enabled or home == Path(home.anchor) or not home.is_dir():
        return None
    if root == home or root in home.parents:
        return None
    return home


def _below(p: Path, home: Path, aliases: Iterable[Path]) -> Path | None:
    """``p`` relative to ``home`` or to another spelling of it (``None``: not under home)."""
    for h in (home, *aliases):
        try:
            return p.relative_to(h)
        except ValueError:
            continue
    return None


def toolchain_dirs(home: Path, path_env: str, aliases: Iterable[Path] = ()) -> list[Path]:
    """The directories of home that the ``PATH`` entries ``path_env`` need (see the module docstring), spelled from
    ``home`` (resolved) also when an entry spells home another way, one of ``aliases`` (``/home/u`` where ``/home``
    links to ``/var/home``)."""
    out: dict[Path, None] = {}
    aliases = tuple(aliases)
    for entry in path_env.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue  # a relative entry names the command's own directory, not home
        rel = _below(Path(os.path.normpath(entry)), home, aliases)
        if rel is None:
            continue
        p = home / rel
        if not rel.parts:
            continue  # home itself on PATH: not a reason to show all of it
        top = rel.parts[0]
        if top.startswith(".") and top not in DATA_DIRS:
            picked = home / top  # ~/.pyenv for ~/.pyenv/shims
        elif p.name == "bin" and len(rel.parts) > 1 and top not in DATA_DIRS and rel.parts != ("go", "bin"):
            picked = p.parent  # an installation's prefix: ~/miniconda3 for ~/miniconda3/bin (its lib/ beside)
        elif rel.parts[:2] == (".local", "share") and len(rel.parts) > 3:
            picked = home.joinpath(*rel.parts[:3])  # a tool's own data: ~/.local/share/mise for its shims
        else:
            picked = p
        out[picked] = None
        for name in COMPANIONS.get(str(picked.relative_to(home)), ()):
            out[home / name] = None
    return list(out)


def toolchain_secrets(dirs: Iterable[Path]) -> list[Path]:
    """The :data:`TOOL_SECRETS` that exist in ``dirs`` (the toolchain directories read back: a few ``listdir``).

    >>> toolchain_secrets([Path("/nonexistent/h/.nvm")])
    []
    """
    return [d / hit for d in dirs for pattern in (*TOOL_SECRETS, *TOOL_SECRETS_IN.get(d.name, ()))
            for hit in glob.glob(pattern, root_dir=d, include_hidden=True)]


def home_reads(home: Path, path_env: str, extra: Iterable[str], aliases: Iterable[Path] = ()) -> tuple[Path, ...]:
    """What a command may read under a private ``home``: the toolchains on ``path_env``, git's ignore files, and
    ``extra`` (``[sandbox] home_read``: ``~/...``, absolute, or relative to home) — the ones under home."""
    aliases = tuple(aliases)
    picked = [*toolchain_dirs(home, path_env, aliases), *(home / g for g in (*GIT_CONFIG, *CACHES))]
    for raw in extra:
        if raw.startswith("~") and raw != "~" and not raw.startswith("~/"):
            continue  # another user's home (``~bob/...``): not this one's to open
        rel = _below(Path(os.path.normpath(str(home) + raw[1:] if raw.startswith("~") else home / raw)), home,
                     aliases)
        if rel is not None and rel.parts:
            picked.append(home / rel)
    return tuple(dict.fromkeys(picked))


def reachable(hidden: Iterable[Path], reads: Iterable[Path]) -> list[Path]:
    """Each hidden path as a command can reach it: where it really is (a directory on the way may be a link:
    ``~/.config -> ~/dotfiles/config``), and, inside each directory read back from a private home (bound there by
    its home name, ``~/.cargo``, while its content is where it leads, ``/data/.cargo``), by that name — a mask on one
    mount does not cover the other.  The links are resolved once per list of paths (commands cannot write in home,
    and under bubblewrap the directories above the workspace's hidden paths are pinned).

    >>> [str(p) for p in reachable([Path("/nonexistent/h/.cargo/credentials")], [Path("/nonexistent/h/.cargo")])]
    ['/nonexistent/h/.cargo/credentials']
    """
    return list(_reachable(tuple(hidden), tuple(reads)))


@functools.lru_cache(maxsize=16)
def _reachable(hidden: tuple[Path, ...], reads: tuple[Path, ...]) -> tuple[Path, ...]:
    # (resolved once per list: ~20 ``realpath`` calls cost ~0.35 ms, every command)
    bound = [(str(r), os.path.realpath(r)) for r in reads]
    out: dict[str, None] = {}
    for h in hidden:
        real = os.path.realpath(h)
        out[real] = None
        for name, target in bound:
            if real.startswith(target + "/"):
                out[name + real[len(target):]] = None
    return tuple(Path(p) for p in out)
