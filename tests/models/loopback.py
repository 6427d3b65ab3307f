"""A loopback HTTP server that speaks the Anthropic Messages and OpenAI Chat Completions wire formats.

Tests queue scripted responses per endpoint (``POST /v1/messages``, ``POST /v1/chat/completions``),
point the official SDK at :attr:`Loopback.url`, and read back every request body and its headers.
``Loopback(keep_alive=True)`` speaks HTTP/1.1 and keeps connections open between requests (every
finished body has a ``content-length``); :attr:`Loopback.connections` counts the TCP connections
accepted.  Shapes follow the providers' API references:

* Anthropic — https://docs.anthropic.com/en/api/messages and /en/docs/build-with-claude/streaming
  (``message_start``, ``content_block_start``, ``content_block_delta`` with ``text_delta`` /
  ``input_json_delta``, ``content_block_stop``, ``message_delta`` with ``stop_reason`` and usage,
  ``message_stop``; errors ``{"type": "error", "error": {"type", "message"}}``).
* OpenAI — https://platform.openai.com/docs/api-reference/chat (``chat.completion``,
  ``chat.completion.chunk`` lines, ``data: [DONE]``; errors ``{"error": {"message", "type", "param",
  "code"}}``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"


@dataclass(slots=True)
class Recorded:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(slots=True)
class Reply:
    """A plain JSON response."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class SSE:
    """A ``text/event-stream`` response: ``(event name or None, data)`` pairs, written in order.

    ``hang=True`` keeps the connection open and silent after the last event (a stalled stream);
    otherwise the server closes it (HTTP/1.0: the end of the body).
    """

    events: list[tuple[str | None, Any]]
    hang: bool = False
    short_body: bool = False
    """Declare a ``content-length`` longer than the events, then close: the client sees a dropped connection."""


@dataclass(slots=True)
class Silent:
    """Read the request, then never answer (until the server closes)."""


@dataclass(slots=True)
class Drip:
    """Send 200 and the headers, then one byte every ``interval_s`` forever (no event or body ever completes)."""

    interval_s: float = 0.02
    content_type: str = "text/event-stream"
    byte: bytes = b" "


@dataclass(slots=True)
class Raw:
    """Any body as is (an HTML error page, ``{}``, text that is not JSON) with this status and content type."""

    body: bytes
    status: int = 200
    content_type: str = "text/html"


Response = Reply | SSE | Silent | Drip | Raw


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # the test output stays quiet
        return

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # frames go out as written
        if self.server.loopback.keep_alive:
            self.protocol_version = "HTTP/1.1"  # answers 1.1 requests keep the connection open
        self.server.loopback.accepted(self.connection)

    def finish(self) -> None:
        super().finish()
        self.server.loopback.hung_up(self.connection)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        path = self.path.split("?", 1)[0]
        response = self.server.loopback.take(Recorded(path, {k.lower(): v for k, v in self.headers.items()},
                                                      json.loads(raw)))
        if isinstance(response, Reply | Raw):
            data = response.body if isinstance(response, Raw) else json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("content-type", response.content_type if isinstance(response, Raw) else "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in ({} if isinstance(response, Raw) else response.headers).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            return
        closing = self.server.loopback.closing
        if isinstance(response, Silent):
            self.close_connection = True
            closing.wait()
            return
        self.send_response(200)
        self.send_header("content-type", response.content_type if isinstance(response, Drip) else "text/event-stream")
        self.send_header("cache-control", "no-cache")
        frames = [] if isinstance(response, Drip) else [
            ((f"event: {event}\n" if event else "") + "data: "
             + (payload if isinstance(payload, str) else json.dumps(payload)) + "\n\n").encode()
            for event, payload in response.events]
        if isinstance(response, SSE) and response.short_body:
            self.send_header("content-length", str(sum(map(len, frames)) + 1000))
        elif isinstance(response, SSE) and not response.hang:
            self.send_header("content-length", str(sum(map(len, frames))))
        else:  # no end of the body but the end of the connection
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            if isinstance(response, Drip):
                while not closing.wait(response.interval_s):
                    self.wfile.write(response.byte)
                    self.wfile.flush()
                return
            for frame in frames:
                self.wfile.write(frame)
                self.wfile.flush()
            if response.hang:
                closing.wait()
        except OSError:  # the client hung up (e.g. after a timeout)
            return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    loopback: Loopback


class Loopback:
    """The server: ``script(path, *responses)``, then read ``requests`` / ``bodies(path)``."""

    def __init__(self, *, keep_alive: bool = False) -> None:
        self.keep_alive = keep_alive
        self.connections = 0
        """TCP connections accepted so far."""
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.closing = threading.Event()
        """Set by :meth:`close`: wakes the handlers of ``Silent``, ``Drip`` and hanging ``SSE`` responses."""
        self._queues: dict[str, collections.deque[Response]] = collections.defaultdict(collections.deque)
        self.requests: list[Recorded] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.loopback = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopback", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the Anthropic SDK adds ``/v1/...``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The base URL for the OpenAI SDK (``.../v1``)."""
        return self.url + "/v1"

    def script(self, path: str, *responses: Response | dict[str, Any]) -> None:
        """Queue responses for ``path``; a plain dict is a 200 JSON reply."""
        with self._lock:
            self._queues[path].extend(Reply(r) if isinstance(r, dict) else r for r in responses)

    def anthropic(self, *responses: Response | dict[str, Any]) -> None:
        self.script(ANTHROPIC_PATH, *responses)

    def openai(self, *responses: Response | dict[str, Any]) -> None:
        self.script(OPENAI_PATH, *responses)

    def take(self, recorded: Recorded) -> Response:
        with self._lock:
            self.requests.append(recorded)
            queue = self._queues[recorded.path]
            if queue:
                return queue.popleft()
        message = f"loopback: no scripted response left for POST {recorded.path}"
        if recorded.path == ANTHROPIC_PATH:
            return anthropic_error(400, "invalid_request_error", message)
        return openai_error(400, message, "invalid_request_error")

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == path]

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def accepted(self, conn: socket.socket) -> None:
        with self._lock:
            self.connections += 1
            self._open.add(conn)

    def hung_up(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.discard(conn)

    def open_connections(self) -> int:
        """Connections accepted and not yet ended by either side."""
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        with self._lock:  # wake handlers waiting on an idle kept-alive connection
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join()


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i:i + size]


