"""Permission rules: ``Tool`` or ``Tool(specifier)``, as in Claude Code's settings.

- ``bash`` — every call of the tool; ``mcp__github__*`` — every tool whose name matches the glob;
- ``bash(git status*)`` — the command matches the glob (``*`` spans anything; Claude Code's
  ``npm run test:*`` prefix form is accepted); a compound command (``a && b``, ``a; b``, ``a | b``)
  matches an *allow* rule only if every part does, and never when it holds ``$(...)``, backticks,
  process substitution, a redirection or a newline; it matches a *deny* or *ask* rule if any part does;
- ``write_file(docs/**)``, ``read_file(.env)`` — the path, relative to the workspace, matches the
  glob (``**`` spans directories; a pattern without ``/`` also matches the file name at any depth;
  a matching directory covers everything under it);
- ``spawn_agent(explore)`` — the agent type; other tools: any string argument.

Claude Code's tool names work too (``Bash``, ``Read``, ``Write``, ``Edit``, ``Glob``, ``Grep``, ``LS``,
``Task``).  Rules for ``bash`` are a convenience, not a boundary: the sandbox is the boundary.

>>> r = parse_rule("bash(git status*)")
>>> r.matches("bash", {"command": "git status --short"}, allow=True)
True
>>> r.matches("bash", {"command": "git status; rm -rf ~"}, allow=True)
False
>>> parse_rule("Write(docs/**)").matches("write_file", {"path": "docs/a/b.md"}, allow=True)
True
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TOOL_ALIASES", "Rule", "command_segments", "escape", "parse_rule", "parse_rules"]

TOOL_ALIASES = {
    "bash": "bash", "read": "read_file", "write": "write_file", "edit": "edit_file", "multiedit": "edit_file",
    "glob": "glob", "grep": "grep", "ls": "list_dir", "task": "spawn_agent", "agent": "spawn_agent",
    "todowrite": "todo_write", "webfetch": "web_fetch", "websearch": "web_search",
}
"""Claude Code / Qwen tool names (lower-cased) -> ours."""

_PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"})
_SUBJECT = {"bash": "command", "spawn_agent": "agent_type"}
_OMITTED = {"spawn_agent": "general-purpose"}  # the subject of a call that leaves it out (the tool's default)
_RULE = re.compile(r"\A\s*([A-Za-z0-9_.*?\-]+)\s*(?:\((.*)\))?\s*\Z", re.S)
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;"})
_UNSAFE = re.compile(r"\$\(|`|<\(|>\(|\n|\r")


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule; ``source`` says where it came from (a file, ``argument``, ``approval``...)."""

    text: str
    tool: str
    specifier: str | None = None
    source: str = ""
    _tool_rx: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    _spec_rx: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    _any_depth: bool = field(default=False, compare=False, repr=False)

    def matches_tool(self, name: str) -> bool:
        if self._tool_rx is None:
            return name == self.tool
        return self._tool_rx.fullmatch(name) is not None

    def matches(self, tool: str, arguments: dict[str, Any], *, allow: bool, root: str | None = None) -> bool:
        """Whether this rule covers the call.  ``allow``: match as an allow rule (strict for compound commands)."""
        if not self.matches_tool(tool):
            return False
        if self._spec_rx is None:
            return True
        rx = self._spec_rx
        if tool == "web_fetch" and self.specifier is not None and self.specifier.startswith("domain:"):
            return _domain_matches(self.specifier[len("domain:"):], str(arguments.get("url", "")))
        if tool == "bash":
            return _command_matches(rx, str(arguments.get("command", "")), allow=allow)
        if tool in _PATH_TOOLS:
            return _path_matches(rx, str(arguments.get("path", ".")), root, any_depth=self._any_depth)
        key = _SUBJECT.get(tool)
        if key is not None:
            return rx.fullmatch(str(arguments.get(key, _OMITTED.get(tool, "")))) is not None
        return any(isinstance(v, str) and rx.fullmatch(v) for v in arguments.values())

    def __str__(self) -> str:
        return self.text


