"""``subagents run --engine temporal://...``: the demo's tree runs on a ``subagents worker`` process (the demo's
scripted model named by import path), the answer is printed as a local run prints it, and ``subagents runs``
shows the tree from the store the worker wrote.  All three are separate processes, as in production."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from subagents import Runtime
from subagents.cli.main import main
from subagents.config import user_config_dir
from subagents.demo import DEMO_PROMPT, REPORT_PATH
from subagents.engines.temporal import TemporalTarget
from subagents.store import open_store
from subagents.trust import add_trusted

pytestmark = [pytest.mark.temporal]

TESTS = Path(__file__).resolve().parents[2]


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    pass  # TODO: more\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (root / "README.md").write_text("# Project\nA small project.\n")
    return root


@contextlib.contextmanager
def _worker(env: WorkflowEnvironment, workdir: Path, log_path: Path, *args: str, configured: bool = False
            ) -> Iterator[str]:
    """A ``subagents worker`` process over ``workdir`` (its default store) on a fresh task queue: its URL
    (``configured``: also written to the project's config as ``[engine] url``, for ``subagents run`` there)."""
    target = TemporalTarget(env.client.service_client.config.target_host, "default", f"cli-{uuid.uuid4()}")
    if configured:
        (workdir / ".subagents").mkdir(exist_ok=True)
        (workdir / ".subagents" / "config.toml").write_text(f'[engine]\nurl = "{target.url}"\n')
    engine = ["--engine", target.url]  # (the config's address applies in a trusted project: the tests trust it)
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "subagents.cli.worker_cmd", *engine, "--workdir", str(workdir), *args],
        stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])})
    try:
        yield target.url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def demo_worker(temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[str, Path]]:
    """A worker running the demo's model (named by import path, as a person would) over a small project whose
    config names the engine (the worker still runs the agents itself; ``subagents run`` there goes to it)."""
    root = tmp_path_factory.mktemp("cli-demo")
    project = _project(root / "project")
    with _worker(temporal_env, project, root / "worker.log", "--model", "subagents.demo:demo_model",
                 "--permission-mode", "autoEdit", configured=True) as url:
        yield url, project


@pytest.fixture
def worker_url(demo_worker: tuple[str, Path]) -> str:
    return demo_worker[0]


@pytest.fixture
def project(demo_worker: tuple[str, Path]) -> Path:
    """The demo worker's project, without the report of an earlier test's run (the survey would count it),
    trusted (its config's ``[engine] url`` applies)."""
    (demo_worker[1] / REPORT_PATH).unlink(missing_ok=True)
    add_trusted(demo_worker[1], user_config_dir())
    return demo_worker[1]


async def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "subagents.cli.main", *args, cwd=cwd, env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


