"""Secrets stay secret: credentials under ``$HOME``, the user config dir of subagents, and the provider API
keys in the runtime's environment never reach an agent, through any tool.

Three layouts, because the hidden paths must hold wherever the workspace is: beside ``$HOME``, inside it
(``$HOME/project``), and ``$HOME`` itself (then ``~/.ssh`` is *inside* the workspace).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import Home
from .kit import Call, attack, core, edit, find, grep, ls, marker, populate_workspace, ran, read, run_child, sh

LAYOUTS = ["beside-home", "inside-home", "is-home"]


def _workspace(layout: str, home: Home, tmp_path: Path) -> Path:
    root = {"beside-home": tmp_path / "ws", "inside-home": home.root / "project", "is-home": home.root}[layout]
    return populate_workspace(root)


def _as_agent_paths(rel: str, ws: Path, home: Home) -> list[str]:
    """The ways an agent could name ``$HOME/rel``: relative to the workspace and absolute."""
    target = home.root / rel
    return [os.path.relpath(target, ws), str(target)]


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_file_tools_cannot_read_credentials(layout: str, home: Home, tmp_path: Path) -> None:
    ws = _workspace(layout, home, tmp_path)
    calls: list[Call] = []
    for rel in home.secrets:
        for p in _as_agent_paths(rel, ws, home):
            calls += [read(p), grep("MARK", p)]
    home_dir = _as_agent_paths(".", ws, home)[0]
    calls += [
        grep("MARK[0-9a-f]{32}", home_dir), grep("MARK", home_dir, glob="**/*"), grep("MARK", str(home.root)),
        edit(_as_agent_paths(".ssh/id_rsa", ws, home)[0], "SSHMARK", "x"),
        edit(_as_agent_paths(".aws/credentials", ws, home)[0], "aws_secret_access_key", "x"),
        ls(_as_agent_paths(".ssh", ws, home)[0]), find("**/*", _as_agent_paths(".ssh", ws, home)[0]),
    ]
    a = await attack(ws, calls)
    a.assert_completed()
    a.assert_no_leak(*home.markers)


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_file_tools_cannot_read_credentials_through_links(layout: str, home: Home, tmp_path: Path) -> None:
    """Symlinks to the credential dirs, and hard links to the key files, made inside the workspace."""
    ws = _workspace(layout, home, tmp_path)
    (ws / "links").mkdir()
    os.symlink(home.root / ".ssh", ws / "links" / "ssh")
    os.symlink(home.root / ".aws" / "credentials", ws / "links" / "aws")
    os.symlink(home.user_config, ws / "links" / "usercfg")
    os.link(home.root / ".ssh" / "id_rsa", ws / "links" / "id_rsa_hardlink")
    os.link(home.root / ".netrc", ws / "links" / "netrc_hardlink")
    os.link(home.user_config, ws / "links" / "usercfg_hardlink")
    a = await attack(ws, [
        read("links/ssh/id_rsa"), read("links/aws"), read("links/usercfg"), read("links/id_rsa_hardlink"),
        read("links/netrc_hardlink"), read("links/usercfg_hardlink"), grep("MARK", "links"),
        edit("links/id_rsa_hardlink", "SSHMARK", "x"),
    ])
    a.assert_completed()
    a.assert_no_leak(*home.markers)


def _credential_commands(home: Home) -> str:
    files = " ".join(f"~/{rel}" for rel in home.secrets if not rel.startswith(".config/subagents"))
    real = " ".join(str(home.root / rel) for rel in home.secrets)
    return (f"cat {files} 2>&1; cat {real} 2>&1; grep -rao 'MARK[0-9a-f]*' {home.root} ~ 2>/dev/null | head -50; "
            f"find {home.root} -type f -name '*' -exec cat {{}} + 2>/dev/null | grep -a MARK; "
            "cat ~/.config/subagents/config.toml $XDG_CONFIG_HOME/subagents/config.toml 2>&1")


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_shell_cannot_read_credentials(layout: str, home: Home, tmp_path: Path) -> None:
    ws = _workspace(layout, home, tmp_path)
    a = await attack(ws, [sh(_credential_commands(home))])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    a.assert_no_leak(*home.markers)


async def test_shell_cannot_read_credentials_through_links_it_makes(home: Home, ws: Path) -> None:
    a = await attack(ws, [sh(f"cd src; ln -s {home.root}/.ssh k; cat k/id_rsa; ln {home.root}/.ssh/id_rsa hl 2>&1; "
                             f"cat hl; cp {home.root}/.aws/credentials c 2>&1; cat c")])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    a.assert_no_leak(*home.markers)


ENV_COMMANDS = {
    "env": "env",
    "printenv": "printenv ANTHROPIC_API_KEY OPENAI_API_KEY GITHUB_TOKEN AWS_SECRET_ACCESS_KEY",
    "proc-self-environ": "cat /proc/self/environ | tr '\\0' '\\n'",
    "proc-shell-environ": "tr '\\0' '\\n' < /proc/$$/environ",
    "ps-e": "ps eww -o pid,args -p $$ -p $PPID",
    "python-environ": "python3 -c \"import os; print(dict(os.environ))\"",
    "proc-1-environ": "tr '\\0' '\\n' < /proc/1/environ",
    "login-shell": "bash -lc env",
}


@pytest.mark.parametrize("name", list(ENV_COMMANDS))
async def test_shell_environment_has_no_keys(name: str, ws: Path, api_keys: dict[str, str]) -> None:
    a = await attack(ws, [sh(ENV_COMMANDS[name])])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    a.assert_no_leak(*core(api_keys))


MEMORY_SCAN = """python3 - {pid} <<'EOF'
import re, sys
found = set()
with open(f"/proc/{{sys.argv[1]}}/maps") as maps, open(f"/proc/{{sys.argv[1]}}/mem", "rb", 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in span.split("-"))
        if "r" in perms and hi - lo < 1 << 28:
            try:
                mem.seek(lo)
                found.update(re.findall(rb"[A-Z]*MARK[0-9a-f]{{32}}", mem.read(hi - lo)))
            except (OSError, ValueError, OverflowError):
                pass
