"""The shell sees none of ``$HOME`` but the workspace, the toolchains on ``PATH``, git's config and ``home_read``
(``[sandbox] private_home``, on by default), under bubblewrap and Landlock alike.

Every attack runs once per backend.  A leak is a marker (see ``home_kit.SECRETS``: tokens no credential list
names, a run store of another project, credentials inside the directories the shell may read) showing up in any
tool result or the final text; the real home must not change.  The usability tests check that what a command
needs keeps working (a toolchain under home, ``git commit`` with the user's identity, ``home_read``), and
``private_home = false`` in the user's config proves these attacks do see a readable home.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents import ConfigError

from .home_kit import GIT_EMAIL, GIT_NAME, MARK_RE, HostHome, build_home, make_base, py_walk
from .kit import Attack, Call, attack, core, diff, is_store_file, marker, populate_workspace, ran, read, sh, snapshot

BACKENDS = ["bwrap", "landlock"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def hh(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostHome]:
    """A home under ``/var/tmp`` with the workspace at ``~/project`` and three toolchains on ``PATH``."""
    base = make_base()
    root = base / "home" / "user"
    root.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / ".config"))
    try:
        h = build_home(root)
        monkeypatch.setenv("PATH", h.path_env + os.pathsep + os.environ["PATH"])
        yield h
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def run(h: HostHome, backend: str, calls: list[Call], *, ws: Path | None = None,
              timeout: float = 60.0) -> Attack:
    """Run ``calls`` over the workspace; every shell command must have run to its end."""
    a = await attack(ws or h.ws, calls, sandbox=backend, timeout=timeout)
    a.assert_completed()
    shells = [s for s in a.steps if s.tool == "bash"]
    assert all(ran(s.content) for s in shells), f"a command did not run to its end:\n{a.transcript()}"
    return a


def assert_sealed(h: HostHome, a: Attack, before: dict[str, tuple[object, ...]]) -> None:
    leaked = h.leaked(a.everything)
    assert not leaked, f"the shell read {leaked} from home:\n{a.transcript()}"
    assert h.snapshot() == before, f"the real home changed:\n{diff(before, h.snapshot())}"


# --- 1. secrets no list names -------------------------------------------------------------------------------

FIND = ("find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f \\( -name hosts.yml "
        "-o -name '*history' -o -name '*.gpg' -o -name .env -o -name 'credentials*' -o -name '*.keyring' "
        "-o -name 'NAMEMARK*' \\) -print 2>/dev/null | grep -F \"$HOME\" | tee /dev/stderr | "
        f"xargs -r -d '\\n' grep -ao {MARK_RE} 2>/dev/null | sort -u")


async def test_unlisted_secrets_in_home_stay_hidden(hh: HostHome, backend: str) -> None:
    before = hh.snapshot()
    files = " ".join(f"~/{rel}" for rel in hh.secrets if rel != "USERCFG")
    a = await run(hh, backend, [
        sh(f"cat {files} {hh.user_config} 2>&1"),
        sh(FIND, timeout_s=60),
        sh(f"grep -rao {MARK_RE} ~ {hh.root}/.config 2>/dev/null | sort -u"),
        sh("ls -la ~ ~/.config ~/.cargo ~/.local ~/.local/share ~/.config/gh 2>&1"),
        sh(f"tar cf - ~ 2>/dev/null | grep -ao {MARK_RE} | sort -u; "
           f"tar cf - -C / {str(hh.root)[1:]} 2>/dev/null | grep -ao {MARK_RE} | sort -u"),
        sh(py_walk("~")),
        sh("python3 -c \"import os; [print(open(os.path.expanduser('~/' + p)).read()) for p in "
           "('.bash_history', '.config/gh/hosts.yml', '.zsh_history')]\" 2>&1"),
        read(str(hh.root / ".bash_history")),
    ], timeout=120)
    assert_sealed(hh, a, before)


async def test_another_projects_run_store_stays_hidden(hh: HostHome, backend: str) -> None:
    other = populate_workspace(hh.root / "other-project")
    secret = marker("STORE")
    await attack(other, [], seeds=[f"the other project's run mentions {secret}"], sandbox=backend)
    before = hh.snapshot()
    db = "~/other-project/.subagents/state.db"
    a = await run(hh, backend, [
        sh(f"strings {db}* 2>&1 | grep -o 'STOREMARK[0-9a-f]*'; ls -la ~/other-project/.subagents 2>&1"),
        sh(f"sqlite3 {db} .dump 2>&1 | grep -o 'STOREMARK[0-9a-f]*'; cp {db} src/copy.db 2>&1; "
           "strings src/copy.db 2>&1 | grep -o 'STOREMARK[0-9a-f]*'"),
        sh(f"python3 -c \"import sqlite3, os; c = sqlite3.connect(os.path.expanduser('{db}')); "
           "print([r for t in ('transcript', 'runs') for r in c.execute('select * from ' + t)])\" 2>&1"),
        sh(f"cd ~/project/..; grep -rao 'STOREMARK[0-9a-f]*' other-project 2>/dev/null; {py_walk('~/other-project')}"),
    ])
    a.assert_no_leak(secret)
    assert_sealed(hh, a, before)


# --- 3. escapes ---------------------------------------------------------------------------------------------


async def test_escapes_into_home_fail(hh: HostHome, backend: str) -> None:
    home = str(hh.root)
    (hh.ws / "planted").symlink_to(hh.root / ".config" / "gh")  # a symlink that comes with the project
    (hh.ws / "src" / "up").symlink_to("../..")  # ../.. from src/: home
    before = hh.snapshot()
    a = await run(hh, backend, [
        sh("ln -s ~/.config/gh src/x; cat src/x/hosts.yml; ln -s ~ src/h; cat src/h/.bash_history "
           "src/h/.config/hub; cat planted/hosts.yml src/up/.zsh_history 2>&1"),
        sh(f"cat /proc/self/root{home}/.bash_history /proc/$$/root{home}/.config/gh/hosts.yml "
           f"/proc/{os.getpid()}/root{home}/.zsh_history 2>&1"),
        sh(f"cat /proc/1/cwd/../.bash_history /proc/1/root{home}/.bash_history /proc/$$/cwd/../.bash_history "
           "/proc/self/cwd/../.config/hub 2>&1; ls -la /proc/1/cwd/.. /proc/$$/cwd/.. 2>&1"),
        sh("cat ~/.tool/../.config/gh/hosts.yml ~/.tool/bin/../../.bash_history ~/.cargo/../.zsh_history "
           "~/.m2/../.config/hub ~/.rustup/../.bash_history 2>&1; cd ~/.tool && cat ../.bash_history ../.config/hub"),
        sh("cd ~ && cat .bash_history .config/gh/hosts.yml; cd ~/project && cd .. && cat .zsh_history 2>&1"),
        sh('for f in /proc/self/fd/* /proc/$$/fd/*; do ls "$f/" >/dev/null 2>&1 && cat "$f/../.bash_history"; done'),
        sh(f"cat {home}//.bash_history {home}/./.config/gh/hosts.yml /{home}/.config//gh/./hosts.yml "
           f"{home}/project/../.bash_history {home}/.config/git/../hub 2>&1"),
        read("../.bash_history"), read("src/x/hosts.yml"), read("planted/hosts.yml"), read("src/up/.bash_history"),
    ])
    assert_sealed(hh, a, before)


# --- 4. credentials inside what the shell may read ----------------------------------------------------------

INSIDE = ("~/.cargo/credentials.toml", "~/.cargo/credentials", "~/.config/git/credentials", "~/.tool/private.txt",
          "~/.local/share/keyrings/login.keyring")


async def test_credentials_inside_readable_dirs_stay_hidden(hh: HostHome, backend: str) -> None:
    before = hh.snapshot()
    dirs = "~/.cargo ~/.rustup ~/.config/git ~/.tool ~/.local"
    a = await run(hh, backend, [
        sh(f"cat {' '.join(INSIDE)} 2>&1"),
        sh(f"ls -la {dirs} 2>&1; grep -rao {MARK_RE} {dirs} 2>/dev/null | sort -u"),
        sh("cd ~/.cargo && cat ./credentials.toml bin/../credentials; cp ~/.cargo/credentials.toml src/c.toml; "
           f"cat src/c.toml; tar cf - -C ~ .cargo .tool .config/git .local 2>/dev/null | grep -ao {MARK_RE}"),
        sh(py_walk("~/.cargo") + "\n" + py_walk("~/.config/git") + "\n" + py_walk("~/.tool")),
        # what must stay readable in the same directories: so the test cannot pass by hiding them whole
        sh("cat ~/.cargo/env ~/.rustup/settings.toml ~/.config/git/ignore ~/.tool/share/data.txt "
           "~/.local/lib/python3/site.txt; ls ~/.cargo/bin ~/.local/bin"),
    ])
    assert_sealed(hh, a, before)
    rels = (".cargo/env", ".rustup/settings.toml", ".config/git/ignore", ".tool/share/data.txt",
            ".local/lib/python3/site.txt")
    missing = hh.missing(a.step(4).content, *rels)
    assert not missing, f"the shell could not read {missing}:\n{a.transcript()}"
    assert "cargo-hello" in a.step(4).content, a.transcript()
    assert "lb-tool" in a.step(4).content, a.transcript()


# --- 5. what must keep working ------------------------------------------------------------------------------


async def test_toolchains_git_identity_home_read_and_workspace_work(hh: HostHome, backend: str) -> None:
    before = hh.snapshot()
    a = await run(hh, backend, [
        sh("hello; cargo-hello; lb-tool 2>&1"),
        sh("cat ~/.m2/settings.xml ~/.rustup/settings.toml ~/.local/lib/python3/site.txt ~/.cargo/env 2>&1"),
        sh("git init -q src/repo && cd src/repo && echo x > f && git add f && git commit -qm first 2>&1; "
           "git log -1 --format='AUTHOR=%an <%ae>' 2>&1"),
        sh("echo hi > src/new.txt && cat src/new.txt README.md 2>&1"),
    ])
    out = [a.step(i).content for i in range(4)]
    assert hh.usable[".tool/share/data.txt"] in out[0], f"a toolchain under home does not run:\n{a.transcript()}"
    assert "cargo says hello" in out[0], a.transcript()
    assert "local tool" in out[0], a.transcript()
    missing = hh.missing(out[1], ".m2/settings.xml", ".rustup/settings.toml", ".local/lib/python3/site.txt",
                         ".cargo/env")
    assert not missing, f"the shell could not read {missing}:\n{a.transcript()}"
    assert f"AUTHOR={GIT_NAME} <{GIT_EMAIL}>" in out[2], f"git did not use ~/.gitconfig:\n{a.transcript()}"
    assert "hi" in out[3], a.transcript()
    assert "The readme says hello" in out[3], a.transcript()
    assert (hh.ws / "src" / "new.txt").read_text() == "hi\n", "the workspace under home is not writable"
    assert_sealed(hh, a, before)


async def test_git_gets_the_identity_from_gitconfig_never_its_tokens(hh: HostHome, backend: str) -> None:
    """``~/.gitconfig`` (and a file it includes) holds tokens, a credential helper, an alias and an ``ssh`` command
    beside the identity: a command's git has the name, e-mail and preferences, and nothing reads the rest."""
    before = hh.snapshot()
    home = str(hh.root)
    a = await run(hh, backend, [
        sh('cat ~/.gitconfig ~/.gitconfig.local "$GIT_CONFIG_GLOBAL" 2>&1; git config --global --list --show-origin '
           "2>&1; git config --list --includes 2>&1; env | grep -i git; echo END"),
        sh("git var GIT_AUTHOR_IDENT 2>&1; git config --global pull.rebase; git config --global alias.ship; "
           "git config --global core.sshCommand; git config --global credential.helper; git config --get-urlmatch "
           "http.extraheader https://github.com/x 2>&1; echo END"),
        sh("git init -q src/r && cd src/r && git config user.name 'Repo Person' && git config user.email r@example.com"
           " && echo x > f && git add f && git commit -qm one 2>&1 && git log -1 --format='AUTHOR=%an <%ae>' 2>&1"),
        sh(f"printf '[include]\\n\\tpath = {home}/.gitconfig\\n' > \"$TMPDIR/x.cfg\"; "
           'GIT_CONFIG_GLOBAL="$TMPDIR/x.cfg" '
           f"git config --global --includes --list 2>&1; git config --file {home}/.gitconfig.local --list 2>&1; "
           f"git -c include.path={home}/.gitconfig config --list --includes 2>&1; echo END"),
        read(f"{home}/.gitconfig"),
    ])
    out = [a.step(i).content for i in range(4)]
    assert all("END" in o for o in (out[0], out[1], out[3])), a.transcript()
    assert f"{GIT_NAME} <{GIT_EMAIL}>" in out[1], f"git has not the user's identity:\n{a.transcript()}"
    assert "\ntrue\n" in out[1], f"pull.rebase (from the included file) did not reach git:\n{a.transcript()}"
    assert "AUTHOR=Repo Person <r@example.com>" in out[2], f"the repository's own identity lost:\n{a.transcript()}"
    assert_sealed(hh, a, before)