@pytest.mark.asyncio(loop_scope="session")
async def test_run_with_an_engine_runs_the_demo_tree_on_a_worker(worker_url: str, project: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    workdir = project
    done = await _cli("run", "--engine", worker_url, "--max-turns", "20", DEMO_PROMPT, cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Survey done (scripted model — no LLM; ")
    assert "3 files (2 .md, 1 .py); 1 TODO/FIXME line in 1 file" in done.stdout
    assert (workdir / REPORT_PATH).is_file()  # the worker wrote it, with the real tools, in its workdir
    assert "(whole tree: 3 agents)" in done.stderr  # the stats line, from the store

    capsys.readouterr()
    assert main(["runs", "list", "--all", "--json", "--cwd", str(workdir)]) == 0  # in this process: no loop needed
    runs = json.loads(capsys.readouterr().out)
    root = max((r for r in runs if r["depth"] == 0), key=lambda r: r["created_at"])  # this test's run
    kids = [r for r in runs if r["parent_id"] == root["run_id"]]
    assert sorted(k["label"] for k in kids) == ["survey docs", "survey src"]
    assert {r["status"] for r in runs if r["root_id"] == root["run_id"]} == {"completed"}
    assert all(k["agent_type"] == "explore" and k["owner"].startswith("temporal:") for k in kids)

    tree = await _cli("runs", "tree", root["run_id"], cwd=workdir)
    assert tree.returncode == 0, tree.stderr
    assert root["nickname"] in tree.stdout
    for k in kids:
        assert k["nickname"] in tree.stdout
    assert done.stdout.strip() == root["result_text"].strip()  # the answer printed is the recorded one
    capsys.readouterr()
    assert main(["runs", "show", kids[0]["run_id"], "--cwd", str(workdir)]) == 0
    shown = capsys.readouterr().out
    assert kids[0]["nickname"] in shown
    assert "survey" in shown


@pytest.mark.asyncio(loop_scope="session")
async def test_run_with_an_engine_streams_the_tree_s_events_as_json(project: Path) -> None:
    done = await _cli("run", "--json", DEMO_PROMPT, cwd=project)  # [engine] url in the project's config
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    result = lines[-1]
    assert (result["kind"], result["status"]) == ("result", "completed")
    events = lines[:-1]
    spawned = [e for e in events if e["kind"] == "subagent_spawned" and e["parent_id"] == result["id"]]
    assert sorted(e["label"] for e in spawned) == ["survey docs", "survey src"]
    for e in spawned:
        kinds = [x["kind"] for x in events if x["agent_id"] == e["agent_id"]]
        assert kinds[:2] == ["subagent_spawned", "subagent_status_changed"]
        assert kinds[-3:] == ["run_end", "subagent_status_changed", "subagent_completed"]
        assert "tool_start" in kinds
    root = [x["kind"] for x in events if x["agent_id"] == result["id"]]
    assert root[-1] == "subagent_completed"
    assert root.count("tool_start") == root.count("tool_end") == result["tool_calls"]


@pytest.mark.asyncio(loop_scope="session")
async def test_sigterm_closes_the_remote_run(temporal_env: WorkflowEnvironment, workdir: Path, tmp_path: Path
                                             ) -> None:
    with _worker(temporal_env, workdir, tmp_path / "worker.log", "--model", "engines.temporal.scripts:model",
                 "--tool", "engines.temporal.scripts:nap") as url:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "subagents.cli.main", "run", "--engine", url, "listen", cwd=workdir,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        store = open_store(None, workdir)  # the project's default store, as the worker's
        try:
            deadline = time.monotonic() + 30
            while not any(r.status == "running" for r in store.list_runs()):
                assert time.monotonic() < deadline, "the run never started on the worker"
                await asyncio.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
            assert proc.returncode == 143, err
            assert "Stopped by SIGTERM: the run was closed on the Temporal workers" in err.decode()
            (rec,) = store.list_runs()
            assert (rec.status, rec.outcome) == ("shutdown", "cancelled")  # closed on the workers
        finally:
            store.close()


def test_options_of_a_local_run_are_refused_with_an_engine(workdir: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_ENGINE", "temporal://localhost:7233?task_queue=q")  # picked up like --engine
    assert main(["run", "--cwd", str(workdir), "--permission-mode", "yolo", "--allow", "bash(ls)", "hi"]) == 2
    err = capsys.readouterr().err
    assert "--permission-mode, --allow apply where the agents run" in err
    assert "subagents worker" in err
    monkeypatch.delenv("SUBAGENTS_ENGINE")
    assert main(["run", "--cwd", str(workdir), "--engine", "http://nope", "hi"]) == 2
    assert "is not a Temporal address" in capsys.readouterr().err


def test_run_sync_goes_to_the_workers_in_each_of_its_event_loops(worker_url: str, project: Path) -> None:
    rt = Runtime(workdir=project, engine=worker_url, trust_project=True)  # no model here: the worker has the demo's
    try:
        first = rt.run_sync(DEMO_PROMPT)
        second = rt.run_sync(DEMO_PROMPT)  # a new event loop: the client connects again
        assert first.text.startswith("Survey done")
        assert second.text.startswith("Survey done")  # (it counts the first one's report too)
        assert first.id != second.id
        assert rt.status(second.id) == "completed"
    finally:
        asyncio.run(rt.aclose())


@pytest.mark.asyncio(loop_scope="session")
async def test_runs_cancel_closes_a_run_of_the_engine_through_the_engine(temporal_env: WorkflowEnvironment,
                                                                         workdir: Path, tmp_path: Path) -> None:
    with _worker(temporal_env, workdir, tmp_path / "worker.log", "--model", "engines.temporal.scripts:model",
                 "--tool", "engines.temporal.scripts:nap") as url:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "subagents.cli.main", "run", "--engine", url, "listen", cwd=workdir,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        store = open_store(None, workdir)
        try:
            deadline = time.monotonic() + 30
            while not any(r.status == "running" for r in store.list_runs()):
                assert time.monotonic() < deadline, "the run never started on the worker"
                await asyncio.sleep(0.05)
            (rec,) = store.list_runs()
            assert rec.owner.startswith("temporal:")
            # without the engine's address the CLI cannot reach the workers, and says how to
            refused = await _cli("runs", "cancel", rec.run_id, cwd=workdir)
            assert refused.returncode == 2
            assert "runs on the Temporal engine" in refused.stderr
            assert "SUBAGENTS_ENGINE" in refused.stderr
            still = store.get_run(rec.run_id)
            assert still is not None
            assert still.status == "running"
            done = await _cli("runs", "cancel", rec.run_id, cwd=workdir, env={"SUBAGENTS_ENGINE": url})
            assert done.returncode == 0, done.stderr
            assert "Closed" in done.stdout
            assert "on the Temporal engine" in done.stdout
            await asyncio.wait_for(proc.communicate(), timeout=60)  # the `run` waiting on it ends too
            now = store.get_run(rec.run_id)
            assert now is not None
            assert (now.status, now.outcome) == ("shutdown", "cancelled")
        finally:
            if proc.returncode is None:
                proc.kill()
            store.close()
