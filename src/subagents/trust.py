"""Trusted projects: which project settings may widen what agents can do.

A project's ``.subagents/config.toml``, its ``.mcp.json`` and its agent definitions come with the
project, which may be a repository cloned a minute ago, or a subdirectory an agent wrote them into.  From a
project that is not trusted, the settings that would widen what agents may do, where data goes or what runs
outside the sandbox are **ignored**, each named in a warning: the rest (limits, ``deny``/``ask`` rules,
``protect``, ``deny_read``, a narrower permission mode...) still apply.  Which keys need trust, and when,
is the ``trust`` column of :data:`subagents.config_keys.KEYS` (see :data:`WHEN`); also every project
``[[hooks.*]]``, every project ``[mcp.servers.*]`` and ``.mcp.json`` server, a ``[pricing]`` table that
reprices a model already priced (:func:`shadows_price`), and of the project's agent definitions their inline
MCP servers and a ``model:`` with ``@<base_url>`` (:func:`subagents.definitions.load_definitions`).

A project is trusted when its directory is listed in ``trusted-projects`` in the user's config directory
(one absolute path per line, ``#`` starting a comment line; ``subagents trust`` adds the current one) or when
the code says so (``Runtime(trust_project=True)``).  Trust is per directory, not per tree: a subdirectory with
settings of its own is a project of its own.  The user's own config file needs no trust.

>>> from pathlib import Path
>>> needs_trust("sandbox.mode", "off"), needs_trust("sandbox.mode", "bwrap")
(True, False)
>>> needs_trust("permissions.mode", "yolo"), needs_trust("permissions.mode", "plan")
(True, False)
>>> needs_trust("agents.max_threads", 64)
False
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .authority.names import canonical_mode
from .config_keys import KEYS
from .exceptions import ConfigError

__all__ = ["SETTINGS_ENTRIES", "TRUST_FILE", "WHEN", "add_trusted", "is_trusted", "mcp_json_ignored", "needs_trust",
           "projects_within", "remove_trusted", "shadows_price", "trusted_projects", "trusted_within", "untrusted_note"]

TRUST_FILE = "trusted-projects"
"""The file in the user's config directory that lists the trusted project directories."""


def _wider_mode(value: Any) -> bool:
    try:
        return canonical_mode(str(value)) in ("autoEdit", "yolo")
    except ValueError:
        return False  # not a mode at all: the loader's error says so


WHEN: dict[str, Callable[[Any], bool]] = {
    "always": lambda v: v is not None,
    "true": lambda v: v is True,
    "non-empty": lambda v: bool(v),
    "off": lambda v: v in ("off", "landlock"),  # and the fallback, weaker than bubblewrap (docs/security.md)
    "wider mode": _wider_mode,
    "base URL": lambda v: isinstance(v, str) and "@" in v,
}
"""A key's ``trust`` condition (:attr:`subagents.config_keys.Key.trust`) -> whether a project value needs trust."""

_TRUST = {k.dotted: WHEN[k.trust] for k in KEYS if k.trust is not None}


def needs_trust(dotted: str, value: Any) -> bool:
    """Whether a project file's ``value`` for ``dotted`` (``sandbox.mode``, ``providers.openai.base_url``) is
    applied only in a trusted project."""
    if dotted.startswith("providers."):
        dotted = "providers.*." + dotted.rsplit(".", 1)[1]
    test = _TRUST.get(dotted)
    return test is not None and test(value)


def _file(config_dir: Path) -> Path:
    return config_dir / TRUST_FILE


_MAX_BYTES = 1 << 20
"""A trust file larger than this is refused (it lists directories, one a line)."""


def _read(path: Path) -> str | None:
    """The trust file's text; ``None`` when there is none.  A FIFO, a directory or a huge file is a
    :class:`ConfigError` (never a read that blocks)."""
    fix = "fix it or remove it (it lists trusted project directories, one absolute path per line)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e}); {fix}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, a directory, a device
        os.close(fd)
        raise ConfigError(f"{path}: is not a regular file, so the trusted projects cannot be read; {fix}")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(_MAX_BYTES + 1)
        except OSError as e:
            raise ConfigError(f"{path}: cannot be read ({e}); {fix}") from None
    if len(data) > _MAX_BYTES:
        raise ConfigError(f"{path}: is larger than {_MAX_BYTES} bytes; {fix}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: cannot be read ({e}); {fix}") from None


def _entry(line: str) -> Path | None:
    """The directory a line lists: ``None`` for a blank line, a comment (``#`` first) or a relative path (it
    would name a different directory in every directory a run starts in)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    p = Path(os.path.expanduser(text))
    return p if p.is_absolute() else None


def trusted_projects(config_dir: Path) -> list[Path]:
    """The directories listed in ``config_dir``'s trust file: one absolute path per line (``~`` expanded); a line
    starting with ``#`` is a comment, blank lines and relative paths are skipped."""
    text = _read(_file(config_dir))
    return [p for p in map(_entry, (text or "").splitlines()) if p is not None]


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def is_trusted(workdir: Path, config_dir: Path) -> bool:
    """Whether ``workdir`` is one of the trusted directories (the same directory, not one below it)."""
    return any(_same(workdir, p) for p in trusted_projects(config_dir))


