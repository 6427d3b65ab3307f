"""The values that cross between the client, the workflows and the activities (plain dataclasses).

Everything here is data only (no I/O, no clock, no randomness), so the workflow sandbox may import it
as is and Temporal's JSON data converter turns each into a JSON object and back.  Messages travel as
the dicts of :func:`subagents.messages.message_to_dict`; results as :meth:`RunResult.to_dict` dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ActivityOptions", "AgentJob", "AgentOutcome", "AgentStart", "Announcement", "ApprovalNote", "Carry",
           "ChildState", "Fence", "InboxItem", "ModelCall", "ModelReply", "Prepared", "ResumeStart", "Resumed",
           "SpawnPlan", "SpawnReply", "ToolRun", "ToolRunReply", "WorkflowFinish"]

WORKFLOW_NAME = "subagents.Agent"
"""The workflow type every agent run is (its id is the run id)."""


@dataclass
class ActivityOptions:
    """Timeouts (seconds) and retries of the activities of one tree (the workflow applies them), and
    how long a workflow's history may grow: an agent continues as new (a fresh history, its state carried
    over) when Temporal suggests it, or after ``turns_per_history`` turns (``0``: only when suggested)."""

    model_timeout_s: float = 300.0
    tool_timeout_s: float = 600.0
    store_timeout_s: float = 60.0
    max_attempts: int = 5
    turns_per_history: int = 0


@dataclass
class Fence:
    """What determines an agent's tools: its type, depth, mode and the tools its parent could grant
    (``None`` for a root).  The worker recomputes (and caches) the registry from it."""

    agent_type: str
    depth: int
    parent_mode: str | None = None
    parent_grantable: list[str] | None = None


@dataclass
class AgentStart:
    """A root run as the client asks for it (the worker resolves the rest in ``prepare``)."""

    run_id: str
    agent_type: str
    prompt: str
    label: str = ""
    model: str | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    options: ActivityOptions = field(default_factory=ActivityOptions)
    background: bool = False  # recorded as a background run (``rt.spawn``); a root announces to nobody


@dataclass
class Prepared:
    """A run ready to go: recorded in the store, its prompt, fence and limits resolved."""

    run_id: str
    nickname: str
    agent_type: str
    prompt: str
    system: str
    system_prefix: int
    mode: str
    fence: Fence
    tools: list[str]
    grantable: list[str]
    parallel_safe: list[str]
    limits: dict[str, Any]
    model: str | None
    result_max_chars: int
    root_id: str
    depth: int = 0
    parent_id: str | None = None
    background: bool = False
    label: str = ""
    notes: list[str] = field(default_factory=list)
    options: ActivityOptions = field(default_factory=ActivityOptions)
    runs: int = 1  # which start of the agent this is (a resume adds one): announcement keys are "<run_id>:<runs>"
    session_rules: list[str] = field(default_factory=list)  # "allow always" answers: this run's and its parents'
    max_threads: int = 0  # the worker's [agents] max_threads (0: not enforced); enforced per tree by the root workflow
    when_full: str = "refuse"  # the worker's [agents] when_full
    slot: str = ""  # the slot this run holds in its root's ledger ("": none; engines/temporal/slots.py)
    queued: bool = False  # recorded pending_init: its workflow waits for the root's grant before it runs


@dataclass
class ResumeStart:
    """A finished run to reopen with its whole conversation and one more user message (``limits`` are
    merged over the recorded ones: ``None`` fields keep theirs)."""

    run_id: str
    message: str
    limits: dict[str, Any] = field(default_factory=dict)
    options: ActivityOptions = field(default_factory=ActivityOptions)


@dataclass
class Resumed:
    """A reopened run: recorded ``running`` again, its transcript, the new user message (after the
    announcements that waited for it, whose keys are ``delivered`` with it)."""

    run: Prepared
    messages: list[dict[str, Any]]
    prompt: str
    delivered: list[str] = field(default_factory=list)


@dataclass
class InboxItem:
    """A message waiting for the next tool boundary: ``key`` is an announcement's idempotency key."""

    key: str | None
    text: str


