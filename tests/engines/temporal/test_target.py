"""Engine URLs and import paths: parsed, or refused with a sentence that says what to write."""

from __future__ import annotations

import pytest

from subagents.engines.temporal import TemporalTarget, load_object
from subagents.exceptions import ConfigError

pytestmark = pytest.mark.temporal


def test_the_engine_url_is_parsed_or_refused_clearly() -> None:
    t = TemporalTarget.parse("temporal://example.org?namespace=ns&task_queue=q")
    assert t == TemporalTarget("example.org:7233", "ns", "q")
    with pytest.raises(ConfigError, match="unknown parameter"):
        TemporalTarget.parse("temporal://h:1?queue=q")
    with pytest.raises(ConfigError, match="not a Temporal address"):
        TemporalTarget.parse("http://h:1")


def test_import_paths_name_a_model_or_fail_clearly() -> None:
    from .scripts import model

    assert load_object("engines.temporal.scripts:model", "--model") is model
    with pytest.raises(ConfigError, match=r"must be an import path such as mypkg\.scripts:model"):
        load_object("nothing", "--model")
    with pytest.raises(ConfigError, match=r"module 'engines\.temporal\.scripts' has no attribute 'nope'"):
        load_object("engines.temporal.scripts:nope", "--model")


def test_the_worker_command_without_an_engine_url_says_what_to_do(workdir: object,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from subagents.cli.main import main

    assert main(["worker", "--workdir", str(workdir)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: no engine URL: pass --engine temporal://host:7233?task_queue=subagents or set [engine] url in "
        ".subagents/config.toml")


def test_the_worker_command_refuses_a_bad_engine_url(workdir: object, capsys: pytest.CaptureFixture[str]) -> None:
    from subagents.cli.main import main

    assert main(["worker", "--workdir", str(workdir), "--engine", "http://x:1"]) == 2
    assert "is not a Temporal address; write it as temporal://host:7233" in capsys.readouterr().err
