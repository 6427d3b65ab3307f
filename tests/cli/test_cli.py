from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.cli.main import entry, main
from subagents.exceptions import ModelError
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall

EVENT_KEYS = {"kind", "agent_id", "nickname", "parent_id", "depth", "ts"}

NO_MODEL = """\
error: no model is configured.
Configure one in any of these ways:
  Anthropic:    export ANTHROPIC_API_KEY=...  and pass  --model anthropic:claude-sonnet-4-5
  OpenAI:       export OPENAI_API_KEY=...     and pass  --model openai:gpt-4.1
  Local server (Ollama, vLLM, llama.cpp, LM Studio; OpenAI-compatible):
                --model openai:<model>@http://localhost:11434/v1
  A default for every run: put
                [model]
                default = "anthropic:claude-sonnet-4-5"
                in .subagents/config.toml, or export SUBAGENTS_MODEL=anthropic:claude-sonnet-4-5
To try subagents offline first, without any model or key, run:  subagents demo
"""


def lister(request: ModelRequest) -> ModelResponse:
    """Turn 1: list the directory; turn 2: answer with what the tool returned."""
    results = [r for m in request.messages for r in m.tool_results]
    if not results:
        return ModelResponse("Looking.", [ToolCall("list_dir", {"path": "."})])
    return ModelResponse("Entries: " + ", ".join(results[0].content.splitlines()))


def restless(request: ModelRequest) -> ModelResponse:
    """Never answers: calls a tool every turn."""
    return ModelResponse(f"still looking ({len(request.messages)})", [ToolCall("list_dir", {"path": "."})])


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == "subagents 0.1.0\n"


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("run", "demo", "config"):
        assert f"\n  {name} " in out


