"""The provider settings the docs describe are the ones the config accepts, and the reverse (issue #12).

One source: ``subagents._config_values.PROVIDER_KEYS`` (name, type, default, meaning).  The config
checks values against it, the adapters take their defaults from it, and docs/providers.md's table must
be exactly its rendering.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

import subagents.config
from subagents.config import load_settings
from subagents.exceptions import ConfigError
from subagents.models.resolve import resolve_model

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "providers.md"
ROW = re.compile(r"^\|\s*`(?P<key>[a-z_]+)`\s*\|\s*(?P<default>[^|]*?)\s*\|\s*(?P<meaning>.*?)\s*\|$")


def settings_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("\n## Settings")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def documented() -> dict[str, tuple[str, str]]:
    """key -> (default, meaning) from the table of docs/providers.md's Settings section."""
    rows = {m["key"]: (m["default"], m["meaning"]) for line in settings_section().splitlines()
            if (m := ROW.match(line.strip()))}
    assert rows, "docs/providers.md has no settings table"
    return rows


def docstring_keys() -> list[str]:
    """The provider keys listed in config.py's module docstring."""
    lines = (subagents.config.__doc__ or "").splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("[providers.anthropic]"))
    listed = lines[start].split("]", 2)[-1]
    for more in lines[start + 1:]:  # continuation lines, up to the next table or the end of the block
        if not more.strip() or more.strip().startswith("["):
            break
        listed += "," + more
    return [k.strip() for k in listed.split(",") if k.strip()]


def sample(default: str) -> Any:
    """A value of the documented type: the documented default when it is a TOML value, else a string."""
    try:
        return tomllib.loads(f"v = {default}")["v"]
    except tomllib.TOMLDecodeError:
        return "x"


def write_config(workdir: Path, section: str, values: dict[str, Any]) -> None:
    lines = [f"[providers.{section}]"]
    for key, value in values.items():
        shown = ("true" if value else "false") if isinstance(value, bool) else (
            f'"{value}"' if isinstance(value, str) else repr(value))
        lines.append(f"{key} = {shown}")
    (workdir / ".subagents").mkdir(exist_ok=True)
    (workdir / ".subagents" / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


# Before: the config rejected the documented `stream`, `retry_base_s` and `retry_max_s` with
# "unknown key [providers.anthropic] stream".
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_every_documented_key_is_accepted_by_the_config(provider: str, workdir: Path) -> None:
    values = {key: sample(default) for key, (default, _) in documented().items()}
    write_config(workdir, provider, values)
    settings = load_settings(workdir, trust=True)
    assert settings.providers[provider].keys() == values.keys()
    resolve_model(f"{provider}:m", settings.providers[provider])  # and the adapter takes them all


# Before: the docstring did not list retry_base_s, retry_max_s or stream, which the adapters read.
def test_the_config_docstring_lists_every_accepted_key(workdir: Path) -> None:
    listed = docstring_keys()
    write_config(workdir, "openai", {key: sample(documented().get(key, ("x", ""))[0]) for key in listed})
    load_settings(workdir, trust=True)
    assert sorted(listed) == sorted(documented())


def test_every_accepted_key_is_documented(workdir: Path) -> None:
    for key in documented():
        write_config(workdir, "anthropic", {key + "_x": 1})
        with pytest.raises(ConfigError, match="unknown key"):
            load_settings(workdir)
    from subagents._config_values import PROVIDER_KEYS

    assert sorted(PROVIDER_KEYS) == sorted(documented())


def test_the_docs_table_is_the_rendering_of_the_one_source() -> None:
    from subagents._config_values import PROVIDER_KEYS, provider_keys_table

    assert provider_keys_table() in settings_section(), (
        "docs/providers.md's settings table differs from subagents._config_values.PROVIDER_KEYS; paste in:\n"
        + provider_keys_table())
    assert list(documented()) == list(PROVIDER_KEYS)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_adapters_use_the_documented_defaults(provider: str) -> None:
    m: Any = resolve_model(f"{provider}:m", {})
    actual = {"max_retries": m.retry.max_retries, "retry_base_s": m.retry.base_s, "retry_max_s": m.retry.max_s,
              "connect_timeout_s": m.timeouts.connect_s, "read_timeout_s": m.timeouts.read_s,
              "stall_timeout_s": m.timeouts.stall_s, "timeout_s": m.timeouts.total_s,
              "max_output_tokens": m.max_output_tokens, "stream": m.stream}
    docs = documented()
    assert {key: sample(docs[key][0]) for key in actual} == actual


@pytest.mark.parametrize(("key", "value"), [("retry_base_s", -1), ("stall_timeout_s", 0), ("read_timeout_s", "5"),
                                        ("stream", "yes"), ("connect_timeout_s", -2)])
def test_bad_values_of_the_new_keys_say_what_is_expected(key: str, value: Any, workdir: Path) -> None:
    write_config(workdir, "openai", {key: value})
    with pytest.raises(ConfigError, match=rf"\[providers.openai\] {key} must be"):
        load_settings(workdir)


# Before: docs/providers.md and the adapters' messages named a `subagents.toml` that nothing reads.
def test_no_doc_or_message_names_a_config_file_that_does_not_exist() -> None:
    files = [DOC, *sorted((ROOT / "src" / "subagents").rglob("*.py"))]
    offenders = [str(f.relative_to(ROOT)) for f in files if "subagents.toml" in f.read_text(encoding="utf-8")]
    assert offenders == []
    assert ".subagents/config.toml" in settings_section()
    assert "~/.config/subagents/config.toml" in settings_section()
