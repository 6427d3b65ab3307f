"""``subagents demo --team``: a scripted lead and 3 teammates count lines with the real tools; the sum is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagents.cli.demo_team import TEAM_REPORT, count_lines, file_types, read_report
from subagents.cli.main import main
from subagents.cli.render import TeamLines, team_line
from subagents.runtime.events import Event


@pytest.fixture
def tree(isolated: Path) -> Path:
    root = isolated / "tree"
    files = {
        "README.md": "# Widget\n\nA small widget library.\n",
        "pyproject.toml": "[project]\nname = 'widget'\n",
        "setup.py": "from setuptools import setup\nsetup()\n",
        "src/widget/__init__.py": "from .core import Widget\n",
        "src/widget/core.py": "class Widget:\n    pass\n\n\ndef make():\n    return Widget()\n",
        "src/widget/empty.py": "",
        "src/widget/no_newline.py": "x = 1\r\ny = 2",  # \r and a last line without \n count as read_file counts
        "docs/guide.md": "# Guide\n" + "line\n" * 2500,  # more than read_file shows at once
        "docs/deep/more.md": "a\nb\n",
        "docs/notes.txt": "not counted: .txt is not among the first three types here\n",
        ".hidden/secret.py": "not counted\n",
        "node_modules/dep/index.py": "not counted: vendored\n",
        "src/.git/hook.py": "not counted: a version-control directory\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode())
    return root


def test_the_team_counts_the_lines_and_the_sum_matches_the_files(
        tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_STORE", f"sqlite:///{tree.parent / 'state.db'}")
    assert main(["demo", "--team", "--cwd", str(tree)]) == 0
    out, err = capsys.readouterr()
    assert file_types(tree) == [".py", ".md", ".toml"]
    expected = count_lines(tree, [".py", ".md", ".toml"])
    # counted here independently: 5 .py files (2 + 1 + 6 + 0 + 2 lines), 3 .md (3 + 2501 + 2), 1 .toml (2)
    assert expected == {".py": (5, 11), ".md": (3, 2506), ".toml": (1, 2)}
    report = read_report(tree / TEAM_REPORT)
    assert report == {**expected, "total": (9, 2519)}
    assert out.startswith("Team lines-")
    assert "counted 2519 lines in 9 files" in out
    assert "Check: the team's total, 2519 lines in 9 files, matches the files counted here in Python" in err
    team = out.split()[1]
    assert f"the board: subagents team show {team}" in err

    assert main(["team", "--store", f"sqlite:///{tree.parent / 'state.db'}", "show", team, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lead"]["nickname"].startswith("team-lead-")
    assert sorted(m["name"] for m in doc["members"]) == ["counter-1", "counter-2", "counter-3"]
    assert {m["status"] for m in doc["members"]} == {"shut_down"}  # the lead ended: the runtime shut them down
    assert [(t["subject"], t["status"]) for t in doc["tasks"]] == [
        ("count .py lines", "completed"), ("count .md lines", "completed"), ("count .toml lines", "completed")]
    notes = {t["note"] for t in doc["tasks"]}
    assert notes == {"COUNT .py files=5 lines=11", "COUNT .md files=3 lines=2506", "COUNT .toml files=1 lines=2"}
    assert {m["text"] for m in doc["messages"] if m["kind"] == "message"} == notes  # each reported to the lead
    assert len({t["owner"] for t in doc["tasks"]}) >= 1


def test_json_events_and_the_check(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--team", "--json", "--cwd", str(tree)]) == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    kinds = [ln["kind"] for ln in lines]
    assert kinds[-2:] == ["result", "check"]
    assert lines[-1]["ok"] is True
    assert lines[-1]["counted"]["total"] == [9, 2519]
    assert kinds.count("team_created") == 1
    assert kinds.count("teammate_joined") == 3
    assert kinds.count("task_created") == 3
    assert kinds.count("task_claimed") == 3
    assert kinds.count("task_completed") == 3
    assert kinds.count("teammate_shutdown") == 3
    claimed = [ln for ln in lines if ln["kind"] == "task_claimed"]
    assert sorted(c["task_id"] for c in claimed) == [1, 2, 3]  # each task claimed exactly once
    assert all(c["team"].startswith("lines-") for c in claimed)


def test_a_report_that_is_not_written_fails_the_check(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--team", "--cwd", str(tree), "--permission-mode", "default"]) == 1
    err = capsys.readouterr().err
    assert "no report was written" in err
    assert not (tree / TEAM_REPORT).exists()


def test_an_empty_directory_is_refused(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (isolated / "empty").mkdir()
    assert main(["demo", "--team", "--cwd", str(isolated / "empty")]) == 2
    assert "no .py, .md, .toml or other text files" in capsys.readouterr().err


def test_team_events_are_one_line_each_and_a_broadcast_once() -> None:
    said: list[str] = []
    lines = TeamLines(said.append)

    def ev(kind: str, **data: object) -> None:
        lines(Event(kind, "a1", None, 0, dict(data), nickname="lead-ada"))

    ev("team_created", team="t", lead="a1")
    ev("teammate_joined", team="t", name="ann", agent_type="general-purpose")
    ev("task_created", team="t", task_id=2, subject="sum\nit", by="lead", blocked_by=[1])
    ev("task_claimed", team="t", task_id=1, owner="ann")
    ev("task_completed", team="t", task_id=1, owner="ann", by="ann", note="12 lines")
    ev("message_sent", team="t", sender="ann", recipient="lead", seq=1, mail_kind="message")
    ev("message_sent", team="t", sender="lead", recipient="ann", seq=2, mail_kind="broadcast")
    ev("message_sent", team="t", sender="lead", recipient="bob", seq=3, mail_kind="broadcast")
    ev("teammate_idle", team="t", name="ann")
    ev("message_sent", team="t", sender="ann", recipient="lead", seq=4, mail_kind="idle")  # told by the line above
    ev("turn_start", turn=1)
    ev("teammate_shutdown", team="t", name="bob", released=[2])
    assert said == [
        "team t: created by lead-ada (its lead)",
        "team t: ann joined (general-purpose, lead-ada)",
        "team t: task #2 created by lead: sum it (after #1)",
        "team t: ann claimed task #1",
        "team t: ann completed task #1: 12 lines",
        "team t: message ann -> lead",
        "team t: broadcast lead -> ann, bob",
        "team t: ann is idle",
        "team t: bob shut down; task #2 back to pending",
    ]
    assert team_line(Event("tool_start", "a1", None, 0, {})) is None
