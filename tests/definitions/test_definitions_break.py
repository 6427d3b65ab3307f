"""Agent definition files built to break the loader: values PyYAML cannot build, alias bombs, a regular expression
that backtracks for hours, a megabyte of keys, a bad ``mcp_servers`` in an untrusted project, and definitions made
in Python whose lists are strings.  Each bad file is skipped (or loaded) with a warning naming it; none crashes the
loader, hangs it, or leaves its agent more authority than its author wrote."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from subagents import AgentDefinition, Runtime
from subagents.definitions import load_definitions, parse_definition_file
from subagents.definitions.toolcheck import tool_warning
from subagents.exceptions import DefinitionError, SpawnError
from subagents.models import FunctionModel, ModelRequest, ModelResponse


def agents_dir(project: Path) -> Path:
    d = project / ".subagents" / "agents"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


def load(project: Path) -> tuple[list[str], list[str]]:
    defs = load_definitions(project, user_dir=project / "u", home=project / "h", extensions=False)
    return defs.names(), defs.warnings


# -- values PyYAML's constructors cannot build: they raised ValueError/KeyError/AttributeError out of the loader -----
@pytest.mark.parametrize(("value", "why"), [
    ("!!float abc", "could not convert string to float: 'abc'"),
    ("!!bool maybe", "KeyError: 'maybe'"),
    ("!!timestamp soon", "AttributeError"),
    ("!!int twelve", "invalid literal for int()"),
])
def test_a_value_yaml_cannot_build_skips_the_file_and_the_others_load(tmp_path: Path, value: str, why: str) -> None:
    a = agents_dir(tmp_path)
    write(a / "bad.md", f"---\nname: bad\ndescription: {value}\n---\nb\n")
    write(a / "good.md", "---\nname: good\n---\nb\n")
    names, warnings = load(tmp_path)
    assert "good" in names
    assert "bad" not in names
    assert len(warnings) == 1
    assert warnings[0].startswith(f"skipped agent definition {a / 'bad.md'}: invalid YAML front matter: line 3: "
                                  "a value YAML cannot build (")
    assert why in warnings[0]


def test_an_impossible_date_is_read_as_text_with_a_warning(tmp_path: Path) -> None:
    """``description: 2024-02-30`` looks like a date to YAML 1.1, and ``datetime.date`` refused it with a ValueError
    that escaped ``load_definitions``: every Runtime and every command in the project failed."""
    a = agents_dir(tmp_path)
    write(a / "when.md", "---\nname: when\ndescription: 2024-02-30\n---\nb\n")
    defs = load_definitions(tmp_path, user_dir=tmp_path / "u", home=tmp_path / "h", extensions=False)
    assert defs.get("when").description == "2024-02-30"
    assert defs.warnings[0].startswith(f"{a / 'when.md'}: front matter line 3 is not valid YAML")


def test_an_integer_past_pythons_digit_limit_is_refused_naming_the_key(tmp_path: Path) -> None:
    a = agents_dir(tmp_path)
    write(a / "big.md", "---\nname: big\nmax_tokens: " + "9" * 5000 + "\n---\nb\n")
    names, warnings = load(tmp_path)
    assert "big" not in names
    assert warnings[0].startswith(f"skipped agent definition project:{a / 'big.md'}: 'max_tokens' must be a positive "
                                  "whole number, got '999")
    assert len(warnings[0]) < 400  # the 5,000 digits are not all repeated


def test_an_impossible_date_does_not_break_the_runtime(tmp_path: Path) -> None:
    write(agents_dir(tmp_path) / "when.md", "---\nname: when\ncreated: 2024-13-45\n---\nb\n")
    rt = Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory")
    assert rt.run_sync("x", agent="when").text == "hi"


def test_deep_nesting_read_leniently_is_a_warning_not_a_recursion_error(tmp_path: Path) -> None:
    """A key strict YAML rejected sends the whole block to the lenient reading, which parsed each key again
    without catching RecursionError."""
    a = agents_dir(tmp_path)
    write(a / "deep.md", "---\nname: deep\ndescription: Use when: x\ncolor: " + "[" * 3000 + "]" * 3000 + "\n---\nb\n")
    names, warnings = load(tmp_path)
    assert "deep" not in names
    assert warnings == [f"skipped agent definition {a / 'deep.md'}: the front matter is nested too deeply to read "
                        "(line 4)"]


# -- sizes: an alias bomb, a quadratic regular expression, a megabyte of keys -------------------------------------
@pytest.mark.timeout(30)
@pytest.mark.parametrize("key", ["tools", "description", "model", "permission_mode", "max_turns", "background"])
def test_a_billion_laughs_value_is_refused_at_once(tmp_path: Path, key: str) -> None:
    """Nine lists of nine aliases nine deep are a few lines of YAML and 9**10 strings; the error message printed the
    value in full (minutes, then a MemoryError)."""
    lines = ["---", "name: lol", "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    p = write(tmp_path / "lol.md", "\n".join([*lines, f"{key}: *l9", "---", "b", ""]))
    start = time.monotonic()
    with pytest.raises(DefinitionError, match=f"'{key}' must be") as e:
        parse_definition_file(p)
    assert time.monotonic() - start < 5
    assert len(str(e.value)) < 600


@pytest.mark.timeout(30)
def test_a_long_string_of_digits_does_not_make_the_number_check_backtrack(tmp_path: Path) -> None:
    """``[-+]?(?:\\d+\\.?\\d*|...)[eE]`` tried every split of the digits: 40,000 took a minute, a megabyte hours."""
    p = write(tmp_path / "digits.md", '---\nname: digits\nmax_turns: "' + "9" * 40000 + '"\n---\nb\n')
    start = time.monotonic()
    with pytest.raises(DefinitionError, match="'max_turns' must be a positive whole number"):
        parse_definition_file(p)
    assert time.monotonic() - start < 5


@pytest.mark.timeout(60)
def test_a_front_matter_of_thousands_of_keys_is_refused_quickly(tmp_path: Path) -> None:
    """A megabyte of ``kN: 1`` lines took 17 s (35 s when one line needed the lenient reading) on every command."""
    a = agents_dir(tmp_path)
    write(a / "keys.md", "---\nname: keys\ndescription: a: b\n" + "".join(f"k{i}: 1\n" for i in range(100000))
          + "---\nb\n")
    start = time.monotonic()
    names, warnings = load(tmp_path)
    assert time.monotonic() - start < 5
    assert "keys" not in names
    assert warnings == [f"skipped agent definition {a / 'keys.md'}: the front matter (between the '---' lines) is "
                        "over 64 KB; an agent's keys fit in far less (its prompt goes below the closing '---')"]


def test_a_long_prompt_below_the_front_matter_still_loads(tmp_path: Path) -> None:
    p = write(tmp_path / "long.md", "---\nname: long\n---\n" + "You review.\n" * 50000)
    assert parse_definition_file(p).system_prompt.startswith("You review.")


@pytest.mark.timeout(60)
def test_thousands_of_keys_that_look_misspelt_are_checked_a_few_only(tmp_path: Path) -> None:
    p = write(tmp_path / "typos.md", "---\nname: typos\n" + "".join(f"description{i:05d}: 1\n" for i in range(3000))
              + "---\nb\n")
    found: list[str] = []
    parse_definition_file(p, warnings=found)
    assert len(found) == 64


# -- a definition's own MCP servers, in a project that is not trusted ----------------------------------------------
def test_a_bad_mcp_servers_value_skips_its_file_not_the_runtime(tmp_path: Path) -> None:
    """``mcp_servers: 5`` loaded, then ``Runtime()`` raised DefinitionError while listing the untrusted project's
    servers: one bad file stopped every run in the project."""
    a = agents_dir(tmp_path)
    write(a / "m.md", "---\nname: m\nmcp_servers: 5\n---\nb\n")
    write(a / "good.md", "---\nname: good\n---\nb\n")
    rt = Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory")
    assert rt.run_sync("x", agent="good").text == "hi"
    names, warnings = load(tmp_path)
    assert "m" not in names
    assert warnings[0].startswith(f"skipped agent definition project:{a / 'm.md'}: mcp_servers must be a list")


@pytest.mark.timeout(30)
def test_an_mcp_servers_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    lines = ["---", "name: lol", "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    p = write(tmp_path / "lol.md", "\n".join([*lines, "mcp_servers: [*l9]", "---", "b", ""]))
    start = time.monotonic()
    with pytest.raises(DefinitionError, match=r"'mcp_servers' holds over 10000 items"):
        parse_definition_file(p)
    assert time.monotonic() - start < 5


def test_good_mcp_servers_still_load(tmp_path: Path) -> None:
    p = write(tmp_path / "gh.md", "---\nname: gh\nmcpServers: [github, {local: {command: srv}}]\n---\nb\n")
    assert parse_definition_file(p).extra["mcpServers"] == ["github", {"local": {"command": "srv"}}]


# -- definitions made in Python -----------------------------------------------------------------------------------
async def test_a_python_definition_with_a_string_for_a_list_is_refused(tmp_path: Path) -> None:
    """``disallowed_tools="bash"`` was iterated letter by letter: it denied 'b', 'a', 's', 'h' and left bash allowed."""
    d = AgentDefinition("nobash", "d", "p", disallowed_tools="bash")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match=r"^agent definition 'nobash': 'disallowed_tools' must be a list of "
                                              r"names, got 'bash'$"):
        Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[d])


@pytest.mark.parametrize("name", ["", "a b", "../up", "x\nmode: yolo", "é"])
def test_a_python_definition_with_an_invalid_name_is_refused(tmp_path: Path, name: str) -> None:
    d = AgentDefinition(name, "d", "p")
    with pytest.raises(DefinitionError, match="is missing or invalid"):
        Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[d])


def test_a_python_definition_with_tuples_and_a_string_flag(tmp_path: Path) -> None:
    ok = AgentDefinition("ok", "d", "p", tools=("read_file",))  # type: ignore[arg-type]
    Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[ok])
    assert ok.tools == ["read_file"]
    bad = AgentDefinition("bg", "d", "p", background="false")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="'background' must be True or False, got 'false'"):
        Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[bad])


async def test_a_list_of_disallowed_tools_still_denies_them(tmp_path: Path) -> None:
    d = AgentDefinition("nobash", "d", "p", disallowed_tools=["bash"])
    seen: list[list[str]] = []

    def fn(req: ModelRequest) -> ModelResponse:
        seen.append([t.name for t in req.tools])
        return ModelResponse(text="done")

    async with Runtime(FunctionModel(fn), workdir=tmp_path, store="memory", agents=[d]) as rt:
        await rt.run("go", agent="nobash")
    assert "bash" not in seen[0]


# -- disallowed_tools that deny nothing, tools that are patterns ------------------------------------------------------
def test_a_disallowed_name_that_is_no_tool_is_named_in_the_warning() -> None:
    d = AgentDefinition("careful", disallowed_tools=["write_fle", "bsh", "WebSearch", "mcp__gh"])
    msg = tool_warning(d, {"read_file", "write_file", "bash"}, mcp_servers=set())
    assert msg == ("agent type 'careful' (session) disallows write_fle, bsh, which are no tools here, so "
                   "nothing is denied by them; name the tools exactly as listed by 'subagents agents show' "
                   "(read_file, bash, ...)")


def test_known_disallowed_names_stay_silent() -> None:
    d = AgentDefinition("careful", disallowed_tools=["bash", "WebSearch"])
    assert tool_warning(d, {"read_file", "bash"}, mcp_servers=set()) is None


@pytest.mark.parametrize("entry", ["Bash(rm:*)", "write_file(x)"])
def test_a_disallowed_rule_skips_the_file(tmp_path: Path, entry: str) -> None:
    """The fence denies whole tools: Claude Code's ``Bash(rm:*)`` would deny nothing and leave bash allowed."""
    a = agents_dir(tmp_path)
    write(a / "careful.md", f'---\nname: careful\ndisallowed_tools: ["{entry}", read_file]\n---\nb\n')
    names, warnings = load(tmp_path)
    assert "careful" not in names
    assert warnings == [f"skipped agent definition project:{a / 'careful.md'}: 'disallowed_tools' entry {entry!r} "
                        "is a permission rule, and a definition's 'disallowed_tools' denies whole tools (names or "
                        "patterns such as write_*), so it would deny nothing; deny the tool by name, or put the rule "
                        "in [permissions] deny of the config"]


