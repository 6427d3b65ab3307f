"""Settings: ``.subagents/config.toml`` in the project, ``config.toml`` in the user's config dir,
environment variables over files, explicit arguments over all.

Precedence, highest first: ``overrides`` (arguments) > environment > project file > user file >
defaults.  :attr:`Settings.sources` records, per dotted key (``agents.max_threads``), where the
effective value came from: a file path, ``env SUBAGENTS_MAX_THREADS``, ``argument`` or ``default``.

The recognised keys::

    [model]        default
    [agents]       max_threads, max_depth, briefing, result_max_chars
    [store]        url, on_restart (resume | mark_interrupted)
    [cleanup]      archive_after_minutes
    [tools]        bash_timeout_s
    [providers.anthropic] / [providers.openai]   api_key, base_url, max_retries, timeout_s, max_output_tokens
    [pricing."<model>"]   input, output, cache_read, cache_write   (USD per million tokens)

Unknown sections or keys and values of the wrong type raise :class:`ConfigError` naming the file,
the key and the expected type.  API keys are masked whenever settings are shown.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exceptions import ConfigError

__all__ = ["ENV_VARS", "NO_MODEL_HELP", "PROVIDERS", "Settings", "load_settings", "mask_secret", "user_config_dir"]

PROVIDERS = ("anthropic", "openai")

# dotted key -> (Settings field, expected type name)
_KEYS: dict[str, tuple[str, str]] = {
    "model.default": ("model_default", "string"),
    "agents.max_threads": ("max_threads", "positive integer"),
    "agents.max_depth": ("max_depth", "non-negative integer"),
    "agents.briefing": ("briefing", "string"),
    "agents.result_max_chars": ("result_max_chars", "positive integer"),
    "store.url": ("store_url", "string"),
    "store.on_restart": ("on_restart", "one of 'resume', 'mark_interrupted'"),
    "cleanup.archive_after_minutes": ("archive_after_minutes", "non-negative number"),
    "tools.bash_timeout_s": ("bash_timeout_s", "positive number"),
}
_FIELD_KEYS = {f: k for k, (f, _) in _KEYS.items()}
_PROVIDER_KEYS = {"api_key": "string", "base_url": "string", "max_retries": "non-negative integer",
                  "timeout_s": "positive number", "max_output_tokens": "positive integer"}
_PRICE_KEYS = {"input": "non-negative number", "output": "non-negative number",
               "cache_read": "non-negative number", "cache_write": "non-negative number"}
_SECTIONS = sorted({k.split(".")[0] for k in _KEYS} | {"providers", "pricing"})

#: environment variable -> dotted key
ENV_VARS: dict[str, str] = {
    "SUBAGENTS_MODEL": "model.default",
    "SUBAGENTS_MAX_THREADS": "agents.max_threads",
    "SUBAGENTS_MAX_DEPTH": "agents.max_depth",
    "SUBAGENTS_STORE": "store.url",
    "ANTHROPIC_API_KEY": "providers.anthropic.api_key",
    "OPENAI_API_KEY": "providers.openai.api_key",
}


NO_MODEL_HELP = """\
no model is configured.
Configure one in any of these ways:
  Anthropic:    export ANTHROPIC_API_KEY=...  and pass  --model anthropic:claude-sonnet-4-5
  OpenAI:       export OPENAI_API_KEY=...     and pass  --model openai:gpt-4.1
  Local server (Ollama, vLLM, llama.cpp, LM Studio; OpenAI-compatible):
                --model openai:<model>@http://localhost:11434/v1
  A default for every run: put
                [model]
                default = "anthropic:claude-sonnet-4-5"
                in .subagents/config.toml, or export SUBAGENTS_MODEL=anthropic:claude-sonnet-4-5
To try subagents offline first, without any model or key, run:  subagents demo"""
"""What to do when no model is configured (the CLI and ``Runtime`` both say it)."""


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/subagents`` (default ``~/.config/subagents``)."""
    environ = os.environ if env is None else env
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "subagents"


