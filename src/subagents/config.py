"""Settings: ``.subagents/config.toml`` in the project, ``config.toml`` in the user's config dir,
environment variables over files, explicit arguments over all.

Precedence, highest first: ``overrides`` (arguments) > environment > project file > user file >
defaults.  :attr:`Settings.sources` records, per dotted key (``agents.max_threads``), where the
effective value came from: a file path, ``env SUBAGENTS_MAX_THREADS``, ``argument`` or ``default``.

Every key, its type, default, meaning and environment variable is declared once, in
:data:`subagents.config_keys.KEYS`; this module loads and checks against it.  The recognised keys::

{keys}

Lists (``allow``, ``protect``, ...) add up: the user file's entries, then the project file's, then
the environment's and the arguments'.  Unknown sections or keys and values of the wrong type raise
:class:`ConfigError` naming the file, the key and the expected type (and the nearest known key).  API keys are
masked whenever settings are shown.
"""

from __future__ import annotations

import os
import re
import tomllib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from ._config_values import NO_MODEL_HELP, mask_secret
from ._config_values import check_value as _check
from ._config_values import hint as _hint
from ._config_values import mcp_shown as _mcp_shown
from ._config_values import quote as _quote
from ._config_values import show as _show
from .authority.names import HOOK_EVENTS, MODE_ALIASES, MODES, canonical_mode
from .config_keys import ENV_VARS, KEYS, PROVIDERS, TABLE_SECTIONS, Key, keys_of, summary
from .exceptions import ConfigError, UntrustedProjectWarning
from .trust import is_trusted, mcp_json_ignored, needs_trust, shadows_price, untrusted_note

__doc__ = (__doc__ or "").format(keys=summary())

__all__ = ["ENV_VARS", "NO_MODEL_HELP", "PROVIDERS", "Settings", "apply_arguments", "load_settings", "mask_secret",
           "user_config_dir"]

_FIXED: dict[str, Key] = {k.dotted: k for k in KEYS if k.field is not None}
"""dotted key -> Key, for the sections of plain keys."""
_FIELDS: dict[str, str] = {dotted: k.field for dotted, k in _FIXED.items() if k.field}
"""dotted key -> Settings field."""
_FIELD_KEYS = {f: dotted for dotted, f in _FIELDS.items()}
_SECTIONS = sorted({k.section for k in _FIXED.values()} | set(TABLE_SECTIONS) | {"mcp"})
_NESTED = {section: keys_of(section + ".*") for section in TABLE_SECTIONS}


