"""Options of ``run``, ``chat`` and ``worker`` that used to mean something other than what was typed.

``--engine ''`` ran the agents in this process without a word (``worker``: on the configured URL); a
``--max-turns`` or ``--timeout`` past any sane bound was taken as given (the Temporal engine's timers overflow
on a timeout of 1e300 seconds). Each is a usage error now (exit 2) that says what to type instead.
"""

from __future__ import annotations

import json
import sys
from io import StringIO
from typing import Any

import pytest

from subagents.cli.main import main
from subagents.definitions.values import MAX_TIMEOUT_S, MAX_TURNS
from subagents.models import FunctionModel, ModelResponse


class Tty(StringIO):
    def isatty(self) -> bool:
        return False


def cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    out, err = Tty(), Tty()
    monkeypatch.setattr(sys, "stdin", Tty(""))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = main(argv, model=FunctionModel(lambda request: ModelResponse("ANSWER")))
    return code, out.getvalue(), err.getvalue()


# -- --engine '' -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["", "   "])
def test_an_empty_engine_is_a_usage_error_not_a_local_run(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = cli(["run", "--engine", url, "hello"], monkeypatch)
    assert code == 2
    assert "--engine is empty: give a Temporal URL (temporal://" in err
    assert "omit --engine to use [engine] url or $SUBAGENTS_ENGINE (unset: the agents run in this process)" in err
    assert "ANSWER" not in out
    assert "Traceback" not in err


def test_an_empty_engine_is_a_usage_error_in_json_too(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = cli(["run", "--json", "--engine", "", "hello"], monkeypatch)
    assert code == 2
    assert json.loads(out.splitlines()[-1])["message"].startswith("--engine is empty")


def test_the_worker_refuses_an_empty_engine_instead_of_using_the_configured_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_ENGINE", "temporal://127.0.0.1:9?task_queue=q")
    code, _, err = cli(["worker", "--engine", ""], monkeypatch)
    assert code == 2
    assert "--engine is empty: give a Temporal URL" in err
    assert "(unset: the agents run in this process)" not in err  # a worker always needs one


# -- --max-turns and --timeout ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "message"), [
    (["--max-turns", "99999999999999999999999"], "Invalid value for '--max-turns': 99999999999999999999999 is not "
                                                 f"in the range 1<=x<={MAX_TURNS}"),
    (["--max-turns", str(MAX_TURNS + 1)], f"in the range 1<=x<={MAX_TURNS}"),
    (["--max-turns", "-3"], "Invalid value for '--max-turns': -3 is not in the range"),
    (["--max-turns", "0"], "Invalid value for '--max-turns': 0 is not in the range"),
    (["--timeout", "1e300"], f"Invalid value for '--timeout': 1e+300 is not in the range 0<x<={MAX_TIMEOUT_S}"),
    (["--timeout", "1e12"], "Invalid value for '--timeout'"),
    (["--timeout", "-5"], "Invalid value for '--timeout': -5.0 is not in the range"),
    (["--timeout", "inf"], "Invalid value for '--timeout'"),
])
@pytest.mark.parametrize("command", ["run", "chat"])
def test_limits_past_any_sane_bound_are_usage_errors(command: str, argv: list[str], message: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = cli([command, *argv, "hello"], monkeypatch)
    assert code == 2
    assert message in err
    assert "ANSWER" not in out


def test_the_largest_limits_are_still_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = cli(["run", "--max-turns", str(MAX_TURNS), "--timeout", f"{MAX_TIMEOUT_S:.0f}", "hello"],
                         monkeypatch)
    assert code == 0, err
    assert "ANSWER" in out


def test_the_help_names_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    _, out, _ = cli(["run", "--help"], monkeypatch)
    text = " ".join(out.split())
    assert f"model turns (at most {MAX_TURNS})" in text


@pytest.mark.parametrize(("kw", "message"), [
    ({"timeout_s": 1e300}, "Limits.timeout_s must be at most 31622400, got 1e+300"),
    ({"max_turns": 10**30}, "Limits.max_turns must be at most 1000000"),
    ({"timeout_s": float("inf")}, "Limits.timeout_s must be a positive number or None, got inf"),
    ({"max_cost_usd": float("nan")}, "Limits.max_cost_usd must be a positive number or None, got nan"),
])
def test_the_python_limits_have_the_clis_bounds(kw: dict[str, Any], message: str) -> None:
    """``Limits(timeout_s=1e300)`` (and NaN, inf) were accepted: the one door left past the CLI's and the
    definitions' bounds (the Temporal engine's timers overflow near 1e14 s)."""
    from subagents import Limits
    from subagents.exceptions import UserError

    with pytest.raises(UserError) as e:
        Limits(**kw)
    assert str(e.value).startswith(message)
