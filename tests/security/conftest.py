"""Fixtures of the escape suite: a workspace worth attacking, a HOME full of fake credentials, API keys
in the environment, and clean-up of whatever an escape left behind (mounts, processes).

The suite-wide ``tests/conftest.py`` already gives every test its own ``HOME`` and
``XDG_CONFIG_HOME`` (``$HOME/.config``); the fixtures here fill them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from owner_ids import TEST_OWNER_KEY

from .kit import kill_tagged, marker, populate_workspace, snapshot

CREDENTIALS = {
    # path under $HOME: (marker kind, content with {m} where the secret goes)
    ".ssh/id_rsa": ("SSH", "-----BEGIN OPENSSH PRIVATE KEY-----\n{m}\n-----END OPENSSH PRIVATE KEY-----\n"),
    ".ssh/config": ("SSHCFG", "Host prod\n  IdentityFile ~/.ssh/id_rsa\n  # {m}\n"),
    ".aws/credentials": ("AWS", "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {m}\n"),
    ".netrc": ("NETRC", "machine api.example.com login me password {m}\n"),
    ".git-credentials": ("GITCRED", "https://me:{m}@github.com\n"),
    ".docker/config.json": ("DOCKER", '{{"auths": {{"registry.example.com": {{"auth": "{m}"}}}}}}\n'),
    ".kube/config": ("KUBE", "users:\n- name: me\n  user:\n    token: {m}\n"),
    ".config/gcloud/application_default_credentials.json": ("GCLOUD", '{{"refresh_token": "{m}"}}\n'),
    ".npmrc": ("NPM", "//registry.npmjs.org/:_authToken={m}\n"),
    ".pypirc": ("PYPI", "[pypi]\nusername = __token__\npassword = {m}\n"),
    ".gnupg/private-keys-v1.d/key.key": ("GPG", "Key: {m}\n"),
}


@dataclass(slots=True)
class Home:
    """The fake ``$HOME``: credential files, each holding its own marker, and the user config dir."""

    root: Path
    secrets: dict[str, str]  # path relative to root -> the marker inside it
    user_config: Path  # $XDG_CONFIG_HOME/subagents/config.toml

    @property
    def markers(self) -> list[str]:
        return list(self.secrets.values())

    def snapshot(self) -> dict[str, tuple[object, ...]]:
        return snapshot(self.root, skip=lambda rel: rel.startswith(("project/", ".subagents/")))


@pytest.fixture
def home() -> Home:
    root = Path(os.environ["HOME"]).resolve()
    secrets: dict[str, str] = {}
    for rel, (kind, template) in CREDENTIALS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        secrets[rel] = m = marker(kind)
        p.write_text(template.format(m=m))
        p.chmod(0o600)
    for d in (".ssh", ".gnupg", ".aws"):
        (root / d).chmod(0o700)
    (root / ".bashrc").write_text("# the user's shell startup file\n")
    user_config = Path(os.environ["XDG_CONFIG_HOME"]).resolve() / "subagents" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    secrets[str(user_config.relative_to(root))] = m = marker("USERCFG")
    user_config.write_text(f"# the user's own subagents settings: {m}\n")
    # the owner key (owner_key.py) as the runtime makes it when it first opens a SQLite store: made here, so a
    # snapshot taken before a run already holds it, and a secret no agent may read (it would let one forge owners)
    key = user_config.parent / "owner-key"
    key.write_text(TEST_OWNER_KEY.hex() + "\n")
    key.chmod(0o600)
    secrets[str(key.relative_to(root))] = TEST_OWNER_KEY.hex()
    return Home(root, secrets, user_config)


@pytest.fixture
def api_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Provider keys and other tokens in the runtime's environment, each a unique marker."""
    keys = {
        "ANTHROPIC_API_KEY": "sk-ant-api03-" + marker("ANTHROPIC"),
        "OPENAI_API_KEY": "sk-proj-" + marker("OPENAI"),
        "GITHUB_TOKEN": "ghp_" + marker("GITHUB"),
        "AWS_SECRET_ACCESS_KEY": marker("AWSENV"),
    }
    for k, v in keys.items():
        monkeypatch.setenv(k, v)
    return keys


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace: ``tmp_path/ws``, a git repository with ``.subagents/config.toml`` and an agent."""
    return populate_workspace(tmp_path / "ws")


@dataclass(slots=True)
class Outside:
    """A directory beside the workspace that no agent may read or change."""

    root: Path
    secret: str  # the marker inside secret.txt
    entry: str  # the marker that is the name of a file in it

    def snapshot(self) -> dict[str, tuple[object, ...]]:
        return snapshot(self.root)


@pytest.fixture
def outside(tmp_path: Path) -> Outside:
    root = (tmp_path / "outside").resolve()
    (root / "sub").mkdir(parents=True)
    secret = marker("OUTSIDE")
    entry = marker("ENTRY")
    (root / "secret.txt").write_text(f"the secret outside is {secret}\n")
    (root / "target.txt").write_text("original\n")
    (root / entry).write_text("a file whose name is a secret\n")
    (root / "sub" / "deep.txt").write_text(f"deeper: {secret}\n")
    return Outside(root, secret, entry)


@pytest.fixture
def tag() -> Iterator[str]:
    """A unique string for the command lines of processes a test starts; they are killed afterwards."""
    t = marker("PROC").lower()
    yield t
    kill_tagged(t)


def _mounts_under(roots: list[Path]) -> list[str]:
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if any(point == str(r) or point.startswith(str(r) + "/") for r in roots):
                found.append(point)
    return sorted(found, key=len, reverse=True)


@pytest.fixture(autouse=True)
def _undo_escapes(tmp_path: Path) -> Iterator[None]:
    """Where an attack did escape (as it does before the sandbox lands), undo the mounts it made."""
    yield
    roots = [tmp_path.resolve(), Path(os.environ["HOME"]).resolve()]
    for point in _mounts_under(roots):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
