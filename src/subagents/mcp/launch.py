"""How a stdio MCP server's process starts: the scrubbed environment, and the shell's sandbox.

The process gets :func:`~subagents.sandbox.env.scrubbed_env` (the allowlist, ``LC_*`` and
``[sandbox] env_passthrough``) plus the server's own ``env``.  Unless the server says
``sandbox = false`` (or ``[sandbox] mode = "off"``), its command runs under bubblewrap with the
shell's view (:func:`~subagents.sandbox.bwrap.bwrap_argv`): the host read-only, the workspace
writable (``writable = false``: read-only), protected and hidden paths as for ``bash``, no network
unless ``network = true`` (default: ``[sandbox] network``).  Where bubblewrap does not work the server
is refused with a sentence saying so (Landlock confines a process from inside it, which the SDK's
launcher cannot do).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from ..sandbox import backends
from ..sandbox import bwrap as _bwrap
from ..sandbox.env import scrubbed_env
from ..sandbox.policy import SandboxPolicy
from ..sandbox.shell import SHELL_HIDDEN
from ..sandbox.workspace import Workspace
from .client import McpStartError
from .config import McpServerConfig

__all__ = ["Launcher"]


class Launcher:
    """Builds the command line and environment of stdio servers for one workspace and policy."""

    def __init__(self, workspace: Workspace, policy: SandboxPolicy) -> None:
        self.workspace = workspace
        self.policy = policy
        self.guards: list[Path] = []  # empty mount points bubblewrap created for missing protected paths

    def confined(self, cfg: McpServerConfig) -> bool:
        """Whether ``cfg``'s process runs in the sandbox."""
        return cfg.sandbox and self.policy.mode != "off"

    def parameters(self, cfg: McpServerConfig) -> StdioServerParameters:
        """The SDK's launch parameters for ``cfg`` (a stdio server); :class:`McpStartError` if it cannot be confined."""
        assert cfg.command is not None
        root = self.workspace.root
        cwd = (root / cfg.cwd) if cfg.cwd and not os.path.isabs(cfg.cwd) else Path(cfg.cwd or root)
        env = scrubbed_env(self.policy.env_passthrough, extra=dict(cfg.env))
        if not self.confined(cfg):
            return StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env, cwd=cwd)
        backend, why = backends.choose(self.policy.mode)
        if backend != "bwrap":
            raise McpStartError(
                f"MCP server {cfg.name!r} ({cfg.source}) cannot run sandboxed: bubblewrap does not work here"
                f"{f' ({why})' if why else ''} and only bubblewrap can confine a server's process; install "
                f"bubblewrap, or set sandbox = false for this server to run it unconfined")
        binary, flags, _ = backends.probe_bwrap()
        assert binary is not None
        home = str(self.workspace.home)
        hidden = [*self.workspace.hidden, *(Path(home + p[1:]) for p in SHELL_HIDDEN)]
        hidden = [Path(os.path.realpath(h)) if os.path.islink(h) else h for h in hidden]
        guard = _bwrap.missing_protected(self.workspace, hidden) if cfg.writable else []
        self.guards += [g for g in guard if g not in self.guards]
        network = self.policy.network if cfg.network is None else cfg.network
        prefix = _bwrap.bwrap_argv(binary, self.workspace, network=network, writable=cfg.writable, cwd=cwd,
                                   flags=flags, hidden=hidden, guard=guard)
        at = prefix.index("--chdir")  # the server's own program and script stay visible (e.g. a venv under /tmp)
        prefix[at:at] = [a for p in _program_paths(cfg, root, hidden) for a in ("--ro-bind", p, p)]
        env["TMPDIR"] = "/tmp"  # private to the server
        return StdioServerParameters(command=prefix[0], args=[*prefix[1:], cfg.command, *cfg.args], env=env,
                                     cwd=root)

    def cleanup(self) -> None:
        """Remove the empty mount points bubblewrap left for missing protected paths (after the servers stopped)."""
        for g in self.guards:
            with contextlib.suppress(OSError):  # not empty, or already gone: leave it
                g.rmdir()
        self.guards.clear()


def _program_paths(cfg: McpServerConfig, root: Path, hidden: list[Path]) -> list[str]:
    """What a sandboxed server must see of its own program read-only, when the sandbox's private ``/tmp`` (or
    another masked folder) would hide it: the command's virtualenv (or the command itself) and the existing
    absolute paths among its arguments (its script).  Never the workspace (bound already) nor a hidden path."""
    assert cfg.command is not None
    found = shutil.which(cfg.command) or cfg.command
    command = Path(os.path.abspath(found))
    venv = command.parent.parent
    wanted = [venv if (venv / "pyvenv.cfg").is_file() else command]
    wanted += [Path(a) for a in cfg.args if os.path.isabs(a) and os.path.exists(a)]
    out: list[str] = []
    for p in wanted:
        p = Path(os.path.abspath(p))
        if p == root or root in p.parents or p in (Path("/"), Path("/tmp")):
            continue
        if any(h == p or h in p.parents or p in h.parents for h in hidden):
            continue
        if str(p) not in out:
            out.append(str(p))
    return out

