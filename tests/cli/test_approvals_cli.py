"""``subagents run`` asks the person on a terminal (driven in a pseudo-terminal), denies elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect

SCRIPT = str(Path(__file__).with_name("scripted_cli.py"))


def spawn_cli(script: str, project: Path, *args: str) -> pexpect.spawn:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "160", "LINES": "50"}
    return pexpect.spawn(sys.executable, [SCRIPT, script, "run", "go", "--cwd", str(project), *args],
                         env=env, encoding="utf-8", timeout=30, dimensions=(50, 160))


def test_the_person_allows_once_then_denies_with_a_reason(isolated: Path) -> None:
    child = spawn_cli("write_two", isolated)
    child.expect("approval needed: general-purpose-ada \\[general-purpose\\] wants to run write_file")
    child.expect("your choice \\[y/a/n\\]: ")
    child.sendline("y")
    child.expect("wants to run write_file\\(path=\"b.txt\"")
    child.expect("your choice \\[y/a/n\\]: ")
    child.sendline("n")
    child.expect("reason for the agent")
    child.sendline("b is reserved")
    child.expect("RESULTS: Created a.txt")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (isolated / "a.txt").read_text() == "a.txt"
    assert not (isolated / "b.txt").exists()
    assert "the user denied it: b is reserved" in (child.before or "")


def test_allow_always_is_not_asked_again_and_a_background_child_asks_too(isolated: Path) -> None:
    child = spawn_cli("write_two", isolated)
    child.expect("your choice \\[y/a/n\\]: ")
    child.sendline("a")
    child.expect("RESULTS: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert sorted(p.name for p in isolated.iterdir() if p.suffix == ".txt") == ["a.txt", "b.txt"]
    assert "approval needed" not in (child.before or "")  # the second write was not asked
    child = spawn_cli("delegate", isolated)
    child.expect("approval needed: general-purpose-ada > general-purpose-[a-z]+ \\[general-purpose\\] wants to run "
                 "write_file\\(path=\"c.txt\"")
    child.sendline("y")
    child.expect("RESULTS: ")
    child.expect(pexpect.EOF)
    child.close()
    assert (isolated / "c.txt").read_text() == "c"


def test_without_a_terminal_the_call_is_denied_and_the_person_told_how_to_allow_it(isolated: Path) -> None:
    p = subprocess.run([sys.executable, SCRIPT, "write_two", "run", "go", "--cwd", str(isolated)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0
    assert not (isolated / "a.txt").exists()
    assert ("subagents: denied write_file for general-purpose-ada: permission mode 'default' asks before file "
            "edits, and no one can approve it here. Allow it with --permission-mode autoEdit|yolo or --allow 'RULE' "
            "(see docs/permissions.md).") in p.stderr
    assert p.stderr.count("subagents: denied write_file") == 1  # said once, not per call
    assert "no one can approve it here" in p.stdout  # the model was told too
    p = subprocess.run([sys.executable, SCRIPT, "write_two", "run", "go", "--cwd", str(isolated), "--allow",
                        "write_file(a.txt)"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (isolated / "a.txt").exists()
    assert not (isolated / "b.txt").exists()


def test_json_mode_denies_and_reports_the_decisions_as_events(isolated: Path) -> None:
    p = subprocess.run([sys.executable, SCRIPT, "write_two", "run", "go", "--cwd", str(isolated), "--json"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in p.stdout.splitlines()]
    decided = [e for e in events if e["kind"] == "approval_decided"]
    assert [(e["tool"], e["decision"], e["by"]) for e in decided] == [("write_file", "denied", "no approver")] * 2
    assert events[-1]["kind"] == "result"
    p = subprocess.run([sys.executable, SCRIPT, "write_two", "run", "go", "--cwd", str(isolated), "--json",
                        "--permission-mode", "acceptEdits"], capture_output=True, text=True, timeout=60)
    assert (isolated / "b.txt").exists()
