"""Permission rules: ``Tool`` or ``Tool(specifier)``, as in Claude Code's settings.

- ``bash`` — every call of the tool; ``mcp__github__*`` — every tool whose name matches the glob;
- ``bash(git status*)`` — the command matches the glob (``*`` spans anything; Claude Code's
  ``npm run test:*`` prefix form is accepted); a compound command (``a && b``, ``a; b``, ``a | b``)
  matches an *allow* rule only if every part does, and never when it holds ``$(...)``, backticks,
  process substitution, ``${...}``, ``$[...]``, ``$'...'``, a redirection or a newline; it matches a
  *deny* or *ask* rule if any part does, also behind wrappers (``env``, ``sudo``, ``eval``, ``sh -c``...);
- ``write_file(docs/**)``, ``read_file(.env)`` — the path, relative to the workspace, matches the
  glob (``**`` spans directories; a pattern without ``/`` also matches the file name at any depth;
  a matching directory covers everything under it; symlinks are followed);
- ``spawn_agent(explore)`` — the agent type; ``web_fetch(https://docs.python.org/*)`` — the URL;
  ``web_search(...)`` — the query; other tools: a string argument (for an *allow* rule, every one).

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

from ..exceptions import ToolError
from ..tools.regexes import compile_glob_regex

__all__ = ["TOOL_ALIASES", "Rule", "command_segments", "escape", "parse_rule", "parse_rules"]

TOOL_ALIASES = {
    "bash": "bash", "read": "read_file", "write": "write_file", "edit": "edit_file", "multiedit": "edit_file",
    "glob": "glob", "grep": "grep", "ls": "list_dir", "task": "spawn_agent", "agent": "spawn_agent",
    "todowrite": "todo_write", "webfetch": "web_fetch", "websearch": "web_search",
}
"""Claude Code / Qwen tool names (lower-cased) -> ours."""

_PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"})
_SUBJECT = {"bash": "command", "spawn_agent": "agent_type", "web_fetch": "url", "web_search": "query"}
_OMITTED = {"spawn_agent": "general-purpose"}  # the subject of a call that leaves it out (the tool's default)
_RULE = re.compile(r"\A\s*([A-Za-z0-9_.*?\-]+)\s*(?:\((.*)\))?\s*\Z", re.S)
_PATH_MAX, _NAME_MAX = 4096, 255
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;"})
_UNSAFE = re.compile(r"\$[({\[']|`|<\(|>\(|\n|\r")
_IFS = re.compile(r"\$\{IFS\}|\$IFS\b")
_ROUGH = re.compile(r"[;&|\n\r(){}]+|\$\(|`")
_ASSIGNMENT = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\+?=")
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
                       "coproc"})
_WRAPPERS = frozenset({"command", "builtin", "exec", "nohup", "env", "sudo", "doas", "nice", "ionice", "xargs",
                       "timeout", "stdbuf", "setsid", "unbuffer", "chronic", "watch", "flock", "eval"})
_WRAPPED_WITHIN = 12
_UNWRAP_BUDGET = 32
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule; ``source`` says where it came from (a file, ``argument``, ``approval``...)."""

    text: str
    tool: str
    specifier: str | None = None
    source: str = ""
    _tool_rx: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    _spec_rx: _PathGlob | _Glob | None = field(default=None, compare=False, repr=False)
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
        if tool == "bash" and isinstance(rx, _Glob):
            return _command_matches(rx, str(arguments.get("command", "")), allow=allow)
        if isinstance(rx, _PathGlob):  # path tools
            return _path_matches(rx, str(arguments.get("path", ".")), root, any_depth=self._any_depth, allow=allow)
        key = _SUBJECT.get(tool)
        if key is not None:
            return bool(rx.fullmatch(str(arguments.get(key, _OMITTED.get(tool, "")))))
        texts = [v for v in arguments.values() if isinstance(v, str)]
        if allow:  # the model picks the arguments: one matching string must not carry the others through
            return bool(texts) and all(rx.fullmatch(v) for v in texts)
        return any(rx.fullmatch(v) for v in texts)

    def __str__(self) -> str:
        return self.text


def _domain_matches(pattern: str, url: str) -> bool:
    """Claude Code's ``WebFetch(domain:example.com)``: the URL's host is that domain (``*.example.com``: a
    subdomain of it); the rest of the URL never counts (``https://evil.com/?example.com`` does not match).  Both
    are compared in their ASCII (IDNA) form, the host as the HTTP client connects to it: ``münchen.de`` and
    ``xn--mnchen-3ya.de`` are one host, whichever spelling the rule or the model uses."""
    host = _connect_host(url.strip())
    pattern = pattern.strip().lower().rstrip(".")
    wild = pattern.startswith("*.")
    pattern = _ascii_host(pattern[2:] if wild else pattern)
    if not host or not pattern:
        return False
    if wild:
        return host.endswith("." + pattern)
    return host == pattern