def _domain_matches(pattern: str, url: str) -> bool:
    """Claude Code's ``WebFetch(domain:example.com)``: the URL's host is that domain (``*.example.com``: a
    subdomain of it); the rest of the URL never counts (``https://evil.com/?example.com`` does not match)."""
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url.strip()).hostname or "").lower().rstrip(".")
    except ValueError:
        return False
    pattern = pattern.strip().lower().rstrip(".")
    if not host or not pattern:
        return False
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def parse_rule(text: str, source: str = "") -> Rule:
    """Parse ``Tool`` or ``Tool(specifier)``; ``ValueError`` with a sentence saying what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"a permission rule must be a string such as 'bash(git status*)', got {text!r}")
    m = _RULE.match(text)
    if m is None:
        raise ValueError(f"invalid permission rule {text!r}: write a tool name, optionally with a specifier in "
                         "parentheses, e.g. 'bash', 'bash(git status*)', 'write_file(docs/**)'")
    name, spec = m.group(1), m.group(2)
    tool = TOOL_ALIASES.get(name.lower(), name)
    tool_rx = re.compile(fnmatch.translate(tool)) if any(c in tool for c in "*?") else None
    spec_rx = None
    if spec is not None:
        spec = spec.strip()
        if not spec:
            raise ValueError(f"invalid permission rule {text!r}: the parentheses are empty; "
                             f"write {name!r} alone to cover every call")
        if spec.endswith(":*"):  # Claude Code's prefix form: "npm run test:*"
            spec = spec[:-2] + "*"
        spec_rx = _glob(spec.removeprefix("./"), path=tool in _PATH_TOOLS)
    any_depth = spec is not None and "/" not in spec.strip("/")
    return Rule(text.strip(), tool, spec, source, tool_rx, spec_rx, any_depth)


def escape(text: str) -> str:
    """``text`` as a literal specifier (``*``, ``?``, ``\\`` and parentheses escaped)."""
    return re.sub(r"([*?\\()])", r"\\\1", text)


def parse_rules(texts: list[str] | tuple[str, ...], source: str = "") -> tuple[Rule, ...]:
    return tuple(parse_rule(t, source) for t in texts)


def _glob(pattern: str, *, path: bool) -> re.Pattern[str]:
    """A glob as a regex: for paths ``*``/``?`` stay in one directory and ``**`` spans them; else ``*`` spans all."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:  # a backslash makes the next character literal
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if path and pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*" if path else ".*")
        elif c == "?":
            out.append("[^/]" if path else ".")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.S)


def _path_matches(rx: re.Pattern[str], raw: str, root: str | None, *, any_depth: bool) -> bool:
    """``raw`` (relative to ``root``) or one of its directories matches; with ``any_depth``, any one component."""
    p = os.path.normpath(raw if os.path.isabs(raw) or root is None else os.path.join(root, raw))
    if root is not None:
        rel = os.path.relpath(p, root)
        p = p if rel == ".." or rel.startswith("../") else rel
    parts = p.split("/")
    candidates = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]  # a matching directory covers its files
    if any_depth:
        candidates += parts
    return any(rx.fullmatch(c) for c in candidates if c)


def command_segments(command: str) -> list[str] | None:
    """The simple commands of a compound command, or ``None`` when it cannot be split safely."""
    if _UNSAFE.search(command):
        return None
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
        lex.whitespace_split = True
        tokens = list(lex)
    except ValueError:
        return None
    segments: list[list[str]] = [[]]
    for tok in tokens:
        if tok in _SEPARATORS:
            segments.append([])
        elif set(tok) <= set(";&|<>"):
            return None  # a redirection or an operator we do not split on
        else:
            segments[-1].append(tok)
    return [" ".join(s) for s in segments if s]


def _variants(segment: str) -> list[str]:
    """A simple command, also without leading ``VAR=value`` words and with the program's base name."""
    words = segment.split(" ")
    while words and re.match(r"\A[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    out = [segment]
    if words:
        out.append(" ".join(words))
        if "/" in words[0]:
            out.append(" ".join([words[0].rsplit("/", 1)[1], *words[1:]]))
    return out


def _command_matches(rx: re.Pattern[str], command: str, *, allow: bool) -> bool:
    segments = command_segments(command)
    if allow:
        return bool(segments) and all(rx.fullmatch(s) for s in segments or ())
    if rx.fullmatch(command.strip()):
        return True
    parts = segments if segments is not None else re.split(r"[;&|\n]+|\$\(|`", command)
    return any(rx.fullmatch(v.strip()) for s in parts for v in _variants(s.strip()) if v.strip())
