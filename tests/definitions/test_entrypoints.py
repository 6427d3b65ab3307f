"""Agent-type extensions are found through installed distributions' entry points; ``importlib.metadata`` is only
imported (10-40 ms, every ``Runtime``) when an installed distribution may declare ``subagents.agents``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from subagents.definitions import load_definitions
from subagents.definitions.entrypoints import _may_declare, entry_points


def _dist(site: Path, name: str, entry_points_txt: str | None) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points_txt is not None:
        (info / "entry_points.txt").write_text(entry_points_txt)


def test_an_installed_extension_is_found_and_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "reviewer_agents.py").write_text(
        "from subagents import AgentDefinition\nAGENTS = [AgentDefinition('reviewer', 'reviews', 'Review.')]\n")
    _dist(site, "other", "[console_scripts]\nother = other:main\n")
    _dist(site, "reviewer_ext", "[subagents.agents]\nreviewer = reviewer_agents:AGENTS\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        assert [ep.name for ep in entry_points("subagents.agents")] == ["reviewer"]
        project = tmp_path / "project"
        project.mkdir()
        defs = load_definitions(project, user_dir=tmp_path / "none", home=tmp_path / "none")
        assert defs.get("reviewer").source == "extension:reviewer"
    finally:
        sys.modules.pop("reviewer_agents", None)


def test_no_declaration_on_the_path_means_no_metadata_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _dist(site, "plain", "[console_scripts]\nplain = plain:main\n")
    _dist(site, "bare", None)
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    assert _may_declare("subagents.agents") is False
    assert entry_points("subagents.agents") == []


@pytest.mark.parametrize("what", ["zip", "egg", "finder"])
def test_what_it_cannot_look_into_is_read_through_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           what: str) -> None:
    site = tmp_path / "site"
    site.mkdir()
    path = [str(site)]
    if what == "zip":
        with zipfile.ZipFile(tmp_path / "bundle.zip", "w") as z:
            z.writestr("x-1.0.dist-info/entry_points.txt", "[subagents.agents]\nx = x:AGENTS\n")
        path.append(str(tmp_path / "bundle.zip"))
    elif what == "egg":
        (site / "x-1.0-py3.11.egg").mkdir()
    else:
        class Finder:
            @staticmethod
            def find_distributions(context: object = None) -> list[object]:
                return []

        monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    monkeypatch.setattr(sys, "path", path)
    assert _may_declare("subagents.agents") is True


def test_a_runtime_opens_without_importing_importlib_metadata(tmp_path: Path) -> None:
    code = ("import asyncio, sys\nfrom subagents import Runtime\nfrom subagents.models import FunctionModel, "
            "ModelResponse\n"
            "async def main():\n"
            f"    async with Runtime(FunctionModel(lambda r: ModelResponse('ok')), workdir={str(tmp_path)!r},"
            " store='memory') as rt:\n"
            "        assert (await rt.run('hi')).text == 'ok'\n"
            "asyncio.run(main())\nprint('importlib.metadata' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False", out.stderr