@dataclass
class ChildState:
    """A sub-agent as its parent's workflow knows it; once ``ended``, ``text`` is what the parent reads
    (the compressed result, or the error when ``failed``) and ``status`` its final status."""

    run_id: str
    nickname: str
    agent_type: str
    background: bool = False
    ended: bool = False
    text: str = ""
    status: str = ""
    failed: bool = False
    runs: int = 1


@dataclass
class Carry:
    """An agent's state when its workflow continues as new (the conversation and everything counted)."""

    run: Prepared
    messages: list[dict[str, Any]]
    recorded: int
    acks: list[str]
    inbox: list[InboxItem]
    seen: list[str]
    turns: int
    tool_calls: int
    usage: dict[str, int]
    cost: float | None
    cost_known: bool
    last_text: str
    children: list[ChildState]
    started: float  # when the run began (epoch seconds, workflow time): timeout_s and duration count from it
    continued: int = 0  # how many times the run continued as new
    limits_state: dict[str, Any] = field(default_factory=dict)  # tree budget, slot ledger (engines/temporal/limits.py)


@dataclass
class AgentJob:
    """The input of an agent workflow: a root to prepare, a child its parent prepared, or a run carried
    over from its previous history (continue-as-new), or a finished run to resume."""

    start: AgentStart | None = None
    prepared: Prepared | None = None
    carry: Carry | None = None
    resume: ResumeStart | None = None


@dataclass
class ModelCall:
    """One model call; ``messages[record_from:]`` are recorded in the store first (with ``delivered``
    announcements marked delivered), the assistant's reply after, at the next index."""

    run: Prepared
    messages: list[dict[str, Any]]
    record_from: int
    delivered: list[str] = field(default_factory=list)


@dataclass
class ModelReply:
    """The assistant message (already recorded), its usage and cost, or the error that ended the run."""

    message: dict[str, Any] | None = None
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    cost_known: bool = True
    error: str | None = None


@dataclass
class ToolRun:
    """One tool call of an agent, run by the worker through the agent's guard and fenced registry;
    ``decision``: a person's answer to the approval this call asked for (``Decision`` fields), with ``approved``:
    the request it answered (tool, arguments, "always" rule), which the call must still be to run."""

    run: Prepared
    call_id: str
    name: str
    arguments: dict[str, Any]
    decision: dict[str, Any] | None = None


@dataclass
class ToolRunReply:
    """The tool's result; or, when the guard would ask a person, ``approval`` (the request: nothing ran).
    ``rules``: the "allow always" rule the decision added (for the run's later calls and children)."""

    content: str
    is_error: bool = False
    approval: dict[str, Any] | None = None
    rules: list[str] = field(default_factory=list)


@dataclass
class ApprovalNote:
    """An approval request to record where clients see it (an audit row on the tree's root run)."""

    run: Prepared
    request: dict[str, Any]


@dataclass
class SpawnPlan:
    """A ``spawn_agent`` call to check and record (the child is started by the parent's workflow)."""

    parent: Prepared
    arguments: dict[str, Any]
    queued: bool = False  # no slot free yet: recorded pending_init (it starts when the root grants a slot)


@dataclass
class SpawnReply:
    """The recorded child, or the tool error for the model."""

    child: Prepared | None = None
    error: str | None = None


@dataclass
class Announcement:
    """A background child's result for its parent; ``key`` (``"<child id>:<runs>"``) makes delivery idempotent.
    ``text`` is the notification; ``compressed`` and ``status`` are what ``wait`` hands over."""

    key: str
    child_id: str
    text: str
    compressed: str = ""
    status: str = ""


@dataclass
class WorkflowFinish:
    """The end of a run to record: its result, the messages not recorded yet (``pending``, from index
    ``record_from``) and the announcements they (or a ``wait``) handed over (``delivered``)."""

    run: Prepared
    result: dict[str, Any]
    pending: list[dict[str, Any]] = field(default_factory=list)
    record_from: int = 0
    delivered: list[str] = field(default_factory=list)


@dataclass
class AgentOutcome:
    """What an agent workflow returns: its result, the compressed text a parent sees, the announcement."""

    result: dict[str, Any]
    compressed: str
    announcement: Announcement | None = None
