"""The offline demo: a scripted model (``FunctionModel`` — no LLM) that drives the real tools.

The script plays an agent that surveys a directory: ``list_dir`` the scope, then (in one turn of
parallel read-only calls) ``glob`` every visible sub-directory, ``grep`` for TODO/FIXME markers and
Python definitions and ``read_file`` the README, then ``write_file`` a report
(:data:`REPORT_PATH`) and answer with a summary.  Every fact in the report and the answer is
parsed from the tool results in the :class:`ModelRequest` — the script never touches the disk.  When a
tool capped its output (``[... N more ... not shown]``, ``[... stopped after ...]``, ``[... output
truncated ...]``), the counts it fed are lower bounds and the report says "at least".

:func:`demo_script` routes on who is asking (``request.agent.agent_type``) and what it may do
(``request.tool_names``): a read-only agent (``explore``, or any agent without ``write_file``)
answers with the report text instead of writing it, so a coordinator can fan out to ``explore``
children, one per directory, by giving each a prompt with a ``scope: <dir>`` line.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from .messages import Message
from .models.base import ModelRequest, ModelResponse, ToolCall
from .models.function import FunctionModel

__all__ = ["DEMO_LABEL", "DEMO_PROMPT", "REPORT_PATH", "Survey", "demo_model", "demo_script", "survey"]

DEMO_LABEL = "scripted model — no LLM"
REPORT_PATH = "subagents-demo-report.md"
DEMO_PROMPT = (
    "Survey this directory: list it, count its files by extension, find TODO/FIXME markers and Python "
    f"definitions, read the README, then write a short report to {REPORT_PATH} and summarise it."
)
TODO_PATTERN = r"TODO|FIXME"
DEF_PATTERN = r"^\s*(async\s+def|def|class)\s"
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "env", "build", "dist", "site-packages", "target"})
"""Generated or vendored directories the survey does not descend into (hidden ones are skipped too)."""
MAX_LISTED = 10
MAX_ENTRIES = 50  # entries the report lists (all are counted)


def demo_model(pace_s: float = 0.0) -> FunctionModel:
    """The demo's model: :func:`demo_script` wrapped in a :class:`FunctionModel`.

    ``pace_s`` makes every scripted "model call" take that long, so a person watching the live view
    can follow the agents working (the tools still run at full speed).
    """
    if pace_s <= 0:
        return FunctionModel(demo_script, name=f"demo ({DEMO_LABEL})")

    async def paced(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(pace_s)
        return demo_script(request)

    return FunctionModel(paced, name=f"demo ({DEMO_LABEL})")


def demo_script(request: ModelRequest) -> ModelResponse:
    """Route to the script for the calling agent.

    A root agent that may spawn sub-agents coordinates: it fans out one background ``explore``
    child per directory and merges their findings; read-only agents answer with their report.
    """
    writes = "write_file" in request.tool_names and request.agent.agent_type != "explore"
    if writes and request.agent.depth == 0 and {"spawn_agent", "wait"} <= set(request.tool_names):
        return coordinate(request)
    return survey(request, write_report=writes)


def coordinate(request: ModelRequest) -> ModelResponse:
    """The coordinator's script: list, fan out to explore children, scan the rest, wait, report."""
    done = finished_calls(request.messages)
    names = {d.name for d in done}
    if "list_dir" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] Listing the workspace before delegating.",
                             [ToolCall("list_dir", {"path": "."})])
    s = Survey.from_calls(".", done)
    if not s.dirs:
        return survey(request, write_report=True)
    if "spawn_agent" not in names:
        spawns = [ToolCall("spawn_agent", {
            "agent_type": "explore", "description": f"survey {d}", "background": True,
            "prompt": f"scope: {d}\nSurvey this directory and report what you find."}) for d in s.dirs]
        own = s.scan_calls(dirs=[])
        return ModelResponse(f"[{DEMO_LABEL}] Delegating {_n(len(s.dirs), 'directory')} to explore sub-agents "
                             "in the background; scanning the top-level files myself.", spawns + own)
    refused = [d for d in done if d.name == "spawn_agent" and d.is_error]
    if refused and "glob" not in names:
        dirs = [str(d.arguments["prompt"]).split("\n", 1)[0].removeprefix("scope: ") for d in refused]
        return ModelResponse(f"[{DEMO_LABEL}] {_n(len(dirs), 'spawn')} refused ({refused[0].output.split(':')[0]}); "
                             "scanning those directories myself.", s.scan_calls(dirs=dirs, files=False))
    if "wait" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] Waiting for the sub-agents.", [ToolCall("wait", {})])
    return conclude(s, done, write_report=True)


