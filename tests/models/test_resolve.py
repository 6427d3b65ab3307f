"""Model strings: parsing, resolution to adapters, settings, and no SDK at import time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from subagents.exceptions import ConfigError
from subagents.models import FunctionModel
from subagents.models.anthropic import AnthropicModel
from subagents.models.openai import OpenAIModel
from subagents.models.resolve import ACCEPTED_FORMS, ModelSpec, parse_model_string, resolve_model


@pytest.mark.parametrize(("text", "spec"), [
    ("anthropic:claude-sonnet-4-6", ModelSpec("anthropic", "claude-sonnet-4-6")),
    ("openai:gpt-4.1", ModelSpec("openai", "gpt-4.1")),
    ("OpenAI:llama3.1@http://localhost:11434/v1", ModelSpec("openai", "llama3.1", "http://localhost:11434/v1")),
    (" openai:qwen@http://127.0.0.1:8000/v1 ", ModelSpec("openai", "qwen", "http://127.0.0.1:8000/v1")),
])
def test_parse(text: str, spec: ModelSpec) -> None:
    assert parse_model_string(text) == spec


@pytest.mark.parametrize(("text", "message"), [
    ("claude", "malformed model string 'claude'"),
    ("openai:", "malformed model string 'openai:'"),
    ("openai:gpt@", "malformed model string 'openai:gpt@'"),
    ("gemini:pro", "unknown model provider 'gemini' in 'gemini:pro'"),
    ("anthropic:claude@http://x", "a base URL is only accepted for openai-compatible servers, not 'anthropic'"),
])
def test_bad_strings_list_the_accepted_forms(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_string(text)
    assert str(info.value).startswith(message)
    assert str(info.value).endswith(ACCEPTED_FORMS)


def test_resolve_builds_the_adapters() -> None:
    a = resolve_model("anthropic:claude-haiku-4-5", {"api_key": "k", "max_retries": 2})
    assert isinstance(a, AnthropicModel)
    assert a.name == "anthropic:claude-haiku-4-5"
    assert a.retry.max_retries == 2
    o = resolve_model("openai:gpt-4.1")
    assert isinstance(o, OpenAIModel)
    assert o.name == "openai:gpt-4.1"
    assert o.connection.api_key is None
    c = resolve_model("openai:llama3.1@http://localhost:11434/v1")
    assert isinstance(c, OpenAIModel)
    assert c.connection.compatible
    assert c.connection.api_key == "not-needed"
    assert c.connection.base_url == "http://localhost:11434/v1"


def test_resolve_passes_model_objects_through() -> None:
    m = FunctionModel(lambda req: "x")
    assert resolve_model(m) is m


def test_bad_setting_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model("openai:gpt-4.1", {"max_retries": "four"})
    assert str(info.value) == (
        "model setting 'max_retries' must be int, got str 'four'; fix it in [providers.<name>] of "
        ".subagents/config.toml (or ~/.config/subagents/config.toml) or in the settings you pass"
    )


def test_negative_retries_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="must not be negative"):
        resolve_model("anthropic:claude-haiku-4-5", {"max_retries": -1})


@pytest.mark.parametrize("key", ["connect_timeout_s", "read_timeout_s", "stall_timeout_s", "timeout_s"])
def test_timeouts_must_be_positive(key: str) -> None:
    with pytest.raises(ConfigError, match="must be positive"):
        resolve_model("openai:gpt-4.1", {key: 0})


def test_import_loads_no_provider_sdk() -> None:
    code = ("import sys, subagents, subagents.models; from subagents import Runtime; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_base_url_without_a_scheme_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"the base URL 'notaurl' in 'openai:gpt-4.1@notaurl' must start with "
                                          r"http:// or https://"):
        parse_model_string("openai:gpt-4.1@notaurl")
