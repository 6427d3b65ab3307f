"""One table of keys (``subagents.config_keys.KEYS``): the loader, the checks, the environment variables,
``Settings``' defaults and the docs' key table all follow it, so none can drift from it."""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import pytest

from subagents import config
from subagents.authority.names import canonical_mode
from subagents.config import Settings, load_settings
from subagents.config_keys import ENV_VARS, KEYS, Key, markdown_table
from subagents.exceptions import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PLAIN = [k for k in KEYS if k.field is not None]


def sample(k: Key) -> tuple[Any, str]:
    """A good value of the key's type (and its TOML spelling), other than the default."""
    kind = k.kind
    if kind == "string":
        return "x", '"x"'
    if kind == "boolean":
        return (not k.default), "false" if k.default else "true"
    if kind == "list of strings":
        return ["a", "b"], '["a", "b"]'
    if kind.startswith("one of"):
        choice = re.findall(r"'([^']*)'", kind)[-1]
        return choice, f'"{choice}"'
    if "integer" in kind:
        return 7, "7"
    return 2.5, "2.5"


def loaded(k: Key, value: Any) -> Any:
    """What Settings holds after loading ``value`` (mode aliases become their canonical names)."""
    return canonical_mode(value) if k.dotted == "permissions.mode" else value


def bad(k: Key) -> tuple[str, str]:
    """A value of the wrong type (TOML) and how the error shows it."""
    return ('"nope"', '"nope"') if k.kind in ("boolean", "list of strings") or "number" in k.kind \
        or "integer" in k.kind else ("3", "3")


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / ".subagents").mkdir()
    return tmp_path, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_settings_defaults_are_the_tables() -> None:
    by_name = {f.name: f for f in fields(Settings)}
    for k in PLAIN:
        f = by_name[k.field or ""]
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        assert default == k.default, k.dotted
    s = Settings()
    assert [key for key, _, _ in s.items()] == [k.dotted for k in PLAIN]


@pytest.mark.parametrize("key", PLAIN, ids=lambda k: k.dotted)
def test_every_key_loads_from_a_file_with_its_type(key: Key, project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    value, toml = sample(key)
    home = root / "xdg" / "subagents" if key.user_only else root / ".subagents"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"[{key.section}]\n{key.name} = {toml}\n", encoding="utf-8")
    s = load_settings(root, env=env, trust=True)
    got = getattr(s, key.field or "")
    assert got == loaded(key, value)
    assert s.sources[key.dotted] == str(home / "config.toml")


@pytest.mark.parametrize("key", [k for k in PLAIN if not k.user_only], ids=lambda k: k.dotted)
def test_a_wrong_type_names_file_section_key_and_type(key: Key, project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    toml, shown = bad(key)
    path = root / ".subagents" / "config.toml"
    path.write_text(f"[{key.section}]\n{key.name} = {toml}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_settings(root, env=env)
    article = "" if key.kind.startswith("one of") else ("an " if key.kind[0] in "aeiou" else "a ")
    assert str(e.value) == f"{path}: [{key.section}] {key.name} must be {article}{key.kind}, got {shown}"


def test_environment_variables_come_from_the_table(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    assert ENV_VARS == {
        "SUBAGENTS_MODEL": "model.default", "SUBAGENTS_MAX_THREADS": "agents.max_threads",
        "SUBAGENTS_WHEN_FULL": "agents.when_full",
        "SUBAGENTS_MAX_DEPTH": "agents.max_depth", "SUBAGENTS_STORE": "store.url", "SUBAGENTS_ENGINE": "engine.url",
        "SUBAGENTS_PERMISSION_MODE": "permissions.mode", "SUBAGENTS_SANDBOX": "sandbox.mode",
        "ANTHROPIC_API_KEY": "providers.anthropic.api_key", "OPENAI_API_KEY": "providers.openai.api_key",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "telemetry.otlp_endpoint", "OTEL_SERVICE_NAME": "telemetry.service_name",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "telemetry.capture_content"}
    for k in PLAIN:
        for var in k.env_vars:
            value, _ = sample(k)
            s = load_settings(root, env={**env, var: str(value)})
            assert getattr(s, k.field or "") == loaded(k, value)
            assert s.sources[k.dotted] == f"env {var}"


def test_unknown_keys_name_the_nearest_known_one(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    path = root / ".subagents" / "config.toml"
    path.write_text("[sandbox]\nallow_hardlink = true\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown key \[sandbox\] allow_hardlink \(did you mean allow_hardlinks\?\)"):
        load_settings(root, env=env)
    path.write_text('[pricing."m"]\ninput = 1\noutput = 2\ncache_reads = 1\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown key \[pricing.m\] cache_reads \(did you mean cache_read\?\)"):
        load_settings(root, env=env)
    path.unlink()
    with pytest.raises(ConfigError, match=r"unknown setting 'max_thread' passed as an argument "
                                          r"\(did you mean max_threads\?\)"):
        load_settings(root, env=env, overrides={"max_thread": 3})


def docs_table() -> str:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- keys:start -->\n(.*?)\n<!-- keys:end -->", text, re.DOTALL)
    assert found is not None, "docs/configuration.md has no <!-- keys:start --> ... <!-- keys:end --> table"
    return found.group(1)


def test_the_docs_table_is_the_rendering_of_the_table() -> None:
    assert docs_table() == markdown_table(), (
        "docs/configuration.md's key table differs from subagents.config_keys.KEYS; paste in the output of "
        "`subagents config keys --markdown`:\n" + markdown_table())


def test_every_key_and_variable_is_documented() -> None:
    table = docs_table()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for k in KEYS:
        assert f"] {k.name}`" in table, k.dotted
    for var in ENV_VARS:
        assert f"`{var}`" in table, var
        assert var in readme, var


def test_the_config_docstring_lists_every_key() -> None:
    doc = config.__doc__ or ""
    for k in KEYS:
        section = k.section.split(".")[0]
        line = next(ln for ln in doc.splitlines() if ln.strip().startswith(("[" + section, "[[" + section)))
        assert k.name in line, k.dotted
