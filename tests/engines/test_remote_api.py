"""The Runtime's remote side (runtime/remote.py) without a server: the same API as the local engine, and what
it cannot do yet refused with a clear error before anything is sent."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.exceptions import UserError
from subagents.models import FunctionModel
from subagents.runtime.remote import ROUTED, RemoteAgents

model = FunctionModel(lambda req: "never called", name="client-side")


async def test_what_the_temporal_engine_cannot_do_yet_is_a_clear_error(workdir: Path) -> None:
    rt = Runtime(workdir=workdir, store="memory://", engine="temporal://localhost:7233?task_queue=nobody")
    try:  # refused before anything is sent (no server, no worker needed)
        with pytest.raises(UserError, match="not supported on the Temporal engine yet"):
            await rt.spawn("listen", isolation="worktree")
        with pytest.raises(UserError, match="not supported on the Temporal engine yet"):
            await rt.spawn("listen", parent="someone")
        with pytest.raises(UserError, match="structured result"):
            await rt.run("delegate", output_schema={"type": "object"})
        with pytest.raises(UserError, match="name the model by a string"):
            await rt.run("delegate", model=model)
        with pytest.raises(UserError, match="teams"):
            rt.create_team("crew")
        with pytest.raises(UserError, match="workers"):
            rt.brief("be brief")
    finally:
        await rt.aclose()


def test_the_remote_side_has_every_routed_method_with_the_runtime_s_signature() -> None:
    for name in ROUTED:
        local, remote = inspect.signature(getattr(Runtime, name)), inspect.signature(getattr(RemoteAgents, name))
        assert list(local.parameters.values())[1:] == list(remote.parameters.values())[1:], name
        assert inspect.iscoroutinefunction(getattr(Runtime, name)) == inspect.iscoroutinefunction(
            getattr(RemoteAgents, name)), name
