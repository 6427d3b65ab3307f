"""MCP server configurations: where they come from, and their validation.

Three sources, each parsed into :class:`McpServerConfig` with errors that name the file and the server:

- ``[mcp.servers.NAME]`` in ``.subagents/config.toml`` (or the user's config file)::

      [mcp.servers.github]
      command = "github-mcp-server"
      args = ["stdio"]
      env = { GITHUB_TOKEN = "..." }
      # or: url = "http://127.0.0.1:8000/mcp"   (streamable HTTP)
      # options: sandbox = true, network = false, writable = true, timeout_s = 120, startup_timeout_s = 30

- the project's ``.mcp.json`` (Claude Code's format, with its ``${VAR}`` and ``${VAR:-default}`` expansion of
  environment variables in ``command``, ``args``, ``env``, ``url`` and ``headers``)::

      {"mcpServers": {"github": {"command": "...", "args": [...], "env": {"TOKEN": "${GITHUB_TOKEN}"}},
                      "docs": {"type": "http", "url": "https://..."}}}

- an agent definition's ``mcp_servers:`` (Claude Code's ``mcpServers:``) front matter: a list of server
  names (configured elsewhere) or of ``{name: {config}}`` inline configurations.

>>> parse_server("fs", {"command": "mcp-fs", "args": ["--root", "."]}, source="config.toml").transport
'stdio'
>>> parse_server("docs", {"type": "http", "url": "http://127.0.0.1:9/mcp"}, source=".mcp.json").transport
'http'
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..exceptions import ConfigError, DefinitionError

__all__ = ["McpServerConfig", "definition_servers", "expand_vars", "load_mcp_json", "parse_mcp_section",
           "parse_server", "parse_servers", "project_servers", "same_server"]

log = logging.getLogger("subagents.mcp")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
MAX_NAME = 40  # "mcp__<server>__<tool>" must stay within the model APIs' 64 characters
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_KEYS = ("type", "command", "args", "env", "url", "headers", "cwd", "sandbox", "network", "writable",
         "timeout_s", "startup_timeout_s")


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One MCP server: a command to start (stdio) or a URL (streamable HTTP), and how to run it.

    ``sandbox``: run a stdio server under the shell's sandbox (bubblewrap), with ``network`` and a
    ``writable`` workspace; ``timeout_s`` bounds each tool call, ``startup_timeout_s`` the start.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    sandbox: bool = True
    network: bool | None = None
    writable: bool = True
    timeout_s: float = 120.0
    startup_timeout_s: float = 30.0
    source: str = ""
    unset: tuple[str, ...] = ()
    """Environment variables its ``${VAR}`` references name that are not set (``.mcp.json``): it cannot start."""

    @property
    def transport(self) -> str:
        """``"stdio"`` (a command) or ``"http"`` (a URL)."""
        return "http" if self.url is not None else "stdio"


def same_server(a: McpServerConfig, b: McpServerConfig) -> bool:
    """Whether two configurations (from different files, say) describe the same server."""
    return replace(a, source="") == replace(b, source="")


def _strings(value: Any, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {what} must be a list of strings, got {value!r}")
    return tuple(value)


def _table(value: Any, what: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"{where}: {what} must be a table of strings (NAME = \"value\"), got {value!r}")
    return dict(value)


def _positive(value: Any, what: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{where}: {what} must be a positive number of seconds, got {value!r}")
    return float(value)


def _flag(value: Any, what: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {what} must be true or false, got {value!r}")
    return value


def _options(raw: dict[str, Any], where: str) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for key in ("sandbox", "network", "writable"):
        if key in raw:
            opts[key] = _flag(raw[key], key, where)
    for key in ("timeout_s", "startup_timeout_s"):
        if key in raw:
            opts[key] = _positive(raw[key], key, where)
    if "cwd" in raw:
        if not isinstance(raw["cwd"], str):
            raise ConfigError(f"{where}: cwd must be a directory path, got {raw['cwd']!r}")
        opts["cwd"] = raw["cwd"]
    return opts


def parse_server(name: str, raw: Any, *, source: str) -> McpServerConfig:
    """Validate one server's configuration; :class:`ConfigError` names ``source`` and the server."""
    where = f"{source}: MCP server {name!r}"
    if not _NAME.fullmatch(name) or "__" in name:
        raise ConfigError(f"{where}: the name must be letters, digits, '-' or '_' (no '__': tools are named "
                          "mcp__<server>__<tool>)")
    if len(name) > MAX_NAME:
        raise ConfigError(f"{where}: the name is {len(name)} characters long; use at most {MAX_NAME} (its tools are "
                          "named mcp__<server>__<tool>, and model APIs refuse tool names over 64 characters)")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table with a command (stdio) or a url (HTTP), got {raw!r}")
    unknown = [k for k in raw if k not in _KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(_KEYS)}")
    kind = raw.get("type")
    if kind not in (None, "stdio", "http", "streamable-http", "streamable_http"):
        raise ConfigError(f"{where}: type must be 'stdio' or 'http' (streamable HTTP), got {kind!r}"
                          + ("; SSE servers are not supported, use their streamable HTTP endpoint"
                             if kind == "sse" else ""))
    command, url = raw.get("command"), raw.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"{where} needs exactly one of command = \"program\" (stdio) or url = \"http://...\" "
                          "(streamable HTTP)")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ConfigError(f"{where}: command must be the program to run, got {command!r}")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ConfigError(f"{where}: url must start with http:// or https://, got {url!r}")
    opts = _options(raw, where)
    return McpServerConfig(
        name=name, command=command, url=url, source=source,
        args=_strings(raw["args"], "args", where) if "args" in raw else (),
        env=_table(raw["env"], "env", where) if "env" in raw else {},
        headers=_table(raw["headers"], "headers", where) if "headers" in raw else {}, **opts)