# -- what the conversation holds ----------------------------------------------------------------
@dataclass(slots=True)
class Done:
    """One finished tool call, as the conversation shows it."""

    name: str
    arguments: dict[str, Any]
    output: str
    is_error: bool


def finished_calls(messages: list[Message]) -> list[Done]:
    """Every tool call in the conversation that has a result, in order."""
    calls = {u.id: u for m in messages if m.role == "assistant" for u in m.tool_uses}
    return [Done(calls[r.tool_use_id].name, calls[r.tool_use_id].arguments, r.content, r.is_error)
            for m in messages if m.role == "user" for r in m.tool_results if r.tool_use_id in calls]


def scope_of(messages: list[Message]) -> str:
    """The directory to survey: a ``scope: <dir>`` line in the first user message, else ``.``."""
    first = next((m.text for m in messages if m.role == "user"), "")
    match = re.search(r"^scope:\s*(\S+)\s*$", first, re.MULTILINE)
    return match.group(1) if match else "."


# -- the survey script ---------------------------------------------------------------------------
def survey(request: ModelRequest, *, write_report: bool) -> ModelResponse:
    """One step of the survey, chosen by which tool calls have finished so far."""
    done = finished_calls(request.messages)
    scope = scope_of(request.messages)
    names = {d.name for d in done}
    if "list_dir" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] Listing {scope}.", [ToolCall("list_dir", {"path": scope})])
    s = Survey.from_calls(scope, done)
    if not names & {"glob", "grep", "read_file"}:
        calls = s.scan_calls()
        if calls:
            return ModelResponse(f"[{DEMO_LABEL}] Scanning {_n(len(s.dirs), 'directory')} and "
                                 f"{_n(len(s.top_files), 'file')} with {_n(len(calls), 'read-only tool call')}.",
                                 calls)
    return conclude(s, done, write_report=write_report)


def conclude(s: Survey, done: list[Done], *, write_report: bool) -> ModelResponse:
    """The last steps: write the report (or answer with it), then summarise."""
    report = s.report()
    if write_report and not any(d.name == "write_file" for d in done):
        return ModelResponse(f"[{DEMO_LABEL}] Writing the report.",
                             [ToolCall("write_file", {"path": REPORT_PATH, "content": report})])
    if not write_report:
        return ModelResponse(f"{report}\n```json\n{json.dumps(s.facts())}\n```\n")
    written = next(d for d in done if d.name == "write_file")
    where = f"Writing the report failed: {written.output}" if written.is_error else f"The report is in {REPORT_PATH}."
    return ModelResponse(f"{s.summary()}\n{where}")