def _connect_host(url: str) -> str:
    """The host ``web_fetch`` (httpx) connects to for ``url``, in ASCII, lower case, no trailing dot; ``""`` when
    there is none (a URL it cannot fetch)."""
    try:
        import httpx
    except ImportError:  # (web_fetch needs httpx: without it nothing is fetched)
        from urllib.parse import urlsplit

        try:
            return _ascii_host((urlsplit(url).hostname or "").lower().rstrip("."))
        except ValueError:
            return ""
    try:
        return httpx.URL(url).raw_host.decode("ascii", "replace").lower().rstrip(".")
    except (httpx.InvalidURL, ValueError, TypeError):
        return ""


def _ascii_host(host: str) -> str:
    """``host`` in its IDNA (punycode) form; ``""`` when it has none (no host can match it)."""
    if host.isascii():
        return host
    try:
        import idna

        return str(idna.encode(host, uts46=True).decode("ascii"))
    except ImportError:  # (idna comes with httpx)
        return ""
    except (idna.IDNAError, UnicodeError, ValueError):
        return ""


def parse_rule(text: str, source: str = "") -> Rule:
    """Parse ``Tool`` or ``Tool(specifier)``; ``ValueError`` with a sentence saying what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"a permission rule must be a string such as 'bash(git status*)', got {text!r}")
    m = _RULE.match(text) if "\x00" not in text else None
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
        path = tool in _PATH_TOOLS
        spec_rx = _PathGlob(spec.removeprefix("./")) if path else _Glob(spec)  # "./x.sh" is not "x.sh" on PATH
    any_depth = spec is not None and "/" not in spec.strip("/")
    return Rule(text.strip(), tool, spec, source, tool_rx, spec_rx, any_depth)


def escape(text: str) -> str:
    """``text`` as a literal specifier (``*``, ``?``, ``\\`` and parentheses escaped)."""
    return re.sub(r"([*?\\()])", r"\\\1", text)


def parse_rules(texts: list[str] | tuple[str, ...], source: str = "") -> tuple[Rule, ...]:
    return tuple(parse_rule(t, source) for t in texts)


class _Glob:
    """A glob whose ``*`` spans anything (commands, agent types), matched without backtracking: a regex of
    several ``.*`` takes polynomial time, and a model's long command would stall every agent."""

    __slots__ = ("literal", "pieces")

    def __init__(self, pattern: str) -> None:
        pieces: list[list[str]] = [[]]  # the regexes of the text between stars (``?``: any one character)
        text: list[str] | None = []  # the text itself while the pattern has no wildcard
        i, n = 0, len(pattern)
        while i < n:
            c = pattern[i]
            if c == "\\" and i + 1 < n:  # a backslash makes the next character literal
                pieces[-1].append(re.escape(pattern[i + 1]))
                if text is not None:
                    text.append(pattern[i + 1])
                i += 1
            elif c == "*":
                text = None
                if pieces[-1] or len(pieces) == 1:
                    pieces.append([])
            else:
                pieces[-1].append("." if c == "?" else re.escape(c))
                if c == "?":
                    text = None
                elif text is not None:
                    text.append(c)
            i += 1
        self.pieces = [(re.compile("".join(p), re.S), len(p)) for p in pieces]
        self.literal = None if text is None else "".join(text)  # an exact command ("allow always" makes one)

    def fullmatch(self, text: str) -> bool:
        (first, n0), *middle = self.pieces
        if not middle:
            return first.fullmatch(text) is not None
        *middle, (last, n1) = middle
        end = len(text) - n1
        if end < n0 or first.match(text) is None or last.fullmatch(text, end) is None:
            return False
        pos = n0
        for rx, size in middle:  # the leftmost place for each piece leaves the most room for the rest
            m = rx.search(text, pos, end)
            if m is None:
                return False
            pos = m.start() + size
        return True


class _PathGlob:
    """A path glob (``*``/``?`` stay in one directory, ``**`` spans them) that also covers what is under a matching
    directory, compiled with RE2: Python's ``re`` backtracked on it — a deny rule ``read_file(*a*a*a*a*b)`` took
    60 s on a model's 255-character file name, holding the event loop."""

    __slots__ = ("rx",)

    def __init__(self, pattern: str) -> None:
        out: list[str] = []
        i, n = 0, len(pattern)
        while i < n:
            c = pattern[i]
            if c == "\\" and i + 1 < n:  # a backslash makes the next character literal
                out.append(re.escape(pattern[i + 1]))
                i += 2
                continue
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            else:
                out.append(re.escape(c))
            i += 1
        try:
            self.rx = compile_glob_regex("(?s)" + "".join(out))
        except ToolError as e:
            raise ValueError(f"the path pattern {pattern!r} cannot be used: {e}") from None

    def fullmatch(self, text: str) -> bool:
        """``text`` or one of its directories (a non-empty prefix ending before a ``/``) matches the glob."""
        rx = self.rx
        if text and rx.fullmatch(text) is not None:
            return True
        i = text.find("/", 1)
        while i != -1:
            if rx.fullmatch(text, 0, i) is not None:
                return True
            i = text.find("/", i + 1)
        return False


