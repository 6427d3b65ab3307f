"""The skill tool: Agent Skills folders listed in its description, loaded by name (seed 004)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from subagents import Runtime
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall


def write_skill(base: Path, folder: str, front: str, body: str, files: dict[str, str] | None = None) -> Path:
    d = base / folder
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    for name, text in (files or {}).items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def skills(workdir: Path, home: Path) -> Path:
    write_skill(workdir / ".claude" / "skills", "pdf-forms", "name: pdf-forms\ndescription: Fill PDF forms. Use "
                "when the user asks to fill a PDF.", "# PDF forms\nRun scripts/fill.py.",
                {"reference.md": "the field reference", "scripts/fill.py": "print('fill')"})
    write_skill(workdir / ".subagents" / "skills", "changelog", "name: changelog\ndescription: Write changelog "
                "entries: when a release is cut", "Keep a Changelog style.")
    write_skill(Path(os.environ["XDG_CONFIG_HOME"]) / "subagents" / "skills", "pdf-forms",
                "name: pdf-forms\ndescription: the user's older copy", "OLD BODY")
    write_skill(home / ".claude" / "skills", "haiku", "name: haiku\ndescription: Answer in haiku.", "5-7-5.",
                {"notes.md": "seasons"})
    return workdir


def runtime(workdir: Path, fn: Any) -> Runtime:
    return Runtime(model=FunctionModel(fn), workdir=workdir, store="memory://")


def calls_then_done(*calls: ToolCall) -> tuple[Any, list[tuple[str, bool]], list[ModelRequest]]:
    """A model that makes ``calls`` one turn each, then ends; returns it, the results it saw, the requests."""
    results: list[tuple[str, bool]] = []
    reqs: list[ModelRequest] = []

    def fn(req: ModelRequest) -> ModelResponse:
        reqs.append(req)
        if len(reqs) > 1:
            results.extend((r.content, r.is_error) for r in req.messages[-1].tool_results)
        if len(reqs) <= len(calls):
            return ModelResponse(tool_calls=[calls[len(reqs) - 1]])
        return ModelResponse(text="done")

    return fn, results, reqs


async def test_descriptions_listed_body_folder_and_files_loaded(skills: Path, home: Path) -> None:
    fn, results, reqs = calls_then_done(ToolCall("skill", {"name": "pdf-forms"}),
                                        ToolCall("skill", {"name": "pdf-forms", "file": "reference.md"}),
                                        ToolCall("skill", {"name": "haiku", "file": "notes.md"}))
    async with runtime(skills, fn) as rt:
        r = await rt.run("fill the form")
    assert r.ok
    spec = next(s for s in reqs[0].tools if s.name == "skill")
    assert "- pdf-forms: Fill PDF forms. Use when the user asks to fill a PDF." in spec.description
    assert "- changelog: Write changelog entries: when a release is cut" in spec.description  # lenient YAML
    assert "- haiku: Answer in haiku." in spec.description
    assert "older copy" not in spec.description  # the project's skill shadows the user's
    (body, err), (ref, err2), (notes, err3) = results
    assert not err
    assert not err2
    assert not err3
    assert "Run scripts/fill.py." in body
    assert "OLD BODY" not in body
    assert "folder: .claude/skills/pdf-forms" in body
    assert "reference.md" in body
    assert "scripts/fill.py" in body
    assert ref == "the field reference"
    assert notes == "seasons"  # a user skill's file, outside the workspace, through the tool


async def test_unknown_name_lists_the_known_skills_and_escapes_are_refused(skills: Path) -> None:
    fn, results, _ = calls_then_done(ToolCall("skill", {"name": "pdf"}),
                                     ToolCall("skill", {"name": "pdf-forms", "file": "../changelog/SKILL.md"}),
                                     ToolCall("skill", {"name": "pdf-forms", "file": "missing.md"}))
    async with runtime(skills, fn) as rt:
        await rt.run("x")
    (unknown, e1), (escape, e2), (missing, e3) = results
    assert e1
    assert e2
    assert e3
    assert "no skill named 'pdf'; the skills here are: changelog, haiku, pdf-forms" in unknown
    assert "outside the folder of skill 'pdf-forms'" in escape
    assert "has no file 'missing.md'" in missing
    assert "reference.md" in missing


async def test_general_purpose_has_the_tool_plan_verify_and_explore_do_not(skills: Path) -> None:
    tools: dict[str, list[str]] = {}

    def fn(req: ModelRequest) -> ModelResponse:
        tools[req.agent.agent_type] = [s.name for s in req.tools]
        return ModelResponse(text="ok")

    async with runtime(skills, fn) as rt:
        for agent in ("general-purpose", "plan", "verify", "explore"):
            await rt.run("look", agent)
    assert "skill" in tools["general-purpose"]
    assert "skill" not in tools["plan"]
    assert "skill" not in tools["verify"]
    assert "skill" not in tools["explore"]


async def test_no_skills_and_bad_files(workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_skill(workdir / ".subagents" / "skills", "broken", "name: broken", "no description")
    fn, results, reqs = calls_then_done(ToolCall("skill", {"name": "broken"}))
    with caplog.at_level(logging.WARNING, logger="subagents.skills"):
        async with runtime(workdir, fn) as rt:
            await rt.run("x")
    spec = next(s for s in reqs[0].tools if s.name == "skill")
    assert "No skills are installed here" in spec.description
    [(why, is_error)] = results
    assert is_error
    assert "no skills are installed" in why
    assert any("broken/SKILL.md" in m and "no description" in m for m in caplog.messages)


async def test_a_skill_added_later_loads_by_name(workdir: Path) -> None:
    fn, results, _ = calls_then_done(ToolCall("skill", {"name": "late"}))
    async with runtime(workdir, fn) as rt:
        write_skill(workdir / ".subagents" / "skills", "late", "description: added while running", "LATE BODY")
        await rt.run("x")
    [(body, is_error)] = results
    assert not is_error
    assert "LATE BODY" in body  # its name defaults to the folder's