@contextmanager
def _locked(config_dir: Path) -> Iterator[Path]:
    """The trust file, locked against another ``subagents trust`` changing it meanwhile (whose entry the
    read-modify-write of this one would otherwise drop)."""
    import fcntl  # (POSIX; imported here, only by `subagents trust`)

    try:
        config_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(config_dir / f".{TRUST_FILE}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as e:
        raise ConfigError(f"{config_dir}: cannot keep the list of trusted projects there ({e}); make it a directory "
                          "you can write") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield _file(config_dir)
    finally:
        os.close(fd)  # (closing releases the lock)


def add_trusted(workdir: Path, config_dir: Path) -> bool:
    """List ``workdir`` (resolved) as trusted; ``False`` when it already was.  A path the one-per-line file
    cannot hold as it is (a line break, or blanks at its ends) is a :class:`ConfigError`."""
    resolved = str(workdir.resolve())
    if "\n" in resolved or "\r" in resolved or resolved != resolved.strip():
        raise ConfigError(f"{resolved!r}: a directory whose path has a line break or starts or ends with blanks "
                          "cannot be listed as trusted; rename it")
    with _locked(config_dir) as path:
        if is_trusted(workdir, config_dir):
            return False
        old = _read(path)
        if old is None:
            old = "# Projects whose settings may widen what agents can do (subagents trust); one directory a line.\n"
        if old and not old.endswith("\n"):
            old += "\n"
        _write(path, old + f"{resolved}\n")
    return True


def remove_trusted(workdir: Path, config_dir: Path) -> bool:
    """Stop trusting ``workdir``; ``False`` when it was not listed."""
    with _locked(config_dir) as path:
        lines = (_read(path) or "").splitlines(keepends=True)
        kept = [ln for ln in lines if not ((p := _entry(ln)) is not None and _same(p, workdir))]
        if len(kept) == len(lines):
            return False
        _write(path, "".join(kept))
    return True


def _write(path: Path, text: str) -> None:
    path = path.resolve()  # a trust file that is a symlink (kept with one's dotfiles) stays one
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a full disk, a directory where the file belongs: nothing half-written is left
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot be written ({e}); fix its directory or remove it") from None


def shadows_price(name: str, known: Iterable[str]) -> bool:
    """Whether a project's ``[pricing."<name>"]`` would be used instead of a price already known: the built-in
    one of a model, or one the user configured (a name matches by prefix, so ``""`` and ``"claude"`` reprice
    every model they start).  Only a trusted project may do that: a price of zero defeats ``max_cost_usd``."""
    from .models.pricing import PRICES

    return any(name.startswith(k) or k.startswith(name) for k in (*PRICES, *known))


def mcp_json_ignored(path: Path) -> dict[str, str]:
    """The servers of an untrusted project's ``.mcp.json``, as :attr:`~subagents.config.Settings.ignored` lists
    them (not started; a file that cannot be read is named whole)."""
    if not path.is_file():
        return {}
    try:
        servers = json.loads(path.read_text(encoding="utf-8")).get("mcpServers", {})
        names = [n for n, c in servers.items() if not (isinstance(c, dict) and c.get("disabled") is True)]
    except (OSError, ValueError, AttributeError, RecursionError):
        return {"the MCP servers of .mcp.json": str(path)}
    return {f"MCP server {n!r}": str(path) for n in names}


def untrusted_note(project: Path, ignored: Mapping[str, str]) -> str:
    """The warning for settings an untrusted project asked for: what was ignored and how to apply it."""
    by_file: dict[str, list[str]] = {}
    for what, where in ignored.items():
        by_file.setdefault(where, []).append(what)
    shown = "; ".join(f"from {where}: {', '.join(whats)}" for where, whats in by_file.items())
    return (f"the project {project} is not trusted, so these of its settings were ignored ({shown}). "
            "If you have read them and trust this project, run `subagents trust` in it (or pass "
            "trust_project=True) to apply them")


SETTINGS_ENTRIES: tuple[str, ...] = (".subagents", ".claude", ".qwen", ".mcp.json")
"""The entries of a project directory its settings come from: ``.subagents/`` (``config.toml`` with its hooks and
MCP servers, agent definitions, skills), ``.claude/`` and ``.qwen/`` (agent definitions, skills), ``.mcp.json``."""


def _real(path: str, parents: dict[str, str]) -> str:
    """``path`` with its symlinks resolved as the kernel does (as ``os.path.realpath``, but one ``open`` on Linux,
    where ``realpath`` costs a system call per component); a path that does not exist is its parent's (resolved
    once in ``parents``) joined with its name."""
    o_path = getattr(os, "O_PATH", 0)
    if not o_path:
        return os.path.realpath(path)
    try:
        fd = os.open(path, o_path | os.O_CLOEXEC)
    except OSError:
        parent, name = os.path.split(path)
        if parent == path or not name:
            return os.path.realpath(path)
        real = parents.get(parent)
        if real is None:
            real = parents[parent] = _real(parent, parents)
        return os.path.normpath(os.path.join(real, name))
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc
        return os.path.realpath(path)
    finally:
        os.close(fd)


def projects_within(root: Path, entries: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The directories of ``entries`` (trusted ones) that lie below ``root`` (a resolved path), each as written
    (normalized) and as it resolves now: :func:`is_trusted` follows symlinks, so both name it."""
    base = str(root)
    prefix = base if base.endswith("/") else base + "/"
    out: dict[str, None] = {}
    parents: dict[str, str] = {}
    for entry in entries:
        raw = os.path.normpath(os.fspath(entry))  # (as the kernel reads it but for ``..`` after a symlink:)
        for p in (raw, _real(os.fspath(entry), parents)):
            if p.startswith(prefix):
                out[p] = None
    return [Path(p) for p in out]


def trusted_within(root: Path, config_dir: Path) -> list[Path]:
    """:func:`projects_within` of the trusted directories listed in ``config_dir`` (none when the list cannot be
    read: then no directory is trusted by it either)."""
    try:
        text = _read(_file(config_dir)) or ""
    except ConfigError:
        return []
    lines = (os.path.expanduser(t) for ln in text.splitlines() if (t := ln.strip()) and not t.startswith("#"))
    return projects_within(root, [p for p in lines if os.path.isabs(p)])  # (as trusted_projects, without pathlib)