def parse_servers(table: Any, *, source: str, expand: bool = False) -> dict[str, McpServerConfig]:
    """``{name: config}`` from a ``[mcp.servers]`` table or an ``mcpServers`` object (``expand``: with
    ``.mcp.json``'s ``${VAR}`` expansion, :func:`expand_vars`)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: the MCP servers must be a table of named servers, got {table!r}")
    out = {}
    for n, raw in table.items():
        if expand and isinstance(raw, dict):  # .mcp.json, shared with other MCP clients (see _foreign)
            raw = _foreign(str(n), raw, source)
            if raw is None:
                continue
        raw, unset = expand_vars(raw) if expand else (raw, ())
        try:
            cfg = parse_server(str(n), raw, source=source)
        except ConfigError as e:
            if not unset:
                raise
            raise ConfigError(f"{e} (the environment variable {', '.join(unset)} it names as ${{...}} is not "
                              "set)") from None
        out[str(n)] = replace(cfg, unset=unset) if unset else cfg
    return out


def _foreign(name: str, raw: dict[str, Any], source: str) -> dict[str, Any] | None:
    """A ``.mcp.json`` server as this runtime reads it: ``None`` if it is ``"disabled": true`` (other MCP clients'
    switch, honoured), else without the keys other clients use and this runtime does not (``autoApprove``,
    ``transportType``...; a warning names them) — a config file's ``[mcp.servers]`` still refuses unknown keys."""
    off = raw.get("disabled", False)
    if not isinstance(off, bool):
        raise ConfigError(f"{source}: MCP server {name!r}: disabled must be true or false, got {off!r}")
    if off:
        log.info("%s: MCP server %r is disabled (\"disabled\": true): left out", source, name)
        return None
    other = [k for k in raw if k not in _KEYS and k != "disabled"]
    if other:
        log.warning("%s: MCP server %r: ignoring %s (not used by subagents; known keys: %s)", source, name,
                    ", ".join(repr(k) for k in other), ", ".join(_KEYS))
    return {k: v for k, v in raw.items() if k in _KEYS}


def expand_vars(raw: Any, env: Mapping[str, str] | None = None) -> tuple[Any, tuple[str, ...]]:
    """``raw`` with ``${VAR}`` / ``${VAR:-default}`` replaced in ``command``, ``args``, ``env``, ``url`` and
    ``headers`` (Claude Code's expansion in ``.mcp.json``), and the names of the variables that are unset.

    >>> expand_vars({"command": "srv", "env": {"T": "${TOK}", "U": "${NO_SUCH:-x}"}}, {"TOK": "abc"})
    ({'command': 'srv', 'env': {'T': 'abc', 'U': 'x'}}, ())
    >>> expand_vars({"url": "http://h/${NO_SUCH}"}, {})[1]
    ('NO_SUCH',)
    """
    env = os.environ if env is None else env
    if not isinstance(raw, dict):
        return raw, ()
    unset: list[str] = []

    def sub(value: Any) -> Any:
        if isinstance(value, str):
            return _VAR.sub(lambda m: one(m.group(1), m.group(2)), value)
        if isinstance(value, list):
            return [sub(v) for v in value]
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        return value

    def one(name: str, default: str | None) -> str:
        if name in env:
            return env[name]
        if default is None and name not in unset:
            unset.append(name)
        return default or ""

    out = {k: sub(v) if k in ("command", "args", "env", "url", "headers") else v for k, v in raw.items()}
    return out, tuple(unset)


