"""``subagents demo --team``: a scripted team (``FunctionModel`` — no LLM) counts lines with the real tools.

The lead (:data:`TEAM_LEAD`, a lead that writes the report itself) creates a team,
puts one task per file type on the board (up to three of the types the directory has, ``.py``, ``.md`` and
``.toml`` first) and spawns three teammates.  Each teammate claims a task (``task_claim``), finds the files
(``list_dir``, ``glob``), counts their lines (``read_file`` with ``limit=1``: its footer says how many lines
the file has), completes the task with the count in the note (``task_update``) and messages the lead
(``send_message``), then claims the next task or goes idle.  The lead sums the counts as their messages
arrive, writes :data:`TEAM_REPORT` and answers; when it ends its turn with every teammate idle, the runtime
shuts them down.

Every number comes from the tool results in the conversation: the script never reads the disk.  The
command then counts the same files itself, in Python, and says whether the team's sum matches.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..definitions.model import AgentDefinition
from ..demo import DEMO_LABEL, SKIP_DIRS, finished_calls
from ..models.base import ModelRequest, ModelResponse, ToolCall
from ..models.function import FunctionModel
from .common import plural

__all__ = ["TEAMMATES", "TEAM_LEAD", "TEAM_REPORT", "count_lines", "file_types", "read_report", "run_team_demo",
           "team_model", "team_prompt", "team_script"]

TEAM_REPORT = "subagents-team-report.md"
TEAMMATES = ("counter-1", "counter-2", "counter-3")
FIRST_TYPES = (".py", ".md", ".toml")
TEXT_TYPES = frozenset({".txt", ".rst", ".json", ".yaml", ".yml", ".cfg", ".ini", ".js", ".ts", ".tsx", ".jsx",
                        ".go", ".rs", ".java", ".c", ".h", ".cpp", ".hpp", ".sh", ".html", ".css", ".sql", ".rb"})
VCS_DIRS = frozenset({".git", ".hg", ".svn"})  # glob never descends into these
TEAM_LEAD = AgentDefinition(
    "team-lead", "Leads a team that counts lines (subagents demo --team).",
    "You lead a team: create it, put one task per part of the job on its board, spawn named teammates to claim "
    "them, sum what they report by message, and write the report.",
    tools=["team_create", "spawn_agent", "list_dir", "glob", "read_file", "write_file"])
"""The demo's lead: unlike the built-in coordinator (which only delegates) it reads and writes the report itself;
its teammates' file tools come from its own fence."""
_COUNT = re.compile(r'from="([^"]+)" kind="[a-z]+">\nCOUNT (\S+) files=(\d+) lines=(\d+)(.*)$', re.M)