async def _tools_of(tmp_path: Path, agent: str) -> list[str]:
    seen: list[list[str]] = []

    def model(req: ModelRequest) -> ModelResponse:
        seen.append(sorted(req.tool_names))
        return ModelResponse("done")

    async with Runtime(FunctionModel(model), workdir=tmp_path, store="memory") as rt:
        await rt.run("go", agent=agent)
    return seen[0]


@pytest.mark.parametrize(("entries", "gone"), [
    ('["write_*", "edit_fil?"]', {"write_file", "edit_file"}),
    ('["*"]', None),  # every tool
    ('["bash", "g[lr]*"]', {"bash", "glob", "grep"}),
])
async def test_a_disallowed_pattern_denies_every_tool_it_matches(tmp_path: Path, entries: str,
                                                                 gone: set[str] | None) -> None:
    """``disallowed_tools: [write_*, edit_*, bash*]`` loaded and its agent kept write_file, edit_file and bash, while
    ``agents list`` showed "all tools (minus write_*, ...)"; then such a file was skipped.  Now a pattern denies."""
    write(agents_dir(tmp_path) / "careful.md", f"---\nname: careful\ndisallowed_tools: {entries}\n---\nb\n")
    every = await _tools_of(tmp_path, "general-purpose")
    got = await _tools_of(tmp_path, "careful")
    assert got == ([] if gone is None else sorted(set(every) - gone))
    assert gone is None or gone <= set(every)  # (each denied tool is one the runtime has)