# -- Anthropic ------------------------------------------------------------------------------------
def a_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def a_tool(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def anthropic_message(*content: dict[str, Any], stop_reason: str = "end_turn", input_tokens: int = 10,
                      output_tokens: int = 5, cache_read: int = 0, cache_write: int = 0,
                      model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    """A Messages API ``message`` object."""
    return {
        "id": "msg_01loopback", "type": "message", "role": "assistant", "model": model,
        "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read},
    }


def anthropic_stream(message: dict[str, Any], *, text_pieces: Sequence[str] | None = None,
                     json_chunk: int = 7) -> SSE:
    """The SSE event sequence that streams ``message`` (text split in ``text_pieces`` or by word)."""
    start = dict(message, content=[], stop_reason=None, stop_sequence=None,
                 usage=dict(message["usage"], output_tokens=1))
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            pieces = list(text_pieces) if text_pieces is not None else _words(block["text"])
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in ["", *_pieces(json.dumps(block["input"]), json_chunk)]]
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
                      for d in deltas)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return SSE(events)


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def anthropic_error(status: int, type: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply({"type": "error", "error": {"type": type, "message": message}}, status, dict(headers or {}))


# -- OpenAI ---------------------------------------------------------------------------------------
def o_call(id: str | None, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {
        "name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}
    if id is not None:
        call["id"] = id
    return call


def openai_completion(content: Any = None, *calls: dict[str, Any], finish_reason: str | None = None,
                      prompt_tokens: int = 10, completion_tokens: int = 5, cached_tokens: int | None = None,
                      usage: bool = True, model: str = "gpt-4.1-2025-04-14") -> dict[str, Any]:
    """A ``chat.completion`` object (``usage=False`` leaves usage out, as some servers do)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = list(calls)
    body: dict[str, Any] = {
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason or ("tool_calls" if calls else "stop")}],
    }
    if usage:
        u: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
        if cached_tokens is not None:
            u["prompt_tokens_details"] = {"cached_tokens": cached_tokens, "audio_tokens": 0}
        body["usage"] = u
    return body


def openai_stream(completion: dict[str, Any], *, text_pieces: Sequence[str] | None = None,
                  json_chunk: int = 6) -> SSE:
    """The ``chat.completion.chunk`` sequence that streams ``completion``, ending in ``[DONE]``.

    Usage comes in a last chunk with empty ``choices`` (``stream_options.include_usage``) when the
    completion has usage.
    """
    head = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    events: list[tuple[str | None, Any]] = [chunk({"role": "assistant", "content": ""})]
    if message["content"]:
        pieces = list(text_pieces) if text_pieces is not None else _words(message["content"])
        events.extend(chunk({"content": p}) for p in pieces)
    for i, call in enumerate(message.get("tool_calls", [])):
        first = {"index": i, "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
        if "id" in call:
            first["id"] = call["id"]
        events.append(chunk({"tool_calls": [first]}))
        events.extend(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                      for p in _pieces(call["function"]["arguments"], json_chunk))
    events.append(chunk({}, choice["finish_reason"]))
    if "usage" in completion:
        events.append((None, dict(head, choices=[], usage=completion["usage"])))
    events.append((None, "[DONE]"))
    return SSE(events)


def openai_error(status: int, message: str, type: str, code: str | None = None,
                 headers: dict[str, str] | None = None) -> Reply:
    return Reply({"error": {"message": message, "type": type, "param": None, "code": code}}, status,
                 dict(headers or {}))
