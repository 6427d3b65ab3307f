"""The ``skill`` tool: Agent Skills folders an agent loads when a task matches them (seed 004).

A skill is a folder holding a ``SKILL.md`` whose YAML front matter has a ``name`` and a
``description`` (the Agent Skills format of Claude Code), followed by the instructions; the folder
may hold more files (references, scripts, templates).  Skills are found, first match by name wins, in

1. the project: ``.subagents/skills/<skill>/SKILL.md``, ``.claude/skills/<skill>/SKILL.md``;
2. the user: ``~/.config/subagents/skills/`` (``$XDG_CONFIG_HOME``), ``~/.claude/skills/``.

The skills' names and descriptions are listed in the tool's *description*, not in the system
prompt: only the agents that may load skills see the list (``plan`` and ``verify`` deny the tool),
and the tool list is fixed for a :class:`~subagents.Runtime`, so it stays in the prompt-cache prefix
that parents and children share.  ``skill(name)`` returns the body of ``SKILL.md``, the skill's
folder and its other files; ``skill(name, file=...)`` reads one of those files (confined to the
folder, so a user-level skill's references are readable although they lie outside the workspace).
Each call looks at the folders again: a skill added while the runtime runs can be loaded by name.

A project's skills come with the project, so they are read as untrusted: ``SKILL.md`` only if it is a regular
file, its first 256 kB, a front matter of at most 8 kB whose ``name`` and ``description`` are text (a YAML list
of aliases is never expanded); 128 entries per skills folder; a listing of at most 16,000 characters; and a
project skill's files the workspace hides (the run store, ``[sandbox] deny_read``) stay unreadable, even
through a skill folder linked to the project's root.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._threads import call_in_thread
from ..exceptions import ToolError
from .base import ToolCategory, ToolContext, truncate_output

__all__ = ["SKILL_FILE", "Skill", "SkillTool", "find_skills", "skill_dirs"]

SKILL_FILE = "SKILL.md"
PROJECT_DIRS = (".subagents/skills", ".claude/skills")
MAX_DESCRIPTION = 1024
"""The Agent Skills format's cap on a description; longer ones are cut in the listing."""
MAX_LISTED_FILES = 50
MAX_FILE_BYTES = 256 * 1024
"""``skill(name, file=...)`` reads this much of a file at most (its result is cut at 50,000 characters anyway);
a ``SKILL.md`` is read this far too."""
MAX_FRONT_MATTER = 8 * 1024
"""A longer front matter block is refused (it is parsed with PyYAML, in pure Python, on every call)."""
MAX_BRACKETS = 256
"""More ``[`` and ``{`` in a front matter are refused: 3,000 nested ``[`` took PyYAML 3 s (per skill, per call)."""
MAX_ENTRIES = 128
"""Entries of one skills folder looked at (a cloned project's folder of thousands is not read whole each call)."""
MAX_LISTING = 16_000
"""Characters of the skills listing in the tool's description (it is in every request of every agent)."""
MAX_WALK = 2000
"""Entries of a skill's folder visited to list its files."""
_log = logging.getLogger("subagents.skills")
_KEY = re.compile(r"\A(name|description)[ \t]*:[ \t]*(.*)\Z")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
Hidden = Callable[[str], bool]
"""Whether a resolved path is hidden from agents (:meth:`~subagents.sandbox.workspace.Workspace.is_hidden`)."""


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name and description (front matter) and the folder holding its ``SKILL.md``."""

    name: str
    description: str
    folder: Path
    level: str  # "project" or "user"


def _user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "subagents"


def skill_dirs(workdir: Path, *, home: Path | None = None, user_dir: Path | None = None) -> list[tuple[Path, str]]:
    """The folders skills are looked for in, in precedence order, with their level."""
    h = home if home is not None else Path.home()
    return [*((workdir / d, "project") for d in PROJECT_DIRS),
            ((user_dir or _user_config_dir()) / "skills", "user"), (h / ".claude" / "skills", "user")]


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a ``SKILL.md``; raises ``ValueError`` saying what is wrong."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError("it does not start with a '---' front matter block (name: and description: lines)")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ValueError("its front matter has no closing '---' line")
    block, body = "\n".join(lines[1:end]), "\n".join(lines[end + 1:]).strip()
    if len(block) > MAX_FRONT_MATTER:
        raise ValueError(f"its front matter is {len(block):,} characters long, over the limit of {MAX_FRONT_MATTER:,}")
    if block.count("[") + block.count("{") > MAX_BRACKETS:  # PyYAML's scanner is quadratic in flow nesting
        raise ValueError(f"its front matter has more than {MAX_BRACKETS} '[' and '{{' (YAML flow collections)")
    import yaml

    from ..definitions.frontmatter import safe_load

    try:
        meta = safe_load(block)
    except yaml.YAMLError:  # e.g. an unquoted ': ' in the description: read the two keys line by line
        meta = {m.group(1): m.group(2).strip() for m in map(_KEY.match, block.splitlines()) if m}
    except RecursionError:  # nested too deep for PyYAML, which recurses per level
        raise ValueError("its front matter is nested too deeply") from None
    except Exception as e:  # a value PyYAML's constructors reject (a timestamp of month 13...)
        raise ValueError(f"its front matter could not be read ({type(e).__name__}: {e})") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValueError("its front matter is not a mapping of keys to values")
    return meta, body


def _one_line(text: str) -> str:
    """``text`` on one line: control characters (an ANSI escape...) and runs of white space become one space."""
    return " ".join(_CONTROL.sub(" ", text).split())


def _shown(path: Path | str) -> str:
    """A path for a log line: control characters written out (``\\x1b``), so a folder's name cannot drive the
    terminal the warning is printed on."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(path))


