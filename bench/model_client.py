"""Model calls over the real SDK: µs per call and TCP connections opened, against a loopback server.

    .venv/bin/python bench/model_client.py [--calls 200] [--provider anthropic|openai]

A keep-alive loopback server (``tests/models/loopback.py``, HTTP/1.1) answers every call with a
short streamed message.  ``--calls`` sequential calls are timed in each mode, in one process:

* ``model``: the model as ``resolve_model("anthropic:...", settings)`` builds it — what an agent uses;
* ``per_call_client``: the same model given a new SDK client for every call, closed after it (what
  every call did before models shared their clients);
* ``httpx_floor``: the same requests with one plain ``httpx`` client and no SDK (the HTTP floor);
* ``asyncio_floor``: an ``await`` of a task that returns at once (the plain-asyncio floor).

Prints ONE JSON line (see ``bench/_common.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the loopback server of tests/models

from _common import summ_us
from tests.models.loopback import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Loopback,
    a_text,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
)

from subagents.messages import Message
from subagents.models.base import AgentInfo, Model, ModelRequest
from subagents.models.resolve import resolve_model

REQUEST = ModelRequest(AgentInfo("a1", "main", "general-purpose"), "You are terse.", [Message.user("hi")], [])


def _script(server: Loopback, provider: str, n: int) -> None:
    if provider == "anthropic":
        server.anthropic(*[anthropic_stream(anthropic_message(a_text("hello there"))) for _ in range(n)])
    else:
        server.openai(*[openai_stream(openai_completion("hello there")) for _ in range(n)])


async def _timed(n: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return samples


def _model(server: Loopback, provider: str) -> Model:
    url = server.url if provider == "anthropic" else server.openai_url
    return resolve_model(f"{provider}:bench-model", {"api_key": "sk-bench", "base_url": url})


async def _per_call_client(model: Any) -> None:
    client = model.connection.open()
    try:
        pinned = type(model)(model.model, dataclasses.replace(model.connection, client=client),
                             max_output_tokens=model.max_output_tokens, stream=model.stream, retry=model.retry)
        await pinned.request(REQUEST)
    finally:
        await client.close()


async def _httpx_floor(server: Loopback, provider: str, n: int) -> list[float]:
    try:
        httpx: Any = importlib.import_module("httpx2")
    except ImportError:  # older SDKs use httpx
        httpx = importlib.import_module("httpx")
    if provider == "anthropic":
        url, body = server.url + ANTHROPIC_PATH, {"model": "m", "max_tokens": 10, "stream": True,
                                                   "messages": [{"role": "user", "content": "hi"}]}
    else:
        url, body = server.url + OPENAI_PATH, {"model": "m", "stream": True,
                                                "messages": [{"role": "user", "content": "hi"}]}

    async with httpx.AsyncClient() as client:
        async def call() -> None:
            async with client.stream("POST", url, json=body) as r:
                async for _ in r.aiter_lines():
                    pass
        return await _timed(n, call)


async def _asyncio_floor(n: int) -> list[float]:
    async def nothing() -> None:
        return None

    loop = asyncio.get_running_loop()
    return await _timed(n, lambda: loop.create_task(nothing()))


async def _mode(name: str, provider: str, n: int) -> dict[str, Any]:
    server = Loopback(keep_alive=True)
    try:
        if name == "asyncio_floor":
            samples = await _asyncio_floor(n)
        elif name == "httpx_floor":
            _script(server, provider, n + 5)
            samples = await _httpx_floor(server, provider, n)
        else:
            _script(server, provider, n + 5)
            model: Any = _model(server, provider)
            call = (lambda: _per_call_client(model)) if name == "per_call_client" else (lambda: model.request(REQUEST))
            await call()  # warm-up (imports, first connection)
            samples = await _timed(n, call)
        return {"mode": name, **summ_us(samples), "connections": server.connections}
    finally:
        server.close()


async def main(provider: str, n: int) -> dict[str, Any]:
    modes = ["asyncio_floor", "httpx_floor", "per_call_client", "model"]
    out = {m: await _mode(m, provider, n) for m in modes}
    return {"bench": "model_client", "provider": provider, "calls": n, "modes": out}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--provider", choices=["anthropic", "openai"], default="anthropic")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.provider, args.calls))))
