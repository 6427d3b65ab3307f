"""Load agent definitions (Markdown + YAML front matter) along the hierarchy.

First match wins, level by level::

    session    Runtime(agents=[...])
    project    <workdir>/.subagents/agents/*.md, then .claude/agents/*.md, then .qwen/agents/*.md
    user       <user config dir>/agents/*.md, then ~/.claude/agents/*.md, then ~/.qwen/agents/*.md
    extension  Python entry points in the group ``subagents.agents``
    built-in   subagents/definitions/builtin/*.md

A file that fails to parse adds a warning naming the file and the problem; the others still load.  So does a
file that is no regular UTF-8 file of at most 1 MB (a FIFO is never opened), and a second file of one
directory defining a name the first already did.  A key that looks like a misspelt known key is ignored with
a warning naming its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import DefinitionError
from . import values
from .entrypoints import entry_points as _entry_points
from .frontmatter import FrontMatterError, load_front_matter
from .model import MODEL_ALIASES, AgentDefinition

__all__ = ["DefinitionSet", "load_definitions", "parse_definition", "parse_definition_file"]

BUILTIN_DIR = Path(__file__).parent / "builtin"

_KEY_ALIASES = {
    "disallowedtools": "disallowed_tools", "disallowed_tools": "disallowed_tools",
    "delegatetools": "delegate_tools", "delegate_tools": "delegate_tools",
    "maxturns": "max_turns", "max_turns": "max_turns",
    "maxtokens": "max_tokens", "max_tokens": "max_tokens",
    "timeout": "timeout_s", "timeout_s": "timeout_s", "timeouts": "timeout_s", "runtimeoutseconds": "timeout_s",
    "maxcostusd": "max_cost_usd", "max_cost_usd": "max_cost_usd",
    "permissionmode": "permission_mode", "permission_mode": "permission_mode",
    "nicknamecandidates": "nickname_candidates", "nickname_candidates": "nickname_candidates",
    "background": "background", "runinbackground": "background", "run_in_background": "background",
    "isolation": "isolation", "tools": "tools", "model": "model", "name": "name", "description": "description",
}

# Claude Code / Qwen tool names -> ours.
_TOOL_ALIASES = {
    "read": "read_file", "write": "write_file", "edit": "edit_file", "multiedit": "edit_file",
    "glob": "glob", "grep": "grep", "bash": "bash", "ls": "list_dir", "todowrite": "todo_write",
    "task": "spawn_agent", "agent": "spawn_agent",
    # Claude Code's agent-team tools (issue 14); TaskCreate/TaskUpdate are its team board's
    "teamcreate": "team_create", "teamdelete": "team_delete", "taskcreate": "task_create", "tasklist": "task_list",
    "taskget": "task_get", "taskupdate": "task_update", "sendmessage": "send_message",
    "webfetch": "web_fetch", "websearch": "web_search",
}

_FRONT = re.compile(r"\A---[ \t]*\r?\n(?:(.*?)\r?\n)??---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.S)
_OPENED = re.compile(r"\A---[ \t]*\r?\n")


@dataclass(slots=True)
class DefinitionSet:
    """Resolved definitions by name, what each shadows, and the warnings of loading."""

    by_name: dict[str, AgentDefinition] = field(default_factory=dict)
    shadowed: dict[str, list[AgentDefinition]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, d: AgentDefinition) -> None:
        if d.name in self.by_name:
            self.shadowed.setdefault(d.name, []).append(d)
        else:
            self.by_name[d.name] = d

    def get(self, name: str) -> AgentDefinition:
        d = self.by_name.get(name)
        if d is None:
            known = ", ".join(sorted(self.by_name)) or "none"
            raise DefinitionError(f"unknown agent type {values.shown(name)}; known types: {known}")
        return d

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def names(self) -> list[str]:
        return sorted(self.by_name)


def _as_list(value: Any, key: str, source: str, *, map_tools: bool) -> list[str]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value if v.strip()]
    else:
        raise DefinitionError(f"{source}: '{key}' must be a list of names or a comma-separated string, "
                              f"got {values.shown(value)}")
    if map_tools:
        items = [_TOOL_ALIASES.get(v.lower(), v) if v[:1].isupper() or v.lower() in _TOOL_ALIASES else v
                 for v in items]
    return list(dict.fromkeys(items))


def _canonical(raw_key: Any) -> str | None:
    return _KEY_ALIASES.get(str(raw_key).replace("-", "_").lower()) or _KEY_ALIASES.get(
        str(raw_key).replace("-", "").replace("_", "").lower())


def parse_definition(meta: dict[str, Any], body: str, *, source: str, default_name: str = "") -> AgentDefinition:
    """Build a definition from front-matter keys (ours, Claude Code's or Qwen's) and a body.

    Each value is checked here (:mod:`subagents.definitions.values`): a definition that loads spawns as written.
    """
    d = AgentDefinition(name=default_name, system_prompt=body.strip(), source=source)
    given: dict[str, str] = {}
    for raw_key, value in meta.items():
        key = _canonical(raw_key)
        if key is None:
            d.extra[str(raw_key)] = value
            continue
        if key in given:
            raise DefinitionError(f"{source}: {values.shown(given[key])} and {values.shown(str(raw_key))} both set "
                                  f"{key}; keep one")
        given[key] = str(raw_key)
        if value is None:
            continue
        _set(d, key, str(raw_key), value, source)
    values.agent_name(d.name, source)
    _check_mcp(d.extra, source)
    return d


def _check_mcp(extra: dict[str, Any], source: str) -> None:
    """The definition's own MCP servers, checked as it is read (a wrong one skips this file, not every run made in
    its project); nothing is started here."""
    for raw_key, value in extra.items():
        if raw_key.replace("-", "").replace("_", "").lower() == "mcpservers":
            from ..mcp.config import definition_servers  # lazy: only for a definition that names MCP servers

            values.small(value, raw_key, source)
            definition_servers({raw_key: value}, source=source)


_MOST = {"max_turns": values.MAX_TURNS, "timeout_s": values.MAX_TIMEOUT_S}
"""The limits with a largest value (the CLI's --max-turns and --timeout have the same)."""


def _set(d: AgentDefinition, key: str, raw_key: str, value: Any, source: str) -> None:
    if key in ("tools", "disallowed_tools", "delegate_tools", "nickname_candidates"):
        names = _as_list(value, raw_key, source, map_tools=key != "nickname_candidates")
        setattr(d, key, values.denials(names, raw_key, source) if key == "disallowed_tools" else names)
    elif key in ("max_turns", "max_tokens"):
        setattr(d, key, values.number(values.yaml_number(value, True), raw_key, source, whole=True,
                                      most=_MOST.get(key)))
    elif key in ("timeout_s", "max_cost_usd"):
        setattr(d, key, float(values.number(values.yaml_number(value, False), raw_key, source, whole=False,
                                            most=_MOST.get(key))))
    elif key == "background":
        if not isinstance(value, bool):
            raise DefinitionError(f"{source}: 'background' must be true or false, got {values.shown(value)}")
        d.background = value
    elif key == "model":
        m = values.model_name(value, raw_key, source)
        d.model = MODEL_ALIASES.get(m.lower(), m) if m.lower() != "inherit" else "inherit"
    elif key == "permission_mode":
        d.permission_mode = values.mode(value, raw_key, source)
    elif key == "isolation":
        d.isolation = values.isolation(value, raw_key, source)
    else:
        setattr(d, key, values.text(value, raw_key, source).strip())


_MAX_TYPOS = 64
"""The most keys of its own a definition has checked for misspellings (each is a fuzzy match against ours)."""


def _unknown_key_warnings(path: Path, d: AgentDefinition, lines: dict[str, int]) -> list[str]:
    """One warning per ignored key that looks like a misspelt known one (other tools' keys stay silent); only the
    first :data:`_MAX_TYPOS` keys are looked at: a file of thousands of foreign keys is no file of typos."""
    out = []
    for raw in list(d.extra)[:_MAX_TYPOS]:
        near = values.suggest(raw, _KEY_ALIASES)
        if near is None:
            continue
        canonical = _KEY_ALIASES[near]
        where = f"line {lines[raw]}: " if raw in lines else ""
        msg = f"{path}: {where}unknown key {values.shown(raw)} (did you mean {canonical!r}?); it is ignored"
        if canonical == "tools" and d.tools is None:
            msg += ", so this agent gets every tool"
        out.append(msg)
    return out


def parse_definition_file(path: Path, *, level: str = "project", warnings: list[str] | None = None
                          ) -> AgentDefinition:
    """Parse one Markdown file with YAML front matter; :class:`DefinitionError` names the file.

    Front matter strict YAML rejects is read leniently (plain ``key: value`` lines, see
    :mod:`subagents.definitions.frontmatter`); then one warning naming the file and its lines is
    appended to ``warnings`` (and logged when ``warnings`` is ``None``).
    """
    text = values.read_text(path)
    m = _FRONT.match(text)
    if m is None:
        if _OPENED.match(text):
            raise DefinitionError(f"{path}: the front matter opened by '---' on line 1 is never closed; "
                                  "end it with a line '---' before the prompt")
        raise DefinitionError(f"{path}: no YAML front matter; start the file with '---', the keys, and '---'")
    if len(m.group(1) or "") > values.MAX_FRONT_MATTER:
        raise DefinitionError(f"{path}: the front matter (between the '---' lines) is over "
                              f"{values.MAX_FRONT_MATTER // 1024} KB; an agent's keys fit in far less (its prompt "
                              "goes below the closing '---')")
    key_lines: dict[str, int] = {}
    try:
        meta, lenient = load_front_matter(m.group(1) or "", first_line=2, lines=key_lines)  # line 1 is the '---'
    except FrontMatterError as e:
        raise DefinitionError(f"{path}: {e}") from None
    source = "builtin" if level == "builtin" else f"{level}:{path}"
    d = parse_definition(meta, m.group(2), source=source, default_name=path.stem)
    notes = _unknown_key_warnings(path, d, key_lines)
    if lenient:
        lines = ", ".join(map(str, lenient))
        many = len(lenient) > 1
        msg = (f"{path}: front matter line{'s' if many else ''} {lines} {'are' if many else 'is'} not valid YAML "
               "(an unquoted ': ' inside a value?) and was read as plain 'key: value' text; quote the value "
               "to silence this warning")
        notes.insert(0, msg)
    for msg in notes:
        if warnings is None:
            _log_warning(msg)
        else:
            warnings.append(msg)
    return d


def _load_dir(out: DefinitionSet, directory: Path, level: str) -> None:
    if not directory.is_dir():
        return
    here: dict[str, Path] = {}  # name -> the file of this directory that defines it
    for path in sorted(directory.glob("*.md")):
        if path.name.startswith("."):  # an editor's lock or swap file (Emacs' .#x.md), a hidden draft: not ours
            continue
        try:
            found: list[str] = []
            d = parse_definition_file(path, level=level, warnings=found)
            first = here.setdefault(d.name, path)
            if first != path:
                found.append(f"{path} also defines agent type {d.name!r}, which {first} defines; {first} takes "
                             "precedence (rename one of them)")
            out.add(d)
            for w in found:
                out.warnings.append(w)
                _log_warning(w)
        except (DefinitionError, OSError, UnicodeDecodeError) as e:
            msg = str(e) if str(path) in str(e) else f"{path}: {e}"
            out.warnings.append(f"skipped agent definition {msg}")
            _log_warning(f"skipped agent definition {msg}")


def _log_warning(message: str) -> None:
    import logging  # lazy: logging costs ~10 ms of import time and is only needed here

    logging.getLogger("subagents.definitions").warning("%s", message)


def _load_extensions(out: DefinitionSet) -> None:
    for ep in _entry_points("subagents.agents"):
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type):
                obj = obj()
            if isinstance(obj, (str, Path)):
                _load_dir(out, Path(obj), f"extension:{ep.name}")
                continue
            items = obj if isinstance(obj, (list, tuple)) else [obj]
            for d in items:
                if not isinstance(d, AgentDefinition):
                    raise DefinitionError(f"entry point {ep.name!r} gave {type(d).__name__}, not an AgentDefinition")
                d.source = f"extension:{ep.name}"
                out.add(_checked(d, d.source))
        except Exception as e:
            out.warnings.append(f"skipped agent extension {ep.name!r} ({ep.value}): {type(e).__name__}: {e}")
            _log_warning(out.warnings[-1])


