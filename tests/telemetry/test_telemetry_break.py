"""Telemetry under hostile input: no secrets, no unbounded attributes, no event loop held by a dead collector."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from subagents import Runtime
from subagents.exceptions import ConfigError, ModelError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import EventBus
from subagents.telemetry import TelemetryConfig, attributes, config, start_tracing

from .spans_util import memory_provider

SECRET = "hunter2hunter2"


def everything(spans: Sequence[ReadableSpan]) -> str:
    """All a span shows: names, attributes, status descriptions, events."""
    out: list[str] = []
    for s in spans:
        out += [s.name, json.dumps(dict(s.attributes or {}), default=str), str(s.status.description)]
        out += [e.name + json.dumps(dict(e.attributes or {}), default=str) for e in s.events]
    return "\n".join(out)


def leaky(req: ModelRequest) -> ModelResponse:
    if len(req.messages) == 1:
        return ModelResponse(text=f"the key is {SECRET}", tool_calls=[
            ToolCall("read_file", {"path": SECRET}, id="c1"),
            ToolCall(f"read the file of {SECRET}", {}, id=f"call {SECRET}")])
    raise ModelError(f"OpenAI-compatible server at https://me:{SECRET}@proxy.example/v1 could not be reached "
                     f"(Authorization: Bearer sk-{SECRET}{SECRET})")


async def traced(workdir: Path, fn: object, prompt: str, *, capture: bool) -> str:
    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://",  # type: ignore[arg-type]
                       telemetry=TelemetryConfig(tracer_provider=provider, capture_content=capture)) as rt:
        await rt.run(prompt)
        await rt.events_delivered()
    return everything(exporter.get_finished_spans())


async def test_without_capture_content_no_secret_reaches_a_span(workdir: Path) -> None:
    text = await traced(workdir, leaky, f"the prompt says {SECRET}", capture=False)
    assert SECRET not in text
    assert "could not be reached" in text  # the model error still says what happened
    assert "execute_tool invalid" in text


async def test_with_capture_content_credentials_are_still_blanked(workdir: Path) -> None:
    text = await traced(workdir, leaky, "hello", capture=True)
    assert f"me:{SECRET}@" not in text
    assert f"sk-{SECRET}" not in text
    assert "https://[redacted]@proxy.example/v1" in text


def test_a_base_url_with_a_password_is_no_part_of_a_model_name() -> None:
    attrs = attributes.model_attributes(f"my-model@https://me:{SECRET}@proxy.example/v1")
    assert SECRET not in json.dumps(attrs)


async def test_content_attributes_are_bounded(workdir: Path) -> None:
    big = "x" * 2_000_000

    def fn(req: ModelRequest) -> ModelResponse:
        if len(req.messages) == 1:
            return ModelResponse(tool_calls=[ToolCall("read_file", {"path": big}, id="c1")])
        return ModelResponse(text=big)

    provider, exporter = memory_provider()
    async with Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://",
                       telemetry=TelemetryConfig(tracer_provider=provider, capture_content=True)) as rt:
        await rt.run(big)
        await rt.events_delivered()
    longest = max(len(str(v)) for s in exporter.get_finished_spans() for v in (s.attributes or {}).values())
    assert longest < attributes.MAX_CONTENT + 200


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A collector that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()


async def test_closing_with_a_dead_collector_does_not_hold_the_event_loop(
        black_hole: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # seconds: the exporter gives up after about 1 s
    bus = EventBus()
    tracing = start_tracing(TelemetryConfig(otlp_endpoint=f"{black_hole}/v1/traces"), bus.on)
    span = tracing.tracer.start_span("pending")
    span.end()  # one span waits in the batch for a collector that never answers
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    t0 = time.monotonic()
    await tracing.aclose()
    took = time.monotonic() - t0
    ticker.cancel()
    assert took > 0.5  # it did wait for the exporter...
    assert ticks >= 3  # ...while the event loop went on (a held loop: 0)


@pytest.mark.parametrize("endpoint", [f"ftp://me:{SECRET}@collector:4318", f"https://me:{SECRET}@collector:4318"])
def test_an_endpoint_error_does_not_show_its_password(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "_missing", lambda module: True)  # as without the otel extra
    with pytest.raises(ConfigError) as e:
        config.resolve(None, env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    assert SECRET not in str(e.value)
