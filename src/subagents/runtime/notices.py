"""Many background results at once, kept to one model message's worth (:func:`fitted`).

A background child's result reaches its parent as a ``<subagent-notification>`` (seed 003's trigger message,
:func:`~.result.trigger_message`), delivered at the parent's next tool boundary.  A parent that started 1,000
children whose results arrive together would get 1,000 of them in one message — 330 KB for one-line results,
megabytes for long ones: more than a model's context holds, so the parent's next model call fails.

When the notifications drained at once hold more than :data:`NOTICE_BUDGET` characters, they become one line
each (``wait``'s "many results" form) in a single ``<subagent-notifications>`` block, and past what the budget
holds in lines, a count.  Nothing is lost: ``wait(agent_ids=[...])`` gives each result in full (and
``rt.result(id)`` the whole text).  Other messages in the same delivery (``send_input`` from the user or a
teammate) are always kept whole, in their place.

>>> from subagents.runtime.result import RunResult
>>> from subagents.runtime.status import Outcome, Status
>>> from subagents.runtime.result import trigger_message
>>> r = RunResult(id="a1b2", nickname="Ada", agent="general-purpose", status=Status.COMPLETED, outcome=Outcome.OK,
...               text="x" * 900)
>>> many = [trigger_message(r, f"task {i}", r.text) for i in range(60)]
>>> out = fitted(["from the user: hurry", *many])
>>> out[0], len(out), sum(map(len, out)) < sum(map(len, many)) // 5
('from the user: hurry', 2, True)
>>> print(out[1].splitlines()[1])
60 background tasks finished at once, shown one line each (wait(agent_ids=[...]) gives a result in full):
"""

from __future__ import annotations

from .result import NO_REPLY

__all__ = ["NOTICE_BUDGET", "fitted", "notice_line"]

NOTICE_BUDGET = 45_000
"""Characters of notifications one delivery gives in full (``wait``'s budget for results, the same reason)."""

_LINE_WIDTH = 160  # a one-line form's findings are cut to this many characters
_HEAD = "<subagent-notification>\nA background task "
_FINDINGS, _STATS, _END = "\n\nFindings:\n", "\n\nStats: ", "</subagent-notification>"


def notice_line(text: str) -> str | None:
    """``text``'s one-line form if it is a background child's notification, else ``None``.

    >>> notice_line('<subagent-notification>\\nA background task "scan" (Ada, id a1) just failed.\\n'
    ...             'Reason: boom. The findings below are its partial work.\\n\\nFindings:\\nhalf\\n done\\n\\n'
    ...             'Stats: runtime 1s</subagent-notification>')
    '- "scan" (Ada, id a1) failed: half done'
    >>> notice_line("a message from the user") is None
    True
    """
    if not text.startswith(_HEAD):
        return None
    end = text.find("\n", len(_HEAD))
    who, sep, status = text[len(_HEAD):end].rpartition(") just ")
    start, stop = text.find(_FINDINGS, end), text.rfind(_STATS)
    if end < 0 or not sep or start < 0 or stop < start:
        return None
    findings = " ".join(text[start + len(_FINDINGS):stop].split())
    if len(findings) > _LINE_WIDTH:
        findings = findings[:_LINE_WIDTH - 1] + "…"
    return f"- {who}) {status.removesuffix('.')}: {findings}"


def fitted(texts: list[str], budget: int = NOTICE_BUDGET) -> list[str]:
    """``texts`` (one delivery, in order) with its notifications in one-line form when they hold more than ``budget``
    characters (see the module docstring); unchanged otherwise."""
    if sum(map(len, texts)) <= budget:
        return texts
    out: list[str] = []
    lines: list[str] = []
    at, more, used = -1, 0, 0  # where the block goes (the first notification's place); notifications not shown
    for t in texts:
        if more and t.startswith(_HEAD) and t.endswith(_END):  # past the budget: counted (not parsed)
            more += 1
            continue
        line = notice_line(t)
        if line is None:
            out.append(t)
            continue
        if at < 0:
            at = len(out)
        used += len(line) + 1
        if used > budget and lines:
            more = 1
        else:
            lines.append(line)
    if not lines:
        return texts
    block = [f"{len(lines) + more} background tasks finished at once, shown one line each "
             "(wait(agent_ids=[...]) gives a result in full):", *lines]
    if more:
        block.append(f"[and {more} more not shown: list_agents lists them; wait(agent_ids=[...]) with their ids "
                     "gives their results]")
    block.append("Summarize this naturally for the user. Keep it brief (1-2 sentences).\n"
                 f"You can respond with {NO_REPLY} if no announcement is needed.")
    out.insert(at, "<subagent-notifications>\n" + "\n".join(block) + "\n</subagent-notifications>")
    return out
