"""``subagents runs approvals ID`` / ``subagents runs approve ID CALL_ID allow|always|deny``: a person answers a
Temporal-engine run's request from any terminal (no client approver: the run is started through the engine).

``main([...])`` runs in a thread (the CLI runs its own event loop); the project's ``.subagents/config.toml``
names the engine and the store, as a user's would.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Limits, Runtime
from subagents.cli.main import main
from subagents.config import user_config_dir
from subagents.engines.temporal import TemporalTarget
from subagents.engines.temporal.client import TemporalEngine
from subagents.engines.temporal.worker import build_worker
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.tools.base import tool
from subagents.trust import add_trusted

pytestmark = [pytest.mark.temporal, pytest.mark.asyncio(loop_scope="session")]

TOUCHED: list[str] = []


@tool(category="edit")
def poke(name: str) -> str:
    """Poke a thing (an edit: permission mode default asks first).

    Args:
        name: what to poke.
    """
    TOUCHED.append(name)
    return f"poked {name}"


def _script(req: ModelRequest) -> ModelResponse:
    """Pokes each word of the task, one turn each, then answers with every tool result joined by `` | ``."""
    turns = sum(1 for m in req.messages if m.role == "assistant")
    words = req.messages[0].text.split()
    if turns < len(words):
        return ModelResponse(tool_calls=[ToolCall("poke", {"name": words[turns]})])
    return ModelResponse(text=" | ".join(r.content for m in req.messages for r in m.tool_results))


@dataclass
class Project:
    engine: TemporalEngine
    root: Path
    url: str


@pytest_asyncio.fixture(loop_scope="session")
async def project(temporal_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Project]:
    root = tmp_path / "project"
    (root / ".subagents").mkdir(parents=True)
    target = TemporalTarget(temporal_env.client.service_client.config.target_host, "default", f"cli-{uuid.uuid4()}")
    store = f"sqlite:///{tmp_path / 'state.db'}"
    worker_rt = Runtime(model=FunctionModel(_script, name="poker"), workdir=root, store=store, tools=[poke],
                        permission_mode="default")
    # the user's project: the CLI finds the engine and the store here (written after the worker read its own)
    (root / ".subagents" / "config.toml").write_text(f'[engine]\nurl = "{target.url}"\n\n[store]\nurl = "{store}"\n')
    add_trusted(root, user_config_dir())  # engine and store addresses from a project need trust
    TOUCHED.clear()
    try:
        async with build_worker(temporal_env.client, worker_rt, target.task_queue):
            yield Project(TemporalEngine(temporal_env.client, target), root, target.url)
    finally:
        await worker_rt.aclose()


async def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


async def _pending(engine: TemporalEngine, run_id: str, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while not (pending := await engine.approvals(run_id)):
        assert time.monotonic() < deadline, "no approval request came"
        await asyncio.sleep(0.05)
    (req,) = pending
    assert req["arguments"] == {"name": name}
    return req


async def test_list_allow_and_deny_from_the_cli(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = await project.engine.start("a b", limits=Limits(max_turns=10))
    where = ("--cwd", str(project.root))
    req = await _pending(project.engine, run_id, "a")
    code, out, _ = await _cli(capsys, "runs", "approvals", run_id, *where)
    assert code == 0
    assert out.startswith(f"{req['id']}  poke({{'name': 'a'}})  why: permission mode 'default' asks before file edits")
    code, out, _ = await _cli(capsys, "runs", "approve", run_id, req["id"], "allow", *where)
    assert (code, out.split(": ", 1)[1]) == (0, f"{req['id']} allowed once\n")

    req = await _pending(project.engine, run_id, "b")
    code, out, err = await _cli(capsys, "runs", "approve", run_id, "no-such-call", "allow", *where)
    assert code == 2
    assert "the decision was refused" in err
    assert "no-such-call" in err
    assert "Traceback" not in out + err
    code, out, _ = await _cli(capsys, "runs", "approve", run_id[:8], req["id"], "deny", "--message", "not b",
                              *where)
    assert (code, out.split(": ", 1)[1]) == (0, f"{req['id']} denied\n")

    result = await asyncio.wait_for(project.engine.result(run_id), 60)
    assert result.status == "completed"
    assert result.text == ("poked a | poke was not run: the user denied it: not b. Do not retry the same call; "
                           "adjust your approach.")
    assert TOUCHED == ["a"]

    # the run has ended: nothing to list, nothing to answer
    code, out, _ = await _cli(capsys, "runs", "approvals", run_id, *where)
    assert (code, out) == (0, f"{result.nickname} ({run_id}) waits for no approval\n")
    code, out, err = await _cli(capsys, "runs", "approve", run_id, req["id"], "allow", *where)
    assert code == 2
    assert f"agent run {run_id}" in err
    assert "Traceback" not in out + err


async def test_clear_errors_without_an_engine_or_a_run(project: Project, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBAGENTS_ENGINE", raising=False)
    run_id = await project.engine.start("a", limits=Limits(max_turns=10))
    req = await _pending(project.engine, run_id, "a")
    store = f"sqlite:///{tmp_path / 'state.db'}"
    bare = tmp_path / "bare"  # a project without [engine] url
    bare.mkdir()
    code, out, err = await _cli(capsys, "runs", "approve", run_id, req["id"], "allow", "--cwd", str(bare),
                                "--store", store)
    assert code == 2
    assert "set [engine] url or SUBAGENTS_ENGINE" in err
    assert "Traceback" not in out + err
    code, out, err = await _cli(capsys, "runs", "approvals", "nope-nope", "--cwd", str(project.root))
    assert code == 2
    assert "nope-nope" in err
    assert "Traceback" not in out + err
    monkeypatch.setenv("SUBAGENTS_ENGINE", "temporal://127.0.0.1:1?task_queue=none")  # nothing answers there
    code, out, err = await _cli(capsys, "runs", "approvals", run_id, "--cwd", str(bare), "--store", store)
    assert code != 0
    assert "cannot reach the Temporal server at 127.0.0.1:1" in err
    assert "Traceback" not in out + err
    monkeypatch.delenv("SUBAGENTS_ENGINE")
    code, out, _ = await _cli(capsys, "runs", "approve", run_id, req["id"], "always", "--cwd", str(project.root))
    assert (code, out.split(": ", 1)[1]) == (0, f"{req['id']} allowed always\n")
    result = await asyncio.wait_for(project.engine.result(run_id), 60)
    assert result.text == "poked a"
