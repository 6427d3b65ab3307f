"""The ``notepad_write`` tool: an agent adds a finding to the runtime's shared notepad.

The notepad (:attr:`~subagents.tools.base.ToolContext.notepad`, the manager's list; ``rt.note(text)``
writes to it from Python) is seed 001's "notepad wisdom": the latest :data:`NOTEPAD_LATEST` entries are
layered into the system prompt of every sub-agent spawned afterwards.  Entries carry the writer's
nickname, so a reader knows where a fact came from.
"""

from __future__ import annotations

from ..exceptions import ToolError
from .base import ToolCategory, ToolContext, tool

__all__ = ["MAX_NOTE_CHARS", "MAX_RAW_CHARS", "NOTEPAD_LATEST", "notepad_write"]

NOTEPAD_LATEST = 10
"""How many of the latest entries a new sub-agent's prompt carries."""

MAX_NOTE_CHARS = 1000
"""The longest entry ``notepad_write`` takes (every later sub-agent pays for it in its prompt)."""

MAX_RAW_CHARS = 20 * MAX_NOTE_CHARS
"""A longer ``text`` is refused before its white space is folded: folding splits it into one string per word, on
the event loop (a note of 30 MB took 600 MB and seconds, with every agent of the runtime waiting)."""


def _too_long(n: int) -> ToolError:
    return ToolError(f"the note is {n:,} characters long, over the limit of {MAX_NOTE_CHARS:,}; every later "
                     "sub-agent reads it in its prompt, so keep one short finding per note and split longer ones")


# READ: it touches no file, so read-only agents (explore, plan) may share what they found.  ``inline``: two
# calls of one turn append in order.
@tool(category=ToolCategory.READ, inline=True)
def notepad_write(ctx: ToolContext, text: str) -> str:
    """Add a short note to the shared notepad: a fact, decision or pitfall that agents spawned later should know.

    The latest entries are shown in the system prompt of every sub-agent started afterwards (not in the
    prompts of agents already running). Keep each note to one self-contained finding.

    Args:
        text: the note, e.g. "tests run with `make check`, not pytest directly".
    """
    if len(text) > MAX_RAW_CHARS:
        raise _too_long(len(text))
    note = " ".join(text.split())
    if not note:
        raise ToolError("the note is empty; write the fact, decision or pitfall to share")
    if len(note) > MAX_NOTE_CHARS:
        raise _too_long(len(note))
    if ctx.notepad is None:
        raise ToolError("there is no shared notepad here (this agent runs without an agent manager); put the "
                        "finding in your answer instead")
    ctx.notepad.append(f"{ctx.agent.nickname}: {note}")
    return (f"Noted (entry {len(ctx.notepad)} of the notepad). Sub-agents spawned from now on see the latest "
            f"{NOTEPAD_LATEST} entries in their prompt.")