def test_a_disallowed_pattern_that_matches_no_tool_is_named_in_the_warning() -> None:
    d = AgentDefinition("careful", disallowed_tools=["wirte_*", "write_*"])
    msg = tool_warning(d, {"read_file", "write_file", "bash"}, mcp_servers=set())
    assert msg is not None
    assert "disallows wirte_*, which is no tool here, so nothing is denied by it" in msg


def test_an_mcp_pattern_in_disallowed_tools_still_loads(tmp_path: Path) -> None:
    p = write(tmp_path / "m.md", "---\nname: m\ndisallowed_tools: [mcp__github__delete_*, Bash]\n---\nb\n")
    assert parse_definition_file(p).disallowed_tools == ["mcp__github__delete_*", "bash"]


def test_a_python_definition_with_a_disallowed_rule_is_refused(tmp_path: Path) -> None:
    d = AgentDefinition("careful", "d", "p", disallowed_tools=["Bash(rm:*)"])
    with pytest.raises(DefinitionError, match=r"'disallowed_tools' entry 'Bash\(rm:\*\)' is a permission rule"):
        Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory", agents=[d])


async def test_tools_star_is_refused_at_spawn_not_a_silent_agent_without_tools(tmp_path: Path) -> None:
    """``tools: "*"`` gave an agent no tool at all, without a word: the check counted patterns as known tools."""
    write(agents_dir(tmp_path) / "star.md", '---\nname: star\ntools: "*"\n---\nb\n')
    async with Runtime(FunctionModel(lambda r: "hi"), workdir=tmp_path, store="memory") as rt:
        with pytest.raises(SpawnError, match=r"agent type 'star' .* has no usable tool"):
            await rt.run("go", agent="star")