def test_help_lists_each_command_with_its_own_summary() -> None:
    """``--help`` lists the commands from a table (no command imported); it must say what each command's help says."""
    import click

    from subagents.cli.main import COMMANDS, SUMMARIES, LazyGroup, cli

    assert sorted(SUMMARIES) == sorted(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        assert SUMMARIES[name] == (cmd.help or "").split("\n\n")[0].strip(), name
    listed = click.Context(cli).get_help()  # the commands are loaded now: click's own listing
    fresh = LazyGroup(cli.name, params=cli.params, help=cli.help)  # none loaded: the table's
    assert click.Context(fresh, info_name="subagents").get_help().split("Commands:")[1] == listed.split("Commands:")[1]


def test_help_and_version_do_not_load_the_runtime() -> None:
    """``subagents --help`` is the first thing a newcomer runs: it imports click and the CLI's entry, not the
    runtime (was ~0.4 s of imports on a slow machine; now ~0.13 s)."""
    import subprocess
    import sys

    code = ("import sys; from subagents.cli.main import main; assert main(['--help']) == 0; "
            "assert main(['--version']) == 0; "
            "print(sorted(m for m in sys.modules if m.startswith('subagents') or m in ('asyncio', 'rich')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = out.strip().splitlines()[-1]
    assert loaded == "['subagents', 'subagents.cli', 'subagents.cli.common', 'subagents.cli.main', " \
                     "'subagents.exceptions']", loaded


def test_python_dash_m_runs_the_cli() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "subagents", "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "subagents 0.1.0\n", "")
    done = subprocess.run([sys.executable, "-m", "subagents", "nope"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "No such command 'nope'." in done.stderr


def test_entry_exits_with_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["subagents", "--version"])
    with pytest.raises(SystemExit) as e:
        entry()
    assert e.value.code == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope"], "No such command 'nope'."),
        (["run"], "Error: missing the prompt: give it as an argument"),
        (["run", "hi", "--max-turns", "0"], "Invalid value for '--max-turns'"),
        (["run", "hi", "--timeout", "soon"], "Invalid value for '--timeout'"),
        (["run", "hi", "--cwd", "/does/not/exist"], "Invalid value for '--cwd'"),
        (["config", "show", "--bogus"], "No such option '--bogus'."),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("Usage: subagents")


def test_missing_model_message(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "hello"]) == 2
    captured = capsys.readouterr()
    assert captured.err == NO_MODEL
    assert captured.out == ""


def test_malformed_model_string_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "hello", "--model", "gpt-4.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: malformed model string 'gpt-4.1'; accepted forms:")


def test_bad_config_file_exits_2(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (isolated / ".subagents").mkdir()
    path = isolated / ".subagents" / "config.toml"
    path.write_text('[agents]\nmax_threads = "four"\n')
    assert main(["run", "hello"]) == 2
    assert capsys.readouterr().err == (
        f"error: {path.resolve()}: "

        '[agents] max_threads must be a positive integer, got "four"\n'
    )


def test_run_prints_the_answer(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (isolated / "a.txt").write_text("x")
    (isolated / "sub").mkdir()
    assert main(["run", "what is here?"], model=FunctionModel(lister)) == 0
    captured = capsys.readouterr()
    assert captured.out == "Entries: a.txt, sub/\n"
    assert "2 turns" in captured.err


def test_run_cwd_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "only.md").write_text("x")
    assert main(["run", "what is here?", "--cwd", str(other)], model=FunctionModel(lister)) == 0
    assert capsys.readouterr().out == "Entries: only.md\n"


def test_run_json_events_then_result(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (isolated / "a.txt").write_text("x")
    assert main(["run", "what is here?", "--json"], model=FunctionModel(lister)) == 0
    lines = json_lines(capsys.readouterr().out)
    kinds = [ln["kind"] for ln in lines]
    assert kinds[-1] == "result"
    for kind in ("run_start", "turn_start", "assistant_text", "tool_start", "tool_end", "run_end"):
        assert kind in kinds
    assert kinds.index("tool_start") < kinds.index("tool_end") < kinds.index("run_end") < kinds.index("result")
    for ev in lines[:-1]:
        assert ev.keys() >= EVENT_KEYS
        assert ev["depth"] == 0
        assert ev["parent_id"] is None
    start = next(ev for ev in lines if ev["kind"] == "tool_start")
    end = next(ev for ev in lines if ev["kind"] == "tool_end")
    assert (start["tool"], start["arguments"]) == ("list_dir", {"path": "."})
    assert (end["tool"], end["call_id"], end["is_error"], end["output"]) == ("list_dir", start["call_id"], False,
                                                                            "a.txt")
    result = lines[-1]
    assert {k: result[k] for k in ("outcome", "status", "text", "truncated", "limit", "turns", "tool_calls")} == {
        "outcome": "ok", "status": "completed", "text": "Entries: a.txt", "truncated": False, "limit": None,
        "turns": 2, "tool_calls": 1,
    }
    assert result["usage"] == {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
                               "cache_write_tokens": 0}


def test_max_turns_stops_the_run_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "look", "--max-turns", "1", "--json"], model=FunctionModel(restless)) == 1
    result = json_lines(capsys.readouterr().out)[-1]
    assert (result["kind"], result["outcome"], result["limit"], result["truncated"]) == (
        "result", "limit", "max_turns", True)
    assert result["text"] == "still looking (1)"


def test_limit_stop_keeps_partial_text_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "look", "--max-turns", "2"], model=FunctionModel(restless)) == 1
    captured = capsys.readouterr()
    assert captured.out == "still looking (3)\n"
    assert "run stopped: outcome limit: Exceeded max_turns=2 (turns=3) (the partial answer is above)" in captured.err


def test_failing_model_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(request: ModelRequest) -> ModelResponse:
        raise ModelError("provider said no", provider="test")

    assert main(["run", "hi", "--json"], model=FunctionModel(broken)) == 1
    result = json_lines(capsys.readouterr().out)[-1]
    assert (result["outcome"], result["status"]) == ("error", "errored")
    assert "provider said no" in result["error"]


def test_timeout_option(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    async def slow(request: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()  # never answers
        return ModelResponse("never")

    assert main(["run", "hi", "--timeout", "0.2", "--json"], model=FunctionModel(slow)) == 1
    result = json_lines(capsys.readouterr().out)[-1]
    assert (result["outcome"], result["limit"]) == ("timeout", "timeout_s")