def _path_matches(rx: _PathGlob, raw: str, root: str | None, *, any_depth: bool, allow: bool) -> bool:
    """``raw`` (relative to ``root``) or one of its directories matches; with ``any_depth``, any one component.

    With a ``root``, the path is also resolved (symlinks followed): a deny or ask rule matches if the
    path as written *or* the file it reaches matches (``cfg/link -> ../.env`` is ``.env``); an allow
    rule only if both do (``docs/link -> ../src`` is not under ``docs/``).  A path longer than the
    system opens (``PATH_MAX``, ``NAME_MAX``) is never allowed by a rule and always matches a deny or
    ask rule: matching it would cost time for a call that cannot succeed."""
    p = os.path.normpath(raw if os.path.isabs(raw) or root is None else os.path.join(root, raw))
    if len(p) > _PATH_MAX or any(len(part) > _NAME_MAX for part in p.split("/")):
        return not allow
    written = _path_hit(rx, p, root, any_depth)
    if root is None:
        return written
    try:  # the file tools resolve the path as normalized, beneath the root: so does this
        real = _path_hit(rx, os.path.realpath(p), os.path.realpath(root), any_depth)
    except (OSError, ValueError):  # a path the OS refuses (a NUL byte, a symlink loop): no resolved match
        real = False
    return (written and real) if allow else (written or real)


def _path_hit(rx: _PathGlob, p: str, root: str | None, any_depth: bool) -> bool:
    if root is not None:
        rel = os.path.relpath(p, root)
        p = p if rel == ".." or rel.startswith("../") else rel
    if rx.fullmatch(p):  # the path, or one of its directories
        return True
    return any_depth and any(rx.rx.fullmatch(part) is not None for part in p.split("/") if part)


def command_segments(command: str) -> list[str] | None:
    """The simple commands of a compound command, or ``None`` when it cannot be split safely."""
    parts = _split(command)
    return None if parts is None else [" ".join(s) for s in parts]


def _split(command: str) -> list[list[str]] | None:
    """The words of each simple command, or ``None`` when the shell could read more into it than shlex does
    (substitutions, ``${...}`` and ``$[...]`` expansions, which can run commands (``${x@P}``), ``$'...'``
    quoting, which shlex reads differently, redirections, newlines)."""
    if _UNSAFE.search(command):
        return None
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
        lex.whitespace_split = True
        lex.commenters = ""  # shlex starts a comment at a '#' inside a word ('a#;rm'); bash does not
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
    return [s for s in segments if s]


def _command_matches(rx: _Glob, command: str, *, allow: bool) -> bool:
    if allow and rx.literal is not None and command == rx.literal:  # the exact command (the person approved it as
        return True                                                 # it is: "allow always" on a compound one)
    if allow:
        segments = command_segments(command)
        return bool(segments) and all(rx.fullmatch(s) for s in segments or ())
    return _denied(rx, command, [_UNWRAP_BUDGET])


def _denied(rx: _Glob, command: str, budget: list[int]) -> bool:
    """Whether any part of ``command`` matches a deny or ask rule, looking through ``${IFS}``, grouping,
    shell keywords, wrappers (``env``, ``sudo``, ``xargs``, ``timeout``...), ``eval`` and ``sh -c``.

    ``budget``: how many more commands (``eval``'s, ``sh -c``'s) may be read; a command with more is
    taken to match, so that padding cannot hide the part that does."""
    budget[0] -= 1
    if budget[0] < 0:
        return True
    command = _IFS.sub(" ", command)
    if rx.fullmatch(command.strip()):
        return True
    parts = _split(command)
    if parts is None:
        parts = [p.split() for p in _ROUGH.split(command)]
    return any(_words_denied(rx, words, budget) for words in parts if words)


def _words_denied(rx: _Glob, words: list[str], budget: list[int]) -> bool:
    words = list(words)  # "(rm -rf /)": a subshell's parentheses stick to its first and last words
    words[0] = words[0].lstrip("(")
    words[-1] = words[-1].rstrip(")")
    words = [w for w in words if w]
    i = 0
    while i < len(words) and (words[i] in _KEYWORDS or _ASSIGNMENT.match(words[i])):
        i += 1
    starts = {0, i}
    if i < len(words) and os.path.basename(words[i]) in _WRAPPERS:
        # the wrapped command starts after the wrapper's options: a few words on (a bound keeps it linear)
        starts.update(range(i, min(len(words), i + _WRAPPED_WITHIN)))
    for s in sorted(starts):
        rest = words[s:]
        if not rest:
            continue
        program = os.path.basename(rest[0])
        if rx.fullmatch(" ".join(rest)) or rx.fullmatch(" ".join([program, *rest[1:]])):
            return True
        if program == "eval" and _denied(rx, " ".join(rest[1:]), budget):
            return True
        if program in _SHELLS:
            inner = (rest[k + 1] for k in range(1, len(rest) - 1) if re.fullmatch(r"-[a-z]*c[a-z]*", rest[k]))
            if any(_denied(rx, c, budget) for c in inner):
                return True
    return False
