"""Configuration as careless users and hostile repositories write it: a bad file, variable or argument is one
ConfigError naming where and what, never a traceback, a silently odd value, or a page of echoed input."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from subagents.cli.main import main
from subagents.config import load_settings
from subagents.config_keys import ENV_VARS, KEYS
from subagents.exceptions import ConfigError


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "p" / ".subagents").mkdir(parents=True)
    return tmp_path / "p"


def env_of(project: Path, **extra: str) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(project.parent / "xdg"), **extra}


def write_config(project: Path, text: str) -> Path:
    p = project / ".subagents" / "config.toml"
    p.write_bytes(text.encode("utf-8"))
    return p


def test_a_byte_order_mark_is_not_a_syntax_error(project: Path) -> None:
    write_config(project, "\ufeff[agents]\r\nmax_threads = 2\r\n")
    assert load_settings(project, env=env_of(project)).max_threads == 2


@pytest.mark.parametrize(("text", "message"), [
    ("[tools]\nbash_timeout_s = inf\n", "[tools] bash_timeout_s must be a positive number, got inf"),
    ("[permissions]\napproval_timeout_s = inf\n",
     "[permissions] approval_timeout_s must be a non-negative number, got inf"),
    ('[pricing."m"]\ninput = inf\noutput = 1\n', "[pricing.m] input must be a non-negative number, got inf"),
    ("[providers.openai]\ntimeout_s = -inf\n", "[providers.openai] timeout_s must be a positive number, got -inf"),
    ("[[hooks.PreToolUse]]\ncommand = \"x\"\ntimeout_s = inf\n",
     "[[hooks.PreToolUse]] timeout_s must be a positive number, got inf"),
])
def test_infinite_numbers_are_refused(project: Path, text: str, message: str) -> None:
    p = write_config(project, text)
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env_of(project))
    assert str(e.value) == f"{p}: {message}"


def test_an_infinite_argument_is_refused(project: Path) -> None:
    with pytest.raises(ConfigError, match="argument bash_timeout_s must be a positive number, got inf"):
        load_settings(project, env=env_of(project), overrides={"bash_timeout_s": math.inf})


def test_a_huge_bad_variable_is_not_echoed_whole(project: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env_of(project, SUBAGENTS_MAX_THREADS="9" * 5000 + "x"))
    msg = str(e.value)
    assert msg.startswith('environment variable SUBAGENTS_MAX_THREADS must be a positive integer, got "999')
    assert len(msg) < 200
    assert "(5001 characters)" in msg


def test_an_invalid_hook_matcher_is_found_by_the_loader(project: Path) -> None:
    p = write_config(project, '[[hooks.PreToolUse]]\ncommand = "./guard.sh"\nmatcher = "bash("\n')
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env_of(project))
    assert str(e.value).startswith(f"{p}: [[hooks.PreToolUse]] matcher \"bash(\" is not a valid regular expression (")


def test_config_show_on_an_infinite_value_exits_2(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(project.parent / "xdg"))
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    p = write_config(project, "[tools]\nbash_timeout_s = inf\n")
    assert main(["config", "show", "--cwd", str(project)]) == 2
    assert capsys.readouterr().err == (
        f"error: {p.resolve()}: [tools] bash_timeout_s must be a positive number, got inf\n")


def test_config_show_lists_every_plain_key_of_the_table(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(project.parent / "xdg"))
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    assert main(["config", "show", "--json", "--cwd", str(project)]) == 0
    import json

    shown = json.loads(capsys.readouterr().out)["settings"]
    assert list(shown) == [k.dotted for k in KEYS if k.field is not None]
    defaults = {k.dotted: k.default for k in KEYS if k.field is not None}
    assert {k: v["value"] for k, v in shown.items()} == defaults


@pytest.mark.parametrize("kind", ["directory", "fifo", "broken link"])
def test_a_config_file_that_is_not_a_file_is_an_error_not_silently_ignored(project: Path, kind: str) -> None:
    import os

    p = project / ".subagents" / "config.toml"
    if kind == "directory":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    else:
        p.symlink_to(project / "nowhere.toml")
    with pytest.raises(ConfigError, match=r"config\.toml: is not a regular file, so its settings cannot be read"):
        load_settings(project, env=env_of(project))