print(sorted(found))
EOF"""

RUNTIME_PROCESS_COMMANDS = {
    "proc-ppid-environ": "tr '\\0' '\\n' < /proc/$PPID/environ",
    "proc-runtime-environ": "tr '\\0' '\\n' < /proc/{runtime_pid}/environ",
    "proc-all-environ": "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -a MARK",
    "ps-e-all": "ps eww -A -o pid,args | grep -a MARK",
    "runtime-cmdline-and-status": "cat /proc/{runtime_pid}/cmdline /proc/{runtime_pid}/status",
    "runtime-memory": MEMORY_SCAN.format(pid="{runtime_pid}"),
}


def test_shell_cannot_read_the_runtime_process(ws: Path, api_keys: dict[str, str]) -> None:
    """The keys are in the runtime's *initial* environment here (``/proc/<pid>/environ`` shows only that),
    so the runtime runs in a process of its own, started with them; one call per route."""
    names = list(RUNTIME_PROCESS_COMMANDS)
    run = run_child(ws, [sh(RUNTIME_PROCESS_COMMANDS[n]) for n in names], env=dict(os.environ), timeout=30)
    run.assert_completed()
    assert run.result is not None
    steps = run.result["steps"]
    assert all(ran(s["content"]) for s in steps), run.transcript()
    routes = [n for n, s in zip(names, steps, strict=True) if any(k in s["content"] for k in core(api_keys))]
    assert not routes, f"the keys reached the agent through {routes}:\n{run.transcript()}"


async def test_an_api_key_in_the_project_config_is_not_readable(ws: Path) -> None:
    """The project's config is hidden from agents (it may hold an api_key), not only protected from writes."""
    key = "sk-proj-" + marker("CFGKEY")
    with (ws / ".subagents" / "config.toml").open("a") as f:
        f.write(f'\n[providers.openai]\napi_key = "{key}"\n')
    a = await attack(ws, [read(".subagents/config.toml"), sh("cat .subagents/config.toml")])
    a.assert_completed()
    a.assert_no_leak(key)
