"""``subagents run --engine local``: one job in this process whatever engine is configured.

Since ``--engine ''`` became a usage error, a configured ``[engine] url`` (or ``$SUBAGENTS_ENGINE``) left no way
from the command line to run one job locally: ``--engine local`` was taken for a Temporal URL (exit 2).  The
commands that run agents only here were sent to the configured engine too: ``runs resume`` of a run of this
engine and the offline ``demo`` tried to reach the Temporal server, and ``chat`` (whose agents run in its process)
handed its runtime the engine URL.

Also here (the same commands' other leftover): ``runs show``, ``runs tail`` and ``team show`` wrote what the store
holds (a model's answer, a tool's output, team mail) to the terminal as it is, escape sequences obeyed; on a
terminal they are shown now (``\\x1b``), as ``subagents run`` shows an answer.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from subagents import Runtime
from subagents.cli import chat as chat_cmd
from subagents.cli.main import main
from subagents.config import Settings
from subagents.models import FunctionModel, ModelResponse

from .test_cli_gaps import Tty, cli

ENGINE = "temporal://127.0.0.1:9?task_queue=q"  # (the discard port: a run sent there would fail)




@pytest.fixture(params=["env", "user config"])
def engine_configured(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    if request.param == "env":
        monkeypatch.setenv("SUBAGENTS_ENGINE", ENGINE)
    else:
        cfg = isolated.parent / "xdg" / "subagents" / "config.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(f'[engine]\nurl = "{ENGINE}"\n')


@pytest.mark.usefixtures("engine_configured")
@pytest.mark.parametrize("spelled", ["local", "LOCAL"])
def test_engine_local_runs_the_job_in_this_process(spelled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = cli(["run", "--engine", spelled, "hello"], monkeypatch)
    assert code == 0, err  # was 2: "local" taken for a Temporal URL
    assert out.strip() == "ANSWER"


@pytest.mark.usefixtures("engine_configured")
def test_engine_local_takes_the_options_of_a_local_run(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = cli(["run", "--json", "--engine", "local", "--permission-mode", "plan", "--deny", "bash",
                          "hello"], monkeypatch)
    assert code == 0, err  # with an engine these are refused: they apply where the agents run
    assert json.loads(out.splitlines()[-1])["text"] == "ANSWER"


def test_the_configured_engine_is_still_used_without_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_ENGINE", ENGINE)
    code, _, err = cli(["run", "--permission-mode", "plan", "hello"], monkeypatch)
    assert code == 2
    assert "--permission-mode apply where the agents run: with an engine URL" in err


def test_a_worker_refuses_engine_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_ENGINE", ENGINE)
    code, _, err = cli(["worker", "--engine", "local"], monkeypatch)
    assert code == 2
    assert "--engine local: a worker serves a Temporal engine; give its URL" in err


def test_help_and_the_empty_engine_error_name_engine_local(monkeypatch: pytest.MonkeyPatch) -> None:
    _, out, _ = cli(["run", "--help"], monkeypatch)
    code, _, err = cli(["run", "--engine", "", "hello"], monkeypatch)
    assert "'local': in this process, whatever engine is configured" in " ".join(out.split())
    assert code == 2
    assert "or --engine local to run them in this process whatever is configured" in " ".join(err.split())


def test_runs_resume_of_a_local_run_stays_here_with_an_engine_configured(monkeypatch: pytest.MonkeyPatch,
                                                                          isolated: Path) -> None:
    monkeypatch.setenv("SUBAGENTS_STORE", f"sqlite:///{isolated.parent}/s.db")
    code, out, err = cli(["run", "--json", "hello"], monkeypatch)
    assert code == 0, err
    run_id = json.loads(out.splitlines()[-1])["id"]
    monkeypatch.setenv("SUBAGENTS_ENGINE", ENGINE)
    code, out, err = cli(["runs", "resume", run_id, "more"], monkeypatch)
    assert code == 0, err  # was 2: "cannot reach the Temporal server at 127.0.0.1:9"
    assert "ANSWER" in out


class Terminal(Tty):
    def isatty(self) -> bool:
        return True


def test_chat_runs_its_agents_in_its_process_with_an_engine_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_ENGINE", ENGINE)
    seen: list[str | None] = []

    async def fake_chat(model: object, settings: Settings, *args: object, **kwargs: object) -> int:
        seen.append(settings.engine_url)  # what its Runtime is made with
        return 0

    monkeypatch.setattr(chat_cmd, "_chat", fake_chat)
    monkeypatch.setattr(sys, "stdin", Terminal(""))
    monkeypatch.setattr(sys, "stdout", Terminal())
    code = main(["chat"], model=FunctionModel(lambda request: ModelResponse("ANSWER")))
    assert code == 0
    assert seen == [None]  # was [ENGINE]: the chat's agents went to the Temporal workers


@pytest.mark.parametrize("argv", [["demo", "--json"], ["demo", "--json", "--team"]])
def test_the_offline_demo_runs_here_with_an_engine_configured(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                              isolated: Path) -> None:
    (isolated / "a.py").write_text("x = 1\n")
    monkeypatch.setenv("SUBAGENTS_ENGINE", ENGINE)
    code, out, err = cli(argv, monkeypatch)
    assert code == 0, err  # was 2: "cannot reach the Temporal server at 127.0.0.1:9"
    result = next(d for line in out.splitlines() if (d := json.loads(line)).get("kind") == "result")
    assert result["status"] == "completed"


# -- what the store holds, shown on a terminal ------------------------------------------------------------------
EVIL = "ok \x1b]0;pwned\x07\x1b[2J done"  # sets the terminal's title, clears the screen


def on_terminal(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    out = Terminal()
    monkeypatch.setattr(sys, "stdin", Terminal(""))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", Terminal())
    code = main(argv, model=FunctionModel(lambda request: ModelResponse(EVIL)))
    return code, out.getvalue()


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch, isolated: Path) -> str:
    """A sqlite store holding one run whose answer is :data:`EVIL`; the run's id."""
    monkeypatch.setenv("SUBAGENTS_STORE", f"sqlite:///{isolated.parent}/s.db")
    code, _ = on_terminal(["run", "hello"], monkeypatch)
    assert code == 0
    _, out, _ = cli(["runs", "list", "--json"], monkeypatch)
    run_id: str = json.loads(out)[0]["run_id"]
    return run_id


