"""A careless user against ``run``, ``chat``, ``demo``, ``agents`` and ``config``: odd input, odd streams, odd places.

Every case here broke once: a traceback where the docs promise one ``error:`` line, a usage error reported as a
failed run (or a failed store), or a model's answer that could drive the person's terminal.
"""

from __future__ import annotations

import errno
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from subagents.cli.main import main
from subagents.models import FunctionModel, ModelRequest, ModelResponse

ESC = "\x1b"
HOSTILE = "look \x1b]0;pwned\x07 here \x1b[2J\x9b31m done"
"""An answer that would set the terminal's title, clear the screen and turn text red (C1 CSI) if printed raw."""


def echo(request: ModelRequest) -> ModelResponse:
    return ModelResponse(f"ECHO: {request.messages[0].text}")


def say(text: str) -> FunctionModel:
    return FunctionModel(lambda request: ModelResponse(text))


class Stream(io.StringIO):
    """A text stream that says whether it is a terminal, and may fail every write with ``fails``."""

    def __init__(self, text: str = "", *, tty: bool = False, fails: int | None = None) -> None:
        super().__init__(text)
        self.tty = tty
        self.fails = fails

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        if self.fails is not None:
            raise OSError(self.fails, os.strerror(self.fails))
        return super().write(s)


def run_cli(argv: list[str], model: Any, monkeypatch: pytest.MonkeyPatch, *, stdin: Any = "",
            stdout: Any = None, stderr: Any = None) -> tuple[int, str, str]:
    """``main(argv)`` with the given streams (``None`` = closed, as with ``<&-``); returns (code, out, err)."""
    out = Stream() if stdout is None else stdout
    err = Stream() if stderr is None else stderr
    monkeypatch.setattr(sys, "stdin", Stream(stdin) if isinstance(stdin, str) else stdin)
    monkeypatch.setattr(sys, "stdout", None if stdout == "closed" else out)
    monkeypatch.setattr(sys, "stderr", None if stderr == "closed" else err)
    code = main(argv, model=model)
    return code, out.getvalue() if isinstance(out, io.StringIO) else "", (
        err.getvalue() if isinstance(err, io.StringIO) else "")


# -- the prompt ---------------------------------------------------------------------------------------------
def test_a_prompt_on_stdin_that_is_not_utf8_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """``printf 'caf\\xe9' | subagents run -``: Python reads stdin with surrogateescape; the run used to start
    and then fail in the store ("the run store ... failed while writing to it") or print invalid UTF-8."""
    stdin = io.TextIOWrapper(io.BytesIO(b"caf\xe9 au lait\n"), encoding="utf-8", errors="surrogateescape")
    code, out, err = run_cli(["run", "-"], FunctionModel(echo), monkeypatch, stdin=stdin)
    assert code == 2, (out, err)
    assert "the prompt read from stdin is not UTF-8 text" in err
    assert out == ""


def test_a_prompt_argument_that_is_not_utf8_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """``subagents run $'caf\\xe9'`` in a UTF-8 locale: argv holds a surrogate-escaped byte."""
    code, out, _ = run_cli(["run", "caf\udce9", "--json"], FunctionModel(echo), monkeypatch)
    assert code == 2
    assert json.loads(out) == {"kind": "error", "type": "error", "exit_code": 2,
                               "message": "the prompt is not UTF-8 text; write it in UTF-8"}


def test_a_closed_stdin_is_not_called_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """``subagents run - <&-``: there is no stdin at all (``sys.stdin`` is None); the message said it was a terminal."""
    code, _, err = run_cli(["run", "-"], FunctionModel(echo), monkeypatch, stdin=None)
    assert code == 2
    assert "stdin is closed" in err
    assert "terminal" not in err


