"""``subagents worker``: run a Temporal worker that executes agent runs (the Temporal engine).

    subagents worker --engine 'temporal://localhost:7233?namespace=default&task_queue=subagents' \\
        --model anthropic:claude-sonnet-4-5 --workdir . --store sqlite:///.subagents/state.db

The worker is configured as a local run would be (the project's ``.subagents/config.toml``, agent
definitions, store); ``--model`` and ``--tool`` also take import paths (``mypkg.scripts:model``: a
``FunctionModel`` object, or a function returning one), so scripted runs work across processes.
SIGTERM / Ctrl-C stop it gracefully (the runs it was executing continue on the other workers).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from .common import engine_option

__all__ = ["worker"]

_PROVIDERS = ("anthropic:", "openai:")


def _model(ref: str | None) -> Any:
    from ..engines.temporal import load_object

    if ref is None or ref.lower().startswith(_PROVIDERS):
        return ref
    return load_object(ref, "--model")


async def _serve(engine: str, model: Any, workdir: Path, store: str | None, tools: list[Any],
                 permission_mode: str | None) -> None:
    from ..engines.temporal import TemporalTarget
    from ..engines.temporal.worker import serve

    target = TemporalTarget.parse(engine)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    click.echo(f"subagents worker: task queue {target.task_queue!r} on {target.address} "
               f"(namespace {target.namespace!r}); stop with Ctrl-C", err=True)
    await serve(target, model=model, workdir=str(workdir), store=store, tools=tools, stop=stop,
                permission_mode=permission_mode)


@click.command("worker")
@click.option("--engine", "engine", metavar="URL", default=None,
              help="temporal://host:port?namespace=...&task_queue=... (default: [engine] url).")
@click.option("--model", "model", metavar="MODEL", default=None,
              help="provider:model, or an import path module:attribute naming a Model (or a factory of one).")
@click.option("--tool", "tools", metavar="PATH", multiple=True, help="A Python tool by import path (repeatable).")
@click.option("--workdir", "workdir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("."),
              help="Project directory the agents work in (default: the current directory).")
@click.option("--store", "store", metavar="URL", default=None, help="Run store URL (default: [store] url).")
@click.option("--permission-mode", "permission_mode", default=None,
              help="Permission mode of the root agents (default: [permissions] mode).")
def worker(engine: str | None, model: str | None, tools: tuple[str, ...], workdir: Path, store: str | None,
           permission_mode: str | None) -> int:
    """Run a Temporal worker for agent runs (the durable, distributed engine)."""
    from ..config import load_settings
    from ..engines.temporal import load_object
    from ..exceptions import UserError

    url = (engine_option(engine, local=False) if engine is not None
           else getattr(load_settings(workdir), "engine_url", None))
    if not url:
        raise UserError("no engine URL: pass --engine temporal://host:7233?task_queue=subagents "
                        "or set [engine] url in .subagents/config.toml")
    loaded = [load_object(t, "--tool") for t in tools]
    asyncio.run(_serve(url, _model(model), workdir, store, loaded, permission_mode))
    return 0


if __name__ == "__main__":  # python -m subagents.cli.worker_cmd (what `subagents worker` runs)
    from .main import cli, main

    cli.add_command(worker)  # also before cli/main.py lists it
    code = main(["worker", *sys.argv[1:]])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: temporalio's core threads can crash it (temporalio/sdk-python#300)
