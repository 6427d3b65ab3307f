"""Start tracing a runtime: the tracer provider (yours, the global one, or an OTLP exporter of our own)."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import trace

from ..store.base import Store
from .config import TelemetryConfig
from .spans import EventLike, Tracing

__all__ = ["start_tracing"]


def _version() -> str:
    try:
        return version("subagents")
    except PackageNotFoundError:
        return "0"


def _own_provider(cfg: TelemetryConfig) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": cfg.service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=cfg.otlp_endpoint)))
    return provider


def start_tracing(cfg: TelemetryConfig, on: Callable[[Callable[[EventLike], None]], Callable[[], None]],
                  store: Store | None = None) -> Tracing:
    """Trace a runtime's agents: subscribe a :class:`Tracing` with ``on`` (``EventBus.on``) and return it.

    Spans go to ``cfg.tracer_provider`` when given, else to an OTLP/HTTP exporter of ``cfg.otlp_endpoint``
    (a provider of its own, shut down with :meth:`Tracing.shutdown`), else to the global tracer provider.
    """
    owned = None
    provider = cfg.tracer_provider
    if provider is None and cfg.otlp_endpoint:
        provider = owned = _own_provider(cfg)
    if provider is None:
        provider = trace.get_tracer_provider()
    tracer = provider.get_tracer("subagents", _version())
    tracing = Tracing(tracer, store=store, capture_content=cfg.capture_content, provider=owned)
    tracing.off = on(tracing)
    return tracing
