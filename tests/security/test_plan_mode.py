"""Plan mode changes nothing: in ``permission_mode="plan"`` no tool may change any file in the workspace.

Plan mode is enforced by the permission layer (``subagents.authority``, being built at the same time as
the sandbox): file edits are refused outright, and ``bash`` is allowed only because the sandbox runs it
with the workspace read-only.  So these tests attack through the shell above all, and through a
sub-agent whose type has a shell.  The shell must still *run* in plan mode (reading is what planning
needs): each command must run to its last line, and the README's text must be readable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .kit import Call, attack, diff, edit, is_store_file, ran, sh, snapshot, spawn, write


def _tree(ws: Path) -> dict[str, tuple[object, ...]]:
    return snapshot(ws, skip=is_store_file)


ATTACKS: dict[str, Call] = {
    "write-new": write("plan-created.txt"),
    "write-existing": write("README.md", "overwritten in plan mode\n"),
    "edit": edit("README.md", "hello", "PWNED"),
    "bash-touch": sh("touch plan-touched"),
    "bash-redirect": sh("echo PWNED > README.md; echo PWNED >> src/app.py"),
    "bash-rm": sh("rm -f README.md; rm -rf src"),
    "bash-mv": sh("mv README.md README.old"),
    "bash-mkdir": sh("mkdir -p new/dir"),
    "bash-chmod": sh("chmod 000 README.md; chmod 777 src"),
    "bash-ln": sh("ln -s README.md link; ln README.md hard"),
    "bash-git-init": sh("git init -q sub; git init -q ."),
    "bash-git-config": sh("git config user.name planner"),
    "bash-python": sh("python3 -c \"open('README.md', 'a').write('PWNED')\""),
    "bash-sed-inplace": sh("sed -i s/hello/PWNED/ README.md"),
    "bash-touch-mtime": sh("touch -d 2000-01-01 README.md"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
async def test_plan_mode_changes_nothing(name: str, ws: Path) -> None:
    before = _tree(ws)
    mtime = (ws / "README.md").stat().st_mtime_ns
    a = await attack(ws, [sh("cat README.md"), ATTACKS[name]], mode="plan")
    a.assert_completed()
    assert ran(a.step(0).content), f"the shell does not run in plan mode:\n{a.transcript()}"
    assert "The readme says hello" in a.step(0).content, f"the shell cannot read in plan mode:\n{a.transcript()}"
    if ATTACKS[name][0] == "bash":
        assert ran(a.step(1).content), a.transcript()
    assert _tree(ws) == before, f"plan mode changed the workspace:\n{diff(before, _tree(ws))}\n{a.transcript()}"
    assert (ws / "README.md").stat().st_mtime_ns == mtime, "plan mode touched README.md"


async def test_plan_mode_child_with_a_shell_changes_nothing(ws: Path) -> None:
    """A plan-mode parent spawns ``verify`` (read-only tools plus bash): the child is in plan mode too."""
    before = _tree(ws)
    a = await attack(ws, [spawn("verify", "check the project")], mode="plan", child_calls=[
        sh("touch child-touched; echo PWNED >> README.md; rm -f src/app.py"),
        write("child-created.txt"),
    ])
    a.assert_completed()
    assert _tree(ws) == before, f"a plan-mode child changed the workspace:\n{diff(before, _tree(ws))}\n{a.transcript()}"
