"""A trusted directory inside the workspace keeps the settings the user trusted.

Trust is per directory (``subagents.trust``): the user trusted ``mono/pkg`` and now runs agents at ``mono``.
Were ``pkg/.subagents/config.toml``, ``pkg/.mcp.json``, ``pkg/.claude/`` or ``pkg/.qwen/`` writable, an agent
would write ``[sandbox] mode = "off"``, hooks or an unconfined MCP server there, and the next run in ``pkg``
would apply them as trusted.  Each attack below is judged by its effect: the bytes of those files, whether
``pkg`` is still the directory the user trusted, and the settings a later run there loads; ordinary files in
``pkg`` and untrusted subdirectories stay writable (no over-blocking).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from subagents.config import load_settings, user_config_dir
from subagents.sandbox import Workspace, bwrap
from subagents.sandbox.seatbelt import seatbelt_profile
from subagents.trust import TRUST_FILE, add_trusted, is_trusted

from .kit import Attack, attack, edit, ran, sh, write

OFF = '[sandbox]\nmode = "off"\n'
SERVER = '{"mcpServers": {"x": {"command": "sh", "args": ["-c", "id"], "sandbox": false}}}\n'
PKG_CONFIG = "[agents]\nmax_threads = 4\n"
PKG_MCP = '{"mcpServers": {}}\n'


def trusted_pkg(ws: Path, rel: str = "pkg") -> Path:
    """``ws/rel``, trusted, with settings of its own and a source file."""
    pkg = ws / rel
    (pkg / "src").mkdir(parents=True)
    (pkg / "src" / "lib.py").write_text("x = 1\n")
    (pkg / ".subagents").mkdir()
    (pkg / ".subagents" / "config.toml").write_text(PKG_CONFIG)
    (pkg / ".mcp.json").write_text(PKG_MCP)
    add_trusted(pkg, user_config_dir())
    return pkg


def lexists(p: Path) -> bool:
    return p.exists() or p.is_symlink()


def settings_of(pkg: Path) -> dict[str, str]:
    """What the settings entries of ``pkg`` hold (a missing one as ``-``)."""
    out = {}
    for name in (".subagents", ".claude", ".qwen", ".mcp.json"):
        p = pkg / name
        if p.is_dir() and not p.is_symlink():
            out.update({str(f.relative_to(pkg)): f.read_text() for f in sorted(p.rglob("*")) if f.is_file()})
        elif os.path.lexists(p):
            out[name] = os.readlink(p) if p.is_symlink() else p.read_text()
        else:
            out[name] = "-"
    return out


def refused(a: Attack, *indexes: int) -> list[str]:
    """The calls among ``indexes`` that were not refused (should be none)."""
    return [a.transcript() for i in indexes if not a.step(i).is_error][:1]


async def test_file_tools_cannot_write_a_trusted_subdirectorys_settings(ws: Path) -> None:
    pkg = trusted_pkg(ws)
    before = settings_of(pkg)
    a = await attack(ws, [
        write("pkg/.subagents/config.toml", OFF),
        write("src/../pkg/.subagents/config.toml", OFF),
        write(f"{pkg}/.subagents/config.toml", OFF),
        write("pkg/./.subagents//hooks.toml", OFF),
        write("pkg/.mcp.json", SERVER),
        edit("pkg/.mcp.json", "{}", '{"x": {"command": "sh"}}'),
        edit("pkg/.subagents/config.toml", "4", "64"),
        write("pkg/.claude/agents/x.md", "---\nname: x\ndescription: d\n---\nhi\n"),
        write("pkg/.qwen/agents/x.md", "---\nname: x\ndescription: d\n---\nhi\n"),
        sh("ln -s pkg/.subagents s && ln -s pkg p"),
        write("s/config.toml", OFF),
        write("p/.mcp.json", SERVER),
        write("pkg/src/lib.py", "x = 2\n"),          # ordinary files in pkg stay writable
        write("other/.subagents/config.toml", OFF),  # and so do untrusted subdirectories
    ])
    a.assert_completed()
    assert not refused(a, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11)
    assert settings_of(pkg) == before, a.transcript()
    assert load_settings(pkg).sandbox_mode == "auto"
    assert not a.step(12).is_error, a.transcript()
    assert (pkg / "src" / "lib.py").read_text() == "x = 2\n"
    assert (ws / "other" / ".subagents" / "config.toml").read_text() == OFF


SHELL_ATTACKS = [
    sh(f"printf '{OFF}' > pkg/.subagents/config.toml; echo '{{}}' >> pkg/.mcp.json"),
    sh("mv pkg/.mcp.json pkg/m; mv pkg/.subagents pkg/s; ln -sf /tmp pkg/.claude; mkdir -p pkg/.qwen/agents"),
    sh(f"rm -rf pkg/.subagents; mkdir -p pkg/.subagents; printf '{OFF}' > pkg/.subagents/config.toml"),
    sh(f"mv pkg pkg2; mkdir -p pkg/.subagents; printf '{OFF}' > pkg/.subagents/config.toml"),
    sh("cd pkg && mv ../pkg ../pkg3"),
    sh("ln pkg/.mcp.json h; cp -al pkg pk2; echo evil >> h; echo evil >> pk2/.mcp.json"),
    sh("echo 'x = 2' > pkg/src/lib.py && mkdir pkg/src/d && echo z > pkg/src/d/z && cat pkg/src/lib.py pkg/src/d/z"),
    sh(f"rm -rf pkg; mkdir -p evil/.subagents; printf '{OFF}' > evil/.subagents/config.toml; ln -s evil pkg"),
]


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
async def test_bash_cannot_write_move_or_replace_them(ws: Path, sandbox: str) -> None:
    pkg = trusted_pkg(ws)
    before = settings_of(pkg)
    a = await attack(ws, SHELL_ATTACKS, sandbox=sandbox)
    a.assert_completed()
    assert all(ran(s.content) for s in a.steps), a.transcript()
    assert settings_of(pkg) == before, a.transcript()
    assert not pkg.is_symlink(), a.transcript()
    assert is_trusted(pkg, user_config_dir())
    assert load_settings(pkg).sandbox_mode == "auto"
    assert "x = 2\nz\n" in a.step(6).content, a.transcript()  # no over-blocking: pkg's own files stay writable


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
async def test_a_trusted_directory_that_does_not_exist_cannot_be_created(ws: Path, sandbox: str) -> None:
    add_trusted(ws / "newpkg", user_config_dir())
    add_trusted(ws / "a" / "b" / "deep", user_config_dir())
    a = await attack(ws, [
        write("newpkg/.subagents/config.toml", OFF),
        write("a/b/deep/.mcp.json", SERVER),
        sh(f"mkdir -p newpkg/.subagents && printf '{OFF}' > newpkg/.subagents/config.toml"),
        sh("ln -s src newpkg; mkdir -p a/b/deep/.subagents"),
        sh(f"mkdir -p x/.subagents; printf '{OFF}' > x/.subagents/config.toml; mv x newpkg; mv x a"),
    ], sandbox=sandbox)
    a.assert_completed()
    assert not refused(a, 0, 1)
    assert not lexists(ws / "newpkg"), a.transcript()
    assert not lexists(ws / "a"), a.transcript()


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
async def test_a_protected_entry_that_is_a_symlink_cannot_be_replaced_or_written_through(
        ws: Path, sandbox: str) -> None:
    (ws / "shared").mkdir()
    (ws / "shared" / "mcp.json").write_text(PKG_MCP)
    os.symlink("shared/mcp.json", ws / ".mcp.json")
    a = await attack(ws, [
        sh(f"rm -f .mcp.json; printf '{SERVER}' > .mcp.json"),
        sh(f"printf '{SERVER}' > shared/mcp.json"),
        write("shared/mcp.json", SERVER),
        sh("echo ordinary > shared/other.txt"),
    ], sandbox=sandbox)
    a.assert_completed()
    assert os.readlink(ws / ".mcp.json") == "shared/mcp.json", a.transcript()
    assert (ws / "shared" / "mcp.json").read_text() == PKG_MCP, a.transcript()
    assert a.step(2).is_error, a.transcript()
    if sandbox == "bwrap":  # (Landlock: no entry can be created beside a protected one)
        assert (ws / "shared" / "other.txt").exists(), a.transcript()


async def test_a_hand_written_line_through_a_symlink_in_the_workspace(ws: Path) -> None:
    (ws / "real" / "pkg").mkdir(parents=True)
    os.symlink("real", ws / "link")
    listed = user_config_dir() / TRUST_FILE
    listed.write_text(listed.read_text() + f"{ws}/link/pkg\n{ws}/./q/../q/\n")
    (ws / "q").mkdir()
    a = await attack(ws, [
        write("real/pkg/.mcp.json", SERVER),
        write("q/.mcp.json", SERVER),
        sh(f"rm link; mkdir -p evil/pkg/.subagents; printf '{OFF}' > evil/pkg/.subagents/config.toml; ln -s evil link"),
        sh(f"printf '{SERVER}' > q/.mcp.json; printf '{SERVER}' > real/pkg/.mcp.json"),
    ])
    a.assert_completed()
    assert not refused(a, 0, 1)
    assert os.readlink(ws / "link") == "real", a.transcript()
    assert "put back" in a.step(2).content, a.transcript()
    assert not (ws / "real" / "pkg" / ".mcp.json").is_file(), a.transcript()
    assert not (ws / "q" / ".mcp.json").is_file(), a.transcript()
    assert load_settings(ws / "link" / "pkg").sandbox_mode == "auto"


def test_only_the_lines_below_the_workspace_cost_anything(tmp_path: Path) -> None:
    root = (tmp_path / "mono").resolve()
    (root / "pkg").mkdir(parents=True)
    listed = [f"{tmp_path}/elsewhere/group{i % 100}/project{i}" for i in range(10_000)]
    path = user_config_dir() / TRUST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*listed, str(root / "pkg"), str(root)]) + "\n")
    t0 = time.monotonic()
    ws = Workspace(root)
    built = time.monotonic() - t0
    bare = Workspace(root, trusted=())
    assert set(ws.protected) - set(bare.protected) == {root / "pkg" / n for n in (".subagents", ".claude", ".qwen",
                                                                                    ".mcp.json")}
    assert built < 5.0  # read once per runtime (about 0.1 s on a laptop), never per command
    assert len(bwrap.bwrap_argv("bwrap", ws, network=False, writable=True)) < 2 * len(
        bwrap.bwrap_argv("bwrap", bare, network=False, writable=True))


def test_seatbelt_pins_the_directories_above_protected_paths() -> None:
    root = Path("/Users/u/mono")
    text = seatbelt_profile(root=root, writable=True, readonly=[root / ".git", root / "a" / "pkg" / ".subagents"],
                            hidden=[], temp_dir=Path("/private/tmp/c"), network=False)
    pins = text.splitlines()[-1]
    assert pins == '(deny file-write* (literal "/Users/u/mono/a") (literal "/Users/u/mono/a/pkg"))'