@dataclass(slots=True)
class Survey:
    """The facts parsed from the tool results of one survey."""

    scope: str
    entries: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    top_files: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    defs: Counter[str] = field(default_factory=Counter)
    def_files: set[str] = field(default_factory=set)
    readme: str | None = None
    readme_lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: int = 0
    delegated: list[str] = field(default_factory=list)
    capped: set[str] = field(default_factory=set)
    """The counts that are lower bounds (a tool capped its output): entries, files, todos, defs."""
    merged: Counter[str] = field(default_factory=Counter)
    """Counts the explore children reported: files, todos, todo_files, def_files."""
    merged_exts: Counter[str] = field(default_factory=Counter)
    child_todos: list[str] = field(default_factory=list)
    """The TODO lines the children listed (their first ones; ``merged["todos"]`` counts them all)."""

    @classmethod
    def from_calls(cls, scope: str, done: list[Done]) -> Survey:
        s = cls(scope, calls=len(done))
        for d in done:
            if d.is_error:
                s.notes.append(f"{d.name}({_show_args(d.arguments)}) failed: {d.output}")
            else:
                getattr(s, f"_add_{d.name}", s._add_other)(d)
        return s

    def _path(self, name: str) -> str:
        return name if self.scope in (".", "") else f"{self.scope.rstrip('/')}/{name}"

    def _add_list_dir(self, d: Done) -> None:
        if any(ln.startswith("[...") for ln in _lines(d.output)):
            self.capped |= {"entries", "files"}
            self.notes.append(f"list_dir {self.scope} was capped: only the entries it showed are counted")
        self.entries = [ln for ln in _lines(d.output) if not ln.startswith("[...")]
        if len(self.entries) == 1 and self.entries[0].endswith(" is empty."):
            self.entries = []
        for e in self.entries:
            if e.endswith("/"):
                hidden = e.startswith(".") or e.rstrip("/") in SKIP_DIRS
                (self.skipped if hidden else self.dirs).append(self._path(e.rstrip("/")))
            else:
                self.top_files.append(self._path(e))
        self.files.extend(self.top_files)
        self.readme = next((f for f in self.top_files if PurePosixPath(f).name.lower().startswith("readme")), None)

    def _add_glob(self, d: Done) -> None:
        for ln in _lines(d.output):
            if ln.startswith("[..."):
                self.capped.add("files")
                self.notes.append(f"glob in {d.arguments.get('path')} was capped: {ln.strip('[]. ')}")
            elif not ln.endswith("/") and not ln.startswith("No paths match"):
                self.files.append(ln)

    def _add_grep(self, d: Done) -> None:
        for ln in _lines(d.output):
            m = re.match(r"^(.+?):(\d+): (.*)$", ln)
            if m is None:
                if ln.startswith("[..."):
                    self.capped.add("todos" if d.arguments.get("pattern") == TODO_PATTERN else "defs")
                    self.notes.append(f"grep {d.arguments.get('pattern')!r} in {d.arguments.get('path')} was "
                                      f"capped: {ln.strip('[]. ')}")
                continue
            if d.arguments.get("pattern") == TODO_PATTERN:
                self.todos.append(ln)
            else:
                self.defs["class" if m.group(3).lstrip().startswith("class") else "function"] += 1
                self.def_files.add(m.group(1))

    def _add_read_file(self, d: Done) -> None:
        for ln in _lines(d.output):
            num, tab, text = ln.partition("\t")
            if tab and num.strip().isdigit():
                self.readme_lines.append(text)

    def _add_other(self, d: Done) -> None:
        """Tools the survey does not parse (``write_file``, ``spawn_agent``) add nothing."""

    def _add_wait(self, d: Done) -> None:
        """Merge the facts each explore child reported (a JSON block after its report)."""
        headers = re.findall(r"^\[agent (\S+) · id \S+ · \S+ · status (\S+) · outcome (\S+)", d.output, re.M)
        self.delegated += [f"{h[0]}: status {h[1]}, outcome {h[2]}" for h in headers]
        blocks = re.findall(r"```json\n(.*?)\n```", d.output, re.S)
        for block in blocks:
            facts = json.loads(block)
            self.merged.update({k: facts[k] for k in ("files", "todos", "todo_files", "def_files")})
            self.merged_exts.update(facts["exts"])
            self.child_todos += facts["listed_todos"]
            self.defs.update(facts["defs"])
            self.notes += facts["notes"]
            self.calls += facts["calls"]
            self.capped.update(set(facts["capped"]) - {"entries"})  # its entries are not in this report
        if len(blocks) < len(headers):  # an answer cut short or a failed child: its counts are missing, not 0
            self.capped |= {"files", "todos", "defs"}
            self.notes.append(f"the findings of {_n(len(headers) - len(blocks), 'sub-agent')} could not be read; "
                              "the counts above leave them out")

    def facts(self) -> dict[str, Any]:
        """What a child hands its coordinator (the report's raw data)."""
        return {"scope": self.scope, "files": self.n_files(), "exts": dict(self.by_extension()),
                "todos": self.n_todos(), "listed_todos": self.listed_todos(), "todo_files": self.n_todo_files(),
                "defs": dict(self.defs), "def_files": self.n_def_files(), "notes": self.notes, "calls": self.calls,
                "capped": sorted(self.capped)}

    def scan_calls(self, dirs: list[str] | None = None, *, files: bool = True) -> list[ToolCall]:
        """The scan turn: glob each directory, grep everything, read the README (all read-only)."""
        dirs = self.dirs if dirs is None else dirs
        top = self.top_files if files else []
        calls = [ToolCall("glob", {"pattern": "**/*", "path": d}) for d in dirs]
        for target in [*dirs, *top]:
            calls.append(ToolCall("grep", {"pattern": TODO_PATTERN, "path": target}))
        calls += [ToolCall("grep", {"pattern": DEF_PATTERN, "path": d, "glob": "*.py"}) for d in dirs]
        calls += [ToolCall("grep", {"pattern": DEF_PATTERN, "path": f}) for f in top if f.endswith(".py")]
        if self.readme is not None and files:
            calls.append(ToolCall("read_file", {"path": self.readme, "limit": 5}))
        return calls

    def by_extension(self) -> list[tuple[str, int]]:
        counts = Counter(PurePosixPath(f).suffix.lower() or "(none)" for f in self.files) + self.merged_exts
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def n_files(self) -> int:
        return len(self.files) + self.merged["files"]

    def n_todos(self) -> int:
        return len(self.todos) + self.merged["todos"]

    def listed_todos(self) -> list[str]:
        return (self.todos + self.child_todos)[:MAX_LISTED]

    def n_todo_files(self) -> int:
        return len({t.split(":", 1)[0] for t in self.todos}) + self.merged["todo_files"]

    def n_def_files(self) -> int:
        return len(self.def_files) + self.merged["def_files"]

    def report(self) -> str:
        scope = "the workspace" if self.scope in (".", "") else f"`{self.scope}`"
        out = [f"# Survey of {scope}", "",
               f"Written by the `subagents demo` ({DEMO_LABEL}) from the results of "
               f"{_n(self.calls, 'real tool call')}; "
               "every fact below can be checked against the directory.", "",
               f"## Entries ({self._at_least('entries')}{len(self.entries)}, from `list_dir {self.scope}`)", ""]
        out += [f"- {e}" for e in self.entries[:MAX_ENTRIES]] or ["(empty)"]
        if len(self.entries) > MAX_ENTRIES:
            out.append(f"- … and {len(self.entries) - MAX_ENTRIES} more")
        if self.skipped:
            out += ["", "Not descended into (hidden or generated): " + ", ".join(f"{d}/" for d in self.skipped)]
        out += ["", f"## Files by extension ({self._count(self.n_files(), 'file', 'files')})", "",
                "| extension | files |", "|---|---|"]
        out += [f"| {ext} | {n} |" for ext, n in self.by_extension()]
        out += ["", f"## TODO / FIXME markers: {self._count(self.n_todos(), 'line', 'todos')} in "
                f"{self._count(self.n_todo_files(), 'file', 'todos')}", ""]
        out += [f"- {t}" for t in self.listed_todos()]
        if self.n_todos() > MAX_LISTED:
            out.append(f"- … and {self._at_least('todos')}{self.n_todos() - MAX_LISTED} more")
        out += ["", f"## Python definitions: {self._at_least('defs')}{_n(self.defs['class'], 'class')} and "
                f"{self._at_least('defs')}{_n(self.defs['function'], 'function')} in "
                f"{self._count(self.n_def_files(), 'file', 'defs')}", ""]
        if self.readme is not None:
            out += [f"## {self.readme}, first lines", ""] + [f"> {ln}" for ln in self.readme_lines] + [""]
        if self.delegated:
            out += [f"## Delegated to {_n(len(self.delegated), 'sub-agent')} (explore, in the background)", ""]
            out += [f"- {d}" for d in self.delegated] + [""]
        if self.notes:
            out += ["## Notes", ""] + [f"- {n}" for n in self.notes] + [""]
        return "\n".join(out).rstrip() + "\n"

    def summary(self) -> str:
        exts = ", ".join(f"{n} {ext}" for ext, n in self.by_extension()[:4]) or "none"
        first = next((ln.strip() for ln in self.readme_lines if ln.strip()), None)
        readme = f' The README starts with "{first}".' if first else ""
        d = self._at_least("defs")
        return (f"Survey done ({DEMO_LABEL}; {_n(self.calls, 'real tool call')}). "
                f"{self._count(self.n_files(), 'file', 'files')} ({exts}); "
                f"{self._count(self.n_todos(), 'TODO/FIXME line', 'todos')} in "
                f"{self._count(self.n_todo_files(), 'file', 'todos')}; "
                f"{d}{_n(self.defs['class'], 'Python class')} and {d}{_n(self.defs['function'], 'function')}.{readme}")

    def _at_least(self, what: str) -> str:
        return "at least " if what in self.capped else ""

    def _count(self, n: int, noun: str, what: str) -> str:
        """``12 files``, or ``at least 12 files`` when a capped tool output fed the count."""
        return self._at_least(what) + _n(n, noun)


def _n(n: int, what: str) -> str:
    """``1 file``, ``2 files``, ``3 classes``, ``2 directories``."""
    if n == 1:
        return f"{n} {what}"
    if what.endswith(("ss", "sh", "ch", "x")):
        return f"{n} {what}es"
    if what.endswith("y") and what[-2:-1] not in ("a", "e", "i", "o", "u"):
        return f"{n} {what[:-1]}ies"
    return f"{n} {what}s"


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _show_args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())
