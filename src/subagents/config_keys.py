"""The one table of settings: every key's section, name, type, default, meaning and environment variable.

:mod:`subagents.config` loads and checks files, variables and arguments against :data:`KEYS`;
``subagents config show`` lists the settings in its order; ``subagents config keys`` prints it; and
the key table of docs/configuration.md is its rendering (:func:`markdown_table`; a test keeps them
equal).  To add a setting: add a :class:`Key` here and the field it names to
:class:`~subagents.config.Settings` (whose defaults are read from here), then paste the output of
``subagents config keys --markdown`` into docs/configuration.md.

Three sections are tables of tables: ``[providers.<name>]`` (its keys are :data:`PROVIDER_KEYS`,
which the model adapters read their defaults from), ``[pricing."<model>"]`` and
``[[hooks.<Event>]]``; their keys have ``section`` ``providers.*``, ``pricing.*`` and ``hooks.*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._config_values import PROVIDER_KEYS
from .authority.names import MODES

__all__ = ["ENV_VARS", "KEYS", "MCP_SERVER_KEYS", "PROVIDERS", "TABLE_SECTIONS", "Key", "keys_of", "markdown_table",
           "summary"]

PROVIDERS = ("anthropic", "openai")
TABLE_SECTIONS = ("providers", "pricing", "hooks")
MCP_SERVER_KEYS = ("command", "args", "env", "url", "headers", "cwd", "sandbox", "network", "writable", "timeout_s",
                   "startup_timeout_s")
"""The keys of an ``[mcp.servers.<name>]`` table (checked by :func:`subagents.mcp.config.parse_mcp_section`)."""
"""Sections whose entries are tables named by the user (a provider, a model, a hook event)."""
_MODE_NAMES = (*MODES, "acceptEdits", "bypassPermissions")


@dataclass(slots=True, frozen=True)
class Key:
    """One setting.  ``kind`` is a type name of :func:`~subagents._config_values.check_value`."""

    section: str
    """``agents``; ``providers.*``, ``pricing.*`` and ``hooks.*`` for the tables of tables."""
    name: str
    kind: str
    default: Any
    """The value when nothing sets it (``None``: unset)."""
    doc: str
    env: str | None = None
    """The environment variable that sets it (``{PROVIDER}`` stands for the provider's name)."""
    field: str | None = None
    """The :class:`~subagents.config.Settings` attribute of a key outside the tables of tables."""
    user_only: bool = False
    """Read only from the user's own config file, never from a project's."""
    required: bool = False
    """Each table of a table-of-tables section must set it."""
    shown: str | None = None
    """The default as the docs show it, when it is not a plain value."""
    trust: str | None = None
    """When a project file's value is applied only in a trusted project (a condition of
    :data:`subagents.trust.WHEN`: ``always``, ``true``, ``non-empty``, ``off``, ``wider mode``, ``base URL``)."""

    @property
    def dotted(self) -> str:
        """``agents.max_threads``."""
        return f"{self.section}.{self.name}"

    @property
    def env_vars(self) -> tuple[str, ...]:
        """The environment variables that set it (one per provider for ``{PROVIDER}_API_KEY``)."""
        if self.env is None:
            return ()
        if "{PROVIDER}" in self.env:
            return tuple(self.env.format(PROVIDER=p.upper()) for p in PROVIDERS)
        return (self.env,)

    @property
    def shown_default(self) -> str:
        """The default as a TOML value (or ``shown``); ``-`` when unset."""
        if self.shown is not None:
            return self.shown
        return _toml(self.default)


def _toml(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _one_of(*names: str) -> str:
    return "one of " + ", ".join(f"'{n}'" for n in names)


_LIST = "list of strings"
_FIXED: tuple[Key, ...] = (
    Key("model", "default", "string", None, "the model of every run that names none (`provider:model[@base_url]`)",
        env="SUBAGENTS_MODEL", field="model_default", trust="base URL"),
    Key("agents", "max_threads", "positive integer", 4,
        "sub-agents running at once (root agents hold no slot; on the Temporal engine: per tree, the root's "
        "worker's value)",
        env="SUBAGENTS_MAX_THREADS", field="max_threads"),
    Key("agents", "when_full", _one_of("refuse", "queue"), "refuse",
        "a spawn over `max_threads`: refused, or (`queue`) a background one waits for a free slot, first come "
        "first served", env="SUBAGENTS_WHEN_FULL", field="when_full"),
    Key("agents", "max_depth", "non-negative integer", 2, "how deep sub-agents may nest (0: no sub-agents)",
        env="SUBAGENTS_MAX_DEPTH", field="max_depth"),
    Key("agents", "briefing", "string", "", "shared context given to every child", field="briefing"),
    Key("agents", "result_max_chars", "positive integer", 20_000,
        "a child's result is cut to this many characters (the full text stays in the store)",
        field="result_max_chars"),
    Key("store", "url", "string", None, "the run store: `sqlite:///<path>`, `postgresql://user@host/db` or `memory://`",
        env="SUBAGENTS_STORE",
        field="store_url", trust="always", shown='"sqlite:///.subagents/state.db"'),
    Key("engine", "url", "string", None,
        "where agents run: unset, the local asyncio engine; `temporal://host:7233?namespace=default&task_queue="
        "subagents`, Temporal workers (`subagents worker`; needs the `temporal` extra)",
        env="SUBAGENTS_ENGINE", field="engine_url", trust="always"),
    Key("store", "on_restart", _one_of("resume", "mark_interrupted"), "resume",
        "what happens to the runs a dead process left unfinished", field="on_restart"),
    Key("cleanup", "archive_after_minutes", "non-negative number", 60.0,
        "minutes after its end a finished run's transcript is archived", field="archive_after_minutes"),
    Key("announce", "steer", "boolean", True,
        "a background child's result is injected into its running parent at the parent's next tool boundary; "
        "`false`: queued as a follow-up turn, given when the parent ends its turn (or is resumed)",
        field="announce_steer"),
    Key("tools", "bash_timeout_s", "positive number", 120.0, "default time limit of one `bash` command",
        field="bash_timeout_s"),
    Key("limits", "max_turns", "non-negative integer", 50, "turns of a sub-agent that sets none (0: no limit)",
        field="child_max_turns"),
    Key("limits", "root_max_turns", "non-negative integer", 200, "turns of a root agent that sets none (0: no limit)",
        field="root_max_turns"),
    Key("permissions", "mode", _one_of(*_MODE_NAMES), "default",
        "`plan`, `default`, `autoEdit` or `yolo` (see docs/permissions.md)", env="SUBAGENTS_PERMISSION_MODE",
        field="permission_mode", trust="wider mode"),
    Key("permissions", "allow", _LIST, [], "rules of calls that run without asking, e.g. `bash(git status*)`",
        field="allow", trust="non-empty"),
    Key("permissions", "ask", _LIST, [], "rules of calls that always ask", field="ask"),
    Key("permissions", "deny", _LIST, [], "rules of calls that are refused", field="deny"),
    Key("permissions", "approval_timeout_s", "non-negative number", None,
        "seconds an approval may wait before the call is denied (unset: no limit on a terminal)",
        field="approval_timeout_s"),
    Key("sandbox", "mode", _one_of("auto", "bwrap", "landlock", "off"), "auto",
        "how the shell is confined (see docs/security.md)", env="SUBAGENTS_SANDBOX", field="sandbox_mode",
        trust="off"),
    Key("sandbox", "network", "boolean", False, "the shell may use the network", field="sandbox_network",
        trust="true"),
    Key("sandbox", "protect", _LIST, [], "more paths no agent tool may write", field="protect"),
    Key("sandbox", "unprotect", _LIST, [], "default protected paths to release (user file only)",
        field="unprotect", user_only=True),
    Key("sandbox", "deny_read", _LIST, [], "more paths no agent tool may read", field="deny_read"),
    Key("sandbox", "env_passthrough", _LIST, [], "environment variables (or `PREFIX_*` patterns) the shell keeps",
        field="env_passthrough", trust="non-empty"),
    Key("sandbox", "allow_git", "boolean", False, "the shell may write `.git` (never its hooks or config)",
        field="allow_git", trust="true"),
    Key("sandbox", "allow_hardlinks", "boolean", False, "the file tools may write files with several hard links",
        field="allow_hardlinks", trust="true"),
    Key("sandbox", "allow_other_devices", "boolean", False,
        "the file tools may write files on another file system than the workspace's", field="allow_other_devices",
        trust="true"),
    Key("sandbox", "private_home", "boolean", True,
        "the shell sees none of your home directory but the workspace, the toolchains on `PATH`, package caches, "
        "git's identity (not its config file) and `home_read` (user file only; see docs/security.md)",
        field="private_home", user_only=True),
    Key("sandbox", "home_read", _LIST, [], "more paths under your home directory the shell may read (user file only)",
        field="home_read", user_only=True),
    Key("telemetry", "otlp_endpoint", "string", None,
        "OTLP/HTTP endpoint that receives OpenTelemetry traces of every agent run (e.g. `http://localhost:4318`); "
        "unset: no tracing, and OpenTelemetry is not imported. Needs the `otel` extra",
        env="OTEL_EXPORTER_OTLP_ENDPOINT", field="otlp_endpoint", trust="always"),
    Key("telemetry", "capture_content", "boolean", False,
        "put prompts, model answers, tool arguments and results into the spans (they may hold secrets)",
        env="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", field="capture_content", trust="true"),
    Key("telemetry", "service_name", "string", "subagents", "`service.name` of the traces",
        env="OTEL_SERVICE_NAME", field="telemetry_service_name"),
    Key("web", "allow_private_hosts", _LIST, [],
        "hosts `web_fetch` may reach although they resolve to loopback or private addresses (e.g. `localhost` for "
        "a local documentation server); user file only: a cloned project must not open your machine's services",
        field="web_allow_private_hosts", user_only=True),
)

_PROVIDER: tuple[Key, ...] = tuple(
    Key("providers.*", name, spec.kind, None, spec.meaning, shown=spec.default,
        env="{PROVIDER}_API_KEY" if name == "api_key" else None,
        trust="always" if name in ("api_key", "base_url") else None)
    for name, spec in PROVIDER_KEYS.items())

_PRICE = "non-negative number"
_PRICING: tuple[Key, ...] = (
    Key("pricing.*", "input", _PRICE, None, "USD per million input tokens", required=True),
    Key("pricing.*", "output", _PRICE, None, "USD per million output tokens", required=True),
    Key("pricing.*", "cache_read", _PRICE, None, "USD per million tokens read from the prompt cache",
        shown="input"),
    Key("pricing.*", "cache_write", _PRICE, None, "USD per million tokens written to the prompt cache",
        shown="input"),
)

_HOOKS: tuple[Key, ...] = (
    Key("hooks.*", "matcher", "string", None,
        "the tool names (or agent types) it applies to: a regex matching the whole name; unset: all"),
    Key("hooks.*", "command", "string", None, "the program to run (Claude Code's hook protocol)", required=True),
    Key("hooks.*", "timeout_s", "positive number", 30.0, "seconds the command may take"),
    Key("hooks.*", "on_error", _one_of("allow", "block"), "allow",
        "when the hook fails: go on (`allow`) or fail closed (`block`)"),
)

KEYS: tuple[Key, ...] = (*_FIXED, *_PROVIDER, *_PRICING, *_HOOKS)
"""Every setting, in the order ``config show`` and the docs list them."""


def keys_of(section: str) -> dict[str, Key]:
    """``{name: Key}`` of one section (``agents``, or ``providers.*`` for a table of tables)."""
    return {k.name: k for k in KEYS if k.section == section}


#: environment variable -> dotted key
ENV_VARS: dict[str, str] = {
    **{var: k.dotted for k in _FIXED for var in k.env_vars},
    **{var: f"providers.{p}.{k.name}" for k in _PROVIDER for p, var in zip(PROVIDERS, k.env_vars, strict=False)},
}


def _label(k: Key) -> str:
    head = {"providers.*": "[providers.<name>]", "pricing.*": '[pricing."<model>"]',
            "hooks.*": "[[hooks.<Event>]]"}.get(k.section, f"[{k.section}]")
    return f"`{head} {k.name}`"


_TRUST_NOTE = {"always": "any value", "true": "`true`", "non-empty": "any entry", "off": "`off` or `landlock`",
               "wider mode": "`autoEdit` or `yolo`", "base URL": "a model with `@<base_url>`"}


def _doc(k: Key) -> str:
    if k.trust is None:
        return k.doc
    return f"{k.doc}. *From a project file, {_TRUST_NOTE[k.trust]} applies only in a trusted project*"


def markdown_table() -> str:
    """:data:`KEYS` as the Markdown table of docs/configuration.md."""
    rows = [("Key", "Type", "Default", "Environment", "Meaning")]
    rows += [(_label(k), k.kind + (", required" if k.required else ""), k.shown_default,
              " / ".join(f"`{v}`" for v in k.env_vars), _doc(k)) for k in KEYS]
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("---" for _ in rows[0]) + "|")
    return "\n".join(lines)


def summary() -> str:
    """The sections and their keys, one line per section (the :mod:`subagents.config` docstring shows it)."""
    lines = []
    for section in dict.fromkeys(k.section for k in _FIXED):
        lines.append(f"    [{section}]".ljust(19) + ", ".join(keys_of(section)))
    lines.append("    [providers.anthropic] / [providers.openai]   " + ", ".join(keys_of("providers.*")))
    lines.append('    [pricing."<model>"]   ' + ", ".join(keys_of("pricing.*")) + "   (USD per million tokens)")
    lines.append("    [[hooks.<Event>]]     " + ", ".join(keys_of("hooks.*")) + "   (one table per hook)")
    lines.append("    [mcp.servers.<name>]  " + ", ".join(MCP_SERVER_KEYS) + "   (one table per MCP server)")
    return "\n".join(lines)