def test_an_empty_prompt_file_name_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--prompt-file ''`` (an unset shell variable) said "cannot read the prompt file  (Is a directory)"."""
    code, _, err = run_cli(["run", "--prompt-file", ""], FunctionModel(echo), monkeypatch)
    assert code == 2
    assert "the --prompt-file name is empty" in err
    assert "Is a directory" not in err


# -- numbers ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["run", "hi", "--timeout", "nan"],
    ["run", "hi", "--timeout", "inf"],
    ["demo", "--pace", "nan"],  # (--pace inf is refused too; the old code hung on it, so it is not run here)
])
def test_a_number_that_is_not_finite_is_a_usage_error(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--timeout nan`` passed the range check (every comparison with NaN is false) and stopped the run at once
    ("Exceeded timeout_s=nan", exit 1); ``--pace nan`` slowed the demo to 10 s, ``--pace inf`` hung it."""
    code, out, err = run_cli([*argv, "--json"], FunctionModel(echo), monkeypatch)
    assert code == 2, (out, err)
    error = json.loads(out)
    assert error["kind"] == "error"
    assert "is not a finite number" in error["message"]


# -- where it runs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["run", "hi"], ["run", "hi", "--json"], ["demo"], ["config", "show"],
                                  ["agents", "list"], ["agents", "show", "explore"]])