async def test_writes_to_home_do_not_reach_the_real_home(hh: HostHome, backend: str) -> None:
    before = hh.snapshot()
    a = await run(hh, backend, [
        sh("echo x > ~/new.txt && echo HOME-WRITE-OK; cat ~/new.txt 2>&1; echo evil >> ~/.bashrc; "
           "mkdir -p ~/.config/autostart && echo evil > ~/.config/autostart/x.desktop; echo evil >> ~/.tool/bin/hello; "
           "echo evil >> ~/.gitconfig; rm -rf ~/.m2 ~/.cargo/env 2>&1"),
        sh("cat ~/new.txt 2>&1 || echo GONE-AFTER"),
    ])
    assert not (hh.root / "new.txt").exists(), "the shell wrote into the real home"
    assert_sealed(hh, a, before)
    if backend == "bwrap":  # home is an empty writable tmpfs: writing works, and vanishes with the command
        assert "HOME-WRITE-OK" in a.step(0).content, f"home is not writable under bubblewrap:\n{a.transcript()}"
        assert "GONE-AFTER" in a.step(1).content, f"a file written in home outlived its command:\n{a.transcript()}"
    else:  # Landlock: the rest of home is neither readable nor writable
        assert "HOME-WRITE-OK" not in a.step(0).content, f"home is writable under Landlock:\n{a.transcript()}"