def test_a_tools_pattern_is_named_in_the_warning() -> None:
    d = AgentDefinition("reader", tools=["read_file", "grep*"], delegate_tools=["*"])
    assert tool_warning(d, {"read_file", "grep"}, mcp_servers=set()) == (
        "agent type 'reader' (session) lists tools it cannot have: grep*: a pattern, and only mcp__ names may be "
        "patterns here; list the tools by name (they are left out)")


# -- control characters: no lenient reading that splits lines where YAML does not ---------------------------------
@pytest.mark.parametrize(("text", "char"), [
    ("description: Reviews code\x1cpermission_mode: plan\x1dmax_turns: 3", "#x001c"),  # one line in an editor
    ("description: look \x1b]0;pwned\x07 here", "#x001b"),  # plain (unquoted): it went to the lenient reading
])
def test_a_control_character_in_a_plain_value_skips_the_file(tmp_path: Path, text: str, char: str) -> None:
    """Strict YAML refused the character; the lenient reading then split the line at ``\\x1c`` (``str.splitlines``)
    and loaded three keys out of what every editor shows as one line, without a warning; a raw ESC in an unquoted
    value loaded too (a quoted one was refused)."""
    a = agents_dir(tmp_path)
    write(a / "fs.md", f"---\nname: fs\n{text}\n---\nb\n")
    names, warnings = load(tmp_path)
    assert "fs" not in names
    (warning,) = warnings  # PyYAML's reader says "special", libyaml's "control"
    assert re.fullmatch(re.escape(f"skipped agent definition {a / 'fs.md'}: invalid YAML front matter: line 3: "
                                  f"unacceptable character {char}: ") + "(special|control) characters are not allowed",
                        warning), warning


@pytest.mark.parametrize("libyaml", [True, False])
def test_both_yaml_loaders_read_and_refuse_the_same(monkeypatch: pytest.MonkeyPatch, libyaml: bool) -> None:
    """libyaml's loader is used when PyYAML has it (as its wheels do); without it PyYAML's own loader reads the
    same keys and refuses nesting as clearly (its ``RecursionError`` and libyaml's depth limit: one message)."""
    import yaml

    from subagents.definitions.frontmatter import FrontMatterError, load_front_matter

    if libyaml:
        assert getattr(yaml, "CSafeLoader", None) is not None, "PyYAML without libyaml: install its wheel"
    else:
        monkeypatch.delattr(yaml, "CSafeLoader")
    lines: dict[str, int] = {}
    meta, lenient = load_front_matter("name: a\n# c\ntools: [Read, Grep]\nmax_turns: 3", lines=lines)
    assert (meta, lenient, lines) == ({"name": "a", "tools": ["Read", "Grep"], "max_turns": 3}, [],
                                      {"name": 1, "tools": 3, "max_turns": 4})
    assert load_front_matter("description: Use when: x\ntools: [Read]")[1] == [1]
    for text, where in (("color: " + "[" * 3000 + "]" * 3000, ""),
                        ("description: a: b\ncolor: " + "{a: " * 3000 + "}" * 3000, " (line 2)")):
        with pytest.raises(FrontMatterError, match=re.escape(f"the front matter is nested too deeply to read{where}")):
            load_front_matter(text)