@pytest.mark.parametrize("argv", [["runs", "show"], ["runs", "tail", "--no-follow"]])
def test_runs_show_and_tail_show_an_answers_escape_codes_on_a_terminal(argv: list[str], answered: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = on_terminal([*argv, answered], monkeypatch)
    assert code == 0
    assert "\x1b" not in out  # was sent as is: the terminal obeyed it
    assert "ok \\x1b]0;pwned\\x07" in out


def test_runs_show_piped_writes_the_answer_as_it_is(answered: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = cli(["runs", "show", answered], monkeypatch)
    assert code == 0
    assert "ok \x1b]0;pwned\x07" in out  # not written out: only a terminal gets the shown form


def test_team_show_shows_escape_codes_in_tasks_and_mail_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                                       isolated: Path) -> None:
    db = f"sqlite:///{isolated.parent}/s.db"

    async def make() -> None:
        async with Runtime(model=FunctionModel(lambda r: ModelResponse("idle")), workdir=isolated, store=db) as rt:
            team = rt.create_team("t")
            await team.add_task("task " + EVIL)
            team.spawn("bob", "wait")
            assert await team.wait_idle(timeout=5)
            team.send("bob", EVIL)
            assert await team.wait_idle(timeout=5)
            team.shutdown()

    asyncio.run(make())
    monkeypatch.setenv("SUBAGENTS_STORE", db)
    code, out = on_terminal(["team", "show", "t"], monkeypatch)
    assert code == 0
    assert "\x1b" not in out
    assert "lead -> bob: ok \\x1b]0;pwned\\x07\\x1b[2J done" in out