def _checked(d: AgentDefinition, source: str) -> AgentDefinition:
    """A definition made in Python (``Runtime(agents=[...])``, an extension), checked as a file's values are: a wrong
    one is a :class:`DefinitionError` now, not an error first at spawn (or a silent unisolated run)."""
    values.agent_name(d.name, source)
    d.tools = values.name_list(d.tools, "tools", source, optional=True)
    for key in ("disallowed_tools", "delegate_tools", "nickname_candidates"):
        setattr(d, key, values.name_list(getattr(d, key), key, source))
    values.denials(d.disallowed_tools, "disallowed_tools", source)
    if not isinstance(d.background, bool):
        raise DefinitionError(f"{source}: 'background' must be True or False, got {values.shown(d.background)}")
    if d.permission_mode is not None:
        d.permission_mode = values.mode(d.permission_mode, "permission_mode", source)
    if d.isolation is not None:
        d.isolation = values.isolation(d.isolation, "isolation", source)
    for key in ("max_turns", "max_tokens"):
        if getattr(d, key) is not None:
            values.number(getattr(d, key), key, source, whole=True, most=_MOST.get(key))
    for key in ("timeout_s", "max_cost_usd"):
        if getattr(d, key) is not None:
            values.number(getattr(d, key), key, source, whole=False, most=_MOST.get(key))
    values.model_name(d.model, "model", source)
    return d


