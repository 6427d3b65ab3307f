"""OpenTelemetry traces of agent trees (the ``otel`` extra): GenAI spans built from the runtime's events.

``import subagents.telemetry`` imports no OpenTelemetry; :func:`start_tracing` and :class:`Tracing`
load it on first use.  The runtime turns tracing on from ``Runtime(telemetry=...)``, ``[telemetry]
otlp_endpoint`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (:func:`~subagents.telemetry.config.resolve`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import TelemetryConfig, resolve

if TYPE_CHECKING:
    from .setup import start_tracing
    from .spans import Tracing

__all__ = ["TelemetryConfig", "Tracing", "resolve", "start_tracing"]


def __getattr__(name: str) -> Any:
    if name == "start_tracing":
        from .setup import start_tracing

        return start_tracing
    if name == "Tracing":
        from .spans import Tracing

        return Tracing
    raise AttributeError(f"module 'subagents.telemetry' has no attribute {name!r}")
