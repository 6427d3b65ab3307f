"""The environment of confined commands: an allowlist, never the runtime's secrets."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from procutil import SANDBOX_PYTHON
from subagents.sandbox import SandboxPolicy, Workspace
from subagents.sandbox.env import ALLOWED, is_secret_name, scrubbed_env
from subagents.sandbox.shell import ShellSandbox

BASE = {
    "PATH": "/usr/bin:/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "xterm",
    "ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai", "GITHUB_TOKEN": "ghp", "AWS_SECRET_ACCESS_KEY": "a",
    "MYAPP_MODE": "dev", "MYAPP_API_KEY": "k", "MYAPP_TOKEN": "t", "EDITOR": "vi", "DB_PASSWORD": "p",
    "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
}


def test_only_the_allowlist_and_locale_pass() -> None:
    env = scrubbed_env(base=BASE)
    assert env == {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C", "TERM": "xterm"}
    assert set(env) <= ALLOWED | {"LC_ALL"}


def test_patterns_never_pass_a_secret_but_exact_names_do() -> None:
    env = scrubbed_env(["MYAPP_*", "GITHUB_TOKEN"], base=BASE)
    assert env["MYAPP_MODE"] == "dev"
    assert "MYAPP_API_KEY" not in env
    assert "MYAPP_TOKEN" not in env
    assert env["GITHUB_TOKEN"] == "ghp"
    assert "ANTHROPIC_API_KEY" not in scrubbed_env(["*"], base=BASE)


def test_secret_names() -> None:
    for name in ("OPENAI_API_KEY", "GH_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "X_CREDENTIALS", "APIKEY"):
        assert is_secret_name(name) or (name == "AWS_SECRET_ACCESS_KEY" and "SECRET" in name), name
    for name in ("PATH", "HOME", "MYAPP_MODE", "KEYBOARD_LAYOUT", "TOKENIZERS_PARALLELISM"):
        assert not is_secret_name(name), name


def test_extra_is_set_last_and_path_has_a_default() -> None:
    env = scrubbed_env(base={"HOME": "/h"}, extra={"TMPDIR": "/t", "HOME": "/other"})
    assert env == {"HOME": "/other", "PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": "/t"}


@pytest.mark.parametrize("mode", ["bwrap", "landlock", "off"])
async def test_a_spawned_process_gets_exactly_the_scrubbed_environment(
        mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in BASE.items():
        if k not in ("PATH", "HOME"):
            monkeypatch.setenv(k, v)
    ws = Workspace(tmp_path, SandboxPolicy(mode=mode, env_passthrough=("MYAPP_*", "GITHUB_TOKEN")))
    box = ShellSandbox(ws)
    assert box.backend == mode
    proc = await box.spawn([SANDBOX_PYTHON, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
                           env_extra={"SUBAGENTS_AGENT": "a1"})
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err
    env = json.loads(out)
    expected = scrubbed_env(("MYAPP_*", "GITHUB_TOKEN"), extra={"SUBAGENTS_AGENT": "a1"})
    if mode != "off":
        tmp = env.pop("TMPDIR")
        assert tmp.startswith("/tmp")
    if mode == "landlock":  # git's identity, never ~/.gitconfig itself (sandbox/gitident.py)
        git = env.pop("GIT_CONFIG_GLOBAL")
        assert git == os.devnull or os.path.basename(os.path.dirname(git)).startswith("subagents-git-"), git
    assert len(env.pop("SUBAGENTS_COMMAND")) == 16  # the tag that finds processes which left the group
    if mode == "bwrap":
        assert env.pop("PWD") == str(ws.root)  # bubblewrap's --chdir sets it
    assert env == expected
    assert "sk-ant" not in out.decode()