def mask_secret(value: str) -> str:
    """``sk-ant-api03-abcd…wxyz`` -> ``****wxyz`` (short values are masked whole)."""
    return "****" + value[-4:] if len(value) >= 12 else "****"


@dataclass(slots=True)
class Settings:
    """The effective settings; ``sources`` maps each dotted key to where its value came from."""

    model_default: str | None = None          # [model] default           / SUBAGENTS_MODEL
    max_threads: int = 4                      # [agents] max_threads      / SUBAGENTS_MAX_THREADS
    max_depth: int = 2                        # [agents] max_depth        / SUBAGENTS_MAX_DEPTH
    briefing: str = ""                        # [agents] briefing
    result_max_chars: int = 20_000            # [agents] result_max_chars
    store_url: str | None = None              # [store] url               / SUBAGENTS_STORE
    on_restart: str = "resume"                # [store] on_restart: resume | mark_interrupted
    archive_after_minutes: float = 60.0       # [cleanup] archive_after_minutes
    bash_timeout_s: float = 120.0             # [tools] bash_timeout_s
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)   # [providers.anthropic] api_key = ...
    pricing: dict[str, dict[str, Any]] = field(default_factory=dict)     # [pricing."model"] input = ...
    sources: dict[str, str] = field(default_factory=dict)

    def items(self, *, masked: bool = True) -> Iterator[tuple[str, Any, str]]:
        """``(dotted key, value, source)`` for every setting; API keys masked unless ``masked=False``."""
        for key, (name, _) in _KEYS.items():
            yield key, getattr(self, name), self.sources.get(key, "default")
        for prov in sorted(self.providers):
            for opt, v in sorted(self.providers[prov].items()):
                key = f"providers.{prov}.{opt}"
                shown = mask_secret(v) if masked and opt == "api_key" and isinstance(v, str) else v
                yield key, shown, self.sources.get(key, "default")
        for model in sorted(self.pricing):
            for opt, v in sorted(self.pricing[model].items()):
                key = f"pricing.{_quote(model)}.{opt}"
                yield key, v, self.sources.get(key, "default")

    def to_dict(self, *, masked: bool = True) -> dict[str, dict[str, Any]]:
        """``{dotted key: {"value": ..., "source": ...}}`` (API keys masked by default)."""
        return {k: {"value": v, "source": s} for k, v, s in self.items(masked=masked)}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v, _ in self.items(masked=True))
        return f"Settings({shown})"


def load_settings(workdir: str | os.PathLike[str] = ".", *, env: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """Effective settings for a project directory.

    ``env`` defaults to ``os.environ`` (its ``XDG_CONFIG_HOME`` also locates the user file).
    ``overrides`` take Settings field names (``max_threads``) or dotted keys (``agents.max_threads``);
    ``None`` values are ignored.  Raises :class:`ConfigError` for any bad file, variable or argument.
    """
    environ = os.environ if env is None else env
    s = Settings()
    for key in _KEYS:
        s.sources[key] = "default"
    for path in (user_config_dir(environ) / "config.toml", Path(workdir).resolve() / ".subagents" / "config.toml"):
        if path.is_file():
            _apply_file(s, path)
    for var, key in ENV_VARS.items():
        raw = environ.get(var)
        if raw is not None and raw.strip():
            _set(s, key, _from_env(key, raw.strip()), f"env {var}", f"environment variable {var}")
    for name, value in (overrides or {}).items():
        if value is None:
            continue
        key = _FIELD_KEYS.get(name, name)
        if key not in _KEYS and not key.startswith(("providers.", "pricing.")):
            raise ConfigError(f"unknown setting {name!r} passed as an argument; known settings: "
                              f"{', '.join(sorted(_FIELD_KEYS))}")
        _set(s, key, value, "argument", f"argument {name}")
    return s


# -- files ------------------------------------------------------------------------------------------
def _apply_file(s: Settings, path: Path) -> None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}; fix the syntax of this file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e}); fix its permissions or remove it") from None
    src = str(path)
    for section, table in data.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}]{_hint(section, _SECTIONS)}; "
                              f"known sections: {', '.join(_SECTIONS)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section} must be a table ([{section}]), got {_show(table)}")
        if section in ("providers", "pricing"):
            _apply_nested(s, path, section, table)
            continue
        known = [k.split(".", 1)[1] for k in _KEYS if k.startswith(section + ".")]
        for key, value in table.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown key [{section}] {key}{_hint(key, known)}; "
                                  f"known keys of [{section}]: {', '.join(known)}")
            _set(s, f"{section}.{key}", value, src, f"{path}: [{section}] {key}")


