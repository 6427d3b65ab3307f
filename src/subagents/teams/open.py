"""``open_team_store``: the team store that goes with a run store (one per run store object).

* a :class:`~subagents.store.sqlite.SQLiteStore` gets a :class:`~subagents.teams.sqlite.SQLiteTeamStore` on
  the same file, opened on first use and closed when the run store closes (``SQLiteStore.on_close``);
* a store with a ``team_store()`` method gets what that returns: the PostgreSQL store its
  :class:`~subagents.teams.postgres.PostgresTeamStore`; a SQLite store opened only to read it
  (:class:`~subagents.store._readonly.SQLiteReader`, ``subagents team list/show``) a
  :class:`~subagents.teams.sqlite_reader.SQLiteTeamReader` on the reader's read-only connection;
* any other store (the :class:`~subagents.store.memory.MemoryStore`, test doubles) gets a
  :class:`~subagents.teams.memory.MemoryTeamStore`, which lives as long as the run store object.
"""

from __future__ import annotations

import sys
import threading
import weakref

from ..store.base import Store
from .memory import MemoryTeamStore
from .store import TeamStore

__all__ = ["open_team_store"]

_opened: weakref.WeakKeyDictionary[object, TeamStore] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def open_team_store(store: Store) -> TeamStore:
    """The team store of ``store`` — the same object on every call for the same run store."""
    with _lock:
        ts = _opened.get(store)
        if ts is None:
            ts = _new(store)
            _opened[store] = ts
        return ts


def _new(store: Store) -> TeamStore:
    own = getattr(store, "team_store", None)
    if callable(own):
        made: TeamStore = own()
        return made
    sqlite_mod = sys.modules.get("subagents.store.sqlite")  # not imported: store cannot be a SQLiteStore
    if sqlite_mod is not None and isinstance(store, sqlite_mod.SQLiteStore):
        from .sqlite import SQLiteTeamStore

        ts = SQLiteTeamStore(store.path, timeout=store._timeout, autocheckpoint=False)
        store.on_close.append(ts.close)
        return ts
    return MemoryTeamStore()