async def test_workspace_that_is_home_is_readable_as_before(hh: HostHome, backend: str) -> None:
    ws = populate_workspace(hh.root)
    a = await run(hh, backend, [sh("cat ~/.bash_history .config/gh/hosts.yml ~/.ssh/id_rsa 2>&1")], ws=ws)
    assert hh.secrets[".bash_history"] in a.everything, f"the workspace (home) is not readable:\n{a.transcript()}"
    assert hh.secrets[".config/gh/hosts.yml"] in a.everything, a.transcript()
    assert hh.secrets[".ssh/id_rsa"] not in a.everything, f"a listed credential leaked:\n{a.transcript()}"


# --- 6, 7. who may open home --------------------------------------------------------------------------------


async def test_private_home_off_in_the_user_config_shows_home(hh: HostHome, backend: str) -> None:
    """The old behaviour, and the proof that these attacks would see a leak."""
    hh.configure("[sandbox]\nprivate_home = false\n")
    a = await run(hh, backend, [sh("cat ~/.bash_history ~/.config/gh/hosts.yml ~/.ssh/id_rsa 2>&1")])
    shown = hh.leaked(a.everything)
    assert ".bash_history" in shown, f"private_home = false did not show home:\n{a.transcript()}"
    assert ".config/gh/hosts.yml" in shown, f"private_home = false did not show home:\n{a.transcript()}"
    assert ".ssh/id_rsa" not in shown, f"a listed credential leaked:\n{a.transcript()}"