def _apply_nested(s: Settings, path: Path, section: str, table: dict[str, Any]) -> None:
    known = _PROVIDER_KEYS if section == "providers" else _PRICE_KEYS
    for name, sub in table.items():
        if section == "providers" and name not in PROVIDERS:
            raise ConfigError(f"{path}: unknown provider [providers.{name}]{_hint(name, PROVIDERS)}; "
                              f"known providers: {', '.join(PROVIDERS)}")
        label = f"{section}.{_quote(name)}"
        if not isinstance(sub, dict):
            raise ConfigError(f"{path}: {label} must be a table ([{label}]), got {_show(sub)}")
        if section == "pricing":
            missing = [k for k in ("input", "output") if k not in sub]
            if missing:
                raise ConfigError(f"{path}: [{label}] needs {' and '.join(missing)} (USD per million tokens)")
        for key, value in sub.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown key [{label}] {key}{_hint(key, list(known))}; "
                                  f"known keys: {', '.join(known)}")
            _set(s, f"{section}.{name}.{key}", value, str(path), f"{path}: [{label}] {key}")


# -- values ---------------------------------------------------------------------------------------
def _expected(key: str) -> str:
    if key in _KEYS:
        return _KEYS[key][1]
    section, _, rest = key.partition(".")
    opt = rest.rsplit(".", 1)[-1]
    table = _PROVIDER_KEYS if section == "providers" else _PRICE_KEYS
    if opt not in table:
        raise ConfigError(f"unknown setting {key!r}; known {section} keys: {', '.join(table)}")
    return table[opt]


def _from_env(key: str, raw: str) -> Any:
    """Environment values are strings; integers are parsed here (validation follows in ``_set``)."""
    if "integer" in _expected(key):
        try:
            return int(raw)
        except ValueError:
            return raw
    return raw


def _check(value: Any, expected: str) -> Any:
    """The value converted to its type, or raise ``ValueError`` (the caller words the message)."""
    if expected == "string":
        if isinstance(value, str):
            return value
    elif expected.startswith("one of"):
        if isinstance(value, str) and f"'{value}'" in expected:
            return value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        in_range = value > 0 or (value == 0 and expected.startswith("non-negative"))
        if in_range and "integer" not in expected:
            return float(value)
        if in_range and isinstance(value, int):
            return value
    raise ValueError(expected)


def _set(s: Settings, key: str, value: Any, source: str, where: str) -> None:
    expected = _expected(key)
    try:
        value = _check(value, expected)
    except ValueError:
        article = "" if expected.startswith("one of") else ("an " if expected[0] in "aeiou" else "a ")
        raise ConfigError(f"{where} must be {article}{expected}, got {_show(value)}") from None
    if key in _KEYS:
        setattr(s, _KEYS[key][0], value)
    else:
        section, _, rest = key.partition(".")
        name, _, opt = rest.rpartition(".")
        table = s.providers if section == "providers" else s.pricing
        table.setdefault(name, {})[opt] = value
        key = f"{section}.{_quote(name)}.{opt}"
    s.sources[key] = source


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


def _quote(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else json.dumps(name)


def _hint(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
