"""The private home (``sandbox/home.py``): what is read back, when home is hidden, and the bubblewrap mounts.

What a command can reach is attacked in ``tests/security/test_private_home.py``; these check the rules.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.sandbox import SandboxPolicy, Workspace
from subagents.sandbox.bwrap import bwrap_argv
from subagents.sandbox.home import CACHES, home_reads, private_home, reachable, toolchain_dirs

H = Path("/home/u")


@pytest.mark.parametrize(("path_env", "expected"), [
    ("/home/u/.pyenv/shims:/home/u/.pyenv/bin", ["/home/u/.pyenv"]),
    ("/home/u/.nvm/versions/node/v20/bin", ["/home/u/.nvm"]),
    ("/home/u/.cargo/bin", ["/home/u/.cargo", "/home/u/.rustup"]),
    ("/home/u/.local/bin", ["/home/u/.local/bin", "/home/u/.local/lib", "/home/u/.local/share/uv",
                            "/home/u/.local/share/pipx", "/home/u/.local/pipx"]),  # pip --user, uv tool, pipx
    ("/home/u/.local/share/mise/shims:/home/u/.local/share/pnpm", ["/home/u/.local/share/mise",
                                                                    "/home/u/.local/share/pnpm"]),  # a tool's own
    ("/home/u/.local/share/keyrings", ["/home/u/.local/share/keyrings"]),  # (on PATH: the user's choice)
    ("/home/u/.config/tool/bin:/home/u/.cache/x/bin", ["/home/u/.config/tool/bin", "/home/u/.cache/x/bin"]),
    ("/home/u/bin:/home/u/go/bin", ["/home/u/bin", "/home/u/go/bin"]),  # alone: ~/go/src holds other projects
    ("/home/u/miniconda3/bin:/home/u/sdk/flutter/bin", ["/home/u/miniconda3", "/home/u/sdk/flutter"]),  # prefixes
    ("/home/u/projects/app/node_modules/.bin", ["/home/u/projects/app/node_modules/.bin"]),  # not a projects dir
    ("/home/u/tools/x/scripts", ["/home/u/tools/x/scripts"]),
    ("/usr/bin:/bin:/home/other/.pyenv/bin", []),
    ("/home/u:/home/u/:.:bin:relative/dir:", []),  # home itself, and relative entries, open nothing
    ("/home/u/.pyenv/../.ssh:/home/u/./.gnupg/bin", ["/home/u/.ssh", "/home/u/.gnupg"]),  # normalized first
])
def test_toolchain_dirs(path_env: str, expected: list[str]) -> None:
    assert [str(p) for p in toolchain_dirs(H, path_env)] == expected


def test_home_read_entries_stay_under_home() -> None:
    got = home_reads(H, "", ["~/.m2", ".gradle", "~", "~bob/.ssh", "/etc/passwd", "~/../../etc", "/home/u/x/../y"])
    caches = [f"/home/u/{c}" for c in CACHES]
    assert [str(p) for p in got] == ["/home/u/.config/git/ignore", "/home/u/.config/git/attributes", *caches,
                                     "/home/u/.m2", "/home/u/.gradle", "/home/u/y"]
    assert not any(c.endswith(("settings.xml", ".properties", ".npmrc")) or c in (".m2", ".gradle", ".npm", ".cache")
                   for c in CACHES)  # the package directories only, never the tools' settings beside them


def test_credential_paths_inside_a_read_back_dir_stay_hidden(tmp_path: Path) -> None:
    """~/.cargo is read back for ~/.cargo/bin; its credentials are hidden paths all the same."""
    home, root = tmp_path / "home", tmp_path / "home" / "proj"
    (home / ".cargo" / "bin").mkdir(parents=True)
    (home / ".cargo" / "credentials.toml").write_text("token = 'x'\n")
    root.mkdir()
    ws = Workspace(root, home=home)
    assert home / ".cargo/credentials.toml" in ws.hidden
    assert home / ".config/git/credentials" in ws.hidden


@pytest.mark.parametrize(("where", "hidden"), [("under", True), ("elsewhere", True), ("home", False),
                                               ("above", False)])
def test_home_is_private_unless_the_workspace_is_or_holds_it(tmp_path: Path, where: str, hidden: bool) -> None:
    home = tmp_path / "top" / "home"
    home.mkdir(parents=True)
    root = {"under": home / "proj", "elsewhere": tmp_path / "srv", "home": home, "above": tmp_path / "top"}[where]
    root.mkdir(exist_ok=True)
    assert private_home(home.resolve(), root.resolve(), True) == (home.resolve() if hidden else None)
    assert private_home(home.resolve(), root.resolve(), False) is None
    ws = Workspace(root, home=home)
    assert ws.private_home == (home.resolve() if hidden else None)
    assert Workspace(root, SandboxPolicy(private_home=False), home=home).private_home is None


def test_a_missing_home_or_the_root_directory_is_not_hidden(tmp_path: Path) -> None:
    assert private_home(Path("/"), tmp_path, True) is None
    assert private_home(tmp_path / "nope", tmp_path / "x", True) is None


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


@pytest.fixture
def var_home() -> Iterator[Path]:
    """A home outside ``/tmp`` (which bubblewrap masks whole, so nothing under it would need a mount)."""
    base = Path(tempfile.mkdtemp(prefix="subagents-home-", dir="/var/tmp"))
    try:
        yield base / "home"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_bwrap_masks_home_before_the_workspace_and_binds_back_reads(var_home: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home = var_home
    (home / ".tool" / "bin").mkdir(parents=True)
    (home / ".tool" / "credentials").mkdir()
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".gitconfig").write_text('[user]\n\tname = U\n[http]\n\textraHeader = "Authorization: Bearer t0k"\n')
    (home / ".ssh").mkdir()
    (home / ".config" / "git").mkdir()
    (home / ".config" / "git" / "ignore").write_text("*.swp\n")
    (home / ".m2" / "repository").mkdir(parents=True)  # read back twice: by home_read, and as a package cache
    (home / ".m2" / "settings.xml").write_text("<password>x</password>")
    root = home / "proj"
    root.mkdir()
    monkeypatch.setenv("PATH", f"{home}/.tool/bin:/usr/bin")
    ws = Workspace(root, SandboxPolicy(deny_read=("~/.tool/credentials",), home_read=("~/.m2",)), home=home)
    argv = bwrap_argv("/usr/bin/bwrap", ws, network=False, writable=True)
    h = str(home.resolve())
    tmpfs = _pairs(argv, "--tmpfs")
    assert h in tmpfs
    home_at = argv.index(h, argv.index("--tmpfs", argv.index("/tmp") - 1))
    assert argv.index("--bind") > home_at  # the workspace is bound over the empty home, not hidden by it
    assert _pairs(argv, "--ro-bind-try") == sorted([f"{h}/.config/git/ignore", f"{h}/.m2", f"{h}/.m2/repository",
                                                    f"{h}/.tool"])  # what exists
    at = argv.index(f"{h}/.gitconfig")  # not ~/.gitconfig itself: a file with its identity only (gitident)
    assert argv[at - 2] == "--ro-bind"
    assert at > home_at
    assert Path(argv[at - 1]).read_text() == '[user]\n\tname = "U"\n'

    assert f"{h}/.tool/credentials" in tmpfs  # a hidden path inside what is read back is masked
    assert f"{h}/.ssh" not in tmpfs
    assert f"{h}/.config/gh" not in tmpfs
    off = bwrap_argv("/usr/bin/bwrap", Workspace(root, SandboxPolicy(private_home=False), home=home),
                     network=False, writable=True)
    assert h not in _pairs(off, "--tmpfs")
    assert not _pairs(off, "--ro-bind-try")
    assert f"{h}/.ssh" in _pairs(off, "--tmpfs")  # the whole host is seen: the credentials are masked one by one


def test_a_home_spelled_through_a_link_still_finds_its_toolchains() -> None:
    """``/home -> /var/home`` (Fedora Silverblue): ``PATH`` spells home the way ``$HOME`` does, not resolved."""
    got = home_reads(Path("/var/home/u"), "/home/u/.tool/bin:/var/home/u/.cargo/bin", ["/home/u/.m2"],
                     aliases=[H])
    caches = [f"/var/home/u/{c}" for c in CACHES if c != ".rustup"]
    assert [str(p) for p in got] == ["/var/home/u/.tool", "/var/home/u/.cargo", "/var/home/u/.rustup",
                                     "/var/home/u/.config/git/ignore", "/var/home/u/.config/git/attributes",
                                     *caches, "/var/home/u/.m2"]


def test_a_hidden_file_under_a_linked_directory_is_hidden_by_both_names(tmp_path: Path) -> None:
    """``~/.config -> ~/dotfiles/config``: the file tools resolve a path before asking whether it is hidden, and
    a command reaches the file through the link, or through a directory read back by its home name."""
    home = tmp_path / "home"
    (home / "dotfiles" / "config" / "git").mkdir(parents=True)
    (home / "dotfiles" / "config" / "git" / "credentials").write_text("https://u:tok@example.com\n")
    (home / ".config").symlink_to(home / "dotfiles" / "config")
    (tmp_path / "data" / ".cargo").mkdir(parents=True)
    (home / ".cargo").symlink_to(tmp_path / "data" / ".cargo")
    ws = Workspace(home, home=home)  # the workspace is home: nothing private, the credentials hidden one by one
    real = (home / "dotfiles" / "config" / "git" / "credentials").resolve()
    assert ws.is_hidden(real)
    got = reachable([home / ".config/git/credentials", home / ".cargo/credentials.toml"], [home / ".cargo"])
    assert got == [real, (tmp_path / "data/.cargo/credentials.toml").resolve(), home / ".cargo/credentials.toml"]