PROJECT_ASKS = {"private-home-off": "private_home = false\n", "home-read": 'home_read = ["~/.config/gh", "~"]\n',
                "both": 'private_home = false\nhome_read = ["~"]\n'}


@pytest.mark.parametrize("asks", list(PROJECT_ASKS))
async def test_a_trusted_project_cannot_open_home(hh: HostHome, backend: str, asks: str) -> None:
    with (hh.ws / ".subagents" / "config.toml").open("a") as f:
        f.write("\n[sandbox]\n" + PROJECT_ASKS[asks])
    before = hh.snapshot()
    calls = [sh("cat ~/.bash_history ~/.config/gh/hosts.yml 2>&1"), sh(f"grep -rao {MARK_RE} ~ 2>/dev/null")]
    refused: ConfigError | None = None
    try:
        a = await run(hh, backend, calls)
    except ConfigError as e:  # refusing the project's file outright opens nothing either
        refused = e
    else:
        assert_sealed(hh, a, before)
    if refused is not None:
        assert "private_home" in str(refused) or "home_read" in str(refused), refused
        assert hh.snapshot() == before


async def test_shell_started_from_home_subdirectories_sees_only_its_own_workspace(hh: HostHome, backend: str) -> None:
    """A workspace deeper in home (``~/code/team/app``): its parents and siblings stay hidden."""
    sibling = hh.root / "code" / "team" / "other" / "notes.txt"
    sibling.parent.mkdir(parents=True)
    hh.secrets["code/team/other/notes.txt"] = m = marker("SIBLING")
    sibling.write_text(m + "\n")
    hh.ws = ws = populate_workspace(hh.root / "code" / "team" / "app")
    before = hh.snapshot()
    a = await run(hh, backend, [
        sh("cat ../other/notes.txt ~/code/team/other/notes.txt ../../../.bash_history 2>&1; "
           f"grep -rao {MARK_RE} .. ~/code 2>/dev/null"),
        sh("echo ok > src/w.txt && cat src/w.txt README.md"),
    ], ws=ws)
    assert "The readme says hello" in a.step(1).content, a.transcript()
    assert_sealed(hh, a, before)


