"""Models named by import path (``--model package.module:attribute``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.exceptions import ConfigError
from subagents.models import FunctionModel
from subagents.serve.modelref import is_import_path, load_model_ref


@pytest.fixture(autouse=True)
def scripts_on_path() -> Iterator[None]:
    here = str(Path(__file__).parent)
    sys.path.insert(0, here)
    yield
    sys.path.remove(here)


def test_which_specs_are_import_paths() -> None:
    assert is_import_path("serve_scripts:model")
    assert is_import_path("subagents.models:FunctionModel")
    assert not is_import_path("anthropic:claude-sonnet-4-5")  # a provider, even though the SDK is importable
    assert not is_import_path("openai:gpt-4.1@http://localhost:11434/v1")
    assert not is_import_path("antropic:claude")  # a typo is left to the provider's error, not imported
    assert not is_import_path("no.such.package:model")
    assert not is_import_path("serve_scripts")


def test_an_object_or_a_factory() -> None:
    assert isinstance(load_model_ref("serve_scripts:model"), FunctionModel)
    made = load_model_ref("serve_scripts:factory")
    assert isinstance(made, FunctionModel)
    assert made is not load_model_ref("serve_scripts:factory")  # called each time


def test_what_is_not_a_model_is_said() -> None:
    with pytest.raises(ConfigError, match=r"^'serve_scripts:not_a_model' is a int, not a model; it must be an "):
        load_model_ref("serve_scripts:not_a_model")
    with pytest.raises(ConfigError, match=r"^'serve_scripts' has no attribute 'nothing' for the model"):
        load_model_ref("serve_scripts:nothing")
    with pytest.raises(ConfigError, match=r"^cannot import 'no_such_module_x' for the model .*ModuleNotFoundError"):
        load_model_ref("no_such_module_x:m")
