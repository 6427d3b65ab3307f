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
    [limits]       max_turns (sub-agents), root_max_turns (root agents); 0 means no limit
    [permissions]  mode, allow, ask, deny, approval_timeout_s
    [sandbox]      mode, network, protect, unprotect (user file only), deny_read, env_passthrough,
                   allow_git, allow_hardlinks, allow_other_devices
    [[hooks.<Event>]]     matcher, command, timeout_s, on_error   (one table per hook)
    [providers.anthropic] / [providers.openai]   api_key, base_url, max_retries, retry_base_s, retry_max_s,
                          connect_timeout_s, read_timeout_s, stall_timeout_s, timeout_s, max_output_tokens, stream
    [pricing."<model>"]   input, output, cache_read, cache_write   (USD per million tokens)

Lists (``allow``, ``protect``, ...) add up: the user file's entries, then the project file's, then
the environment's and the arguments'.

Unknown sections or keys and values of the wrong type raise :class:`ConfigError` naming the file,
the key and the expected type.  API keys are masked whenever settings are shown.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._config_values import PROVIDER_KEYS
from ._config_values import check_value as _check
from ._config_values import hint as _hint
from ._config_values import quote as _quote
from ._config_values import show as _show
from .authority.names import HOOK_EVENTS, MODE_ALIASES, MODES, canonical_mode
from .exceptions import ConfigError

__all__ = ["ENV_VARS", "NO_MODEL_HELP", "PROVIDERS", "Settings", "load_settings", "mask_secret", "user_config_dir"]

PROVIDERS = ("anthropic", "openai")

_ALIAS_NAMES = ("acceptEdits", "bypassPermissions")
_USER_ONLY = frozenset({"sandbox.unprotect"})
"""Keys read only from the user's own config file: a project file (which an agent might have written
in an unprotected checkout) can never loosen the sandbox."""
_HOOK_KEYS = {"matcher": "string", "command": "string", "timeout_s": "positive number",
              "on_error": "one of 'allow', 'block'"}

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
    "limits.max_turns": ("child_max_turns", "non-negative integer"),
    "limits.root_max_turns": ("root_max_turns", "non-negative integer"),
    "permissions.mode": ("permission_mode", "one of " + ", ".join(f"'{m}'" for m in (*MODES, *_ALIAS_NAMES))),
    "permissions.allow": ("allow", "list of strings"),
    "permissions.ask": ("ask", "list of strings"),
    "permissions.deny": ("deny", "list of strings"),
    "permissions.approval_timeout_s": ("approval_timeout_s", "non-negative number"),
    "sandbox.mode": ("sandbox_mode", "one of 'auto', 'bwrap', 'landlock', 'off'"),
    "sandbox.network": ("sandbox_network", "boolean"),
    "sandbox.protect": ("protect", "list of strings"),
    "sandbox.unprotect": ("unprotect", "list of strings"),
    "sandbox.deny_read": ("deny_read", "list of strings"),
    "sandbox.env_passthrough": ("env_passthrough", "list of strings"),
    "sandbox.allow_git": ("allow_git", "boolean"),
    "sandbox.allow_hardlinks": ("allow_hardlinks", "boolean"),
    "sandbox.allow_other_devices": ("allow_other_devices", "boolean"),
}
_FIELD_KEYS = {f: k for k, (f, _) in _KEYS.items()}
_PROVIDER_KEYS = {key: spec.kind for key, spec in PROVIDER_KEYS.items()}  # one source, shared with the docs
_PRICE_KEYS = {"input": "non-negative number", "output": "non-negative number",
               "cache_read": "non-negative number", "cache_write": "non-negative number"}
_SECTIONS = sorted({k.split(".")[0] for k in _KEYS} | {"providers", "pricing", "hooks"})