def _text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if isinstance(value, (dict, list, set, tuple)):  # never str() it: YAML aliases nest a list 9**9 items wide
        raise ValueError(f"its {key}: is a YAML {type(value).__name__}, not text")
    return "" if value is None else _one_line(str(value))


def _open_regular(path: Path | str) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file (a FIFO or device is never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):  # missing, a loop, no permission, a NUL byte
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _parse(folder: Path, level: str) -> tuple[Skill, str]:
    fd = _open_regular(folder / SKILL_FILE)
    if fd is None:
        raise ValueError("it is not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_FILE_BYTES)  # a SKILL.md of gigabytes is not read whole
    meta, body = _front_matter(data.decode("utf-8", errors="replace"))
    name = _text(meta, "name") or _one_line(folder.name)
    description = _text(meta, "description")
    if not description:
        raise ValueError("its front matter has no description: (say what the skill does and when to use it)")
    return Skill(name, description, folder, level), body


def _scan(workdir: Path, home: Path | None, user_dir: Path | None, problems: list[str] | None
          ) -> Iterator[tuple[Skill, str]]:
    for base, level in skill_dirs(workdir, home=home, user_dir=user_dir):
        try:
            names = sorted(os.listdir(base))
        except (OSError, ValueError):  # no such folder (the common case), or unreadable
            continue
        if len(names) > MAX_ENTRIES and problems is not None:
            problems.append(f"{_shown(base)} holds {len(names):,} entries; only the first {MAX_ENTRIES} (by name) "
                            "were looked at for skills")
        for name in names[:MAX_ENTRIES]:
            folder = base / name
            if not (folder / SKILL_FILE).is_file():
                continue
            try:
                yield _parse(folder, level)
            except (OSError, ValueError) as e:
                if problems is not None:
                    problems.append(f"skipped skill {_shown(folder / SKILL_FILE)}: {_shown(str(e))}")


def find_skills(workdir: Path, *, home: Path | None = None, user_dir: Path | None = None,
                problems: list[str] | None = None) -> dict[str, Skill]:
    """Every skill visible from ``workdir`` by name (the first found wins); bad files go to ``problems``."""
    out: dict[str, Skill] = {}
    for s, _ in _scan(workdir, home, user_dir, problems):
        out.setdefault(s.name, s)
    return out


def _where(folder: Path, root: Path) -> str:
    try:
        return str(folder.resolve().relative_to(root))
    except ValueError:
        return str(folder)


def _files(folder: Path, hidden: Hidden | None = None) -> list[str]:
    """The files of ``folder`` (dot-files and ``hidden`` ones left out), depth first by name, at most
    ``MAX_LISTED_FILES + 1``; at most :data:`MAX_WALK` entries are visited, iteratively (no recursion limit)."""
    out: list[str] = []
    stack, seen = [""], 0
    while stack:
        sub = stack.pop()
        try:
            with os.scandir(folder / sub if sub else folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (OSError, ValueError):
            continue
        subdirs: list[str] = []
        for e in entries:
            seen += 1
            if seen > MAX_WALK or len(out) > MAX_LISTED_FILES:
                return out
            rel = f"{sub}{e.name}"
            if e.name.startswith(".") or (hidden is not None and hidden(os.path.realpath(e.path))):
                continue
            try:
                is_dir = e.is_dir()
            except OSError:
                continue
            if is_dir:
                if not e.is_symlink():  # a linked folder is neither listed nor entered
                    subdirs.append(rel + "/")
            elif rel != SKILL_FILE:
                out.append(rel)
        stack.extend(reversed(subdirs))
    return out


class SkillTool:
    """The ``skill`` tool (see the module docstring); ``workdir`` lists that project's skills in the description."""

    __slots__ = ("description", "home", "user_dir")
    name = "skill"
    category = ToolCategory.READ
    parameters: dict[str, Any] = {  # noqa: RUF012 - read-only, shared by every instance
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the skill's name, as listed in this tool's description"},
            "file": {"type": "string",
                     "description": "optional: another file of the skill's folder to read (a path inside it)"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }

    def __init__(self, workdir: str | os.PathLike[str] | None = None, *, home: Path | None = None,
                 user_dir: Path | None = None) -> None:
        self.home, self.user_dir = home, user_dir
        problems: list[str] = []
        found = find_skills(Path(workdir), home=home, user_dir=user_dir, problems=problems) if workdir else {}
        for p in problems:
            _log.warning("%s", p)
        head = ("Load a skill: a folder of instructions (with references or scripts) for one kind of task. When "
                "the task at hand matches a skill's description, call skill(name) before you start and follow "
                "its instructions; skill(name, file=...) reads another file of its folder.")
        if not found:
            self.description = (head + " No skills are installed here (they live in .subagents/skills/, "
                                ".claude/skills/ or ~/.claude/skills/), but one may be loaded by name.")
            return
        lines: list[str] = []
        used = 0
        for s in found.values():
            line = f"- {s.name}: {s.description[:MAX_DESCRIPTION]}"
            if used + len(line) > MAX_LISTING:
                lines.append(f"[... {len(found) - len(lines):,} more skills are installed but not listed: too many]")
                break
            lines.append(line)
            used += len(line) + 1
        listed = "\n".join(lines)
        self.description = f"{head}\n\nAvailable skills:\n{listed}"

    @property
    def parallel_safe(self) -> bool:
        """Loading a skill only reads files."""
        return True

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        """Return the named skill's instructions (or one of its files)."""
        ws = ctx.workspace
        return await call_in_thread(self._load, ws.root, str(arguments["name"]), arguments.get("file"), ws.is_hidden)

    def _load(self, root: Path, name: str, file: str | None, hidden: Hidden | None = None) -> str:
        """The skill ``name`` (or its ``file``); ``hidden``: what a *project* skill may not read (a project's skill
        folder linked to its root must not reach the run store or ``deny_read`` files the file tools refuse)."""
        wanted = _one_line(name)
        hit: tuple[Skill, str] | None = None
        names: set[str] = set()
        for s, body in _scan(root, self.home, self.user_dir, None):
            if s.name == wanted:  # the first found wins, as in the listing; the rest is not parsed
                hit = (s, body)
                break
            names.add(s.name)
        if hit is None:
            if not names:
                raise ToolError(f"no skill named {name!r}: no skills are installed (a skill is a folder with a "
                                "SKILL.md in .subagents/skills/, .claude/skills/ or ~/.claude/skills/)")
            raise ToolError(f"no skill named {name!r}; the skills here are: {', '.join(sorted(names))}")
        s, body = hit
        guard = hidden if s.level == "project" else None
        if guard is not None and guard(os.path.realpath(s.folder / SKILL_FILE)):
            raise ToolError(f"the SKILL.md of skill {s.name!r} is hidden from agents (it leads to the run store, "
                            "credentials or a [sandbox] deny_read path), so it was not read")
        if file is not None:
            return self._read_file(s, file, guard)
        files = _files(s.folder, guard)
        more = "" if len(files) <= MAX_LISTED_FILES else f" (and more; first {MAX_LISTED_FILES} shown)"
        listing = (f"Other files in its folder (read one with skill(name={s.name!r}, file=...)): "
                   f"{', '.join(files[:MAX_LISTED_FILES])}{more}\n" if files else "")
        return truncate_output(f"Skill {s.name!r} ({s.level} skill; folder: {_where(s.folder, root)})\n"
                               f"{listing}\n{body}")

    def _read_file(self, s: Skill, file: str, hidden: Hidden | None = None) -> str:
        if "\x00" in file:
            raise ToolError(f"{file!r} contains a NUL byte; give the path of a file inside the folder of skill "
                            f"{s.name!r}")
        folder = Path(os.path.realpath(s.folder))
        target = Path(os.path.realpath(folder / file))  # (a symlink loop resolves to a path that fails to open)
        if not target.is_relative_to(folder):
            raise ToolError(f"{file!r} is outside the folder of skill {s.name!r}; give a path inside it")
        if hidden is not None and hidden(str(target)):
            raise ToolError(f"{file!r} of skill {s.name!r} is hidden from agents (the run store, credentials or a "
                            "[sandbox] deny_read path); it cannot be read by any tool.")
        fd = _open_regular(target)  # a FIFO put there is refused, never waited on
        if fd is None:
            files = ", ".join(_files(folder, hidden)) or "none"
            raise ToolError(f"skill {s.name!r} has no file {file!r}; its files: {files}")
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES)  # a file of gigabytes is not read whole
        if b"\x00" in data[:8192]:
            raise ToolError(f"{file!r} of skill {s.name!r} is a binary file (it contains NUL bytes), so it was not "
                            "read; the skill tool reads text files only.")
        text = data.decode("utf-8", "replace")
        return truncate_output(text)

    def __repr__(self) -> str:
        return f"<tool {self.name} (read)>"
