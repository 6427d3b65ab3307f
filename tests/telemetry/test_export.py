"""Spans leave the process over OTLP/HTTP, and tracing costs nothing when it is not configured."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, ExportTraceServiceRequest]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        self.received.append((self.path, req))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, ExportTraceServiceRequest]]]]:
    received: list[tuple[str, ExportTraceServiceRequest]] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _fn(req: ModelRequest) -> ModelResponse:
    if req.agent.depth == 0 and len(req.messages) == 1:
        return ModelResponse(tool_calls=[ToolCall("spawn_agent", {
            "agent_type": "explore", "prompt": "look around", "description": "look"})])
    return ModelResponse(text="done")


async def test_a_run_exports_one_connected_trace_over_otlp_http(
        workdir: Path, collector: tuple[str, list[tuple[str, ExportTraceServiceRequest]]]) -> None:
    url, received = collector
    (workdir / ".subagents").mkdir()
    (workdir / ".subagents" / "config.toml").write_text(f'[telemetry]\notlp_endpoint = "{url}"\n')
    async with Runtime(model=FunctionModel(_fn), workdir=workdir, store="memory://", trust_project=True) as rt:
        assert rt.tracing is not None
        await rt.run("explore the project")
    # closing the runtime flushed the batch to the collector
    assert {path for path, _ in received} == {"/v1/traces"}
    spans = [(rs, s) for _, req in received for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    names = sorted(s.name for _, s in spans)
    assert names == ["chat function"] * 3 + ["execute_tool spawn_agent", "invoke_agent explore",
                     "invoke_agent general-purpose"]
    assert len({s.trace_id for _, s in spans}) == 1
    by_name = {s.name: s for _, s in spans}
    assert by_name["invoke_agent explore"].parent_span_id == by_name["execute_tool spawn_agent"].span_id
    service = {a.value.string_value for rs, _ in spans for a in rs.resource.attributes if a.key == "service.name"}
    assert service == {"subagents"}


_PROBE = """
import json, sys
from subagents import Runtime
from subagents.models import FunctionModel
rt = Runtime(model=FunctionModel(lambda req: "ok"), store="memory://", workdir=sys.argv[1])
rt.run_sync("hi")
print(json.dumps({"otel": sorted(m for m in sys.modules if m.startswith("opentelemetry"))[:3],
                  "spans": "subagents.telemetry.spans" in sys.modules,
                  "tracing": getattr(rt, "tracing", None) is not None}))
"""


def _probe(workdir: Path, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(workdir)], env={**clean, **env}, capture_output=True,
                         text=True, timeout=120, check=True)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_tracing_off_imports_no_opentelemetry(
        workdir: Path, collector: tuple[str, list[tuple[str, ExportTraceServiceRequest]]]) -> None:
    assert _probe(workdir) == {"otel": [], "spans": False, "tracing": False}
    url, received = collector
    on = _probe(workdir, OTEL_EXPORTER_OTLP_ENDPOINT=url)  # the standard variable turns it on
    assert (on["spans"], on["tracing"], bool(on["otel"])) == (True, True, True)
    assert received  # the spans of a run_sync reach the collector when the process ends
    off = _probe(workdir, OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_SDK_DISABLED="true")
    assert off == {"otel": [], "spans": False, "tracing": False}
