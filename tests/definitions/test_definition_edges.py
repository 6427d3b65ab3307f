"""Agent definition files as careless users and hostile repositories write them: each is loaded (with a clear
warning where it is odd) or skipped with one warning naming the file and the problem; none crashes or hangs
the loader, and none widens the authority of the agent that spawns it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.cli.main import main
from subagents.definitions import load_definitions, parse_definition_file
from subagents.exceptions import DefinitionError
from subagents.models import FunctionModel, ModelRequest, ModelResponse


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def load(project: Path) -> tuple[list[str], list[str]]:
    defs = load_definitions(project, user_dir=project / "u", home=project / "h", extensions=False)
    return defs.names(), defs.warnings


def project_defs(project: Path) -> Path:
    return project / ".subagents" / "agents"


# -- the front matter's frame ---------------------------------------------------------------------------------
def test_a_byte_order_mark_does_not_hide_the_front_matter(tmp_path: Path) -> None:
    p = write(tmp_path / "bom.md", "\ufeff---\nname: bom\ndescription: saved by Notepad\n---\nBody.\n")
    d = parse_definition_file(p)
    assert (d.name, d.description, d.system_prompt) == ("bom", "saved by Notepad", "Body.")


def test_crlf_and_an_empty_front_matter_load(tmp_path: Path) -> None:
    crlf = parse_definition_file(write(tmp_path / "crlf.md", "---\r\nname: crlf\r\ntools: [Read]\r\n---\r\nBody.\r\n"))
    assert (crlf.name, crlf.tools, crlf.system_prompt) == ("crlf", ["read_file"], "Body.")
    empty = parse_definition_file(write(tmp_path / "helper.md", "---\n---\nYou help.\n"))
    assert (empty.name, empty.system_prompt) == ("helper", "You help.")  # the name is the file's


def test_an_unclosed_front_matter_says_so(tmp_path: Path) -> None:
    p = write(tmp_path / "open.md", "---\nname: open\ndescription: never closed\nYou review code.\n")
    with pytest.raises(DefinitionError) as e:
        parse_definition_file(p)
    assert str(e.value) == (f"{p}: the front matter opened by '---' on line 1 is never closed; "
                            "end it with a line '---' before the prompt")


# -- keys -------------------------------------------------------------------------------------------------------
def test_a_key_given_twice_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    p = write(tmp_path / "dup.md", "---\nname: dup\ntools: [read_file]\ndescription: x\ntools: [bash]\n---\nb\n")
    with pytest.raises(DefinitionError, match=r"dup\.md: key 'tools' is given twice \(lines 3 and 5\); keep one"):
        parse_definition_file(p)


def test_two_spellings_of_one_key_are_an_error(tmp_path: Path) -> None:
    p = write(tmp_path / "two.md", "---\nname: two\nmaxTurns: 3\nmax_turns: 300\n---\nb\n")
    with pytest.raises(DefinitionError, match=r"'maxTurns' and 'max_turns' both set max_turns; keep one"):
        parse_definition_file(p)


def test_a_misspelt_key_warns_with_its_line_and_the_key_it_resembles(tmp_path: Path) -> None:
    p = write(project_defs(tmp_path) / "typo.md", "---\nname: typo\ndescription: x\ntoolz: [read_file]\n---\nb\n")
    names, warnings = load(tmp_path)
    assert "typo" in names  # still loaded (its other keys are fine) ...
    assert warnings == [f"{p}: line 4: unknown key 'toolz' (did you mean 'tools'?); it is ignored, so this "
                        "agent gets every tool"]  # ... but the person hears that the fence they meant is not there


def test_foreign_keys_of_other_tools_stay_silent(tmp_path: Path) -> None:
    write(project_defs(tmp_path) / "cc.md", "---\nname: cc\ncolor: blue\nmemory: project\n---\nb\n")
    assert load(tmp_path)[1] == []


# -- values of the wrong type -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("line", "message"), [
    ("model: {provider: openai}", "'model' must be 'inherit' or a model string, got {'provider': 'openai'}"),
    ("model: [sonnet, haiku]", "'model' must be 'inherit' or a model string, got ['sonnet', 'haiku']"),
    ("model: ''", "'model' must be 'inherit' or a model string, got ''"),
    ("max_cost_usd: .nan", "'max_cost_usd' must be a positive number, got nan"),
    ("max_cost_usd: .inf", "'max_cost_usd' must be a positive number, got inf"),
    ("timeout_s: .inf", "'timeout_s' must be a positive number, got inf"),
    ("permission_mode: godmode", "'permission_mode' must be one of plan, default, autoEdit, yolo "
                                 "(or Claude Code's acceptEdits, bypassPermissions), got 'godmode'"),
    ("permission_mode: [yolo]", "'permission_mode' must be one of plan, default, autoEdit, yolo "
                                "(or Claude Code's acceptEdits, bypassPermissions), got ['yolo']"),
    ("isolation: chroot", "'isolation' must be 'worktree' (or 'none'), got 'chroot'"),
    ("description: {a: 1}", "'description' must be text, got {'a': 1}"),
    ("name: yes", "'name' must be text, got True (quote it)"),
])
def test_wrong_types_are_refused_naming_the_key(tmp_path: Path, line: str, message: str) -> None:
    p = write(tmp_path / "x.md", f"---\n{line}\n---\nbody\n")
    with pytest.raises(DefinitionError) as e:
        parse_definition_file(p)
    assert str(e.value) == f"project:{p}: {message}"


def test_an_over_long_name_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path / "x.md", "---\nname: " + "a" * 65 + "\n---\nbody\n")
    with pytest.raises(DefinitionError, match="is longer than 64 characters"):
        parse_definition_file(p)


def test_aliases_are_canonical_and_empty_tool_names_dropped(tmp_path: Path) -> None:
    p = write(tmp_path / "x.md", "---\npermissionMode: bypassPermissions\nisolation: none\ntools: ['', Read]\n---\nb\n")
    d = parse_definition_file(p)
    assert (d.permission_mode, d.isolation, d.tools) == ("yolo", None, ["read_file"])


# -- files that are not plain files -----------------------------------------------------------------------------
def test_files_that_cannot_be_read_are_skipped_with_one_clear_sentence(tmp_path: Path) -> None:
    a = project_defs(tmp_path)
    (a / "dir.md").mkdir(parents=True)
    os.symlink(a / "loop.md", a / "loop.md")
    (a / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    write(a / "latin.md", "---\nname: latin\ndescription: caf\xe9\n---\nb\n".encode("latin-1"))
    write(a / "ok.md", "---\nname: ok\n---\nb\n")
    names, warnings = load(tmp_path)
    assert "ok" in names
    assert sorted(warnings) == sorted([
        f"skipped agent definition {a / 'dangling.md'}: cannot be read (No such file or directory)",
        f"skipped agent definition {a / 'dir.md'}: is a directory, not a file",
        f"skipped agent definition {a / 'latin.md'}: is not UTF-8 text; save it as UTF-8",
        f"skipped agent definition {a / 'loop.md'}: cannot be read (Too many levels of symbolic links)",
    ])


@pytest.mark.timeout(20)
def test_a_fifo_does_not_hang_the_loader(tmp_path: Path) -> None:
    a = project_defs(tmp_path)
    a.mkdir(parents=True)
    os.mkfifo(a / "pipe.md")
    names, warnings = load(tmp_path)
    assert warnings == [f"skipped agent definition {a / 'pipe.md'}: is not a regular file"]
    assert "explore" in names


def test_a_huge_file_is_skipped(tmp_path: Path) -> None:
    a = project_defs(tmp_path)
    write(a / "big.md", "---\nname: big\n---\n" + "x" * (2 * 1024 * 1024))
    names, warnings = load(tmp_path)
    assert "big" not in names
    assert warnings == [f"skipped agent definition {a / 'big.md'}: is 2.0 MB; an agent definition may be at most "
                        "1 MB"]


def test_two_files_of_one_directory_with_one_name_warn(tmp_path: Path) -> None:
    a = project_defs(tmp_path)
    write(a / "a1.md", "---\nname: same\ndescription: first\n---\nb\n")
    write(a / "a2.md", "---\nname: same\ndescription: second\n---\nb\n")
    defs = load_definitions(tmp_path, user_dir=tmp_path / "u", home=tmp_path / "h", extensions=False)
    assert defs.get("same").description == "first"
    assert defs.warnings == [f"{a / 'a2.md'} also defines agent type 'same', which {a / 'a1.md'} defines; "
                             f"{a / 'a1.md'} takes precedence (rename one of them)"]


# -- the CLI ----------------------------------------------------------------------------------------------------
def test_agents_list_on_a_hostile_folder_warns_and_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    a = project_defs(tmp_path)
    write(a / "gm.md", "---\nname: gm\npermission_mode: godmode\n---\nb\n")
    write(a / "bin.md", b"\x00\xff\xfe---\x00")
    assert main(["agents", "list", "--cwd", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert f"warning: skipped agent definition project:{a / 'gm.md'}: 'permission_mode' must be one of" in err
    assert f"warning: skipped agent definition {a / 'bin.md'}: is not UTF-8 text; save it as UTF-8" in err
    assert "gm " not in out


# -- authority: a definition never widens its parent's ---------------------------------------------------------
async def test_a_bypass_definition_runs_in_the_runtimes_mode(tmp_path: Path) -> None:
    write(project_defs(tmp_path) / "wide.md", "---\nname: wide\npermissionMode: bypassPermissions\n---\nYou act.\n")
    systems: list[str] = []

    def fn(req: ModelRequest) -> ModelResponse:
        systems.append(req.system)
        return ModelResponse(text="done")

    async with Runtime(model=FunctionModel(fn), workdir=tmp_path, store="memory://", permission_mode="plan") as rt:
        await rt.run("go", agent="wide")
        h = await rt.spawn("go", agent="wide")
        await rt.wait([h.id], timeout=10)
    assert len(systems) == 2
    assert all("Permission mode: plan." in s for s in systems)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("permission_mode", "godmode", "'permission_mode' must be one of plan, default"),
    ("isolation", "chroot", "'isolation' must be 'worktree' (or 'none'), got 'chroot'"),
    ("max_cost_usd", float("nan"), "'max_cost_usd' must be a positive number, got nan"),
    ("max_turns", 0, "'max_turns' must be a positive whole number, got 0"),
    ("model", "", "'model' must be 'inherit' or a model string"),
])
def test_a_definition_made_in_python_is_checked_when_the_runtime_is_made(
        tmp_path: Path, field: str, value: object, message: str) -> None:
    """``Runtime(agents=[...])``: a wrong value is a DefinitionError naming the definition as the Runtime is made, not
    a ValueError at its first spawn (or, for isolation, a run without isolation)."""
    from subagents import AgentDefinition

    d = AgentDefinition("x", "d", "p", **{field: value})  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match=r"^agent definition 'x': ") as e:
        Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[d])
    assert message in str(e.value)


def test_a_python_definition_takes_claude_codes_mode_names(tmp_path: Path) -> None:
    from subagents import AgentDefinition

    d = AgentDefinition("x", "d", "p", permission_mode="acceptEdits", isolation="none")
    Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[d])
    assert (d.permission_mode, d.isolation) == ("autoEdit", None)


def test_hidden_files_in_an_agents_directory_are_not_definitions(tmp_path: Path) -> None:
    """An editor's lock file (Emacs makes ``.#name.md``, a dangling symlink, while a file is edited) and hidden
    drafts were read, and warned about as broken definitions."""
    agents = tmp_path / ".subagents" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\nname: reviewer\ndescription: Reviews\n---\nYou review.\n")
    (agents / ".#reviewer.md").symlink_to("root@host.1234:1700000000")
    (agents / ".draft.md").write_text("---\nname: draft\ndescription: not yet\n---\nDraft.\n")
    defs = load_definitions(tmp_path, user_dir=tmp_path / "u", home=tmp_path / "h", extensions=False)
    assert defs.warnings == []
    assert "reviewer" in defs.names()
    assert "draft" not in defs.names()


def test_a_control_character_in_the_front_matter_skips_the_file_with_a_warning(tmp_path: Path) -> None:
    """YAML's reader refuses a raw ESC as the loader is made: that escaped as a ReaderError (a traceback for every
    command, and for every Runtime made in the project) instead of the file being skipped."""
    agents = tmp_path / ".subagents" / "agents"
    agents.mkdir(parents=True)
    (agents / "sly.md").write_text('---\nname: sly\ndescription: "look \x1b]0;pwned\x07"\n---\nYou are.\n')
    defs = load_definitions(tmp_path, user_dir=tmp_path / "u", home=tmp_path / "h", extensions=False)
    assert "sly" not in defs.names()
    assert len(defs.warnings) == 1
    assert "sly.md: invalid YAML front matter: line 3: unacceptable character #x001b" in defs.warnings[0]
