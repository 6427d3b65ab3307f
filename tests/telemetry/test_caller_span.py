"""A root agent started inside the application's own span hangs under it: one trace for the request and its agents."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents import Runtime
from subagents.models import FunctionModel
from subagents.telemetry import TelemetryConfig

from .spans_util import Spans, memory_provider


@pytest.mark.parametrize("store", ["memory://", "sqlite"])
async def test_a_root_run_inside_your_span_joins_your_trace(workdir: Path, store: str) -> None:
    provider, exporter = memory_provider()
    url = f"sqlite:///{workdir.parent / 'state.db'}" if store == "sqlite" else store
    async with Runtime(model=FunctionModel(lambda req: "ok"), workdir=workdir, store=url,
                       telemetry=TelemetryConfig(tracer_provider=provider)) as rt:
        with provider.get_tracer("app").start_as_current_span("handle request"):
            await rt.run("inside")
        await rt.run("outside")
        await rt.events_delivered()
    spans = Spans(exporter.get_finished_spans())
    request = spans.one("handle request")
    inside, outside = sorted(spans.named("invoke_agent general-purpose"), key=lambda s: s.start_time or 0)
    assert spans.parent_of(inside) is request
    assert outside.parent is None  # a root started outside any span begins its own trace
