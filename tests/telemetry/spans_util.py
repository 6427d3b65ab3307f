"""Helpers of the telemetry tests: an in-memory tracer provider and a readable view of finished spans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@dataclass
class Spans:
    """Finished spans, found by name."""

    spans: Sequence[ReadableSpan]

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str, **attrs: Any) -> ReadableSpan:
        found = [s for s in self.named(name) if all((s.attributes or {}).get(k) == v for k, v in attrs.items())]
        assert len(found) == 1, (name, attrs, [(s.name, dict(s.attributes or {})) for s in self.spans])
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.spans if s.context is not None and s.context.span_id == span.parent.span_id),
                    None)

    @property
    def trace_ids(self) -> set[int]:
        return {s.context.trace_id for s in self.spans if s.context is not None}

    def attribute_keys(self) -> set[str]:
        return {k for s in self.spans for k in (s.attributes or {})}