def load_definitions(
    workdir: Path,
    *,
    session: Sequence[AgentDefinition] = (),
    user_dir: Path | None = None,
    home: Path | None = None,
    extensions: bool = True,
    trusted: bool | None = None,
) -> DefinitionSet:
    """Every definition visible from ``workdir``, resolved by precedence.

    ``trusted``: whether the project may name models at a ``@<base_url>`` of its choosing (:mod:`subagents.trust`;
    ``None``: when the user listed ``workdir`` as trusted).  In a project that is not trusted, its definitions'
    ``model: <provider>:<model>@<base_url>`` is ignored (the agent inherits its parent's model), named in an
    :class:`~subagents.exceptions.UntrustedProjectWarning`: that server would get the user's API key and the
    agent's transcript.
    """
    from ..config import user_config_dir

    out = DefinitionSet()
    for d in session:
        out.add(_checked(d, f"agent definition {values.shown(d.name)}"))
    for sub in (".subagents", ".claude", ".qwen"):
        _load_dir(out, workdir / sub / "agents", "project")
    _untrusted_models(out, workdir, user_dir or user_config_dir(), trusted)
    _load_dir(out, (user_dir or user_config_dir()) / "agents", "user")
    h = home if home is not None else Path.home()
    for sub in (".claude", ".qwen"):
        _load_dir(out, h / sub / "agents", "user")
    if extensions:
        _load_extensions(out)
    _load_dir(out, BUILTIN_DIR, "builtin")
    return out


def _untrusted_models(out: DefinitionSet, workdir: Path, config_dir: Path, trusted: bool | None) -> None:
    import warnings

    from ..exceptions import ConfigError, UntrustedProjectWarning
    from ..trust import is_trusted, untrusted_note

    found = [d for d in [*out.by_name.values(), *(d for ds in out.shadowed.values() for d in ds)]
             if d.source.startswith("project:") and "@" in d.model]
    if not found:
        return
    if trusted is None:
        try:
            trusted = is_trusted(workdir, config_dir)
        except ConfigError:  # a trust file that cannot be read trusts nothing (the settings loader says why)
            trusted = False
    if not trusted:
        ignored = {f"model {d.model!r} of agent type {d.name!r}": d.source.partition(":")[2] for d in found}
        for d in found:
            d.model = "inherit"
        warnings.warn(UntrustedProjectWarning(untrusted_note(workdir.resolve(), ignored)), stacklevel=3)


def iter_all(defs: DefinitionSet) -> Iterable[tuple[AgentDefinition, list[AgentDefinition]]]:
    for name in defs.names():
        yield defs.by_name[name], defs.shadowed.get(name, [])
