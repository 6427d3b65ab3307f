"""An agent cannot signal the runtime, and nothing it starts outlives its command.

Signals: the runtime under attack runs in a process of its own (``child_runtime.py``, its own session),
so ``kill -9`` on it ends that process, not the test; the test checks that the process finished its run
normally.  Catchable signals are also aimed at the test process itself, with handlers that record them.

Lifetimes: every escape route a shell offers (``&`` in a subshell, ``nohup``, ``setsid``, a double fork,
``disown``, a command past its timeout).  The processes carry a unique tag in their command line
(``exec -a``); a tool of the test, running in the runtime outside the sandbox, scans ``/proc`` for it
right after the command returned, and the test scans again after the run.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .kit import attack, ran, run_child, sh, wait_gone

SIGNALS = {
    "kill-9-runtime": "kill -9 {runtime_pid}",
    "kill-9-runtime-group": "kill -9 -- -{runtime_pid}",  # it leads its own process group here
    "kill-9-parent": "kill -9 $PPID",
    "kill-stop-runtime": "kill -STOP {runtime_pid}",
    "pkill-by-command-line": "pkill -9 -f {tag}",
}


@pytest.mark.parametrize("name", list(SIGNALS))
def test_shell_cannot_signal_the_runtime(name: str, ws: Path, tag: str) -> None:
    command = SIGNALS[name].replace("{tag}", tag)
    run = run_child(ws, [sh(command + "; sleep 0.2")], timeout=10, tag=tag)
    run.assert_completed()


@pytest.mark.parametrize("sig", ["USR1", "TERM", "HUP", "INT"])
async def test_shell_cannot_signal_the_test_process(sig: str, ws: Path) -> None:
    signum = getattr(signal, f"SIG{sig}")
    got: list[int] = []
    old = signal.signal(signum, lambda s, frame: got.append(s))
    try:
        a = await attack(ws, [sh(f"kill -{sig} {os.getpid()}; kill -{sig} $PPID; sleep 0.2")])
    finally:
        signal.signal(signum, old)
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert not got, f"the shell delivered SIG{sig} to the runtime's process"


def host_processes(tag: str) -> str:
    """Report processes whose command line contains the tag, as the host sees them.

    Args:
        tag: the string to look for.
    """
    left = wait_gone(tag, 2.0)
    return f"SURVIVORS {left}" if left else "none"


OUTLIVERS = {
    "subshell-background": "(exec -a {tag} sleep 300 > /dev/null 2>&1 &)",
    "disown": "bash -c 'exec -a {tag} sleep 300' > /dev/null 2>&1 & disown",
    "nohup": "nohup bash -c 'exec -a {tag} sleep 300' > /dev/null 2>&1 &",
    "setsid": "setsid bash -c 'exec -a {tag} sleep 300' > /dev/null 2>&1 < /dev/null &",
    "setsid-holding-output": "setsid bash -c 'exec -a {tag} sleep 300' &",
    "double-fork": ("python3 -c \"import os; os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); "
                    "os.execvp('sleep', ['{tag}', '300'])\" > /dev/null 2>&1"),
    "background-holding-output": "exec -a {tag} sleep 300 &",
}


@pytest.mark.parametrize("name", list(OUTLIVERS))
async def test_nothing_outlives_its_command(name: str, ws: Path, tag: str) -> None:
    a = await attack(ws, [sh(OUTLIVERS[name].format(tag=tag) + "\nsleep 0.3"),
                          ("host_processes", {"tag": tag})], tools=[host_processes])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert a.step(1).content == "none", f"a process outlived its command: {a.step(1).content}\n{a.transcript()}"
    assert not wait_gone(tag), "a process outlived the run"


async def test_nothing_outlives_a_command_killed_at_its_timeout(ws: Path, tag: str) -> None:
    a = await attack(ws, [
        sh(f"setsid bash -c 'exec -a {tag} sleep 300' > /dev/null 2>&1 < /dev/null & "
           f"(exec -a {tag} sleep 300 > /dev/null 2>&1 &); sleep 30", timeout_s=1),
        ("host_processes", {"tag": tag}),
    ], tools=[host_processes])
    a.assert_completed()
    assert a.step(0).is_error, a.transcript()  # killed at its timeout
    assert a.step(1).content == "none", f"a process outlived its command: {a.step(1).content}\n{a.transcript()}"
    assert not wait_gone(tag), "a process outlived the run"
