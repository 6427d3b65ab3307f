"""Prompt layering and the texts a parent receives (compressed results, announcements).

A child's system prompt is, in order: the parent's *base* system prompt, byte for byte (so a
provider's prompt cache of that prefix is shared), the agent type's instructions, the
isolation / working-directory instructions, its permission mode, the briefing, and the latest
notepad entries.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..markup import quote_text
from .result import RunResult, trigger_message

__all__ = [
    "DEFAULT_BASE_PROMPT",
    "announcement_text",
    "build_system_prompt",
    "compressed_result",
    "header_line",
]

DEFAULT_BASE_PROMPT = (
    "You are an agent of the `subagents` runtime. You work in a project directory through tools; "
    "every path you give a file tool is relative to the workspace root (absolute paths must stay "
    "inside it). Prefer doing the work over describing it, and keep your final answer short and "
    "factual: it is all the caller will see."
)

SEP = "\n\n"


def build_system_prompt(
    base: str,
    type_instructions: str,
    *,
    workdir: str,
    is_child: bool,
    briefing: str = "",
    notes: Sequence[str] = (),
    mode_line: str = "",
) -> str:
    """Layer the system prompt; ``base`` is kept verbatim as the prefix."""
    parts = [base]
    if type_instructions:
        parts.append(type_instructions)
    cwd = f"Working directory (workspace root): {workdir}"
    if is_child:
        cwd += (". You are a sub-agent: you were given one task by a parent agent, which will see only "
                "your final message. You cannot see the parent's conversation.")
    parts.append(cwd)
    if mode_line:
        parts.append(mode_line)
    if briefing:
        parts.append("# Briefing from the parent\n" + briefing)
    if notes:
        parts.append("# Shared notepad (latest entries)\n" + "\n".join(f"- {n}" for n in notes))
    return SEP.join(parts)


def header_line(r: RunResult) -> str:
    """The one-line stats header of a compressed result: seed 003's stats (runtime, tokens, cost), not how many
    turns or tool calls the child took (seed 000: the parent never sees them)."""
    return (f"[agent {r.nickname} · id {r.id} · {r.agent} · status {r.status} · outcome {r.outcome}"
            + (f" ({r.limit})" if r.limit else "") + f" · {r.announce_stats()}]")


def _capped(text: str, cap: int, run_id: str) -> str:
    if len(text) <= cap:
        return text
    return (text[:cap] + f"\n[... result truncated: {len(text):,} characters in all, the first {cap:,} shown; "
            f"the full text is available from rt.result({run_id!r}) ...]")


def compressed_result(r: RunResult, cap: int) -> str:
    """What a parent sees of a finished child: one header line and the (capped) final text, quoted
    (:func:`~subagents.markup.quote_text`: it cannot fake the runtime's markup in its parent's context)."""
    body = quote_text(_capped(r.text, cap, r.id)) if r.text else "(no output)"
    lines = [header_line(r), body]
    if r.outcome != "ok":
        why = r.error or r.outcome
        lines.append(f"[the agent did not complete normally: {why}; the text above is its partial work]")
    return "\n".join(lines)


def announcement_text(r: RunResult, label: str, cap: int) -> str:
    """The trigger message a background child's parent receives when it ends (seed 003's announce flow)."""
    return trigger_message(r, label, quote_text(_capped(r.text, cap, r.id)) if r.text else "")
