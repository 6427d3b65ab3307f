"""Whether and where the runtime sends OpenTelemetry traces: ``[telemetry]`` and the standard ``OTEL_*`` variables.

Importing this module imports no OpenTelemetry: the runtime asks :func:`resolve` whether tracing is on,
and only then loads :mod:`subagents.telemetry.spans` (which needs the ``otel`` extra).  With nothing
configured, tracing is off and costs nothing.

>>> resolve(None, endpoint="http://collector:4318", env={}).otlp_endpoint
'http://collector:4318/v1/traces'
>>> resolve(None, env={}) is None
True
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from ..exceptions import ConfigError
from .attributes import redact

__all__ = ["TelemetryConfig", "resolve", "traces_url"]

_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(slots=True, frozen=True)
class TelemetryConfig:
    """How to trace a runtime's agents.

    ``otlp_endpoint``: the OTLP/HTTP traces URL spans are exported to (a ``BatchSpanProcessor`` on a
    tracer provider of the runtime's own).  ``tracer_provider``: an OpenTelemetry ``TracerProvider`` of
    yours to create the spans with instead (your processors and exporters; tests use the SDK's
    ``InMemorySpanExporter``).  With neither, spans go to OpenTelemetry's global tracer provider (your
    application's).  ``capture_content``: put prompts, answers, tool arguments and results in the
    spans (off by default: they may hold secrets).
    """

    otlp_endpoint: str | None = None
    capture_content: bool = False
    service_name: str = "subagents"
    tracer_provider: Any = None


def traces_url(endpoint: str, *, setting: str = "[telemetry] otlp_endpoint") -> str:
    """The OTLP/HTTP traces URL of a base endpoint (``/v1/traces`` appended unless it is there already).

    >>> traces_url("https://otel.example.com:4318/")
    'https://otel.example.com:4318/v1/traces'
    """
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{setting} {redact(endpoint)!r} is not an http(s) URL; set it to your OpenTelemetry "
                          "collector's OTLP/HTTP endpoint, e.g. http://localhost:4318")
    url = endpoint.strip().rstrip("/")
    return url if parts.path.rstrip("/").endswith("/v1/traces") else f"{url}/v1/traces"


def _need(module: str, why: str) -> None:
    if _missing(module):
        raise ConfigError(f"{why}, but OpenTelemetry is not installed (no module {module!r}); install it with "
                          "pip install 'subagents[otel]', or turn tracing off (unset [telemetry] otlp_endpoint "
                          "and OTEL_EXPORTER_OTLP_ENDPOINT)")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


def resolve(
    value: TelemetryConfig | bool | None,
    *,
    endpoint: str | None = None,
    capture_content: bool | None = None,
    service_name: str | None = None,
    env: Mapping[str, str] | None = None,
) -> TelemetryConfig | None:
    """The tracing of a runtime, or ``None`` when it is off.

    ``value`` is the ``Runtime(telemetry=...)`` argument: ``False`` turns tracing off, a
    :class:`TelemetryConfig` turns it on as given, ``True`` turns it on (the global tracer provider
    unless an endpoint is configured), ``None`` leaves it to the settings (``endpoint``,
    ``capture_content``, ``service_name`` from ``[telemetry]``) and the standard variables
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (a full URL), ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL),
    ``OTEL_SERVICE_NAME``, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` and
    ``OTEL_SDK_DISABLED``.  Raises :class:`~subagents.exceptions.ConfigError` for a bad endpoint or when
    the ``otel`` extra is missing.
    """
    if value is False:
        return None
    e = os.environ if env is None else env
    if value is None and e.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return None
    url = None
    if endpoint:
        url = traces_url(endpoint)
    elif e.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        url = traces_url(e["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], setting="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    elif e.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        url = traces_url(e["OTEL_EXPORTER_OTLP_ENDPOINT"], setting="OTEL_EXPORTER_OTLP_ENDPOINT")
    capture = bool(capture_content) or e.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip(
    ).lower() in _TRUE
    name = service_name or e.get("OTEL_SERVICE_NAME") or "subagents"
    if isinstance(value, TelemetryConfig):
        cfg = value
        if cfg.otlp_endpoint:
            cfg = replace(cfg, otlp_endpoint=traces_url(cfg.otlp_endpoint, setting="TelemetryConfig.otlp_endpoint"))
        elif cfg.tracer_provider is None and url is not None:
            cfg = replace(cfg, otlp_endpoint=url)
    elif value is None and url is None:
        return None
    else:
        cfg = TelemetryConfig(otlp_endpoint=url, capture_content=capture, service_name=name)
    where = f"tracing is on (spans to {redact(cfg.otlp_endpoint)})" if cfg.otlp_endpoint else "tracing is on"
    _need("opentelemetry.trace", where)
    if cfg.tracer_provider is None and cfg.otlp_endpoint:
        _need("opentelemetry.sdk.trace", where)
        _need("opentelemetry.exporter.otlp.proto.http", where)
    return cfg
