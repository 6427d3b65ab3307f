"""A home directory worth attacking, for ``test_private_home.py``: secrets the credential list does not name,
credentials inside the directories the shell may read, and the toolchains and settings it must keep reading.

It lives under ``/var/tmp`` (like ``/home/user``), never under ``/tmp``: the shell sandbox replaces ``/tmp`` by a
private tmpfs, which would hide the home directory for a reason that has nothing to do with ``private_home``.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from owner_ids import TEST_OWNER_KEY

from .kit import Snapshot, marker, populate_workspace, snapshot

MARK_RE = "'[A-Z]*MARK[0-9a-f]\\{32\\}'"
"""A ``grep -o`` pattern for every marker: attacks print only what they find, so no output is ever cut short."""

SECRETS = {
    # path under home: content, {m} is the marker; none of these may ever reach an agent
    ".config/gh/hosts.yml": "github.com:\n    oauth_token: {m}\n",
    ".config/hub": "github.com:\n- oauth_token: {m}\n",
    ".bash_history": "export OPENAI_API_KEY={m}\n",
    ".zsh_history": ": 1700000000:0;curl -H 'Authorization: Bearer {m}' https://api.example.com\n",
    ".terraform.d/credentials.tfrc.json": '{{"credentials": {{"app.terraform.io": {{"token": "{m}"}}}}}}\n',
    ".azure/msal_token_cache.json": '{{"AccessToken": {{"x": {{"secret": "{m}"}}}}}}\n',
    ".password-store/bank.gpg": "{m}\n",
    "other-project/.env": "DATABASE_URL=postgres://u:{m}@db/x\n",
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n{m}\n-----END OPENSSH PRIVATE KEY-----\n",
    # inside directories the shell may read: credentials, and what the user's deny_read names
    ".cargo/credentials.toml": '[registry]\ntoken = "{m}"\n',
    ".cargo/credentials": '[registry]\ntoken = "{m}"\n',
    ".config/git/credentials": "https://me:{m}@github.com\n",
    ".tool/private.txt": "the tool's licence key {m}\n",
    # beside ~/.local/bin (on PATH), which is read back alone, not the whole of ~/.local
    ".local/share/keyrings/login.keyring": "{m}\n",
}

USABLE = {
    # path under home: what the shell must still read there (a toolchain, its companion, git's config, home_read)
    ".tool/share/data.txt": "TOOL",
    ".cargo/env": "CARGOENV",
    ".rustup/settings.toml": "RUSTUP",
    ".local/lib/python3/site.txt": "LOCALLIB",
    ".config/git/ignore": "GITIGNORE",
    ".m2/settings.xml": "MAVEN",
}

GIT_NAME, GIT_EMAIL = "Home Tester", "home-tester@example.com"
DEFAULT_CONFIG = '[sandbox]\nhome_read = ["~/.m2"]\ndeny_read = ["~/.tool/private.txt"]\n'
"""The user's own settings unless a test says otherwise: one ``home_read`` entry, one ``deny_read`` inside a
toolchain."""


@dataclass(slots=True)
class HostHome:
    root: Path
    ws: Path  # the workspace: ``root/project`` unless a test moves it
    user_config: Path
    secrets: dict[str, str] = field(default_factory=dict)  # path under root -> the marker in it
    names: list[str] = field(default_factory=list)  # markers that are names of entries in home
    usable: dict[str, str] = field(default_factory=dict)  # path under root -> the token the shell must read

    @property
    def markers(self) -> list[str]:
        return [*self.secrets.values(), *self.names]

    @property
    def path_env(self) -> str:
        return os.pathsep.join(str(self.root / d) for d in (".tool/bin", ".cargo/bin", ".local/bin"))

    def configure(self, text: str) -> None:
        """Write the user's config file (``$XDG_CONFIG_HOME/subagents/config.toml``); it holds a secret too."""
        self.user_config.write_text(f"# the user's own settings: {self.secrets['USERCFG']}\n{text}")

    def snapshot(self) -> Snapshot:
        """All of home but the workspace (``ws``), whose own tests are elsewhere."""
        ws = self.ws.relative_to(self.root).as_posix()
        return snapshot(self.root, skip=lambda rel: rel == ws or rel.startswith(ws + "/"))

    def leaked(self, text: str) -> list[str]:
        found = [rel for rel, m in self.secrets.items() if m in text]
        return found + [f"(the name {n})" for n in self.names if n in text]

    def missing(self, text: str, *rels: str) -> list[str]:
        """Which of the ``USABLE`` files ``rels`` (default: all) the shell did not read."""
        return [rel for rel in rels or tuple(self.usable) if self.usable[rel] not in text]


