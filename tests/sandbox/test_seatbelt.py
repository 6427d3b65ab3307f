"""macOS Seatbelt: the profile's text (no Mac runs these tests), and how the runner wires it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from subagents.sandbox import SandboxPolicy, Workspace, backends
from subagents.sandbox.seatbelt import SANDBOX_EXEC, seatbelt_argv, seatbelt_profile
from subagents.sandbox.shell import SandboxUnavailable, ShellSandbox

ROOT = Path("/Users/u/proj")
KW: dict[str, Any] = {
    "root": ROOT, "readonly": [ROOT / ".git", ROOT / ".subagents"], "temp_dir": Path("/private/tmp/cmd1"),
    "hidden": [ROOT / ".subagents" / "state.db", Path("/Users/u/.ssh")],
}


def test_deny_by_default_then_read_everywhere_but_hidden_paths() -> None:
    lines = seatbelt_profile(writable=True, network=False, **KW).splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    read = lines.index("(allow file-read*)")
    deny_read = lines.index('(deny file-read* (subpath "/Users/u/proj/.subagents/state.db") '
                            '(subpath "/Users/u/.ssh"))')
    assert read < deny_read  # the last matching rule wins
    assert "(allow signal (target same-sandbox))" in lines


def test_write_the_workspace_but_not_protected_or_hidden_paths() -> None:
    lines = seatbelt_profile(writable=True, network=False, **KW).splitlines()
    allow = next(i for i, line in enumerate(lines) if line.startswith("(allow file-write*"))
    deny = next(i for i, line in enumerate(lines) if line.startswith("(deny file-write*"))
    assert allow < deny
    assert lines[allow].startswith('(allow file-write* (subpath "/Users/u/proj") (subpath "/private/tmp/cmd1") '
                                   '(literal "/dev/null")')
    for p in ('"/Users/u/proj/.git"', '"/Users/u/proj/.subagents"', '"/Users/u/.ssh"'):
        assert f"(subpath {p})" in lines[deny]


def test_read_only_mode_writes_only_the_temp_dir() -> None:
    text = seatbelt_profile(writable=False, network=False, **KW)
    assert '(subpath "/Users/u/proj")' not in text
    assert '(allow file-write* (subpath "/private/tmp/cmd1")' in text


def test_network_only_when_allowed() -> None:
    assert "network" not in seatbelt_profile(writable=True, network=False, **KW)
    assert "(allow network*)" in seatbelt_profile(writable=True, network=True, **KW).splitlines()


def test_paths_are_quoted() -> None:
    text = seatbelt_profile(**{**KW, "root": Path('/Users/u/we"ird\\dir')}, writable=True, network=False)
    assert '(subpath "/Users/u/we\\"ird\\\\dir")' in text
    assert seatbelt_argv("(version 1)") == [SANDBOX_EXEC, "-p", "(version 1)"]


@pytest.fixture
def on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "PLATFORM", "darwin")
    monkeypatch.setattr(backends, "choose", backends.choose.__wrapped__)  # no cached Linux answer


@pytest.mark.usefixtures("on_macos")
async def test_macos_refuses_when_the_probe_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(backends, "probe_seatbelt", lambda: "sandbox-exec refused the profile (bad rule)")
    box = ShellSandbox(Workspace(tmp_path, SandboxPolicy()))
    assert box.backend == "none"
    with pytest.raises(SandboxUnavailable) as info:
        await box.spawn(["/usr/bin/true"])
    assert "sandbox-exec refused the profile (bad rule)" in str(info.value)
    assert '[sandbox] mode = "off"' in str(info.value)


@pytest.mark.usefixtures("on_macos")
async def test_macos_runs_commands_under_sandbox_exec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(backends, "probe_seatbelt", lambda: "")
    seen: dict[str, Any] = {}

    async def fake_exec(*argv: str, **kw: Any) -> Any:
        seen.update(argv=argv, **kw)
        raise OSError("not on a Mac")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", fake_exec)
    ws = Workspace(tmp_path, SandboxPolicy())
    box = ShellSandbox(ws)
    assert box.backend == "seatbelt"
    with pytest.raises(OSError, match="not on a Mac"):
        await box.spawn(["/bin/bash", "-c", "true"])
    argv = seen["argv"]
    assert argv[:2] == (SANDBOX_EXEC, "-p")
    assert argv[3:] == ("/bin/bash", "-c", "true")
    assert f'(allow file-write* (subpath "{ws.root}")' in argv[2]
    assert seen["env"]["TMPDIR"] in argv[2]
    assert seen["start_new_session"] is True
    assert not os.path.lexists(seen["env"]["TMPDIR"])  # noqa: ASYNC240 - the failed spawn removed its temp dir


def test_a_private_home_is_not_read_but_the_workspace_and_what_is_read_back() -> None:
    lines = seatbelt_profile(writable=True, network=False, home=Path("/Users/u"),
                             home_read=[Path("/Users/u/.pyenv"), Path("/Users/u/.gitconfig")], **KW).splitlines()
    read = lines.index("(allow file-read*)")
    deny_home = lines.index('(deny file-read* (subpath "/Users/u"))')
    back = lines.index('(allow file-read* (subpath "/Users/u/proj") (subpath "/Users/u/.pyenv") '
                       '(subpath "/Users/u/.gitconfig"))')
    deny_hidden = next(i for i, line in enumerate(lines) if line.startswith('(deny file-read* (subpath "/Users/u/proj'))
    assert read < deny_home < back < deny_hidden  # the last matching rule wins: ~/.ssh stays hidden in a read back
    unchanged = seatbelt_profile(writable=True, network=False, **KW).splitlines()
    assert not any(line.endswith('"/Users/u"))') for line in unchanged)  # no private home: nothing of it
