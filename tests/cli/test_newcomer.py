"""The newcomer's list: no traceback for an expected error, one exit-code table, JSON errors, read-only
``runs`` commands, plurals and tree stats, long prompts, the live view's current line, a global
``--cwd`` and honest demo counts."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from subagents.cli.main import main
from subagents.cli.render import Progress
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.events import Event
from subagents.store import RunRecord
from subagents.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(Path(__file__).with_name("scripted_cli.py"))
ENTRY = [sys.executable, "-c", "from subagents.cli.main import entry; entry()"]
CORRUPT = b"SQLite format 3\x00" + b"\xff" * 4000  # the header of a database, then garbage


def answer(request: ModelRequest) -> ModelResponse:
    return ModelResponse("done")


def echo_prompt(request: ModelRequest) -> ModelResponse:
    return ModelResponse("PROMPT: " + request.messages[0].text)


def restless(request: ModelRequest) -> ModelResponse:
    return ModelResponse("looking", [ToolCall("list_dir", {"path": "."})])


def delegating(request: ModelRequest) -> ModelResponse:
    """The root spawns one foreground child, which answers; then the root answers."""
    if request.agent.depth == 1:
        return ModelResponse("child done")
    if not any(m.tool_results for m in request.messages):
        return ModelResponse("", [ToolCall("spawn_agent", {"agent_type": "general-purpose", "prompt": "do it"})])
    return ModelResponse("root done")


@pytest.fixture
def durable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default store (``.subagents/state.db`` under the project), not the suite's memory store."""
    monkeypatch.delenv("SUBAGENTS_STORE", raising=False)


def corrupt_store(project: Path) -> Path:
    (project / ".subagents").mkdir(exist_ok=True)
    db = project / ".subagents" / "state.db"
    db.write_bytes(CORRUPT)
    return db


def seed_store(project: Path) -> str:
    run_id = "cafe1234-0000-0000-0000-000000000000"
    s = SQLiteStore(project / ".subagents" / "state.db")
    try:
        s.create_run(RunRecord(run_id=run_id, agent_id=run_id, nickname="explore-ada", agent_type="explore",
                               task="t", status="completed", outcome="ok", owner="gone:999999999:x",
                               created_at=1.0, started_at=1.0, ended_at=2.0, result_text="hi"))
    finally:
        s.close()
    return run_id


def cli(*argv: str, model: Any = None) -> tuple[int, str, str]:
    """``main(argv)`` with its captured output (any exception escaping ``main`` fails the test)."""
    import contextlib

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), model=model)
    return code, out.getvalue(), err.getvalue()


# -- 1. no traceback for an expected error; 2. the exit codes ------------------------------------------
def bad_config(project: Path) -> None:
    (project / ".subagents").mkdir(exist_ok=True)
    (project / ".subagents" / "config.toml").write_text("[agents]\nmax_threads = 'four'\n")


EXPECTED_ERRORS: list[tuple[str, Callable[[Path], None], list[str], str]] = [
    ("bad config: run", bad_config, ["run", "hi"], "max_threads must be a positive integer"),
    ("bad config: runs list", bad_config, ["runs", "list"], "max_threads must be a positive integer"),
    ("bad config: demo", bad_config, ["demo"], "max_threads must be a positive integer"),
    ("bad config: config show", bad_config, ["config", "show"], "max_threads must be a positive integer"),
    ("corrupt store: runs list", corrupt_store, ["runs", "list"], "is corrupt or not a SQLite database"),
    ("corrupt store: runs show", corrupt_store, ["runs", "show", "abcd"], "is corrupt or not a SQLite database"),
    ("corrupt store: runs tree", corrupt_store, ["runs", "tree", "abcd"], "is corrupt or not a SQLite database"),
    ("corrupt store: runs sweep", corrupt_store, ["runs", "sweep"], "is corrupt or not a SQLite database"),
    ("corrupt store: run", corrupt_store, ["run", "hi", "--model", "openai:m@http://127.0.0.1:9/v1"],
     "is corrupt or not a SQLite database"),
    ("unknown run id", lambda p: None, ["runs", "--store", "memory://", "show", "abcd"], "no run matches 'abcd'"),
    ("unknown agent", lambda p: None, ["run", "hi", "--agent", "nope", "--model", "openai:m@http://127.0.0.1:9/v1"],
     "unknown agent type 'nope'"),
    ("missing key", lambda p: None, ["run", "hi", "--model", "anthropic:claude-sonnet-4-5"],
     "ANTHROPIC_API_KEY"),
    ("missing openai key", lambda p: None, ["run", "hi", "--model", "openai:gpt-4.1"], "OPENAI_API_KEY"),
    ("bad model string", lambda p: None, ["run", "hi", "--model", "gpt-4.1"], "malformed model string"),
    ("unreadable prompt file", lambda p: None, ["run", "--prompt-file", "nope.md", "--model", "openai:gpt-4.1"],
     "nope.md"),
    ("unknown agent: agents show", lambda p: None, ["agents", "show", "nope"], "unknown agent type 'nope'"),
]