def _d(dotted: str) -> Any:
    """The default of a key, from the table."""
    return _FIXED[dotted].default


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/subagents`` (default ``~/.config/subagents``; a relative value is ignored, as the XDG spec
    says: the trust list would be a file of the current directory, which a project could ship)."""
    base = (os.environ if env is None else env).get("XDG_CONFIG_HOME", "")
    base = base if os.path.isabs(base) else str(Path.home() / ".config")
    return Path(base) / "subagents"


@dataclass(slots=True)
class Settings:
    """The effective settings; ``sources`` maps each dotted key to where its value came from.

    Each field is one key of :data:`subagents.config_keys.KEYS` (its default comes from there), except
    ``providers``, ``pricing`` and ``hooks`` (the tables of tables) and ``sources``.
    """

    model_default: str | None = _d("model.default")
    max_threads: int = _d("agents.max_threads")
    max_depth: int = _d("agents.max_depth")
    briefing: str = _d("agents.briefing")
    result_max_chars: int = _d("agents.result_max_chars")
    store_url: str | None = _d("store.url")
    on_restart: str = _d("store.on_restart")
    archive_after_minutes: float = _d("cleanup.archive_after_minutes")
    bash_timeout_s: float = _d("tools.bash_timeout_s")
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)   # [providers.anthropic] api_key = ...
    pricing: dict[str, dict[str, Any]] = field(default_factory=dict)     # [pricing."model"] input = ...
    sources: dict[str, str] = field(default_factory=dict)
    child_max_turns: int = _d("limits.max_turns")
    root_max_turns: int = _d("limits.root_max_turns")
    permission_mode: str = _d("permissions.mode")
    allow: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    approval_timeout_s: float | None = _d("permissions.approval_timeout_s")
    sandbox_mode: str = _d("sandbox.mode")
    sandbox_network: bool = _d("sandbox.network")
    protect: list[str] = field(default_factory=list)
    unprotect: list[str] = field(default_factory=list)
    deny_read: list[str] = field(default_factory=list)
    env_passthrough: list[str] = field(default_factory=list)
    allow_git: bool = _d("sandbox.allow_git")
    allow_hardlinks: bool = _d("sandbox.allow_hardlinks")
    allow_other_devices: bool = _d("sandbox.allow_other_devices")
    hooks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # [[hooks.PreToolUse]] command = ...
    when_full: str = _d("agents.when_full")  # after the others: the fields' positional order stays stable
    otlp_endpoint: str | None = _d("telemetry.otlp_endpoint")
    capture_content: bool = _d("telemetry.capture_content")
    telemetry_service_name: str = _d("telemetry.service_name")
    engine_url: str | None = _d("engine.url")
    mcp_servers: dict[str, Any] = field(default_factory=dict)  # [mcp.servers.NAME]: name -> mcp.McpServerConfig
    announce_steer: bool = _d("announce.steer")
    web_allow_private_hosts: list[str] = field(default_factory=list)
    private_home: bool = _d("sandbox.private_home")
    home_read: list[str] = field(default_factory=list)
    trusted: bool = True  # the project's settings were all applied (subagents.trust); load_settings decides
    ignored: dict[str, str] = field(default_factory=dict)  # what an untrusted project asked for -> its file

    def items(self, *, masked: bool = True) -> Iterator[tuple[str, Any, str]]:
        """``(dotted key, value, source)`` for every setting; API keys masked unless ``masked=False``."""
        for key, name in _FIELDS.items():
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
        for name in sorted(self.mcp_servers):
            key = f"mcp.servers.{name}"
            yield key, _mcp_shown(self.mcp_servers[name], masked), self.sources.get(key, "default")

    def to_dict(self, *, masked: bool = True) -> dict[str, dict[str, Any]]:
        """``{dotted key: {"value": ..., "source": ...}}`` (API keys masked by default)."""
        return {k: {"value": v, "source": s} for k, v, s in self.items(masked=masked)}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v, _ in self.items(masked=True))
        return f"Settings({shown})"


def _check_table_matches_settings() -> None:
    """Every plain key names a Settings field whose default is the key's (checked at import: no drift)."""
    by_name = {f.name: f for f in fields(Settings)}
    for dotted, k in _FIXED.items():
        f = by_name.get(_FIELDS[dotted])
        if f is None:
            raise AssertionError(f"config_keys.KEYS: {dotted} names no Settings field {k.field!r}")
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if default != k.default:
            raise AssertionError(f"Settings.{f.name} defaults to {default!r}, config_keys.KEYS to {k.default!r}")


_check_table_matches_settings()


def load_settings(workdir: str | os.PathLike[str] = ".", *, env: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None, trust: bool | None = None) -> Settings:
    """Effective settings for a project directory.

    ``env`` defaults to ``os.environ`` (its ``XDG_CONFIG_HOME`` also locates the user file).
    ``overrides`` take Settings field names (``max_threads``) or dotted keys (``agents.max_threads``);
    ``None`` values are ignored.  ``trust``: whether the project's settings may widen what agents can do
    (:mod:`subagents.trust`; ``None``: when the user listed the directory as trusted); the ones ignored are
    in :attr:`Settings.ignored`, and an :class:`~subagents.exceptions.UntrustedProjectWarning` names them.
    Raises :class:`ConfigError` for any bad file, variable or argument.
    """
    environ = os.environ if env is None else env
    s = Settings()
    for key in _FIXED:
        s.sources[key] = "default"
    user_file = user_config_dir(environ) / "config.toml"
    project = Path(workdir).resolve()
    s.trusted = is_trusted(project, user_file.parent) if trust is None else trust
    for path in (user_file, project / ".subagents" / "config.toml"):
        if path.is_file():
            _apply_file(s, path, user=path == user_file)
        elif path.exists() or path.is_symlink():  # a directory, a FIFO (reading it would block), a broken link
            raise ConfigError(f"{path}: is not a regular file, so its settings cannot be read; make it a TOML file "
                              "or remove it")
    for var, key in ENV_VARS.items():
        raw = environ.get(var)
        if raw is not None and raw.strip():
            _set(s, key, _from_env(key, raw.strip()), f"env {var}", f"environment variable {var}")
    for name, value in (overrides or {}).items():
        if value is None:
            continue
        key = _FIELD_KEYS.get(name, name)
        if key not in _FIXED and not key.startswith(("providers.", "pricing.")):
            raise ConfigError(f"unknown setting {name!r} passed as an argument{_hint(name, _FIELD_KEYS)}; "
                              f"known settings: {', '.join(sorted(_FIELD_KEYS))}")
        _set(s, key, value, "argument", f"argument {name}")
    if not s.trusted:
        s.ignored.update(mcp_json_ignored(project / ".mcp.json"))
        if s.ignored:
            warnings.warn(UntrustedProjectWarning(untrusted_note(project, s.ignored)), stacklevel=2)
    return s


