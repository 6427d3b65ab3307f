"""``AgentCore``: the loop of one agent — one conversation, one tool registry, one model.

Contract of :meth:`AgentCore.run` (each step is one method below):

1. Append the prompt (if any) as a user message; start the wall clock of ``limits.timeout_s``
   (enforced with a deadline around the whole run, so a hanging model call or tool is cancelled).
2. Per turn, check ``max_turns`` *before* calling the model, emit ``turn_start``.
3. Build the :class:`ModelRequest` (system prompt, the whole conversation, the tool specs of the
   fence) and call the model; text reaches ``assistant_text`` events (streamed deltas as they
   arrive).  A model failure ends the run with outcome ``error``.
4. Append the assistant message; add usage and cost to the budget and check ``max_tokens`` and
   ``max_cost_usd`` (spent + reserved for children).
5. Decide: no tool calls → :class:`Final` (unless messages wait in the inbox: then they are
   appended and the run goes on); else run the tools.  A run with an ``output`` (:mod:`.structured`)
   ends only with a valid ``final_result`` call instead.
6. Run the tool calls: consecutive parallel-safe calls (read-only and agent tools) concurrently,
   the others one by one, in order.  The registry enforces the fence and the argument schema;
   every failure is a tool error the model sees, never an exception.
7. Append one user message with every tool result (paired by id) plus any inbox messages
   (``send_input``, announcements) — the "next tool boundary" — and go to 2 (:class:`RunAgain`).
8. End in a :class:`Final` or :class:`Stopped` decision and build the :class:`RunResult`, keeping
   the last assistant text as partial work when stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ..exceptions import LimitExceeded, ModelError
from ..messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from ..models.base import AgentInfo, Model, ModelRequest, ModelResponse
from ..models.pricing import BUILTIN_PRICES, PriceTable
from ..tools.base import ToolContext, ToolRegistry
from .calls import run_parallel
from .events import CURRENT_CALL, Event, EventBus
from .inbox import Inbox
from .limits import Budget, Limits
from .result import RunResult
from .status import Outcome, Status
from .structured import FINAL_RESULT, REMINDER, Expectation
from .turns import CallGuard, Final, RunAgain, Stopped, TurnDecision

__all__ = ["AgentCore", "CallGuard", "Final", "RunAgain", "Stopped", "TurnDecision"]

MAX_STOP_HOOK_TURNS = 8
"""How many times in a row Stop / SubagentStop hooks may send an agent back to work before it ends anyway."""
MessageSink = Callable[[Message], None]


class AgentCore:
    """One agent's conversation loop.  See the module docstring for the contract."""

    __slots__ = (
        "_cost_known", "_deadline", "_deltas", "_held_at", "_holds", "_saved_when", "_stop_hooks", "budget", "bus",
        "cost", "ctx", "guard", "inbox", "info", "last_text", "limits", "messages", "model", "on_message", "open_run",
        "output", "prices", "registry", "started", "system", "system_prefix", "tool_calls", "turns", "usage",
    )

    def __init__(
        self,
        *,
        info: AgentInfo,
        model: Model,
        system: str,
        registry: ToolRegistry,
        ctx: ToolContext,
        limits: Limits | None = None,
        budget: Budget | None = None,
        bus: EventBus | None = None,
        messages: list[Message] | None = None,
        on_message: MessageSink | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        self.info = info
        self.model = model
        self.system = system
        self.system_prefix = 0  # length of the inherited base prompt at the start of ``system``
        self.registry = registry
        self.ctx = ctx
        self.limits = limits or Limits()
        self.budget = budget
        self.bus = bus or EventBus()
        self.messages: list[Message] = messages if messages is not None else []
        self.on_message = on_message
        self.prices = prices or BUILTIN_PRICES
        self.inbox = Inbox()
        self.guard: CallGuard | None = None
        self.output: Expectation | None = None  # set by structured.attach: the run must end with final_result
        self._deadline: asyncio.Timeout | None = None
        self._holds = 0
        self._held_at = 0.0
        self._saved_when: float | None = None
        self.open_run = False  # its run_start was published and its run_end not yet (see end_run)
        self._reset()

    def _reset(self) -> None:
        self.turns = 0
        self.tool_calls = 0
        self.usage = Usage()
        self.cost: float | None = None
        self._cost_known = True
        self.last_text = ""
        self.started = time.monotonic()
        self._deltas = False
        self._stop_hooks = 0
        if self.output is not None:
            self.output.reset()

    # -- events ---------------------------------------------------------------------------------
    def emit(self, kind: str, data: dict[str, object]) -> None:
        """Publish ``kind`` with ``data`` (a fresh dict the event keeps) when someone listens.

        Callers build ``data`` only under ``if self.bus.active`` and pass it as one dict: keyword arguments
        gathered into ``**data`` cost CPython a name-by-name match per keyword (a fifth of an event's cost)."""
        if self.bus.active:
            i = self.info
            self.bus.publish(Event(kind, i.id, i.parent_id, i.depth, data, time.time(), i.nickname))

    def _append(self, m: Message) -> None:
        self.messages.append(m)
        if self.on_message is not None:
            self.on_message(m)

    # -- the run --------------------------------------------------------------------------------
    async def run(self, prompt: str | None = None) -> RunResult:
        """Run until a final answer or a stop; always returns a :class:`RunResult`."""
        self._reset()
        if self.budget is None or self.budget.limits is not self.limits:
            self.budget = Budget(self.limits)
        blocked = None
        if prompt is not None and self.guard is not None:
            prompt, blocked = await self.guard.on_start(prompt)
        if prompt is not None:
            self._append(Message.user(prompt))
        if self.bus.active:
            self.emit("run_start", {"agent_type": self.info.agent_type, "prompt": prompt})
            self.open_run = True
        decision = Stopped(Outcome.ERROR, None, blocked) if blocked else await self._run_with_deadline()
        result = self.result(decision)
        if self.open_run:
            self.end_run(result)
        return result

    def end_run(self, result: RunResult) -> None:
        """Publish ``run_end`` for a run whose ``run_start`` was published (the manager calls it too, for a run
        cancelled inside :meth:`run`: every ``run_start`` gets its ``run_end``)."""
        if self.open_run:
            self.open_run = False
            self.emit("run_end", {"status": str(result.status), "outcome": str(result.outcome), "turns": result.turns,
                                  "usage": result.usage.to_dict()})

    async def _run_with_deadline(self) -> Final | Stopped:
        assert self.budget is not None
        remaining = self.budget.remaining_s()
        if remaining is None:
            return await self._turns()
        try:
            if remaining <= 0:  # (a child that waited for a slot past its parent's deadline: no model call)
                raise TimeoutError
            async with asyncio.timeout(remaining) as self._deadline:
                return await self._turns()
        except TimeoutError:
            return Stopped(Outcome.TIMEOUT, "timeout_s", "Exceeded its parent's timeout_s (the tree's deadline)"
                           if self.budget.inherited else f"Exceeded timeout_s={self.limits.timeout_s}")
        finally:
            self._deadline = None

    def hold_clock(self) -> None:
        """Stop the run's wall clock (a person is deciding an approval); calls nest, see :meth:`release_clock`."""
        self._holds += 1
        if self._holds > 1:
            return
        self._held_at = time.monotonic()
        d = self._deadline
        self._saved_when = d.when() if d is not None and not d.expired() else None
        if d is not None and self._saved_when is not None:
            d.reschedule(None)

    def release_clock(self) -> None:
        """Restart the clock once the last hold ends: the deadline moves by the time it was held."""
        if self._holds == 0:
            return
        self._holds -= 1
        if self._holds:
            return
        paused = time.monotonic() - self._held_at
        if self.budget is not None and self.budget.deadline is not None:
            self.budget.deadline += paused
        d = self._deadline
        if d is not None and self._saved_when is not None and not d.expired():
            d.reschedule(self._saved_when + paused)
        self._saved_when = None

    async def _turns(self) -> Final | Stopped:
        while True:
            decision = await self.turn()
            if not isinstance(decision, RunAgain):
                return decision

    async def turn(self) -> TurnDecision:
        """One turn: steps 2–7 of the contract."""
        try:
            self.limits.check_turns(self.turns + 1)
        except LimitExceeded as e:
            return Stopped(Outcome.LIMIT, e.limit, str(e))
        spent = self.budget.exhausted() if self.budget is not None else None
        if spent is not None:  # a sibling or a child spent the shared budget: no call that cannot be paid for
            return Stopped(Outcome.LIMIT, spent.limit, str(spent))
        self.turns += 1
        if self.bus.active:
            self.emit("turn_start", {"turn": self.turns, "usage": self.usage.to_dict()})
        try:
            response = await self._call_model()
        except ModelError as e:
            self.emit("model_end", {"model": self.model.name, "error": str(e)})
            return Stopped(Outcome.ERROR, None, str(e))
        except (TypeError, ValueError, LookupError, AttributeError, RuntimeError, AssertionError) as e:
            self.emit("model_end", {"model": self.model.name, "error": f"{type(e).__name__}: {e}"})
            return Stopped(Outcome.ERROR, None, f"model {self.model.name!r} failed: {type(e).__name__}: {e}")
        stop = self._take_reply(response)
        if stop is not None:
            return stop
        if self.output is not None:
            return await self._structured(response)
        if not response.tool_calls:
            if self.inbox:
                self._append(Message("user", self._drain_inbox()))
                return RunAgain()
            return RunAgain() if await self._sent_back(response.text) else Final(response.text)
        del response  # its tool calls live on as the message's blocks: a burst of 10,000 spawns keeps one copy
        await self._run_tools(self.messages[-1].content)
        return RunAgain()

    async def _sent_back(self, text: str) -> bool:
        """Stop / SubagentStop hooks may send the agent back to work (at most ``MAX_STOP_HOOK_TURNS`` in a row)."""
        if self.guard is None or self._stop_hooks >= MAX_STOP_HOOK_TURNS:
            return False
        reason = await self.guard.on_final(text, self._stop_hooks > 0)
        if reason is None:
            return False
        self._stop_hooks += 1
        self._append(Message.user(f"<stop-hook>\n{reason}\n</stop-hook>"))
        return True

    async def _structured(self, r: ModelResponse) -> TurnDecision:
        """Step 5 of a run that must end with a valid ``final_result`` call (see :mod:`.structured`)."""
        out = self.output
        assert out is not None
        if not r.tool_calls:  # plain text is no result: read what waits in the inbox, or be told to call it
            self._append(Message("user", self._drain_inbox()) if self.inbox else Message.user(REMINDER))
            return RunAgain()
        await self._run_tools(self.messages[-1].content)  # final_result is checked in _run_one
        text = out.text
        if text is None:
            return RunAgain()
        arrived = any(type(b) is TextBlock for b in self.messages[-1].content)
        if self.inbox:  # follow-ups wait for the end of the turn, which this would be
            self._append(Message("user", self._drain_inbox()))
            arrived = True
        if arrived or await self._sent_back(text):
            out.reset()  # messages arrived with the result, or a Stop hook objected: the agent goes on
            return RunAgain()
        return Final(text)

    async def _call_model(self) -> ModelResponse:
        on_text = self._on_delta if self.bus.active else None
        self._deltas = False
        specs = self.registry.specs() if self.output is None else [  # a tool of the same name is shadowed (no API
            *(t for t in self.registry.specs() if t.name != FINAL_RESULT), self.output.spec.tool_spec]  # takes two)
        req = ModelRequest(self.info, self.system, self.messages, specs, on_text, self.system_prefix)
        return await self.model.request(req)

    def _on_delta(self, delta: str) -> None:
        self._deltas = True
        self.emit("assistant_text", {"text": delta, "delta": True})

    def _take_reply(self, r: ModelResponse) -> Stopped | None:
        """Step 4: append the assistant message, account usage and cost, check the budget."""
        content: list[TextBlock | ToolUseBlock | ToolResultBlock] = []
        if r.text:
            content.append(TextBlock(r.text))
            self.last_text = r.text
            if not self._deltas and self.bus.active:
                self.emit("assistant_text", {"text": r.text, "delta": False})
        for c in r.tool_calls:
            content.append(ToolUseBlock(c.id, c.name, c.arguments))
        self._append(Message("assistant", content))
        if r.usage is not None:
            self.usage.add(r.usage)
            cost = self.prices.cost_of(self.model, r.usage)
            if cost is None:
                self._cost_known = False
                self.cost = None
            elif self._cost_known:
                self.cost = (self.cost or 0.0) + cost
        else:
            cost = None
        if self.bus.active:
            self.emit("model_end", {"model": self.model.name, "response_model": r.model, "stop_reason": r.stop_reason,
                                    "usage": r.usage.to_dict() if r.usage is not None else None, "cost_usd": cost,
                                    "tool_calls": len(r.tool_calls)})
        assert self.budget is not None
        if r.usage is not None:
            self.budget.add(r.usage, cost)
        try:
            self.budget.check()
        except LimitExceeded as e:
            return Stopped(Outcome.LIMIT, e.limit, str(e))
        return None

    async def _run_tools(self, content: list[TextBlock | ToolUseBlock | ToolResultBlock]) -> None:
        """Step 6 and 7 (``content``: the assistant message just appended, whose tool calls are run)."""
        blocks = [b for b in content if type(b) is ToolUseBlock]
        results: list[ToolResultBlock] = []
        i, n = 0, len(blocks)
        while i < n:
            j = i
            while j < n and self._parallel_safe(blocks[j]):
                j += 1
            if j - i > 1:
                results.extend(await run_parallel(self._run_one, blocks[i:j]))
            else:
                j = i + 1
                results.append(await self._run_one(blocks[i]))
            i = j
        out: list[TextBlock | ToolUseBlock | ToolResultBlock] = list(results)
        if self.inbox.steering():  # follow-ups ([announce] steer = false) wait for the end of the turn
            out.extend(TextBlock(t) for t in self.inbox.drain(followups=False))
        self._append(Message("user", out))

    def _parallel_safe(self, b: ToolUseBlock) -> bool:
        t = self.registry.get(b.name)
        return t is not None and t.parallel_safe

    async def _run_one(self, b: ToolUseBlock) -> ToolResultBlock:
        self.tool_calls += 1
        active = self.bus.active
        token = None
        if active:
            self.emit("tool_start", {"tool": b.name, "call_id": b.id, "arguments": b.arguments})
            t0 = time.perf_counter()
            token = CURRENT_CALL.set(b.id)
        g, out = self.guard, self.output
        try:
            if out is not None and b.name == FINAL_RESULT:
                res = out.call(b)
            elif g is None:
                res = await self.registry.execute(b, self.ctx)
            else:
                res = await g.run_call(b, self.registry, self.ctx)
        finally:
            if token is not None:
                CURRENT_CALL.reset(token)
        if active:
            self.emit("tool_end", {"tool": b.name, "call_id": b.id, "is_error": res.is_error,
                                   "duration_s": time.perf_counter() - t0, "output": res.content[:2000]})
        return res

    def _drain_inbox(self) -> list[TextBlock | ToolUseBlock | ToolResultBlock]:
        return [TextBlock(t) for t in self.inbox.drain()]

    # -- results --------------------------------------------------------------------------------
    def result(self, decision: Final | Stopped, *, status: Status | None = None) -> RunResult:
        """Step 8: the :class:`RunResult` for a decision, with partial work when stopped."""
        i = self.info
        if isinstance(decision, Final):
            outcome, limit, error, text, truncated = Outcome.OK, None, None, decision.text, False
        else:
            outcome, limit, error = decision.outcome, decision.limit, decision.error
            text, truncated = self.last_text, True
        out = self.output
        return RunResult(
            id=i.id, nickname=i.nickname, agent=i.agent_type, status=status or outcome.status(),
            outcome=outcome, text=text, truncated=truncated, limit=limit, turns=self.turns,
            usage=self.usage, cost_usd=self.cost, duration_s=time.monotonic() - self.started, error=error,
            tool_calls=self.tool_calls, parent_id=i.parent_id, depth=i.depth,
            output=out.accepted if out is not None and isinstance(decision, Final) else None,
        )