# --- what the user's own setup may look like ----------------------------------------------------------------


async def test_home_read_never_opens_credentials_or_the_user_config(hh: HostHome, backend: str) -> None:
    hh.configure('[sandbox]\nhome_read = ["~/.ssh", "~/.config", "~/.cargo/credentials.toml"]\n')
    before = hh.snapshot()
    key = (hh.user_config.parent / "owner-key").read_text().strip()
    a = await run(hh, backend, [
        sh(f"cat ~/.ssh/id_rsa ~/.cargo/credentials.toml {hh.user_config} {hh.user_config.parent}/owner-key 2>&1; "
           f"grep -rao {MARK_RE} ~/.ssh ~/.config/subagents 2>/dev/null"),
        sh("cat ~/.config/gh/hosts.yml"),  # what the user did open
    ])
    assert hh.secrets[".config/gh/hosts.yml"] in a.step(1).content, f"home_read is not read:\n{a.transcript()}"
    hidden = [".ssh/id_rsa", ".cargo/credentials.toml", "USERCFG"]
    shown = [rel for rel in hidden if hh.secrets[rel] in a.everything] + (["owner-key"] if key in a.everything else [])
    assert not shown, f"home_read opened {shown}:\n{a.transcript()}"
    assert hh.snapshot() == before, diff(before, hh.snapshot())


