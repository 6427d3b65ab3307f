from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.demo import DEMO_LABEL, DEMO_PROMPT, SKIP_DIRS, demo_model


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    files = {
        "README.md": "# Widget\nA small widget library.\n\nMore text.\n",
        "setup.cfg": "[metadata]\nname = widget\n",
        "Makefile": "all:\n\ttrue  # TODO: real build\n",
        "src/widget/__init__.py": "from .core import Widget\n",
        "src/widget/core.py": ("class Widget:\n    def __init__(self):\n        pass  # FIXME: validate\n\n"
                               "    async def spin(self):\n        pass\n\n\ndef make():\n    return Widget()\n"),
        "src/widget/util.py": "def helper():  # TODO: speed up\n    return 1\n",
        "docs/guide.md": "# Guide\nTODO: write the guide\n",
        "docs/img/logo.txt": "logo\n",
        ".hidden/secret.py": "def hidden():  # TODO: not counted, hidden\n    pass\n",
        "node_modules/dep/index.js": "// TODO: not counted, vendored\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def visible_files(root: Path) -> list[Path]:
    """The files the demo promises to count: top level plus visible, non-generated directories."""
    out = []
    for dirpath, dirs, names in os.walk(root):
        top = Path(dirpath) == root
        dirs[:] = [d for d in dirs if not (top and (d.startswith(".") or d in SKIP_DIRS))] if top else dirs
        out += [Path(dirpath) / n for n in names if not (top and n == "subagents-demo-report.md")]
    return out  # the report itself is written after the survey


def test_demo_writes_a_report_whose_facts_match_the_directory(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--cwd", str(tree)]) == 0
    captured = capsys.readouterr()
    assert DEMO_LABEL in captured.err
    assert DEMO_LABEL in captured.out
    report = (tree / "subagents-demo-report.md").read_text()
    assert DEMO_LABEL in report

    files = visible_files(tree)
    by_ext = Counter(f.suffix.lower() or "(none)" for f in files)
    assert by_ext == {".py": 3, ".md": 2, ".cfg": 1, ".txt": 1, "(none)": 1}
    assert f"## Files by extension ({len(files)} files)" in report
    for ext, n in by_ext.items():
        assert f"| {ext} | {n} |" in report

    todo_lines = [(f, i) for f in files for i, line in enumerate(f.read_text().splitlines(), 1)
                  if re.search("TODO|FIXME", line)]
    assert len(todo_lines) == 4
    assert "## TODO / FIXME markers: 4 lines in 4 files" in report
    for f, i in todo_lines:
        assert f"- {f.relative_to(tree).as_posix()}:{i}: " in report

    assert "## Python definitions: 1 class and 4 functions in 2 files" in report
    assert "> # Widget\n> A small widget library.\n> \n> More text.\n" in report
    assert "Not descended into (hidden or generated): .hidden/, node_modules/" in report

    assert captured.out.startswith(f"Survey done ({DEMO_LABEL}; ")
    assert "8 files (3 .py, 2 .md, 1 (none), 1 .cfg); 4 TODO/FIXME lines in 4 files; " in captured.out
    assert 'The README starts with "# Widget".' in captured.out
    assert "The report is in subagents-demo-report.md." in captured.out


def test_demo_json(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--cwd", str(tree), "--json"]) == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    tools = [ln["tool"] for ln in lines if ln["kind"] == "tool_start"]
    assert tools[0] == "list_dir"
    assert tools[-1] == "write_file"
    assert {"glob", "grep", "read_file"} <= set(tools)
    assert all(not ln["is_error"] for ln in lines if ln["kind"] == "tool_end")
    assert lines[-1]["kind"] == "result"
    assert lines[-1]["outcome"] == "ok"


def test_demo_on_an_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["demo", "--cwd", str(empty)]) == 0
    report = (empty / "subagents-demo-report.md").read_text()
    assert "## Entries (0, from `list_dir .`)" in report
    assert "## Files by extension (0 files)" in report


def test_read_only_agent_answers_with_the_report_instead_of_writing(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = DEMO_PROMPT + "\nscope: src"
    assert main(["run", prompt, "--agent", "explore", "--cwd", str(tree)], model=demo_model()) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Survey of `src`")
    assert "## Files by extension (3 files)" in out
    assert "## Python definitions: 1 class and 4 functions in 2 files" in out
    assert not (tree / "subagents-demo-report.md").exists()


def test_demo_fans_out_to_explore_children(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--cwd", str(tree), "--json"]) == 0
    events = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    spawned = [e for e in events if e["kind"] == "subagent_spawned" and e["depth"] == 1]
    assert sorted(e["label"] for e in spawned) == ["survey docs", "survey src"]
    assert {e["agent_type"] for e in spawned} == {"explore"}
    assert all(e["background"] for e in spawned)
    child_tools = {e["tool"] for e in events if e["kind"] == "tool_start" and e["depth"] == 1}
    assert child_tools == {"list_dir", "glob", "grep"}  # children only read
    completed = [e for e in events if e["kind"] == "subagent_completed" and e["depth"] == 1]
    assert [e["outcome"] for e in completed] == ["ok", "ok"]
    report = (tree / "subagents-demo-report.md").read_text()
    assert "## Delegated to 2 sub-agents (explore, in the background)" in report
    assert re.search(r"- explore-\w+: status completed, outcome ok", report)


def test_demo_scans_itself_what_max_threads_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "many"
    for i in range(6):
        (root / f"d{i}").mkdir(parents=True)
        (root / f"d{i}" / "f.py").write_text("def f():  # TODO\n    pass\n")
    assert main(["demo", "--cwd", str(root), "--json"]) == 0
    events = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert len([e for e in events if e["kind"] == "subagent_spawned" and e["depth"] == 1]) == 4  # max_threads=4
    own_globs = [e for e in events if e["kind"] == "tool_start" and e["depth"] == 0 and e["tool"] == "glob"]
    assert len(own_globs) == 2  # the two refused directories were scanned by the coordinator
    report = (root / "subagents-demo-report.md").read_text()
    assert "## Files by extension (6 files)" in report
    assert "## TODO / FIXME markers: 6 lines in 6 files" in report
    assert "## Python definitions: 0 classes and 6 functions in 6 files" in report


def test_demo_pace_slows_the_scripted_model(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    t0 = time.monotonic()
    assert main(["demo", "--cwd", str(tree), "--pace", "0.05"]) == 0
    # the coordinator's 5 model calls and a child's last 2 (its first overlaps the coordinator's 3rd)
    # follow one another: at least 7 paced calls in a row
    assert time.monotonic() - t0 >= 7 * 0.05
    assert "The report is in subagents-demo-report.md." in capsys.readouterr().out