def parse_mcp_section(data: Any, source: str) -> dict[str, McpServerConfig]:
    """The servers of a config file's ``[mcp]`` table (``source``: the file, for the errors)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: [mcp] must be a table, got {data!r}")
    unknown = [k for k in data if k != "servers"]
    if unknown:
        raise ConfigError(f"{source}: unknown key [mcp] {unknown[0]}; [mcp] holds only servers ([mcp.servers.NAME])")
    return parse_servers(data.get("servers", {}), source=source)


def load_mcp_json(path: Path) -> dict[str, McpServerConfig]:
    """The servers of a ``.mcp.json`` file (Claude Code's format); ``{}`` when there is none."""
    if not path.is_file():
        return {}
    twice: dict[str, None] = {}  # (ordered, no repeats)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                twice[k] = None
            out[k] = v
        return out  # the last one wins, as in Claude Code (JSON.parse)

    try:
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=pairs)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ConfigError(f"{path}: cannot be read as JSON ({e}); fix it or remove it") from None
    if twice:
        log.warning("%s: the key %s appears more than once in one object; only the last one is used (remove "
                    "the others)", path, ", ".join(repr(k) for k in twice))
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise ConfigError(f'{path}: expected {{"mcpServers": {{"name": {{"command": ...}}}}}} (Claude Code\'s format)')
    return parse_servers(data.get("mcpServers", {}), source=str(path), expand=True)


def project_servers(workdir: Path, toml_files: Sequence[Path] = (), *,
                    settings_servers: Mapping[str, McpServerConfig] | None = None, mcp_json: bool = True
                    ) -> dict[str, McpServerConfig]:
    """Every configured server of a project: ``.mcp.json`` (unless ``mcp_json`` is false: a project that is not
    trusted, see :mod:`subagents.trust`), then the config files (later ones win).

    ``toml_files``: config files to read ``[mcp]`` from (the user's, then the project's); ``settings_servers``:
    servers already parsed by the settings loader (used instead of reading ``toml_files``).
    """
    import tomllib

    out = load_mcp_json(workdir / ".mcp.json") if mcp_json else {}
    if settings_servers is not None:
        out.update(settings_servers)
        return out
    for path in toml_files:
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"{path}: cannot be read ({e}); fix the syntax of this file") from None
        if "mcp" in data:
            out.update(parse_mcp_section(data["mcp"], str(path)))
    return out


def definition_servers(extra: Mapping[str, Any], *, source: str) -> list[str | McpServerConfig]:
    """An agent definition's ``mcp_servers:`` / ``mcpServers:``: names of configured servers and inline configs.

    Accepted shapes: ``[github, docs]``, ``"github, docs"``, ``[{name: {command: ...}}]`` and
    ``{name: {command: ...}}``.  Raises :class:`DefinitionError` naming the file.
    """
    raw = next((v for k, v in extra.items() if k.replace("-", "").replace("_", "").lower() == "mcpservers"), None)
    if raw is None:
        return []
    if isinstance(raw, str):
        raw = [s.strip() for s in raw.split(",") if s.strip()]
    if isinstance(raw, dict):
        raw = [{k: v} for k, v in raw.items()]
    if not isinstance(raw, list):
        raise DefinitionError(f"{source}: mcp_servers must be a list of server names or {{name: config}} tables, "
                              f"got {raw!r}")
    out: list[str | McpServerConfig] = []
    for item in raw:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and item:
            for name, cfg in item.items():
                try:
                    out.append(parse_server(str(name), cfg, source=source))
                except ConfigError as e:
                    raise DefinitionError(str(e)) from None
        else:
            raise DefinitionError(f"{source}: mcp_servers entry {item!r} is neither a server name nor "
                                  "a {name: {command: ...}} table")
    return out
