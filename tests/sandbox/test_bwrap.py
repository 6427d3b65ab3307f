"""The bubblewrap backend: every attack of :class:`AttackSuite`, plus what only bubblewrap does."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from subagents.sandbox import SandboxPolicy, Workspace
from subagents.sandbox.bwrap import bwrap_argv, missing_protected
from subagents.sandbox.shell import ShellSandbox
from subagents.tools.base import ToolContext

from .attacks import STORE, AttackSuite, eventually, exists, marked, marker, run, setsid_sleep

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="Linux only")


class TestBwrap(AttackSuite):
    mode = "bwrap"

    async def test_a_process_that_leaves_the_group_still_ends(self, ctx: ToolContext) -> None:
        # setsid escapes a process group, not the PID namespace.
        mark = marker()
        out = await run(ctx, setsid_sleep(mark) + "; echo started")
        assert out.startswith("started")
        await eventually(lambda: not marked(mark))

    async def test_a_store_file_created_during_the_command_stays_hidden(self, ctx: ToolContext, ws: Path) -> None:
        journal = ws / ".subagents" / "state.db-journal"
        assert not exists(journal)
        task = asyncio.ensure_future(run(ctx, "sleep 0.5; ls -a .subagents; cat .subagents/state.db-journal"))
        await asyncio.sleep(0.1)
        journal.write_text(STORE)
        out = await task
        assert STORE not in out
        assert out.splitlines()[:3] == [".", "..", "agents"]  # config.toml, state.db* are hidden

    async def test_commands_with_the_network_on_live_while_another_thread_is_busy(self, ws: Path, home: Path) -> None:
        # bubblewrap's --die-with-parent kills it when the *thread* that started it ends.  With the network on it was
        # started from a helper thread that ended right after: when that thread ended late (another thread holding
        # the GIL), bwrap had armed the signal and was killed: 2% of such commands, 77% with a busy thread.
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                sum(range(1000))

        busy = threading.Thread(target=spin, daemon=True)
        busy.start()
        try:
            outs = [await run(self.make(ws, home, network=True), "echo hi") for _ in range(20)]
        finally:
            stop.set()
            busy.join()
        assert outs == ["hi\nexit code 0"] * 20

    async def test_the_private_tmp_is_usable(self, ctx: ToolContext) -> None:
        out = await run(ctx, "echo hi > $TMPDIR/f && cat /tmp/f && ls /run | wc -l")
        assert out == "hi\n0\nexit code 0"


def test_argv_order_tmp_before_the_workspace_and_masks_after(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".subagents").mkdir()
    (root / ".subagents" / "state.db").write_text("x")
    ws = Workspace(root, SandboxPolicy())
    argv = bwrap_argv("/usr/bin/bwrap", ws, network=False, writable=True)
    joined = " ".join(argv)
    assert argv[-1] == "--"
    assert "--share-net" not in argv
    assert joined.index("--tmpfs /tmp") < joined.index(f"--bind {root} {root}")
    assert joined.index(f"--bind {root} {root}") < joined.index(f"--ro-bind {root}/.git {root}/.git")
    # .subagents holds hidden files that do not exist yet (-journal): shown as a snapshot without the store
    assert f"--tmpfs {root}/.subagents" in joined
    assert f"{root}/.subagents/state.db" not in joined
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert {"--new-session", "--die-with-parent", "--unshare-all"} <= set(argv)
    ro = bwrap_argv("/usr/bin/bwrap", ws, network=True, writable=False)
    assert f"--ro-bind {root} {root}" in " ".join(ro)
    assert "--share-net" in ro
    assert missing_protected(ws) == [root / ".claude", root / ".qwen", root / ".mcp.json"]


async def test_killing_bwrap_while_it_sets_up_leaves_nothing(tmp_path: Path) -> None:
    # bubblewrap arms --die-with-parent only part-way through its setup: killed before that, the
    # command it was starting lives on (measured, about 7 ms in).  The SUBAGENTS_COMMAND sweep ends it.
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="bwrap")))
    marks = []
    for i in range(40):
        mark = marker()
        marks.append(mark)
        proc = await box.spawn(["/bin/sleep", mark])
        await asyncio.sleep(i * 0.0003)
        await box.kill(proc)
        box.finish(proc)
    await eventually(lambda: not any(marked(m) for m in marks))


async def test_cancelling_a_spawn_midway_leaves_nothing(tmp_path: Path) -> None:
    # Cancelled inside create_subprocess_exec, asyncio kills bwrap itself, perhaps before it armed
    # --die-with-parent; spawn() sweeps what bwrap had started.
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy(mode="bwrap")))
    marks = []
    for i in range(30):
        mark = marker()
        marks.append(mark)
        task = asyncio.ensure_future(box.spawn(["/bin/sleep", mark]))
        await asyncio.sleep(i * 0.0003)
        task.cancel()
        try:
            proc = await task
        except asyncio.CancelledError:
            continue
        await box.kill(proc)
        box.finish(proc)
    await eventually(lambda: not any(marked(m) for m in marks))