# -- files ------------------------------------------------------------------------------------------
def apply_arguments(s: Settings, *, max_threads: int | None = None, max_depth: int | None = None,
                    when_full: str | None = None, permission_mode: str | None = None) -> None:
    """``Runtime(...)``'s arguments over the loaded settings (``None``: keep the setting)."""
    if max_threads is not None:
        s.max_threads = max_threads
    if max_depth is not None:
        s.max_depth = max_depth
    if when_full is not None:
        if when_full not in ("refuse", "queue"):
            raise ConfigError(f"when_full must be 'refuse' or 'queue', got {when_full!r}")
        s.when_full = when_full
    if permission_mode is not None:
        try:
            s.permission_mode = canonical_mode(permission_mode)
        except ValueError as e:
            raise ConfigError(f"permission_mode: {e}") from None


def _apply_file(s: Settings, path: Path, *, user: bool = False) -> None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a byte order mark is no syntax error
    except (tomllib.TOMLDecodeError, RecursionError) as e:  # (arrays nested thousands deep: RecursionError)
        why = "arrays or tables nested too deeply" if isinstance(e, RecursionError) else e
        raise ConfigError(f"{path}: invalid TOML: {why}; fix the syntax of this file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read ({e}); fix its permissions or remove it") from None
    src = str(path)
    for section, table in data.items():
        if section not in _SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}]{_hint(section, _SECTIONS)}; "
                              f"known sections: {', '.join(_SECTIONS)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section} must be a table ([{section}]), got {_show(table)}")
        gated = not user and not s.trusted  # settings that widen what agents may do need trust
        if section in ("providers", "pricing"):
            _apply_nested(s, path, section, table, gated)
            continue
        if section == "hooks":
            _apply_hooks(s, path, table, gated)
            continue
        if section == "mcp":  # [mcp.servers.NAME]: checked by the MCP package (imports no SDK)
            _apply_mcp(s, table, src, gated)
            continue
        _apply_plain(s, path, section, table, user=user, gated=gated)


def _apply_mcp(s: Settings, table: dict[str, Any], src: str, gated: bool) -> None:
    from .mcp.config import parse_mcp_section

    servers = parse_mcp_section(table, src)
    if gated:
        s.ignored.update({f"MCP server {name!r}": src for name in servers})
        return
    s.mcp_servers.update(servers)
    s.sources.update({f"mcp.servers.{name}": src for name in table.get("servers", {})})


def _apply_plain(s: Settings, path: Path, section: str, table: dict[str, Any], *, user: bool, gated: bool) -> None:
    known = [k.split(".", 1)[1] for k in _FIXED if k.startswith(section + ".")]
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"{path}: unknown key [{section}] {key}{_hint(key, known)}; "
                              f"known keys of [{section}]: {', '.join(known)}")
        if _FIXED[f"{section}.{key}"].user_only and not user:
            raise ConfigError(f"{path}: [{section}] {key} is read only from your user config file "
                              f"({user_config_dir() / 'config.toml'}), never from a project's; move it there")
        label = f"{path}: [{section}] {key}"
        if gated and needs_trust(f"{section}.{key}", value):
            _set(Settings(), f"{section}.{key}", value, str(path), label)  # a bad value is an error all the same
            s.ignored[f"[{section}] {key} = {_show(value)}"] = str(path)
            continue
        _set(s, f"{section}.{key}", value, str(path), label)