def make_base() -> Path:
    return Path("/var/tmp") / f"subagents-escape-{uuid.uuid4().hex}"


def build_home(root: Path) -> HostHome:
    """Fill ``root`` (the future ``$HOME``; ``XDG_CONFIG_HOME`` must already be ``root/.config``)."""
    user_config = root / ".config" / "subagents" / "config.toml"
    user_config.parent.mkdir(parents=True)
    h = HostHome(root, root / "project", user_config)
    for rel, template in SECRETS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        h.secrets[rel] = m = marker("HOMESECRET")
        p.write_text(template.format(m=m))
    for rel, kind in USABLE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        h.usable[rel] = token = f"{kind}-TOKEN-{uuid.uuid4().hex}"
        p.write_text(token + "\n")
    for d in (root, root / ".config"):  # an entry whose name is a secret
        name = marker("NAME")
        (d / name).write_text("a file whose name is a secret\n")
        h.names.append(name)
    scripts = {".tool/bin/hello": f"#!/bin/sh\ncat {root}/.tool/share/data.txt\n",
               ".cargo/bin/cargo-hello": "#!/bin/sh\necho cargo says hello\n",
               ".local/bin/lb-tool": "#!/bin/sh\necho local tool\n"}
    for rel, text in scripts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        (root / rel).chmod(0o755)
    # git's own configuration: the identity a commit needs, beside tokens a user does put there (gitident)
    h.secrets[".gitconfig"] = m = marker("HOMESECRET")
    (root / ".gitconfig").write_text(
        f"[user]\n\tname = {GIT_NAME}\n\temail = {GIT_EMAIL}\n"
        f'[url "https://x-access-token:{m}@github.com/"]\n\tinsteadOf = https://github.com/\n'
        f"[http]\n\textraHeader = Authorization: Bearer {m}\n[credential]\n\thelper = !echo password={m}\n"
        "[include]\n\tpath = .gitconfig.local\n")
    h.secrets[".gitconfig.local"] = m = marker("HOMESECRET")
    (root / ".gitconfig.local").write_text(f"[alias]\n\tship = !curl -H 'X-Token: {m}' https://x\n"
                                           f"[pull]\n\trebase = true\n[core]\n\tsshCommand = ssh -i {m}\n")
    h.secrets["USERCFG"] = marker("USERCFG")
    h.configure(DEFAULT_CONFIG)
    (user_config.parent / "owner-key").write_text(TEST_OWNER_KEY.hex() + "\n")  # made before any snapshot
    (user_config.parent / "owner-key").chmod(0o600)
    populate_workspace(h.ws)
    return h


def py_walk(top: str) -> str:
    """A python3 command that walks ``top`` and prints every marker in a file's name or content."""
    return f"""python3 - <<'EOF'
import os, re
pat = re.compile(rb'[A-Z]*MARK[0-9a-f]{{32}}')
for d, dirs, files in os.walk(os.path.expanduser({top!r})):
    for f in dirs + files:
        p = os.path.join(d, f)
        if pat.search(f.encode()):
            print('name', p)
        try:
            with open(p, 'rb') as fh:
                print(p, sorted(set(m.decode() for m in pat.findall(fh.read()))))
        except OSError:
            pass
EOF"""
