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
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator
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
"""``skill(name, file=...)`` reads this much of a file at most (its result is cut at 50,000 characters anyway)."""
_log = logging.getLogger("subagents.skills")
_KEY = re.compile(r"\A(name|description)[ \t]*:[ \t]*(.*)\Z")


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
    import yaml

    try:
        meta = yaml.safe_load(block)
    except yaml.YAMLError:  # e.g. an unquoted ': ' in the description: read the two keys line by line
        meta = {m.group(1): m.group(2).strip() for m in map(_KEY.match, block.splitlines()) if m}
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValueError("its front matter is not a mapping of keys to values")
    return meta, body


def _parse(folder: Path, level: str) -> tuple[Skill, str]:
    meta, body = _front_matter((folder / SKILL_FILE).read_text(encoding="utf-8", errors="replace"))
    name = str(meta.get("name") or folder.name).strip()
    description = " ".join(str(meta.get("description") or "").split())
    if not description:
        raise ValueError("its front matter has no description: (say what the skill does and when to use it)")
    return Skill(name, description, folder, level), body


def _scan(workdir: Path, home: Path | None, user_dir: Path | None, problems: list[str] | None
          ) -> Iterator[tuple[Skill, str]]:
    for base, level in skill_dirs(workdir, home=home, user_dir=user_dir):
        try:
            folders = sorted(p for p in base.iterdir() if (p / SKILL_FILE).is_file())
        except OSError:  # no such folder (the common case), or unreadable
            continue
        for folder in folders:
            try:
                yield _parse(folder, level)
            except (OSError, ValueError) as e:
                if problems is not None:
                    problems.append(f"skipped skill {folder / SKILL_FILE}: {e}")


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


def _files(folder: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, f), folder)
            if rel != SKILL_FILE and not f.startswith("."):
                out.append(rel)
            if len(out) > MAX_LISTED_FILES:
                return out
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
        listed = "\n".join(f"- {s.name}: {s.description[:MAX_DESCRIPTION]}" for s in found.values())
        self.description = f"{head}\n\nAvailable skills:\n{listed}"

    @property
    def parallel_safe(self) -> bool:
        """Loading a skill only reads files."""
        return True

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        """Return the named skill's instructions (or one of its files)."""
        return await call_in_thread(self._load, ctx.workspace.root, str(arguments["name"]), arguments.get("file"))

    def _load(self, root: Path, name: str, file: str | None) -> str:
        found: dict[str, tuple[Skill, str]] = {}
        for s, body in _scan(root, self.home, self.user_dir, None):
            found.setdefault(s.name, (s, body))  # the first found wins, as in the listing
        hit = found.get(name.strip())
        if hit is None:
            if not found:
                raise ToolError(f"no skill named {name!r}: no skills are installed (a skill is a folder with a "
                                "SKILL.md in .subagents/skills/, .claude/skills/ or ~/.claude/skills/)")
            raise ToolError(f"no skill named {name!r}; the skills here are: {', '.join(sorted(found))}")
        s, body = hit
        if file is not None:
            return self._read_file(s, file)
        files = _files(s.folder)
        more = "" if len(files) <= MAX_LISTED_FILES else f" (and more; first {MAX_LISTED_FILES} shown)"
        listing = (f"Other files in its folder (read one with skill(name={s.name!r}, file=...)): "
                   f"{', '.join(files[:MAX_LISTED_FILES])}{more}\n" if files else "")
        return truncate_output(f"Skill {s.name!r} ({s.level} skill; folder: {_where(s.folder, root)})\n"
                               f"{listing}\n{body}")

    def _read_file(self, s: Skill, file: str) -> str:
        folder = s.folder.resolve()
        target = (folder / file).resolve()
        if not target.is_relative_to(folder):
            raise ToolError(f"{file!r} is outside the folder of skill {s.name!r}; give a path inside it")
        try:  # O_NONBLOCK: a FIFO put there is refused below, never waited on
            fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            fd = -1
        if fd < 0 or not stat.S_ISREG(os.fstat(fd).st_mode):
            if fd >= 0:
                os.close(fd)
            raise ToolError(f"skill {s.name!r} has no file {file!r}; its files: {', '.join(_files(folder)) or 'none'}")
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES)  # a file of gigabytes is not read whole
        if b"\x00" in data[:8192]:
            raise ToolError(f"{file!r} of skill {s.name!r} is a binary file (it contains NUL bytes), so it was not "
                            "read; the skill tool reads text files only.")
        text = data.decode("utf-8", "replace")
        return truncate_output(text)

    def __repr__(self) -> str:
        return f"<tool {self.name} (read)>"