@pytest.mark.parametrize(("setup", "argv", "message"), [e[1:] for e in EXPECTED_ERRORS],
                         ids=[e[0] for e in EXPECTED_ERRORS])
def test_expected_errors_exit_2_with_the_message_only(isolated: Path, durable: None, setup: Callable[[Path], None],
                                                      argv: list[str], message: str) -> None:
    setup(isolated)
    code, out, err = cli(*argv)
    assert code == 2, err
    assert err.startswith("error: "), err
    assert message in err
    assert "Traceback" not in err
    assert out == ""


@pytest.mark.timeout(30)
def test_a_corrupt_store_shows_no_traceback_in_a_real_process(isolated: Path, durable: None) -> None:
    corrupt_store(isolated)
    for argv in (["runs", "list"], ["runs", "show", "abcd"]):
        proc = subprocess.run([*ENTRY, *argv], cwd=isolated, capture_output=True,
                              text=True, timeout=30, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: the run store "), proc.stderr
        assert "Traceback" not in proc.stderr


def readme_exit_codes() -> dict[int, str]:
    """The README's table of exit codes: ``| `N` | meaning |`` rows under a heading named "Exit codes"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Exit codes", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\d+)` \| (.+?) \|$", section, re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def signalled(project: Path, sig: signal.Signals) -> int:
    """Start ``subagents run`` with a model that hangs, signal it once it is running; its exit code."""
    marker = f"m{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, SCRIPT, "hang", "run", f"wait {marker}"], cwd=project,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (project / f"{marker}.started").exists():
            assert proc.poll() is None, proc.stderr and proc.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err, err
    return proc.returncode


@pytest.mark.timeout(60)
def test_the_readme_exit_code_table_is_what_the_cli_does(isolated: Path, durable: None) -> None:
    table = readme_exit_codes()
    assert sorted(table) == [0, 1, 2, 129, 130, 143]
    assert "usage" in table[2]
    assert "unknown agent" in table[2]
    assert "missing" in table[2]
    assert "corrupt" in table[2]
    other = isolated.parent / "other"
    other.mkdir()
    triggers: dict[int, list[Callable[[], int]]] = {
        0: [lambda: cli("run", "hi", model=FunctionModel(answer))[0]],
        1: [lambda: cli("run", "hi", "--max-turns", "1", model=FunctionModel(restless))[0]],
        2: [lambda: cli("run", "hi", "--bogus")[0],
            lambda: cli("run", "hi", "--agent", "nope", model=FunctionModel(answer))[0],
            lambda: cli("run", "hi", "--model", "anthropic:claude-sonnet-4-5")[0],
            lambda: (corrupt_store(other), cli("runs", "--cwd", str(other), "list")[0])[1]],
        130: [lambda: signalled(isolated, signal.SIGINT)],
        143: [lambda: signalled(isolated, signal.SIGTERM)],
        129: [lambda: signalled(isolated, signal.SIGHUP)],
    }
    for code, fns in triggers.items():
        for fn in fns:
            assert fn() == code, table[code]


# -- 3. --json: errors are JSON too -----------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["run", "hi", "--json", "--agent", "nope", "--model", "openai:m@http://127.0.0.1:9/v1"],
    ["run", "hi", "--json"],  # no model configured
    ["run", "hi", "--json", "--max-turns", "0"],  # a usage error, found while parsing
    ["runs", "list", "--json"],  # the corrupt store
    ["agents", "list", "--json", "--cwd", "/does/not/exist"],
])
def test_json_mode_errors_are_json_on_stdout(isolated: Path, durable: None, argv: list[str]) -> None:
    corrupt_store(isolated)
    code, out, _ = cli(*argv)
    assert code == 2
    lines = out.splitlines()
    assert len(lines) == 1, out
    err = json.loads(lines[0])
    assert err["kind"] == "error"
    assert err["type"] == "error"
    assert err["exit_code"] == 2
    assert isinstance(err["message"], str)
    assert err["message"]
    assert not err["message"].startswith("error:")


def test_json_run_failure_still_ends_with_the_result(isolated: Path) -> None:
    code, out, _ = cli("run", "hi", "--json", "--max-turns", "1", model=FunctionModel(restless))
    assert code == 1
    assert json.loads(out.splitlines()[-1])["kind"] == "result"


# -- 4. read-only commands create nothing ---------------------------------------------------------------
def test_read_only_runs_commands_create_no_store(isolated: Path, durable: None) -> None:
    code, out, err = cli("runs", "list")
    assert code == 0
    assert "no run store" in (out + err).lower()
    assert "subagents run" in out + err
    for argv in (["runs", "show", "abcd"], ["runs", "tree", "abcd"], ["runs", "tail", "abcd"],
                 ["runs", "wait", "abcd"]):
        code, out, err = cli(*argv)
        assert code == 2, argv
        assert "no run store" in err
    code, out, _ = cli("runs", "list", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert not (isolated / ".subagents").exists()
    missing = isolated / "nowhere" / "deeper" / "state.db"
    assert cli("runs", "--store", f"sqlite:///{missing}", "list")[0] == 0
    assert not (isolated / "nowhere").exists()


# -- 5. the warning once, the 4-character minimum, plurals, tree stats -----------------------------------
@pytest.mark.timeout(30)
def test_agents_list_prints_a_warning_once(isolated: Path) -> None:
    d = isolated / ".subagents" / "agents"
    d.mkdir(parents=True)
    (d / "broken.md").write_text("no front matter\n")
    proc = subprocess.run([*ENTRY, "agents", "list"], cwd=isolated,
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("broken.md") == 1, proc.stderr


def test_a_short_id_says_the_minimum(isolated: Path) -> None:
    code, _, err = cli("runs", "show", "abc")
    assert code == 2
    assert "at least 4 characters" in err


def test_one_turn_is_singular_and_the_stats_count_the_tree(isolated: Path) -> None:
    code, _, err = cli("run", "hi", model=FunctionModel(answer))
    assert code == 0
    assert "1 turn •" in err
    assert "0 tool calls" in err
    assert "agents" not in err
    code, out, err = cli("run", "hi", model=FunctionModel(delegating))
    assert (code, out) == (0, "root done\n")
    stats = err.strip().splitlines()[-1]
    assert "3 turns" in stats, stats  # the root's 2 and the child's 1
    assert "1 tool call " in stats
    assert stats.endswith("(whole tree: 2 agents)")


def test_the_demo_says_directory_and_files_right(tmp_path: Path) -> None:
    root = tmp_path / "one"
    (root / "only").mkdir(parents=True)
    (root / "only" / "a.py").write_text("def f():\n    pass\n")
    (root / "b.txt").write_text("b\n")
    code, out, _ = cli("demo", "--cwd", str(root), "--json")
    assert code == 0
    texts = " ".join(json.loads(ln).get("text", "") for ln in out.splitlines()
                     if json.loads(ln)["kind"] == "assistant_text")
    assert "Delegating 1 directory " in texts
    assert "Scanning 1 directory and 1 file " in texts or "Scanning 0 directories and 1 file " in texts
    for slip in ("directorys", "1 directories", "1 files", "1 turns", "1 lines", "1 classes"):
        assert slip not in texts


# -- 6. long prompts ---------------------------------------------------------------------------------------
class FakeStdin(io.StringIO):
    def __init__(self, text: str, tty: bool = False) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_prompt_from_stdin_and_from_a_file(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = "Review this:\n" + "line\n" * 2000
    monkeypatch.setattr("sys.stdin", FakeStdin(long))
    code, out, _ = cli("run", "-", model=FunctionModel(echo_prompt))
    assert (code, out) == (0, f"PROMPT: {long.strip()}\n")
    (isolated / "p.md").write_text("from a file\n")
    code, out, _ = cli("run", "--prompt-file", "p.md", model=FunctionModel(echo_prompt))
    assert (code, out) == (0, "PROMPT: from a file\n")


@pytest.mark.parametrize(("argv", "stdin", "message"), [
    (["run", "hi", "--prompt-file", "p.md"], "", "give the prompt either as PROMPT or with --prompt-file"),
    (["run", "--prompt-file", "empty.md"], "", "is empty"),
    (["run", "--prompt-file", "missing.md"], "", "cannot read the prompt file"),
    (["run", "--prompt-file", "."], "", "cannot read the prompt file"),
    (["run", "-"], "   \n", "the prompt read from stdin is empty"),
    (["run", "-"], None, "stdin is a terminal"),
    (["run"], "", "'-' to read it from stdin"),
])
def test_prompt_errors(isolated: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], stdin: str | None,
                       message: str) -> None:
    (isolated / "p.md").write_text("x")
    (isolated / "empty.md").write_text("\n")
    monkeypatch.setattr("sys.stdin", FakeStdin("", tty=True) if stdin is None else FakeStdin(stdin))
    code, _, err = cli(*argv, model=FunctionModel(echo_prompt))
    assert code == 2
    assert message in err, err
    assert "Traceback" not in err


# -- 7. the live view shows the current line -----------------------------------------------------------------
def ev(kind: str, **data: object) -> Event:
    return Event(kind, "ada", None, 0, dict(data), ts=1.0, nickname="ada")


def test_the_live_view_shows_the_current_line_of_streamed_text() -> None:
    p = Progress()
    p.update(ev("turn_start", turn=1))
    for chunk in ("First li", "ne\nSecond ", "li", "ne, still stream"):
        p.update(ev("assistant_text", text=chunk, delta=True))
    assert p.lines() == ["• ada: says: Second line, still stream  (turn 1, 0 tool calls)"]
    p.update(ev("assistant_text", text="\n\n", delta=True))  # a finished line stays until the next begins
    assert p.lines() == ["• ada: says: Second line, still stream  (turn 1, 0 tool calls)"]
    p.update(ev("turn_start", turn=2))
    p.update(ev("assistant_text", text="New turn", delta=True))
    assert p.lines() == ["• ada: says: New turn  (turn 2, 0 tool calls)"]
    p.update(ev("assistant_text", text="x" * 500, delta=True))
    line = p.lines(width=60)[0]
    assert len(line) == 60
    assert line.endswith("(turn 2, 0 tool calls)")
    assert "…" in line


# -- 8. --cwd before or after the subcommand ------------------------------------------------------------
def test_cwd_is_one_global_option(isolated: Path, durable: None, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    run_id = seed_store(other)
    for argv in (["runs", "--cwd", str(other), "list"], ["runs", "list", "--cwd", str(other)],
                 ["--cwd", str(other), "runs", "list"]):
        code, out, err = cli(*argv)
        assert code == 0, (argv, err)
        assert run_id[-8:] in out, argv
    assert cli("runs", "show", "cafe", "--cwd", str(other))[0] == 0
    (other / "marker.txt").write_text("x")
    lister = FunctionModel(lambda r: ModelResponse("ok", [ToolCall("list_dir", {"path": "."})])
                           if not any(m.tool_results for m in r.messages)
                           else ModelResponse(r.messages[-1].tool_results[0].content))
    for argv in (["--cwd", str(other), "run", "ls"], ["run", "--cwd", str(other), "ls"],
                 ["run", "ls", "--cwd", str(other)]):
        code, out, err = cli(*argv, model=lister)
        assert code == 0, (argv, err)
        assert "marker.txt" in out, argv


# -- 9. the demo's capped counts ---------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_the_demo_says_at_least_for_capped_counts(tmp_path: Path) -> None:
    root = tmp_path / "big"
    many = root / "many"
    many.mkdir(parents=True)
    for i in range(1005):
        (many / f"f{i:04}.txt").write_text("")
    (root / "notes.md").write_text("TODO: x\n" * 520)
    code, _, err = cli("demo", "--cwd", str(root))
    assert code == 0, err
    report = (root / "subagents-demo-report.md").read_text()
    todo = re.search(r"^## TODO / FIXME markers: (.*)$", report, re.MULTILINE)
    assert todo is not None
    assert todo.group(1).startswith("at least 500 lines"), todo.group(1)
    assert "## Entries (2, from `list_dir .`)" in report  # the top level was listed whole
    files = re.search(r"^## Files by extension \((.*)\)$", report, re.MULTILINE)
    assert files is not None
    assert files.group(1).startswith("1006 files") or files.group(1).startswith("at least "), files.group(1)
    if os.environ.get("SHOW_REPORT"):
        print(report)


def test_a_run_that_cannot_start_creates_no_store(isolated: Path, durable: None) -> None:
    code, _, err = cli("run", "hi", "--agent", "nope", model=FunctionModel(answer))
    assert code == 2
    assert "unknown agent type 'nope'" in err
    assert not (isolated / ".subagents").exists()