# -- what the command counts itself (the check) ---------------------------------------------------
def _files(root: Path) -> list[Path]:
    """The files the team looks at: the top level, and every visible, non-generated directory below it."""
    out: list[Path] = []
    with os.scandir(root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.name == TEAM_REPORT:  # the team's own report (of a former run) is not counted
            continue
        if e.is_file():
            out.append(Path(e.path))
        elif e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name not in SKIP_DIRS:
            for dirpath, dirs, names in os.walk(e.path):
                dirs[:] = [d for d in dirs if d not in VCS_DIRS]
                out += [Path(dirpath) / n for n in names]
    return out


def file_types(root: Path, most: int = 3) -> list[str]:
    """Up to ``most`` file types to count: ``.py``, ``.md``, ``.toml`` if present, then the commonest text types."""
    names = [p.name for p in _files(root)]
    has = {t: sum(1 for n in names if n.endswith(t) and n != t) for t in (*FIRST_TYPES, *TEXT_TYPES)}
    others = sorted((t for t in TEXT_TYPES if has[t]), key=lambda t: (-has[t], t))
    return [t for t in FIRST_TYPES if has[t]][:most] + others[: max(most - sum(1 for t in FIRST_TYPES if has[t]), 0)]


def count_lines(root: Path, types: list[str]) -> dict[str, tuple[int, int]]:
    """``{type: (files, lines)}``, counted in Python the way ``read_file`` counts a file's lines."""
    out = {t: (0, 0) for t in types}
    for p in _files(root):
        t = next((t for t in types if p.name.endswith(t) and p.name != t), None)
        if t is not None:
            with open(p, encoding="utf-8", errors="replace") as f:
                n = sum(1 for _ in f)
            files, lines = out[t]
            out[t] = (files + 1, lines + n)
    return out


def read_report(path: Path) -> dict[str, tuple[int, int]] | None:
    """The report's table as ``{type or "total": (files, lines)}``; ``None`` when it was not written."""
    if not path.is_file():
        return None
    rows = re.findall(r"^\| (\.\S+|total) \| (\d+) \| (\d+) \|", path.read_text(encoding="utf-8"), re.M)
    return {k: (int(f), int(n)) for k, f, n in rows}


# -- the script ------------------------------------------------------------------------------------
def team_prompt(team: str, types: list[str]) -> str:
    return (f"Count the lines of the {', '.join(types)} files in this directory with a team of "
            f"{len(TEAMMATES)} (team name: {team}): one task per file type; sum the counts and have the report "
            f"written to {TEAM_REPORT}.\nfile types: {' '.join(types)}\nteam: {team}")


def team_model(pace_s: float = 0.0) -> FunctionModel:
    """The team demo's model (:func:`team_script`); ``pace_s`` makes each scripted call take that long."""
    if pace_s <= 0:
        return FunctionModel(team_script, name=f"demo team ({DEMO_LABEL})")

    async def paced(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(pace_s)
        return team_script(request)

    return FunctionModel(paced, name=f"demo team ({DEMO_LABEL})")


def team_script(request: ModelRequest) -> ModelResponse:
    """The lead (the agent that may ``team_create``) or a teammate."""
    return _lead(request) if "team_create" in request.tool_names else _teammate(request)


def _said(request: ModelRequest) -> str:
    return "\n".join(m.text for m in request.messages if m.role == "user")


def _lead(request: ModelRequest) -> ModelResponse:
    done = finished_calls(request.messages)
    names = [d.name for d in done]
    said = _said(request)
    team = re.search(r"^team: (\S+)$", said, re.M).group(1)  # type: ignore[union-attr]
    types = re.search(r"^file types: (.+)$", said, re.M).group(1).split()  # type: ignore[union-attr]
    if "team_create" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] Making team {team}.", [ToolCall("team_create", {
            "name": team, "description": f"count the lines of the {', '.join(types)} files"})])
    if "task_create" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] One task per file type.", [ToolCall("task_create", {
            "subject": f"count {t} lines",
            "description": f"ext: {t}\nFind every {t} file (list_dir ., then glob **/*{t} in each visible "
                           "directory), count each one's lines (read_file with limit=1: its footer gives the total), "
                           "complete the task with the count in the note and message the lead."}) for t in types])
    if "spawn_agent" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] Spawning {len(TEAMMATES)} teammates.", [ToolCall("spawn_agent", {
            "agent_type": "general-purpose", "team": team, "name": name, "description": f"teammate {name}",
            "prompt": "Take tasks from the board one at a time until none is free: do each with the file tools, "
                      "complete it with your count in the note, and message the lead."}) for name in TEAMMATES])
    counts = {m[1]: (m[0], int(m[2]), int(m[3]), m[4].strip()) for m in _COUNT.findall(said)}
    total = (sum(c[1] for c in counts.values()), sum(c[2] for c in counts.values()))
    missing = [t for t in types if t not in counts]
    if missing and "<team-status" not in said:
        return ModelResponse(f"[{DEMO_LABEL}] Waiting for the counts of {', '.join(missing)}.")
    if not missing and "write_file" not in names:
        return ModelResponse(f"[{DEMO_LABEL}] All counted: {total[1]} lines in {total[0]} files. Writing the "
                             "report.", [ToolCall("write_file", {"path": TEAM_REPORT,
                                                                 "content": _report(team, types, counts, total)})])
    # the answer, again at each later turn (a teammate's idle notice, the runtime's "your teammates are idle"):
    # when the lead ends a turn with every teammate idle, the runtime shuts them down
    per = "; ".join(f"{t} {plural(counts[t][2], 'line')} in {plural(counts[t][1], 'file')} ({counts[t][0]})"
                    for t in types if t in counts)
    wrote = next((d for d in done if d.name == "write_file"), None)
    where = ("The report was not written." if wrote is None else f"Writing the report failed: {wrote.output}"
             if wrote.is_error else f"The report is in {TEAM_REPORT}.")
    gap = f" Missing: {', '.join(missing)} (no teammate reported it)." if missing else ""
    return ModelResponse(f"Team {team} counted {plural(total[1], 'line')} in {plural(total[0], 'file')} "
                         f"({DEMO_LABEL}): {per}.{gap} "
                         f"{where}")


def _report(team: str, types: list[str], counts: dict[str, tuple[str, int, int, str]], total: tuple[int, int]
            ) -> str:
    rows = [f"| {t} | {counts[t][1]} | {counts[t][2]} | {counts[t][0]}{counts[t][3] and ' (' + counts[t][3] + ')'} |"
            for t in types]
    return "\n".join([
        "# Lines by file type", "",
        f"Counted by team `{team}` in `subagents demo --team` ({DEMO_LABEL}): the lead put one task per file type "
        f"on the board; {len(TEAMMATES)} teammates claimed them, counted with `glob` and `read_file`, and reported "
        "by message; the lead summed the counts.", "",
        "| file type | files | lines | counted by |", "|---|---:|---:|---|", *rows,
        f"| total | {total[0]} | {total[1]} | |", ""])


