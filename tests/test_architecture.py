"""The house rules a reviewer would otherwise check by hand: no import cycle, no module over 400 lines.

Imports are read from the source (``ast``), all of them: at module level, under ``if TYPE_CHECKING:``
and inside functions (a lazy import that breaks a cycle at run time still ties the two rooms together).
A package's ``__init__`` re-exporting its modules is not a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "subagents"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            for cand in (target, *(f"{target}.{a.name}" for a in node.names)):
                if cand in modules and cand != name:
                    found.add(cand)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules and a.name != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    inits = {n for n, p in modules.items() if p.name == "__init__.py"}
    return {n: _imports(n, p, modules) - inits for n, p in modules.items() if n not in inits}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    assert len(graph) > 50  # the reader found the package
    assert _cycles(graph) == []


def test_the_known_seams_stay_one_way() -> None:
    graph = _graph()
    assert "subagents.tools.agents" not in graph["subagents.tools.base"]
    assert "subagents.authority.hooks" not in graph["subagents.authority._hook_run"]
    assert "subagents.sandbox.workspace" not in graph["subagents.sandbox.access"]


def test_the_lower_rooms_never_import_the_runtime() -> None:
    graph = _graph()
    for name, deps in graph.items():
        if name.startswith(("subagents.definitions", "subagents.engines", "subagents.exceptions", "subagents.limits",
                            "subagents.messages", "subagents.store", "subagents.tools", "subagents.models",
                            "subagents.telemetry", "subagents.teams", "subagents.mcp")) and not name.startswith(
                                "subagents.engines.temporal"):  # a remote engine composes the runtime's parts
            assert not {d for d in deps if d.startswith("subagents.runtime")}, name
    assert graph["subagents.exceptions"] == set()  # the root of every other module: imports none of them


def test_no_module_over_400_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_only_the_engine_creates_the_tasks_agents_run_in() -> None:
    """Agent runs and runtime services start through the Executor seam (engines/), never with create_task."""
    starters = re.compile(r"(?<!store\.)\b(create_task|ensure_future|TaskGroup)\b")  # not TeamStore.create_task
    found = {str(p.relative_to(SRC)) for p in (PACKAGE / "runtime").rglob("*.py") if starters.search(p.read_text())}
    assert found == set()
    assert starters.search((PACKAGE / "engines" / "local.py").read_text())


def test_no_room_reaches_into_the_managers_private_parts() -> None:
    """Recovery, retention, the sweeper, the CLI use the manager's public interface (no ``mgr._x``)."""
    private = re.compile(r"\b(mgr|manager|m|self\.manager|self\.mgr)\._[a-z]\w*")
    offenders = {str(p.relative_to(SRC)): private.findall(p.read_text()) for p in PACKAGE.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_architecture_page_names_files_that_exist() -> None:
    """docs/architecture.md tells a newcomer which file to open: every path it names must be there."""
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"src/subagents/[\w/]+\.py", doc))
    named |= {f"src/subagents/{p}" for p in re.findall(r"\b((?:runtime|engines|store|tools|models)/\w+\.py)", doc)}
    assert len(named) > 20
    assert sorted(p for p in named if not (SRC.parent / p).exists()) == []
