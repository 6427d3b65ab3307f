"""Whether tracing is on, and where spans go: ``[telemetry]``, ``Runtime(telemetry=)`` and the OTEL_* variables."""

from __future__ import annotations

import sys

import pytest

from subagents.exceptions import ConfigError
from subagents.telemetry.config import TelemetryConfig, resolve, traces_url


def test_off_when_nothing_is_configured() -> None:
    assert resolve(None, env={}) is None
    assert resolve(False, endpoint="http://c:4318", env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is None


def test_the_setting_wins_over_the_variables_and_gets_the_traces_path() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "billing-agents"}
    assert resolve(None, endpoint="https://collector.example.com:4318/", env=env) == TelemetryConfig(
        otlp_endpoint="https://collector.example.com:4318/v1/traces", service_name="billing-agents")


@pytest.mark.parametrize(("env", "url"), [
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, "http://localhost:4318/v1/traces"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318/v1/traces"}, "http://localhost:4318/v1/traces"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318"},
     "http://t:4318/v1/traces"),
])
def test_the_standard_variables_turn_it_on(env: dict[str, str], url: str) -> None:
    cfg = resolve(None, env=env)
    assert cfg is not None
    assert cfg.otlp_endpoint == url


def test_capture_content_is_off_unless_asked() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert resolve(None, env=env) == TelemetryConfig(otlp_endpoint="http://c:4318/v1/traces")
    on = resolve(None, capture_content=True, env=env)
    assert on is not None
    assert on.capture_content
    by_env = resolve(None, env={**env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert by_env is not None
    assert by_env.capture_content


def test_sdk_disabled_turns_the_variables_off() -> None:
    assert resolve(None, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}) is None


def test_an_explicit_config_and_true() -> None:
    provider = object()
    mine = TelemetryConfig(tracer_provider=provider, capture_content=True)
    assert resolve(mine, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is mine  # your provider, as given
    assert resolve(True, env={}) == TelemetryConfig()  # the global tracer provider
    filled = resolve(TelemetryConfig(), env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert filled == TelemetryConfig(otlp_endpoint="http://c:4318/v1/traces")


@pytest.mark.parametrize("bad", ["localhost:4318", "grpc://c:4317", "http://"])
def test_a_bad_endpoint_says_what_to_set(bad: str) -> None:
    with pytest.raises(ConfigError) as e:
        resolve(None, endpoint=bad, env={})
    assert str(e.value) == (f"[telemetry] otlp_endpoint {bad!r} is not an http(s) URL; set it to your "
                            "OpenTelemetry collector's OTLP/HTTP endpoint, e.g. http://localhost:4318")
    with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_ENDPOINT 'c:4318' is not an http"):
        resolve(None, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"})


def test_a_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)  # as if not installed
    with pytest.raises(ConfigError) as e:
        resolve(None, endpoint="http://c:4318", env={})
    assert str(e.value) == (
        "tracing is on (spans to http://c:4318/v1/traces), but OpenTelemetry is not installed (no module "
        "'opentelemetry.exporter.otlp.proto.http'); install it with pip install 'subagents[otel]', or turn "
        "tracing off (unset [telemetry] otlp_endpoint and OTEL_EXPORTER_OTLP_ENDPOINT)")
    assert resolve(TelemetryConfig(tracer_provider=object()), env={}) is not None  # your provider: no exporter


def test_traces_url_keeps_a_full_traces_url() -> None:
    assert traces_url("http://c:4318/v1/traces/") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/otlp") == "http://c:4318/otlp/v1/traces"