def test_a_current_directory_that_was_deleted_is_a_usage_error(argv: list[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell still sitting in a directory another terminal removed: every command died with a
    FileNotFoundError traceback from ``Path('.').resolve()``."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    code, out, err = run_cli(argv, FunctionModel(echo), monkeypatch)
    said = out if "--json" in argv else err
    assert code == 2, (out, err)
    assert "the current directory no longer exists" in said
    assert "--cwd" in said


# -- the streams ---------------------------------------------------------------------------------------------
def test_a_closed_stderr_does_not_lose_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``subagents run hi 2>&-``: ``sys.stderr`` is None and ``sys.stderr.isatty()`` raised AttributeError."""
    code, out, _ = run_cli(["run", "hi"], FunctionModel(echo), monkeypatch, stderr="closed")
    assert (code, out) == (0, "ECHO: hi\n")


def test_the_demo_runs_with_a_closed_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run_cli(["demo", "--json"], None, monkeypatch, stderr="closed")
    assert code == 0
    assert json.loads(out.splitlines()[-1])["kind"] == "result"


def test_chat_with_a_closed_stdin_says_it_needs_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run_cli(["chat"], FunctionModel(echo), monkeypatch, stdin=None)
    assert code == 2
    assert "subagents chat needs a terminal" in err


def test_a_json_run_with_a_closed_stdout_has_no_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """``subagents run --json hi >&-``: an AttributeError traceback per event, then one more at the end."""
    err = Stream()
    code, _, said = run_cli(["run", "hi", "--json"], FunctionModel(echo), monkeypatch, stdout="closed", stderr=err)
    assert code == 0
    assert "Traceback" not in said
    assert "raised on a" not in said


@pytest.mark.parametrize("as_json", [False, True])
def test_a_full_disk_on_stdout_is_one_error_line(as_json: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``subagents run hi > /dev/full``: an OSError traceback (ENOSPC) per event and at the end; the run's output
    is lost, so the exit status says so (1) and stderr says why, once."""
    out = Stream(fails=errno.ENOSPC)
    code, _, err = run_cli(["run", "hi", *(["--json"] if as_json else [])], FunctionModel(echo), monkeypatch,
                           stdout=out)
    assert code == 1, err
    assert "Traceback" not in err
    assert "raised on a" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert lines == ["error: cannot write the output (No space left on device)"], err


@pytest.mark.parametrize("as_json", [False, True])
def test_an_answer_with_a_lone_surrogate_is_printed_as_valid_utf8(as_json: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone surrogate in a model's answer (JSON allows ``"\\ud800"``) made the final print raise
    UnicodeEncodeError: a traceback, exit 1, and the answer lost."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", Stream())
    code = main(["run", "hi", *(["--json"] if as_json else [])], model=say("bad \ud800 text"))
    assert isinstance(out.buffer, io.BytesIO)
    raw = out.buffer.getvalue().decode("utf-8")  # valid UTF-8
    assert code == 0
    if as_json:
        assert json.loads(raw.splitlines()[-1])["text"] == "bad \ufffd text"
    else:
        assert raw == "bad \ufffd text\n"


# -- what reaches the terminal -------------------------------------------------------------------------------
def test_an_answer_printed_on_a_terminal_cannot_drive_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's answer (perhaps steered by a file it read) holding escape sequences went raw to the terminal:
    set its title, cleared the screen, recoloured it.  On a terminal they are shown, not obeyed."""
    out = Stream(tty=True)
    code, printed, _ = run_cli(["run", "hi"], say(HOSTILE + "\r\nsecond line\ttab"), monkeypatch, stdout=out)
    assert code == 0
    assert ESC not in printed
    assert "\x9b" not in printed
    assert "\x07" not in printed
    assert printed == "look \\x1b]0;pwned\\x07 here \\x1b[2J\\x9b31m done\nsecond line\ttab\n"


def test_an_answer_written_to_a_pipe_is_left_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped or redirected (``> answer.md``), the answer is what the model wrote: click used to strip its CSI
    sequences (``\\x1b[2J``) but not the others, so the file was neither exact nor safe."""
    code, printed, _ = run_cli(["run", "hi"], say(HOSTILE), monkeypatch)
    assert (code, printed) == (0, HOSTILE + "\n")


def test_the_live_view_does_not_pass_escape_sequences_through() -> None:
    """The live view's "says: ..." (the model's streamed text) and notes went raw into rich, which keeps ESC."""
    from subagents.cli.render import LiveView
    from subagents.runtime.events import Event

    buf = Stream(tty=True)
    with LiveView(buf) as view:
        view(Event("run_start", "a", None, 0, {"agent_type": "general-purpose"}, ts=1.0, nickname="ada"))
        view(Event("assistant_text", "a", None, 0, {"text": HOSTILE, "delta": False}, ts=1.0, nickname="ada"))
        assert ESC not in "\n".join(view.progress.lines(200))
        assert "says: look \\x1b]0;pwned" in "\n".join(view.progress.lines(200))
        view.note("hook says \x1b]52;c;ZXZpbA==\x07")  # OSC 52: write to the clipboard
    assert "\x1b]52" not in buf.getvalue()
    assert "\x1b]0;pwned" not in buf.getvalue()


def test_the_chat_screen_does_not_pass_escape_sequences_through() -> None:
    from subagents.cli.chat_screen import Screen

    out = Stream(tty=True)
    screen = Screen(object(), out=out)  # type: ignore[arg-type]  # the prompt is not running: plain writes
    screen.say(HOSTILE)
    assert out.getvalue() == "look \\x1b]0;pwned\\x07 here \\x1b[2J\\x9b31m done\n"


def test_agent_definitions_listed_on_a_terminal_cannot_drive_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """``agents list`` / ``show`` print a project's agent files (perhaps a cloned repository's): their escape codes
    were sent to the terminal raw."""
    agents = tmp_path / ".subagents" / "agents"
    agents.mkdir(parents=True)
    yaml_escaped = HOSTILE.replace("\x1b", "\\e").replace("\x07", "\\a").replace("\x9b", "\\x9b")  # YAML's
    (agents / "sly.md").write_text(f'---\nname: sly\ndescription: "{yaml_escaped}"\n---\nYou are {HOSTILE}.\n')
    monkeypatch.chdir(tmp_path)
    for argv in (["agents", "list"], ["agents", "show", "sly"]):
        out = Stream(tty=True)
        code, printed, _ = run_cli(argv, None, monkeypatch, stdout=out)
        assert code == 0, argv
        assert "look \\x1b]0;pwned\\x07 here" in printed, argv
        assert ESC not in printed, argv
        assert "\x07" not in printed, argv
