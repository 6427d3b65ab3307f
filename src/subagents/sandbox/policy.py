"""``SandboxPolicy``: what the user configured about confinement (``[sandbox]`` in the config).

The policy is data only; :class:`~subagents.sandbox.workspace.Workspace` turns it into the paths an
agent may not write or read, and the shell sandbox turns it into a bubblewrap / Landlock setup.

>>> p = SandboxPolicy(protect=("secrets",), deny_read=("~/.config/acme",))
>>> p.mode, p.network
('auto', False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["CREDENTIAL_PATHS", "DEFAULT_HIDDEN", "DEFAULT_PROTECTED", "SANDBOX_MODES", "SandboxPolicy"]

SANDBOX_MODES = ("auto", "bwrap", "landlock", "off")

DEFAULT_PROTECTED: tuple[str, ...] = (".subagents", ".git", ".claude", ".qwen", ".mcp.json")
"""Workspace paths no agent tool may write or delete, whatever the mode or the rules.  ``.mcp.json`` too: the
next runtime over the workspace starts the servers it names (``"sandbox": false``: unconfined, with ``${VAR}``
expanded from the runtime's environment), so an agent that wrote it would run code outside every sandbox."""

DEFAULT_HIDDEN: tuple[str, ...] = (".subagents/state.db", ".subagents/state.db-wal", ".subagents/state.db-shm",
                                   ".subagents/state.db-journal", ".subagents/config.toml")
"""Workspace paths no agent tool may read: the default run store, and the project's config (it may hold an
``api_key``); the store a runtime opens is added."""

CREDENTIAL_PATHS: tuple[str, ...] = (
    "~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc", "~/.git-credentials", "~/.docker", "~/.kube",
    "~/.config/gcloud", "~/.npmrc", "~/.pypirc", "~/.cargo/credentials", "~/.cargo/credentials.toml",
    "~/.config/git/credentials",
)
"""Where credentials usually live in ``$HOME``: hidden from every agent tool and from the shell."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """The ``[sandbox]`` settings.

    ``mode``: ``auto`` (bubblewrap, else Landlock, else refuse the shell), ``bwrap``, ``landlock`` or
    ``off`` (unconfined, loudly).  ``protect`` / ``deny_read`` add paths (relative to the workspace,
    absolute, or ``~/...``); ``unprotect`` removes default protected paths (read from the user's own
    config file only).  ``env_passthrough`` names extra environment variables child processes get.
    ``private_home``: the shell sees none of ``$HOME`` but the workspace, the toolchains on ``PATH``, git's
    config and ``home_read`` (see :mod:`~subagents.sandbox.home`; both from the user's own config file only).
    """

    mode: str = "auto"
    network: bool = False
    protect: tuple[str, ...] = ()
    unprotect: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    env_passthrough: tuple[str, ...] = ()
    allow_git: bool = False
    allow_hardlinks: bool = False
    allow_other_devices: bool = False
    private_home: bool = True
    home_read: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in SANDBOX_MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(SANDBOX_MODES)}, got {self.mode!r}")

    @classmethod
    def from_settings(cls, s: Settings, *, mode: str | None = None) -> SandboxPolicy:
        def t(v: Sequence[str]) -> tuple[str, ...]:
            return tuple(v)

        return cls(mode=mode or s.sandbox_mode, network=s.sandbox_network, protect=t(s.protect),
                   unprotect=t(s.unprotect), deny_read=t(s.deny_read), env_passthrough=t(s.env_passthrough),
                   allow_git=s.allow_git, allow_hardlinks=s.allow_hardlinks,
                   allow_other_devices=s.allow_other_devices, private_home=s.private_home,
                   home_read=t(s.home_read))
