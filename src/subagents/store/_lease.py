"""Owner leases: how a runtime says "these runs are mine, and I am alive" in a shared store.

Every store instance has an owner id (:func:`new_owner_id`): ``<host>:<pid>:<random token>:<tag>`` — the
token makes it unique per instance, never reused as a PID is; the tag (:mod:`subagents.owner_key`) says which
user's runtime wrote it, so that restart recovery takes over only this user's runs.  A store that owns runs holds a
**lease** on them: a row ``(owner, renewed at, expires at, process)`` that its writer renews every
``renew_s`` (default :data:`RENEW_S`) for ``lease_s`` more seconds (default :data:`LEASE_S`) and
deletes on a clean close.  A run whose owner has no lease, or an expired one, is orphaned.

``process`` lets a reader on the same machine see at once that an owner is gone, before its
lease expires: ``<boot id>:<pid namespace>:<pid>:<start time>`` (Linux).  When the boot and PID
namespace are the reader's own and that PID is dead, a zombie, or a different process (another
start time — the PID was reused), the owner is provably gone.  Otherwise only the lease decides.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..owner_key import tag_owner
from ._support import store_error

__all__ = ["LEASE_S", "RENEW_S", "Lease", "claim_runs", "new_owner_id", "process_gone", "process_identity"]

LEASE_S = 30.0
"""How long a lease holds without renewal: another runtime adopts a dead owner's runs after this."""

RENEW_S = 5.0
"""How often a store that owns runs renews its lease (well under :data:`LEASE_S`)."""


@dataclass(slots=True, frozen=True)
class Lease:
    owner: str
    renewed_at: float
    expires_at: float
    process: str = ""  # process_identity() of the owner ("" when unknown)


def new_owner_id(*, tagged: bool = True) -> str:
    """``<host>:<pid>:<token>:<tag>``: identifies one store instance (the token is random, 64 bits) and this user
    (the tag: :func:`subagents.owner_key.tag_owner`; none when the user has no usable owner key, or ``tagged`` is
    false: a store whose runs never outlive the process, or that only reads, needs none — and makes no key)."""
    base = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:16]}"
    return tag_owner(base) if tagged else base


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of ``pid`` from ``/proc/<pid>/stat``, or ``None`` when unreadable."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw.rpartition(")")[2].split()  # the command name may hold spaces and parentheses
    return (fields[0], fields[19]) if len(fields) > 19 else None


@functools.lru_cache(maxsize=1)
def _machine() -> str:
    """``<boot id>:<pid namespace>`` of this process ("" where there is no ``/proc``)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}:{ns}" if boot else ""


def process_identity(pid: int | None = None) -> str:
    """The identity of ``pid`` (this process by default) for :func:`process_gone`; "" when unknown."""
    pid = os.getpid() if pid is None else pid
    machine, st = _machine(), _stat(pid)
    return f"{machine}:{pid}:{st[1]}" if machine and st else ""


def process_gone(identity: str) -> bool:
    """Whether the process ``identity`` names is provably gone (``False`` when this process cannot tell)."""
    machine, _, rest = identity.rpartition(":")  # machine, then "pid:start" — split from the right
    machine, _, pid_s = machine.rpartition(":")
    if not machine or machine != _machine() or not pid_s.isdigit():
        return False  # another machine or PID namespace: only the lease can tell
    pid = int(pid_s)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    st = _stat(pid)
    if st is None:
        return False
    state, start = st
    return state in ("Z", "X") or start != rest


def claim_runs(path: Path, timeout: float, owner: str, lease_s: float, expected: Mapping[str, str]) -> set[str]:
    """Take over the runs of ``expected`` (run id -> the owner it must still have) for ``owner`` in the SQLite store
    at ``path``: one ``BEGIN IMMEDIATE`` transaction on its own connection, renewing ``owner``'s lease with it."""
    at = time.time()
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        got = {rid for rid, old in expected.items() if conn.execute(
            "UPDATE runs SET owner = ? WHERE run_id = ? AND owner = ?", (owner, rid, old)).rowcount == 1}
        if got:
            conn.execute("INSERT OR REPLACE INTO owners (owner, heartbeat, expires, process) VALUES (?, ?, ?, ?)",
                         (owner, at, at + lease_s, process_identity()))
        conn.execute("COMMIT")
    except sqlite3.Error as e:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise store_error(path, e, "taking over runs in it") from None
    finally:
        conn.close()
    return got
