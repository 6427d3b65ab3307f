"""``Tracing``: OpenTelemetry spans built from the runtime's events, one trace per tree of agents.

An event-bus callback (``bus.on(tracing)``): every span starts and ends at the timestamps of the
events that delimit it, so spans are right even when events reach listeners late (status events
wait for the store's commit).

* ``invoke_agent {type}``: from ``subagent_status_changed`` ``running`` to ``subagent_completed``
  (one span per run: a resumed agent gets a new one), with the run's outcome, token totals and
  ``subagents.cost_usd``;
* ``chat {model}``: from ``turn_start`` to ``model_end`` (or the agent's next event), with
  ``gen_ai.usage.*``, ``gen_ai.response.finish_reasons``;
* ``execute_tool {name}``: from ``tool_start`` to ``tool_end``.

A child's ``invoke_agent`` span is a child of its parent's ``spawn_agent`` tool span (the
``call_id`` that ``subagent_spawned`` carries; without it, the oldest open ``spawn_agent`` call of
the parent asking for that agent type).  That parent context is saved with the run (``trace`` of
its record, as a W3C ``traceparent``), so a background child, a resumed run or a run restored by
another process stays in its tree's trace.  A root's later runs hang under its first run's span.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from dataclasses import fields
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..exceptions import StoreError
from ..store.base import RunRecord, Store
from . import attributes as A

__all__ = ["EventLike", "Tracing"]

log = logging.getLogger(__name__)
_PROPAGATOR = TraceContextTextMapPropagator()
_STORE_HAS_TRACE = "trace" in {f.name for f in fields(RunRecord)}
_ERROR_OUTCOMES = frozenset({"error", "timeout", "limit"})
_SAVED_MAX = 10_000  # trace contexts kept in memory (the store keeps them all)


class EventLike(Protocol):
    """What a runtime event offers (``subagents.runtime.events.Event``), read without importing the runtime."""

    @property
    def kind(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def depth(self) -> int: ...
    @property
    def data(self) -> dict[str, Any]: ...
    @property
    def ts(self) -> float: ...
    @property
    def nickname(self) -> str: ...


def _ns(ts: float) -> int:
    return int(ts * 1e9)


class _Agent:
    """What the tracer knows of one agent while it runs."""

    __slots__ = ("agent_type", "background", "chat", "ctx", "model", "parent_ctx", "prompt", "span", "spawned_at",
                 "spawns", "text", "tools")

    def __init__(self, agent_type: str, model: str, background: bool, spawned_at: float) -> None:
        self.agent_type, self.model, self.background, self.spawned_at = agent_type, model, background, spawned_at
        self.parent_ctx: otel_context.Context | None = None
        self.span: Span | None = None
        self.ctx: otel_context.Context | None = None  # the context of ``span`` (its children's parent)
        self.chat: Span | None = None
        self.tools: dict[str, Span] = {}
        self.spawns: dict[str, str] = {}  # open spawn_agent calls without a child yet: call id -> agent_type
        self.prompt: str | None = None
        self.text = ""


class Tracing:
    """Builds the spans of a runtime's agents from its events (see the module docstring).

    ``store``: where each run's trace context is saved and read back (``None``: memory only).
    ``capture_content``: prompts, answers, tool arguments and results go into the spans.
    """

    def __init__(self, tracer: Tracer, *, store: Store | None = None, capture_content: bool = False,
                 provider: Any = None) -> None:
        self.tracer = tracer
        self.store = store
        self.capture_content = capture_content
        self.provider = provider  # a tracer provider this object owns (shut down with it), if any
        self.agents: dict[str, _Agent] = {}
        self._saved: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._failed: set[str] = set()
        self._callers: dict[str, otel_context.Context] = {}  # root id -> the caller's context (adopt_caller)
        self.off: Any = None  # what unsubscribes it from the bus (set by start_tracing)

    # -- the bus callback ------------------------------------------------------------------------
    def __call__(self, ev: EventLike) -> None:
        handler = _HANDLERS.get(ev.kind)
        if handler is None:
            return
        try:
            handler(self, ev)
        except Exception:  # tracing must never break a run: say it once per kind, go on
            if ev.kind not in self._failed:
                self._failed.add(ev.kind)
                log.warning("subagents tracing: a %r event could not become a span; spans of this tree may be "
                            "incomplete", ev.kind, exc_info=True)

    def adopt_caller(self, agent_id: str) -> None:
        """Hang root ``agent_id``'s spans under the caller's current span, if there is one (the runtime calls
        it where your code spawns a root: ``rt.run`` inside your own span makes one trace of both)."""
        ctx = otel_context.get_current()
        if not trace.get_current_span(ctx).get_span_context().is_valid:
            return
        a = self.agents.get(agent_id)
        if a is None:  # its subagent_spawned event waits for the store's commit: take it there
            self._callers[agent_id] = ctx
        elif a.span is None:
            a.parent_ctx = ctx
            self._save(agent_id, ctx)

    # -- lifecycle ------------------------------------------------------------------------------
    def _spawned(self, ev: EventLike) -> None:
        d = ev.data
        a = _Agent(str(d.get("agent_type", "")), str(d.get("model") or ""), bool(d.get("background")), ev.ts)
        self.agents[ev.agent_id] = a
        parent = self.agents.get(ev.parent_id) if ev.parent_id else None
        if parent is None:
            if ev.parent_id is not None:
                a.parent_ctx = self._load(ev.parent_id)  # a parent this tracer never saw run: join its trace
            elif ev.agent_id in self._callers:
                a.parent_ctx = self._callers.pop(ev.agent_id)
                self._save(ev.agent_id, a.parent_ctx)
            return
        call = d.get("call_id")
        if not isinstance(call, str) or call not in parent.tools:
            call = next((c for c, t in parent.spawns.items() if t == a.agent_type), None)
        parent.spawns.pop(call or "", None)
        tool = parent.tools.get(call or "")
        a.parent_ctx = trace.set_span_in_context(tool) if tool is not None else parent.ctx
        if a.parent_ctx is not None:
            self._save(ev.agent_id, a.parent_ctx)

    def _status(self, ev: EventLike) -> None:
        if ev.data.get("status") == "running":
            a = self.agents.get(ev.agent_id) or self._restored(ev)
            if a.span is None:
                self._start_run(ev, a, ev.ts)

    def _start_run(self, ev: EventLike, a: _Agent, at: float) -> Span:
        attrs: dict[str, Any] = {A.OPERATION: "invoke_agent", A.AGENT_NAME: a.agent_type, A.AGENT_ID: ev.agent_id,
                                 "subagents.nickname": ev.nickname, "subagents.depth": ev.depth,
                                 "subagents.background": a.background, **A.model_attributes(a.model)}
        if ev.parent_id:
            attrs["subagents.parent_id"] = ev.parent_id
        span = self.tracer.start_span(f"invoke_agent {a.agent_type}", context=a.parent_ctx or otel_context.Context(),
                                      kind=SpanKind.INTERNAL, attributes=attrs, start_time=_ns(at))
        a.span, a.ctx = span, trace.set_span_in_context(span)
        if a.parent_ctx is None:  # a root's first run: its later runs (resume) hang under this span
            a.parent_ctx = a.ctx
            self._save(ev.agent_id, a.parent_ctx)
        return span

    def _restored(self, ev: EventLike) -> _Agent:
        """An agent first seen running (resumed after it left memory, or restored by a new process)."""
        rec = self._record(ev.agent_id)
        a = _Agent(rec.agent_type if rec else "agent", rec.model if rec else "", bool(rec and rec.background), ev.ts)
        a.parent_ctx = self._load(ev.agent_id, rec)
        if a.parent_ctx is None and ev.parent_id is not None:
            parent = self.agents.get(ev.parent_id)
            if parent is not None:
                a.parent_ctx = parent.ctx
        self.agents[ev.agent_id] = a
        return a

    def _run_start(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is None:
            a = self._restored(ev)
        if a.span is None:
            self._start_run(ev, a, ev.ts)
        prompt = ev.data.get("prompt")
        if self.capture_content and isinstance(prompt, str) and a.span is not None:
            a.span.set_attribute(A.INPUT_MESSAGES, A.text_messages("user", prompt))

    def _completed(self, ev: EventLike) -> None:
        a = self.agents.pop(ev.agent_id, None)
        if a is None:
            a = self._restored(ev)
            self.agents.pop(ev.agent_id, None)
        span = a.span or self._start_run(ev, a, a.spawned_at)  # ended before it ran (closed while queued)
        self._end_children(a, ev.ts, "the agent ended")
        d = ev.data
        outcome = str(d.get("outcome", ""))
        span.set_attributes({"subagents.outcome": outcome, "subagents.status": str(d.get("status", "")),
                             "subagents.turns": int(d.get("turns") or 0),
                             "subagents.tool_calls": int(d.get("tool_calls") or 0),
                             **A.usage_attributes(d.get("usage"))})
        cost = d.get("cost_usd")
        if isinstance(cost, (int, float)):
            span.set_attribute(A.COST_USD, float(cost))
        if d.get("limit"):
            span.set_attribute("subagents.limit", str(d["limit"]))
        if self.capture_content and a.text:
            span.set_attribute(A.OUTPUT_MESSAGES, A.text_messages("assistant", a.text))
        if outcome in _ERROR_OUTCOMES:
            span.set_attribute(A.ERROR_TYPE, outcome)
            span.set_status(Status(StatusCode.ERROR, f"the agent ended with outcome {outcome!r}"))
        span.end(end_time=_ns(ev.ts))

    # -- model calls ----------------------------------------------------------------------------
    def _turn_start(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is None or a.span is None:
            return
        self._end_chat(a, ev.ts)
        attrs: dict[str, Any] = {A.OPERATION: "chat", **A.model_attributes(a.model),
                                 "subagents.turn": int(ev.data.get("turn") or 0)}
        a.chat = self.tracer.start_span(f"chat {attrs.get(A.REQUEST_MODEL, 'model')}",
                                        context=a.ctx, kind=SpanKind.CLIENT,
                                        attributes=attrs, start_time=_ns(ev.ts))
        a.text = ""

    def _text(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is not None and self.capture_content:
            text = str(ev.data.get("text", ""))  # kept to MAX_CONTENT (+1: it says it was cut)
            a.text = (a.text + text if ev.data.get("delta") else text)[:A.MAX_CONTENT + 1]

    def _model_end(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is None or a.chat is None:
            return
        chat, d = a.chat, ev.data
        chat.set_attributes(A.usage_attributes(d.get("usage")))
        if d.get("response_model"):
            chat.set_attribute(A.RESPONSE_MODEL, A.clip(str(d["response_model"]), 256))  # what a server said
        if d.get("stop_reason"):
            chat.set_attribute(A.FINISH_REASONS, [A.clip(str(d["stop_reason"]), 256)])
        if isinstance(d.get("cost_usd"), (int, float)):
            chat.set_attribute(A.COST_USD, float(d["cost_usd"]))
        if d.get("error"):
            chat.set_attribute(A.ERROR_TYPE, "model_error")
            chat.set_status(Status(StatusCode.ERROR, A.redact(str(d["error"]), A.MAX_ERROR)))
        self._end_chat(a, ev.ts)

    def _end_chat(self, a: _Agent, ts: float) -> None:
        chat, a.chat = a.chat, None
        if chat is not None:
            if self.capture_content and a.text:
                chat.set_attribute(A.OUTPUT_MESSAGES, A.text_messages("assistant", a.text))
            chat.end(end_time=_ns(ts))

    # -- tool calls -----------------------------------------------------------------------------
    def _tool_start(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is None or a.span is None:
            return
        self._end_chat(a, ev.ts)  # (no model_end event: the call ended before its first tool)
        d = ev.data
        name, call = A.name(d.get("tool", "")), str(d.get("call_id", ""))  # both from the model: any text
        attrs: dict[str, Any] = {A.OPERATION: "execute_tool", A.TOOL_NAME: name, A.TOOL_CALL_ID: A.name(call),
                                 A.TOOL_TYPE: "function"}
        args = d.get("arguments")
        if self.capture_content and args is not None:
            attrs[A.TOOL_ARGUMENTS] = A.redact(json.dumps(args, ensure_ascii=False, default=str))
        a.tools[call] = self.tracer.start_span(f"execute_tool {name}", context=a.ctx,
                                               kind=SpanKind.INTERNAL, attributes=attrs, start_time=_ns(ev.ts))
        if name == "spawn_agent" and isinstance(args, dict):
            a.spawns[call] = str(args.get("agent_type", ""))

    def _tool_end(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is None:
            return
        d = ev.data
        call = str(d.get("call_id", ""))
        span = a.tools.pop(call, None)
        a.spawns.pop(call, None)
        if span is None:
            return
        if self.capture_content and "output" in d:
            span.set_attribute(A.TOOL_RESULT, A.redact(str(d["output"])))
        if d.get("is_error"):
            span.set_attribute(A.ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error"))
        span.end(end_time=_ns(ev.ts))

    def _run_end(self, ev: EventLike) -> None:
        a = self.agents.get(ev.agent_id)
        if a is not None:  # a model call still open ended with the run (a failure says so itself: model_end)
            self._end_children(a, ev.ts, "the run ended", chat_failed=ev.data.get("outcome") in _ERROR_OUTCOMES)

    def _end_children(self, a: _Agent, ts: float, why: str, *, chat_failed: bool = True) -> None:
        if a.chat is not None:
            if chat_failed:
                a.chat.set_status(Status(StatusCode.ERROR, f"{why} during the model call"))
            self._end_chat(a, ts)
        for span in a.tools.values():
            span.set_status(Status(StatusCode.ERROR, f"{why} during the tool call"))
            span.end(end_time=_ns(ts))
        a.tools.clear()
        a.spawns.clear()

    # -- trace contexts saved with the runs ----------------------------------------------------------
    def _save(self, agent_id: str, ctx: otel_context.Context) -> None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=ctx)
        if not carrier:
            return
        self._saved[agent_id] = carrier
        if len(self._saved) > _SAVED_MAX:
            self._saved.popitem(last=False)
        if self.store is not None and _STORE_HAS_TRACE:
            try:
                self.store.update_run(agent_id, {"trace": carrier})
            except StoreError:
                log.warning("subagents tracing: the trace context of run %s could not be saved; a resume "
                            "after a restart starts a new trace", agent_id, exc_info=True)

    def _record(self, agent_id: str) -> RunRecord | None:
        if self.store is None:
            return None
        try:
            return self.store.get_run(agent_id)
        except StoreError:
            return None

    def _load(self, agent_id: str, rec: RunRecord | None = None) -> otel_context.Context | None:
        carrier = self._saved.get(agent_id)
        if carrier is None:
            rec = rec or self._record(agent_id)
            stored = getattr(rec, "trace", None) if rec is not None else None
            carrier = stored if isinstance(stored, dict) and stored else None
        if carrier is None:
            return None
        ctx = _PROPAGATOR.extract(carrier)
        return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None

    def shutdown(self) -> None:
        """End the spans still open (now), stop listening, and flush and shut down a tracer provider it owns."""
        now = time.time()
        if self.off is not None:
            self.off()
            self.off = None
        for a in list(self.agents.values()):
            self._end_children(a, now, "the runtime closed")
            if a.span is not None:
                a.span.set_status(Status(StatusCode.ERROR, "the runtime closed while the agent ran"))
                a.span.end(end_time=_ns(now))
        self.agents.clear()
        if self.provider is not None:
            self.provider.shutdown()
            self.provider = None

    async def aclose(self) -> None:
        """:meth:`shutdown`, with the last flush of a tracer provider it owns in a worker thread: with a collector
        that cannot be reached, that flush takes up to about twice the exporter's timeout, and the event loop
        (other runtimes, your application) goes on meanwhile."""
        provider, self.provider = self.provider, None
        self.shutdown()
        if provider is not None:
            await asyncio.to_thread(provider.shutdown)


_HANDLERS = {
    "subagent_spawned": Tracing._spawned,
    "subagent_status_changed": Tracing._status,
    "subagent_completed": Tracing._completed,
    "run_start": Tracing._run_start,
    "run_end": Tracing._run_end,
    "turn_start": Tracing._turn_start,
    "assistant_text": Tracing._text,
    "model_end": Tracing._model_end,
    "tool_start": Tracing._tool_start,
    "tool_end": Tracing._tool_end,
}
