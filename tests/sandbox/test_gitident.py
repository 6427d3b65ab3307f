"""What a command's git gets of the user's global configuration (``sandbox/gitident.py``): the identity and plain
preferences, read by the host's git (includes resolved), written back so git reads exactly those values."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from subagents.sandbox import gitident
from subagents.sandbox.policy import SandboxPolicy
from subagents.sandbox.workspace import Workspace

TOKEN = "ghp_T0KEN"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    (h / "proj").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    gitident._cache.clear()
    return h


def _git_get(cfg: Path, key: str) -> str:
    return subprocess.run(["git", "config", "--file", str(cfg), "--get", key], capture_output=True, text=True,
                          check=True).stdout.removesuffix("\n")


@pytest.mark.parametrize("value", ['a "quoted" name', "back\\slash", "tab\there", "semi;colon # hash", "  spaced  ",
                                   "Zoë 李", "two\nlines", "bell\bs", "ends with \\"])
def test_a_value_reads_back_exactly(tmp_path: Path, value: str) -> None:
    cfg = tmp_path / "c"
    cfg.write_text(gitident.render([("user.name", value), ("pull.rebase", "true")]), encoding="utf-8")
    assert _git_get(cfg, "user.name") == value
    assert _git_get(cfg, "pull.rebase") == "true"


def test_only_the_listed_keys_pass_includes_resolved(home: Path) -> None:
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Ann\n\temail = ann@home.example\n\tsigningKey = ABC\n"
        f'[url "https://x:{TOKEN}@github.com/"]\n\tinsteadOf = https://github.com/\n'
        f"[http]\n\textraHeader = Authorization: Bearer {TOKEN}\n[credential]\n\thelper = store\n"
        f"[alias]\n\tst = !echo {TOKEN}\n[core]\n\tsshCommand = ssh -i {TOKEN}\n\tpager = less\n\tautocrlf = input\n"
        "[include]\n\tpath = more.inc\n"
        f'[includeIf "gitdir:{home}/proj/"]\n\tpath = work.inc\n')
    (home / "more.inc").write_text(f"[pull]\n\trebase = true\n[filter \"x\"]\n\tclean = cat {TOKEN}\n")
    (home / "work.inc").write_text("[user]\n\temail = ann@work.example\n")
    subprocess.run(["git", "init", "-q", str(home / "proj")], check=True)
    text = gitident.identity_text(home / "proj", home)
    assert text is not None
    assert TOKEN not in text
    cfg = home / "out"
    cfg.write_text(text)
    got = subprocess.run(["git", "config", "--file", str(cfg), "--list"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    # the project's includeIf picked its e-mail; the included file's preference came through
    assert sorted(got) == ["core.autocrlf=input", "pull.rebase=true", "user.email=ann@work.example", "user.name=Ann"]
    elsewhere = gitident.identity_text(home, home)  # not in the project: the e-mail of home
    assert elsewhere is not None
    assert "ann@home.example" in elsewhere


def test_an_onbranch_identity_follows_a_switch_of_branch(home: Path) -> None:
    proj = home / "proj"
    subprocess.run(["git", "init", "-q", "-b", "main", str(proj)], check=True)
    (home / ".gitconfig").write_text('[user]\n\tname = Ann\n[includeIf "onbranch:work/**"]\n\tpath = work.inc\n')
    (home / "work.inc").write_text("[user]\n\temail = ann@work.example\n")
    assert "ann@work.example" not in (gitident.identity_text(proj, home) or "")
    subprocess.run(["git", "-C", str(proj), "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "1"],
                   check=True)
    subprocess.run(["git", "-C", str(proj), "checkout", "-q", "-b", "work/x"], check=True)
    assert "ann@work.example" in (gitident.identity_text(proj, home) or "")
    subprocess.run(["git", "-C", str(proj), "checkout", "-q", "main"], check=True)
    assert "ann@work.example" not in (gitident.identity_text(proj, home) or "")


def test_the_text_is_read_again_when_an_included_file_changes(home: Path) -> None:
    (home / ".gitconfig").write_text("[include]\n\tpath = id.inc\n")
    inc = home / "id.inc"
    inc.write_text("[user]\n\tname = First\n")
    assert '"First"' in (gitident.identity_text(home / "proj", home) or "")
    inc.write_text("[user]\n\tname = Second Name\n")  # (another size: seen even where mtime is coarse)
    assert '"Second Name"' in (gitident.identity_text(home / "proj", home) or "")
    (home / ".gitconfig").unlink()
    assert gitident.identity_text(home / "proj", home) is None


@pytest.mark.parametrize("case", ["no-git", "broken", "nothing-kept", "not-utf8"])
def test_no_identity_is_none_never_an_error(home: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = home / ".gitconfig"
    if case == "no-git":
        cfg.write_text("[user]\n\tname = Ann\n")
        monkeypatch.setenv("PATH", str(home / "nowhere"))
    elif case == "broken":
        cfg.write_text("[user\n\tname = Ann\n")
    elif case == "nothing-kept":
        cfg.write_text(f"[credential]\n\thelper = !echo {TOKEN}\n")
    else:
        cfg.write_bytes(b"[user]\n\tname = Ann \xff\xfe\n")
    assert gitident.identity_text(home / "proj", home) is None


def test_place_names_the_file_or_dev_null_and_respects_home_read(home: Path, tmp_path: Path) -> None:
    (home / ".gitconfig").write_text(f"[user]\n\tname = Ann\n[http]\n\textraHeader = {TOKEN}\n")
    temp = tmp_path / "cmd"
    temp.mkdir()
    ws = Workspace(home / "proj", home=home)
    env: dict[str, str] = {}
    gitident.place(ws, temp, env, copy=True)  # Seatbelt: a copy in the command's temp dir
    assert env["GIT_CONFIG_GLOBAL"] == str(temp / ".gitconfig")
    assert (temp / ".gitconfig").read_text() == '[user]\n\tname = "Ann"\n'
    gitident.place(ws, temp, env, copy=False)  # Landlock: the file the runtime keeps, which it grants reading
    assert [Path(env["GIT_CONFIG_GLOBAL"])] == gitident.granted(ws)
    assert not str(gitident.granted(ws)[0]).startswith(str(home))
    assert gitident.bound(ws) is not None
    assert Path(gitident.bound(ws) or "").read_text() == '[user]\n\tname = "Ann"\n'
    (home / ".gitconfig").write_text(f"[http]\n\textraHeader = {TOKEN}\n")
    for copy in (True, False):
        env = {}
        gitident.place(ws, temp, env, copy=copy)
        assert env == {"GIT_CONFIG_GLOBAL": os.devnull}
    assert gitident.bound(ws) is None
    assert gitident.granted(ws) == []
    for policy in (SandboxPolicy(home_read=("~/.gitconfig",)), SandboxPolicy(home_read=("~/.config/git",)),
                   SandboxPolicy(private_home=False)):
        env = {}
        gitident.place(Workspace(home / "proj", policy, home=home), temp, env, copy=False)
        assert env == {}, policy  # read back whole, as the user asked (or home is not private)


def test_no_key_given_names_a_command_a_path_or_a_credential() -> None:
    risky = ("command", "helper", "pager", "editor", "hook", "program", "path", "url", "header", "proxy", "key",
             "cookie", "token", "password", "fsmonitor", "askpass", "include", "alias", "filter", "driver")
    assert not [k for k in gitident.KEYS - {"core.quotepath"} if any(r in k for r in risky)]  # (a yes or no)
    assert all(k == k.lower() and k.count(".") == 1 for k in gitident.KEYS)  # as git --list spells them


def test_bound_writes_its_file_again_when_tmp_was_cleaned(home: Path) -> None:
    (home / ".gitconfig").write_text("[user]\n\tname = Ann\n")
    ws = Workspace(home / "proj", home=home)
    first = gitident.bound(ws)
    assert first is not None
    shutil.rmtree(Path(first).parent)  # a cleaner of /tmp on a long-lived process
    again = gitident.bound(ws)
    assert again == first
    assert Path(again).read_text() == '[user]\n\tname = "Ann"\n'