def _apply_hooks(s: Settings, path: Path, table: dict[str, Any], gated: bool) -> None:
    known = _NESTED["hooks"]
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
                if key not in known:
                    raise ConfigError(f"{where} unknown key {key}{_hint(key, known)}; "
                                      f"known keys: {', '.join(known)}")
                kind = known[key].kind
                try:
                    h[key] = _check(value, kind)
                    if key == "matcher" and value not in ("", "*"):
                        re.compile(value)  # found by `config show`, not first when a Runtime starts
                except re.error as e:
                    raise ConfigError(f"{where} matcher {_show(value)} is not a valid regular expression ({e}); "
                                      "write a Python regex matched against the whole name") from None
                except ValueError:
                    raise ConfigError(f"{where} {key} must be {_article(kind)}{kind}, got {_show(value)}") from None
            if not h.get("command", "").strip():
                raise ConfigError(f"{where} needs a command (the program to run, e.g. command = \"./guard.sh\")")
            if gated:
                s.ignored[f"{event} hook {_show(h['command'])}"] = str(path)
                continue
            bucket = s.hooks.setdefault(event, [])
            s.sources[f"hooks.{event}[{len(bucket)}]"] = str(path)
            bucket.append(h)


def _apply_nested(s: Settings, path: Path, section: str, table: dict[str, Any], gated: bool) -> None:
    known = _NESTED[section]
    required = [k for k, spec in known.items() if spec.required]
    priced = list(s.pricing)  # before this file's: the user's own prices
    for name, sub in table.items():
        if section == "providers" and name not in PROVIDERS:
            raise ConfigError(f"{path}: unknown provider [providers.{name}]{_hint(name, PROVIDERS)}; "
                              f"known providers: {', '.join(PROVIDERS)}")
        label = f"{section}.{_quote(name)}"
        if not isinstance(sub, dict):
            raise ConfigError(f"{path}: {label} must be a table ([{label}]), got {_show(sub)}")
        shadows = section == "pricing" and shadows_price(name, priced)  # a price known already: trust only
        missing = [k for k in required if k not in sub]
        if missing:
            raise ConfigError(f"{path}: [{label}] needs {' and '.join(missing)} (USD per million tokens)")
        for key, value in sub.items():
            if key not in known:
                raise ConfigError(f"{path}: unknown key [{label}] {key}{_hint(key, list(known))}; "
                                  f"known keys: {', '.join(known)}")
            if gated and (needs_trust(f"{section}.{name}.{key}", value) or shadows):
                _set(Settings(), f"{section}.{name}.{key}", value, str(path), f"{path}: [{label}] {key}")
                s.ignored[f"[{label}] {key}"] = str(path)  # (its value may be a secret: not shown)
                continue
            _set(s, f"{section}.{name}.{key}", value, str(path), f"{path}: [{label}] {key}")


# -- values ---------------------------------------------------------------------------------------
def _expected(key: str) -> str:
    if key in _FIXED:
        return _FIXED[key].kind
    section, _, rest = key.partition(".")
    opt = rest.rsplit(".", 1)[-1]
    table = _NESTED["providers" if section == "providers" else "pricing"]
    if opt not in table:
        raise ConfigError(f"unknown setting {key!r}{_hint(opt, table)}; known {section} keys: {', '.join(table)}")
    return table[opt].kind


def _from_env(key: str, raw: str) -> Any:
    """Environment values are strings; integers and booleans (true/false, 1/0, yes/no, on/off, any case) are
    parsed here (validation follows in ``_set``)."""
    if _expected(key) == "boolean":
        return {"true": True, "1": True, "yes": True, "on": True,
                "false": False, "0": False, "no": False, "off": False}.get(raw.lower(), raw)
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
        if expected.startswith("one of") and f"'{value}'" not in expected[7:].split(", "):
            raise ValueError(expected)  # one choice, not a run of them ("landlock', 'off")
    except ValueError:
        raise ConfigError(f"{where} must be {_article(expected)}{expected}, got {_show(value)}") from None
    spec = _FIXED.get(key)
    if spec is not None and expected == "list of strings":
        name = _FIELDS[key]
        before = getattr(s, name)
        old = s.sources.get(key, "default")
        setattr(s, name, [*before, *value])
        s.sources[key] = source if old == "default" or not before else f"{old}, {source}"
        return
    if spec is not None:
        setattr(s, _FIELDS[key], value)
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
