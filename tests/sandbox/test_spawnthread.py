"""The spawner: one confined thread for the life of the process, for children that die with their parent thread."""

from __future__ import annotations

import os
import threading
import warnings

import pytest

from subagents.sandbox.spawnthread import Spawner


def test_every_job_runs_in_one_thread_confined_once() -> None:
    confined: list[int] = []
    spawner = Spawner(lambda: confined.append(threading.get_ident()))
    seen = []
    for _ in range(3):
        spawner(lambda: seen.append(threading.get_ident()))
    assert len(confined) == 1
    assert seen == confined * 3
    assert confined[0] != threading.get_ident()


def test_a_job_error_reaches_the_caller_and_the_thread_goes_on() -> None:
    spawner = Spawner(lambda: None)

    def fail() -> None:
        raise FileNotFoundError(2, "no such program")

    with pytest.raises(FileNotFoundError):
        spawner(fail)
    ran: list[bool] = []
    spawner(lambda: ran.append(True))
    assert ran == [True]


def test_a_failed_confinement_fails_every_job_without_running_it() -> None:
    calls: list[int] = []

    def confine() -> None:
        calls.append(1)
        raise PermissionError(1, "landlock_restrict_self")

    spawner = Spawner(confine)
    ran: list[bool] = []
    for _ in range(2):
        with pytest.raises(PermissionError):
            spawner(lambda: ran.append(True))
    assert ran == []
    assert calls == [1]


def test_a_forked_child_gets_a_thread_of_its_own() -> None:
    spawner = Spawner(lambda: None)
    parent: list[int] = []
    spawner(lambda: parent.append(threading.get_ident()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() with threads running
        pid = os.fork()
    if pid == 0:  # the child: the parent's spawner thread does not exist here
        code = 1
        try:
            child: list[int] = []
            spawner(lambda: child.append(threading.get_ident()))
            code = 0 if child and child[0] != threading.get_ident() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