#: environment variable -> dotted key
ENV_VARS: dict[str, str] = {
    "SUBAGENTS_MODEL": "model.default",
    "SUBAGENTS_MAX_THREADS": "agents.max_threads",
    "SUBAGENTS_MAX_DEPTH": "agents.max_depth",
    "SUBAGENTS_STORE": "store.url",
    "SUBAGENTS_PERMISSION_MODE": "permissions.mode",
    "SUBAGENTS_SANDBOX": "sandbox.mode",
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
    child_max_turns: int = 50                 # [limits] max_turns (0: no limit)
    root_max_turns: int = 200                 # [limits] root_max_turns (0: no limit)
    permission_mode: str = "default"          # [permissions] mode        / SUBAGENTS_PERMISSION_MODE
    allow: list[str] = field(default_factory=list)   # [permissions] allow = ["bash(git status*)", ...]
    ask: list[str] = field(default_factory=list)     # [permissions] ask
    deny: list[str] = field(default_factory=list)    # [permissions] deny
    approval_timeout_s: float | None = None   # [permissions] approval_timeout_s (unset: no limit on a terminal)
    sandbox_mode: str = "auto"                # [sandbox] mode: auto | bwrap | landlock | off / SUBAGENTS_SANDBOX
    sandbox_network: bool = False             # [sandbox] network
    protect: list[str] = field(default_factory=list)          # [sandbox] protect: more protected paths
    unprotect: list[str] = field(default_factory=list)        # [sandbox] unprotect (user file only)
    deny_read: list[str] = field(default_factory=list)        # [sandbox] deny_read: more hidden paths
    env_passthrough: list[str] = field(default_factory=list)  # [sandbox] env_passthrough
    allow_git: bool = False                   # [sandbox] allow_git: the shell may write .git (not hooks/config)
    allow_hardlinks: bool = False             # [sandbox] allow_hardlinks: file tools write multi-link files
    allow_other_devices: bool = False         # [sandbox] allow_other_devices: ... and files on other mounts
    hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # [[hooks.PreToolUse]] command = ...

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
        for event in sorted(self.hooks):
            for i, h in enumerate(self.hooks[event]):
                key = f"hooks.{event}[{i}]"
                yield key, h, self.sources.get(key, "default")

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
    user_file = user_config_dir(environ) / "config.toml"
    for path in (user_file, Path(workdir).resolve() / ".subagents" / "config.toml"):
        if path.is_file():
            _apply_file(s, path, user=path == user_file)
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
def _apply_file(s: Settings, path: Path, *, user: bool = False) -> None:
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
        if section == "hooks":
            _apply_hooks(s, path, table)
            continue
        known = [k.split(".", 1)[1] for k in _KEYS if k.startswith(section + ".")]
        for key, value in table.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown key [{section}] {key}{_hint(key, known)}; "
                                  f"known keys of [{section}]: {', '.join(known)}")
            if f"{section}.{key}" in _USER_ONLY and not user:
                raise ConfigError(f"{path}: [{section}] {key} is read only from your user config file "
                                  f"({user_config_dir() / 'config.toml'}), never from a project's; move it there")
            _set(s, f"{section}.{key}", value, src, f"{path}: [{section}] {key}")


def _apply_hooks(s: Settings, path: Path, table: dict[str, Any]) -> None:
    for event, hooks in table.items():
        if event not in HOOK_EVENTS:
            raise ConfigError(f"{path}: unknown hook event [[hooks.{event}]]{_hint(event, HOOK_EVENTS)}; "
                              f"known events: {', '.join(HOOK_EVENTS)}")
        if not isinstance(hooks, list) or not all(isinstance(h, dict) for h in hooks):
            raise ConfigError(f"{path}: hooks.{event} must be an array of tables ([[hooks.{event}]]), "
                              f"got {_show(hooks)}")
        for h in hooks:
            where = f"{path}: [[hooks.{event}]]"
            for key, value in h.items():
                if key not in _HOOK_KEYS:
                    raise ConfigError(f"{where} unknown key {key}{_hint(key, _HOOK_KEYS)}; "
                                      f"known keys: {', '.join(_HOOK_KEYS)}")
                try:
                    h[key] = _check(value, _HOOK_KEYS[key])
                except ValueError:
                    raise ConfigError(f"{where} {key} must be {_article(_HOOK_KEYS[key])}{_HOOK_KEYS[key]}, "
                                      f"got {_show(value)}") from None
            if not h.get("command", "").strip():
                raise ConfigError(f"{where} needs a command (the program to run, e.g. command = \"./guard.sh\")")
            bucket = s.hooks.setdefault(event, [])
            s.sources[f"hooks.{event}[{len(bucket)}]"] = str(path)
            bucket.append(h)


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


def _set(s: Settings, key: str, value: Any, source: str, where: str) -> None:
    expected = _expected(key)
    if key == "permissions.mode" and isinstance(value, str) and value not in MODES and value in MODE_ALIASES:
        value = canonical_mode(value)
    try:
        value = _check(value, expected)
    except ValueError:
        raise ConfigError(f"{where} must be {_article(expected)}{expected}, got {_show(value)}") from None
    if expected == "list of strings":
        before = getattr(s, _KEYS[key][0])
        old = s.sources.get(key, "default")
        setattr(s, _KEYS[key][0], [*before, *value])
        s.sources[key] = source if old == "default" or not before else f"{old}, {source}"
        return
    if key in _KEYS:
        setattr(s, _KEYS[key][0], value)
    else:
        section, _, rest = key.partition(".")
        name, _, opt = rest.rpartition(".")
        table = s.providers if section == "providers" else s.pricing
        table.setdefault(name, {})[opt] = value
        key = f"{section}.{_quote(name)}.{opt}"
    s.sources[key] = source


def _article(expected: str) -> str:
    if expected.startswith(("one of", "list")):
        return "a " if expected.startswith("list") else ""
    return "an " if expected[0] in "aeiou" else "a "