async def test_linked_dirs_in_home_keep_what_is_hidden_in_them_hidden(hh: HostHome, backend: str) -> None:
    """``~/.cargo`` and ``~/.tool`` link to another disk (``/data/cargo``), ``~/.config`` into ``~/dotfiles`` (as
    GNU stow leaves it): what is hidden in them stays hidden, by either name, and what is read back still is."""
    data = hh.root.parent.parent / "data"
    data.mkdir()
    for name in (".cargo", ".tool"):
        shutil.move(hh.root / name, data / name)
        (hh.root / name).symlink_to(data / name)
    (hh.root / "dotfiles").mkdir()
    shutil.move(hh.root / ".config", hh.root / "dotfiles" / "config")
    (hh.root / ".config").symlink_to(hh.root / "dotfiles" / "config")
    before = hh.snapshot()
    a = await run(hh, backend, [
        sh("cat ~/.cargo/credentials.toml ~/.cargo/credentials ~/.tool/private.txt ~/.config/git/credentials "
           "~/.config/gh/hosts.yml ~/dotfiles/config/git/credentials 2>&1"),
        sh(f"cat {data}/.cargo/credentials.toml {data}/.cargo/credentials {data}/.tool/private.txt 2>&1; "
           f"grep -rao {MARK_RE} ~/.cargo/ ~/.tool/ ~/.config/ {data} 2>/dev/null"),
        sh("hello; cargo-hello; cat ~/.config/git/ignore; git config user.name"),
    ])
    assert_sealed(hh, a, before)
    out = a.step(2).content
    assert hh.usable[".tool/share/data.txt"] in out, f"a linked toolchain does not run:\n{a.transcript()}"
    assert "cargo says hello" in out, a.transcript()
    assert hh.usable[".config/git/ignore"] in out, f"git's config is not read through a link:\n{a.transcript()}"
    assert GIT_NAME in out, a.transcript()


