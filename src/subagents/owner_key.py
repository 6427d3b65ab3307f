"""The user's owner key: which unfinished runs in a SQLite store this user's runtimes started.

A run store is a file, and a file can come from anyone: a repository that ships (force-adds) its
``.subagents/state.db`` brings "unfinished runs" whose owner's lease has long expired, and restart
recovery would resume them — their transcripts and system prompts, written by the repository's author,
on this user's model and API key.  So every owner id this user's runtimes write carries a tag only
this user can make: ``<host>:<pid>:<token>:<tag>``, the tag being the first 16 hex digits of
HMAC-SHA256(key, ``"<host>:<pid>:<token>"``) with a random 32-byte key kept in the user's config
directory (:data:`KEY_FILE`, mode 0600, made on first use).  Recovery takes over, unasked, only the
orphaned runs whose owner carries a valid tag (:func:`owned_by_this_user`); the others — a shipped
store's, another user's, another machine's (another key), a version's from before the tags — stay as
they are, named in one :class:`ForeignRunsWarning`, and run only when the user asks for them.

A key that is missing is made (atomically: written to a temporary file, then hard-linked into place, so
of two processes making it at once both end with the one that won; in place where there are no hard
links); one that cannot be read or made, or that others may read, is not used: no owner id is tagged,
nothing is taken over unasked, and the warning says why.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import stat
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .exceptions import UntrustedProjectWarning

__all__ = ["KEY_FILE", "ForeignRunsWarning", "OwnerKey", "foreign_runs_note", "owned_by_this_user", "owner_key",
           "tag_owner"]

KEY_FILE = "owner-key"
"""The file in the user's config directory that holds the key (64 hex digits)."""

TAG_LEN = 16
"""Hex digits of the tag (64 bits of the HMAC)."""

_O_FLAGS = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # never block on a FIFO; never leak into a child


class ForeignRunsWarning(UntrustedProjectWarning):
    """Warned when a run store holds unfinished runs, their owner gone, that this user's runtimes did not start
    (or when the owner key cannot be used): they are not resumed unasked."""


@dataclass(slots=True, frozen=True)
class OwnerKey:
    path: Path
    secret: bytes | None  # None: no usable key (``problem`` says why)
    problem: str = ""


def owner_key() -> OwnerKey:
    """This user's key (read, or made, once per process and config directory)."""
    from .config import user_config_dir  # (lazily: the store imports this module; only tagging needs config)

    try:
        where = user_config_dir()
    except (RuntimeError, KeyError, OSError) as e:  # no HOME, and no home directory in the password database
        return OwnerKey(Path(KEY_FILE), None, f"there is no user config directory ({e}); set XDG_CONFIG_HOME")
    return _load(str(where / KEY_FILE))


def tag_owner(base: str) -> str:
    """``base`` (``<host>:<pid>:<token>``) with this user's tag appended; ``base`` itself when there is no key."""
    secret = owner_key().secret
    return f"{base}:{_tag(secret, base)}" if secret is not None else base


def owned_by_this_user(owner: str) -> bool:
    """Whether ``owner`` carries a valid tag of this user's key (``False`` for every owner without one, and for
    every owner at all when there is no usable key)."""
    base, _, tag = owner.rpartition(":")
    if not base or len(tag) != TAG_LEN or not tag.isascii():
        return False
    secret = owner_key().secret
    return secret is not None and hmac.compare_digest(tag, _tag(secret, base))


def _tag(secret: bytes, base: str) -> str:
    return hmac.new(secret, base.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[:TAG_LEN]


@functools.lru_cache(maxsize=16)
def _load(path: str) -> OwnerKey:
    p = Path(path)
    for _ in range(3):  # (a key that another process makes meanwhile is read on the next round)
        got = _read(p)
        if got is None:
            got = _make(p)
        if got is not None:
            return got
    return OwnerKey(p, None, f"{p} does not exist and cannot be made there (a dangling symbolic link?)")


def _read(p: Path) -> OwnerKey | None:
    """The key at ``p``; ``None`` when there is no file; an :class:`OwnerKey` with a problem when it is unusable."""
    fix = "remove it to have a new key made (this user's earlier unfinished runs then need an explicit resume)"
    try:
        fd = os.open(p, os.O_RDONLY | _O_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as e:
        return OwnerKey(p, None, f"{p} cannot be read ({e.strerror or e}); fix its permissions or {fix}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO, a directory, a device
            return OwnerKey(p, None, f"{p} is not a regular file; {fix}")
        if st.st_uid != os.geteuid():
            return OwnerKey(p, None, f"{p} belongs to another user (uid {st.st_uid}); {fix}")
        if st.st_mode & 0o077:
            return OwnerKey(p, None, f"{p} may be read or written by other users (mode {stat.S_IMODE(st.st_mode):o}),"
                                     f" so it proves nothing; {fix}")
        data = os.read(fd, 4 * TAG_LEN + 64)
    except OSError as e:
        return OwnerKey(p, None, f"{p} cannot be read ({e.strerror or e}); {fix}")
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace").strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != 32:
        return OwnerKey(p, None, f"{p} does not hold a key (64 hex digits); {fix}")
    return OwnerKey(p, secret)


def _new_secret() -> bytes:
    return os.urandom(32)  # (the test suite makes every test's key one it knows: tests/owner_ids.py)


def _make(p: Path) -> OwnerKey | None:
    """Make a key at ``p``; ``None`` when another process made one first (read that one)."""
    secret = _new_secret()
    data = f"{secret.hex()}\n".encode("ascii")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(tmp, data)
        try:
            os.link(tmp, p)  # atomic, and never over a key another process made meanwhile
        except FileExistsError:
            return None
        except OSError:  # a file system without hard links: made in place (a reader meanwhile may find it short)
            try:
                _write_new(p, data)
            except FileExistsError:
                return None
        with contextlib.suppress(OSError):  # the new entry survives a power cut
            dfd = os.open(p.parent, os.O_RDONLY | _O_FLAGS)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except OSError as e:
        return OwnerKey(p, None, f"{p} cannot be made ({e.strerror or e}); make its directory one this user can "
                                 "write, or set XDG_CONFIG_HOME to one")
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return OwnerKey(p, secret)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | _O_FLAGS, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def foreign_runs_note(where: str, runs: Sequence[tuple[str, str]], problem: str = "") -> str:
    """The warning for the unfinished ``runs`` ((nickname, run id) pairs) of the store ``where`` that this user's
    runtimes did not start, and for a key that cannot be used (``problem``)."""
    parts = []
    if runs:
        shown = ", ".join(f"{nick} ({rid})" for nick, rid in runs[:10])
        more = f" and {len(runs) - 10} more" if len(runs) > 10 else ""
        parts.append(
            f"the run store {where} holds {len(runs)} unfinished run{'s' if len(runs) != 1 else ''} whose process is "
            f"gone and that this user's runtimes did not start: {shown}{more}. They may come with the project (a "
            "store someone else wrote), from another user or machine, or from a version before run owners were "
            "tagged; they were not resumed and stay as they are. To continue one with its whole conversation, "
            "read it first ('subagents runs show <id>'), then run 'subagents runs cancel <id>' and "
            "'subagents runs resume <id> \"<message>\"'; 'subagents runs cancel <id>' alone ends it for good")
    if problem:
        parts.append(f"the owner key cannot be used: {problem}. Until it can, no unfinished run is resumed "
                     "automatically after a crash")
    return "; ".join(parts)