def _teammate(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if not last.tool_results:  # its first prompt, or a message woke it
        return ModelResponse("Looking for a task.", [ToolCall("task_claim", {})])
    done = finished_calls(request.messages)
    claim = max((i for i, d in enumerate(done) if d.name == "task_claim"), default=-1)
    mine, step = done[claim], done[claim + 1:]
    if not step:  # the claim just finished
        if mine.is_error or not mine.output.startswith("you own #"):
            return ModelResponse("Nothing for me on the board; I go idle.")
        return ModelResponse("Listing the directory.", [ToolCall("list_dir", {"path": "."})])
    task = int(mine.output.split("#", 1)[1].split(" ", 1)[0])
    kinds = {d.name for d in step}
    if kinds & {"task_update", "send_message"}:
        return ModelResponse("Looking for the next task.", [ToolCall("task_claim", {})])
    ext = re.search(r"^ext: (\S+)$", mine.output, re.M).group(1)  # type: ignore[union-attr]
    listing = next(d for d in step if d.name == "list_dir")
    entries = [e for e in listing.output.splitlines() if e.strip() and not e.startswith("[...")]
    top = [e for e in entries if _is(e, ext) and e != TEAM_REPORT]
    dirs = [e.rstrip("/") for e in entries if e.endswith("/") and not e.startswith(".") and e[:-1] not in SKIP_DIRS]
    if "glob" not in kinds and "read_file" not in kinds and dirs:
        return ModelResponse(f"Finding the {ext} files.", [ToolCall("glob", {"pattern": f"**/*{ext}", "path": d})
                                                            for d in dirs])
    if "read_file" not in kinds:
        found = top + [ln for d in step if d.name == "glob" and not d.is_error for ln in d.output.splitlines()
                       if _is(ln, ext) and not ln.startswith(("[", "No paths match"))]
        if found:
            return ModelResponse(f"Counting the lines of {len(found)} {ext} files.",
                                 [ToolCall("read_file", {"path": f, "limit": 1}) for f in found])
    reads = [d for d in step if d.name == "read_file"]
    capped = any("[..." in d.output for d in step if d.name in ("list_dir", "glob"))
    skipped = [d for d in reads if d.is_error]
    lines = sum(_lines_of(d.output) for d in reads if not d.is_error)
    extra = (f" skipped={len(skipped)}" if skipped else "") + (" capped" if capped else "")
    return _finish(task, f"COUNT {ext} files={len(reads) - len(skipped)} lines={lines}{extra}")


def _finish(task: int, said: str) -> ModelResponse:
    return ModelResponse(said, [ToolCall("task_update", {"task_id": task, "status": "completed", "note": said}),
                                ToolCall("send_message", {"to": "lead", "text": said})])




def _is(name: str, ext: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(ext) and base != ext and not name.endswith("/")


def _lines_of(output: str) -> int:
    """A file's line count from ``read_file(path, limit=1)``: its footer, else the lines shown."""
    if output.endswith("is empty (0 lines)."):
        return 0
    footer = re.search(r"\[lines [\d,]+-[\d,]+ of ([\d,]+) shown", output)
    if footer is not None:
        return int(footer.group(1).replace(",", ""))
    return sum(1 for ln in output.splitlines() if re.match(r"^\s*\d+\t", ln))


# -- the command -----------------------------------------------------------------------------------
def run_team_demo(cwd: Path, settings: Any, *, as_json: bool, pace_s: float,
                  execute: Callable[..., int]) -> int:
    """Run the team demo over ``cwd`` with ``execute`` (:func:`subagents.cli.run.execute`), then check it."""
    from ..exceptions import UserError

    root = cwd.resolve()
    types = file_types(root)
    if not types:
        raise UserError(f"{root} has no .py, .md, .toml or other text files to count; pass --cwd DIR")
    team = f"lines-{secrets.token_hex(3)}"
    report = root / TEAM_REPORT
    before = report.stat().st_mtime_ns if report.exists() else None
    if not as_json:
        click.echo(f"subagents demo --team — {DEMO_LABEL} — a lead and {len(TEAMMATES)} teammates count the lines "
                   f"of the {', '.join(types)} files in {root}", err=True)
    code = execute(team_model(pace_s), team_prompt(team, types), workdir=cwd, settings=settings,
                   agent=TEAM_LEAD.name, agents=[TEAM_LEAD], as_json=as_json)
    expected = count_lines(root, types)
    got = read_report(report) if report.exists() and report.stat().st_mtime_ns != before else None
    want_total = (sum(f for f, _ in expected.values()), sum(n for _, n in expected.values()))
    ok = got is not None and all(got.get(t) == expected[t] for t in types) and got.get("total") == want_total
    if as_json:
        click.echo(json.dumps({"kind": "check", "ok": ok, "team": team, "report": str(report) if got else None,
                               "counted": {k: list(v) for k, v in (got or {}).items()},
                               "expected": {**{k: list(v) for k, v in expected.items()}, "total": list(want_total)}}))
    elif got is None:
        click.echo(f"Check: no report was written to {report}, so the team's count could not be checked.", err=True)
    else:
        said = ", ".join(f"{t} {plural(n, 'line')} in {plural(f, 'file')}" for t, (f, n) in expected.items())
        files, lines = got.get("total", (0, 0))
        verdict = "matches" if ok else "does NOT match"
        click.echo(f"Check: the team's total, {plural(lines, 'line')} in {plural(files, 'file')}, {verdict} the files "
                   f"counted here in Python ({said}; {plural(want_total[1], 'line')} in all).", err=True)
        click.echo(f"Report: {report}; the board: subagents team show {team}", err=True)
    return code if ok or code != 0 else 1