async def test_a_home_reached_through_a_symlink(hh: HostHome, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$HOME`` spelled through a link (``/home`` -> ``/var/home`` on Fedora Silverblue), ``PATH`` too."""
    link = hh.root.parent.parent / "link"
    link.symlink_to(hh.root.parent)
    home = link / hh.root.name
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", hh.path_env.replace(str(hh.root), str(home)) + os.pathsep + "/usr/bin:/bin")
    before = hh.snapshot()
    a = await run(hh, backend, [
        sh("hello; cargo-hello; lb-tool; git config user.name"),
        sh(f"cat ~/.bash_history {home}/.config/gh/hosts.yml ~/.cargo/credentials.toml 2>&1; "
           f"grep -rao {MARK_RE} ~/ {home}/ 2>/dev/null"),
    ], ws=home / "project")
    assert_sealed(hh, a, before)
    out = a.step(0).content
    assert hh.usable[".tool/share/data.txt"] in out, f"a toolchain under a linked home does not run:\n{a.transcript()}"
    assert "cargo says hello" in out, a.transcript()
    assert "local tool" in out, a.transcript()
    assert GIT_NAME in out, a.transcript()


@pytest.mark.parametrize("how", ["home-read-parent", "workspace-on-path"])
async def test_a_readable_dir_around_the_workspace_opens_none_of_its_state(hh: HostHome, backend: str, how: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace inside a ``home_read`` entry (``~/code``), or on ``PATH`` itself (``~/bin`` kept in git): its
    run store and config stay hidden, its protected paths read-only, the rest writable."""
    if how == "home-read-parent":
        hh.configure('[sandbox]\nhome_read = ["~/code"]\n')
        hh.ws = populate_workspace(hh.root / "code" / "app")
    else:
        monkeypatch.setenv("PATH", f"{hh.ws}{os.pathsep}{hh.ws}/src{os.pathsep}{os.environ['PATH']}")
    secret, key = marker("STORE"), "sk-" + marker("CFGKEY")
    with (hh.ws / ".subagents" / "config.toml").open("a") as f:
        f.write(f'\n[providers.openai]\napi_key = "{key}"\n')
    await attack(hh.ws, [], seeds=[f"the first run mentions {secret}"], sandbox=backend)
    before = {p: snapshot(hh.ws / p, skip=is_store_file) for p in (".git", ".subagents")}
    a = await run(hh, backend, [
        sh("strings .subagents/state.db* | grep -o 'STOREMARK[0-9a-f]*'; cat .subagents/config.toml 2>&1"),
        sh("echo evil >> .git/config; echo evil > .subagents/agents/evil.md; echo w > src/w.txt && echo WS-WRITE-OK"),
    ])
    a.assert_no_leak(secret, core([key])[0])
    assert "WS-WRITE-OK" in a.step(1).content, f"the workspace is not writable:\n{a.transcript()}"
    for p, snap in before.items():
        assert snapshot(hh.ws / p, skip=is_store_file) == snap, f"{p} changed:\n{a.transcript()}"


@pytest.mark.parametrize("opened", ["private-home-off", "workspace-is-home"])
async def test_a_linked_config_dir_when_home_is_not_private(hh: HostHome, backend: str, opened: str) -> None:
    """``~/.config`` a link into ``~/dotfiles`` with all of home shown: commands run, credentials stay hidden."""
    (hh.root / "dotfiles").mkdir()
    shutil.move(hh.root / ".config", hh.root / "dotfiles" / "config")
    (hh.root / ".config").symlink_to(hh.root / "dotfiles" / "config")
    if opened == "private-home-off":
        hh.configure("[sandbox]\nprivate_home = false\n")
    ws = hh.ws if opened == "private-home-off" else populate_workspace(hh.root)
    a = await run(hh, backend, [sh("cat ~/.config/git/credentials ~/dotfiles/config/git/credentials ~/.ssh/id_rsa "
                                   "~/.config/git/ignore 2>&1")], ws=ws)
    assert hh.usable[".config/git/ignore"] in a.everything, a.transcript()
    shown = [rel for rel in (".config/git/credentials", ".ssh/id_rsa") if hh.secrets[rel] in a.everything]
    assert not shown, f"the shell read {shown}:\n{a.transcript()}"


async def test_package_caches_are_read_without_the_settings_beside_them(hh: HostHome, backend: str) -> None:
    """With the network off, an offline build reads what is already downloaded (``~/go/pkg/mod``,
    ``~/.m2/repository``, ``~/.cache/pip``); the tools' settings next to those (passwords) stay hidden."""
    hh.configure('[sandbox]\ndeny_read = ["~/.tool/private.txt"]\n')  # no home_read: the defaults alone
    secret = marker("MAVENPW")
    (hh.root / ".m2" / "settings.xml").write_text(f"<servers><server><password>{secret}</password></server>\n")
    for rel, text in {".m2/repository/org/x/x.pom": "<project>POMCACHED</project>",
                      "go/pkg/mod/example.com/m@v1/m.go": "package m // GOCACHED",
                      ".cache/pip/http/a": "PIPCACHED"}.items():
        (hh.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (hh.root / rel).write_text(text)
    before = hh.snapshot()
    a = await run(hh, backend, [sh("cat ~/.m2/repository/org/x/x.pom ~/go/pkg/mod/example.com/m@v1/m.go "
                                   "~/.cache/pip/http/a; cat ~/.m2/settings.xml 2>&1")])
    for token in ("POMCACHED", "GOCACHED", "PIPCACHED"):
        assert token in a.step(0).content, a.transcript()
    a.assert_no_leak(secret)
    assert_sealed(hh, a, before)


TOOLCHAIN_SECRETS = {
    # path under home: content ({m}: the marker); each inside a toolchain read back whole because its bin is on PATH
    ".nvm/versions/node/v20.11.0/etc/npmrc": "//registry.npmjs.org/:_authToken={m}\n",
    ".npm-global/etc/npmrc": "//npm.example.com/:_authToken={m}\n",
    ".gem/credentials": "---\n:rubygems_api_key: {m}\n",
    ".composer/auth.json": '{{"github-oauth": {{"github.com": "{m}"}}}}\n',
    "miniconda3/.condarc": "channels:\n  - https://conda.example.com/t/{m}/main\n",
    ".pyenv/versions/3.12.1/pip.conf": "[global]\nindex-url = https://u:{m}@pypi.example.com/simple\n",
    ".local/share/mise/installs/python/3.12.1/pip.conf": "[global]\nindex-url = https://u:{m}@pypi.example.com/x\n",
    ".cabal/config": "hackage.haskell.org\n  username: me\n  password: {m}\n",
}
TOOLCHAIN_BINS = (".nvm/versions/node/v20.11.0/bin", ".npm-global/bin", ".gem/ruby/3.2.0/bin", ".composer/vendor/bin",
                  "miniconda3/bin", ".pyenv/shims", ".local/share/mise/shims", ".cabal/bin")


async def test_tokens_inside_toolchains_read_back_stay_hidden(hh: HostHome, backend: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A toolchain on ``PATH`` is read back whole (its programs need their libraries), and some keep a token inside:
    npm's global ``etc/npmrc`` (``npm config set --global``), ``~/.gem/credentials``, Composer's ``auth.json``,
    conda's ``.condarc``, a Python's ``pip.conf``.  Those stay hidden; the toolchains' other files do not."""
    for rel, template in TOOLCHAIN_SECRETS.items():
        (hh.root / rel).parent.mkdir(parents=True, exist_ok=True)
        hh.secrets[rel] = m = marker("TOOLSECRET")
        (hh.root / rel).write_text(template.format(m=m))
    for d in TOOLCHAIN_BINS:
        (hh.root / d).mkdir(parents=True, exist_ok=True)
    (hh.root / ".nvm/versions/node/v20.11.0/bin/node-hello").write_text("#!/bin/sh\necho NODEHELLO\n")
    (hh.root / ".nvm/versions/node/v20.11.0/bin/node-hello").chmod(0o755)
    (hh.root / ".nvm/versions/node/v20.11.0/etc/other").write_text("NPMETC\n")
    (hh.root / "miniconda3/condarc.txt").write_text("CONDATXT\n")
    monkeypatch.setenv("PATH", os.pathsep.join(str(hh.root / d) for d in TOOLCHAIN_BINS) + os.pathsep
                       + os.environ["PATH"])
    before = hh.snapshot()
    homes = " ".join(f"~/{d.split('/')[0]}" for d in TOOLCHAIN_BINS)
    a = await run(hh, backend, [
        sh(f"cat {' '.join('~/' + rel for rel in TOOLCHAIN_SECRETS)} 2>&1"),
        sh(f"grep -rao {MARK_RE} {homes} ~/.local/share/mise 2>/dev/null | sort -u; tar cf - -C ~ .nvm .gem "
           f".composer miniconda3 .npm-global .pyenv .local/share/mise .cabal 2>/dev/null | grep -ao {MARK_RE}"),
        sh("node-hello; cat ~/.nvm/versions/node/v20.11.0/etc/other ~/miniconda3/condarc.txt; ls ~/.gem/ruby"),
    ])
    assert_sealed(hh, a, before)
    for token in ("NODEHELLO", "NPMETC", "CONDATXT", "3.2.0"):  # (Landlock: no listing of a dir with a hidden entry)
        assert token in a.step(2).content, a.transcript()
