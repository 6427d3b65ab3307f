"""The attacker's kit: run a scripted agent against a real runtime and look at what it changed or saw.

Everything here works from *outside* the agent's reach (the test process), so it can tell whether a
confinement held by its effect: a marker that shows up in a tool result, a file outside that changed,
a process that survived, a connection that reached a server.  It imports only the public runtime and
the standard library, so ``child_runtime.py`` can use it in a fresh process too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents import Runtime
from subagents.config import user_config_dir
from subagents.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from subagents.runtime.result import RunResult
from subagents.runtime.status import Outcome
from subagents.trust import add_trusted

ATTACK_PROMPT = "probe the sandbox"
"""The prompt of every attacking run (seed runs use other prompts)."""

Call = tuple[str, dict[str, Any]]


def marker(kind: str) -> str:
    """A unique secret such as ``SSHMARK3fa2...``; commands only ever name its prefix, never all of it."""
    return f"{kind}MARK{uuid.uuid4().hex}"


def core(secrets: dict[str, str] | Sequence[str]) -> list[str]:
    """The marker inside each secret (``sk-ant-api03-ANTHROPICMARK3fa2...`` -> ``ANTHROPICMARK3fa2...``):
    a leak of the marker alone is still a leak."""
    values = secrets.values() if isinstance(secrets, dict) else secrets
    out = []
    for v in values:
        m = re.search(r"[A-Z]+MARK[0-9a-f]{32}", v)
        out.append(m.group() if m else v)
    return out


# --- building calls -------------------------------------------------------------------------------


def read(path: str) -> Call:
    return ("read_file", {"path": path})


def write(path: str, content: str = "PWNED by an agent\n") -> Call:
    return ("write_file", {"path": path, "content": content})


def edit(path: str, old: str, new: str = "PWNED", replace_all: bool = True) -> Call:
    return ("edit_file", {"path": path, "old_string": old, "new_string": new, "replace_all": replace_all})


def ls(path: str) -> Call:
    return ("list_dir", {"path": path})


def find(pattern: str, path: str = ".") -> Call:
    return ("glob", {"pattern": pattern, "path": path})


def grep(pattern: str, path: str = ".", glob: str | None = None) -> Call:
    args: dict[str, Any] = {"pattern": pattern, "path": path}
    if glob is not None:
        args["glob"] = glob
    return ("grep", args)


RAN_LINE = "echo SHELL-RAN-$((6 * 7))"
"""Appended to every command: proof the shell ran it to the end (the text ``SHELL-RAN-42`` never appears in
the command itself, so an error message quoting the command cannot fake it)."""


def sh(command: str, timeout_s: float = 10) -> Call:
    """A ``bash`` call; the command gets :data:`RAN_LINE` as its last line."""
    return ("bash", {"command": command + "\n" + RAN_LINE, "timeout_s": timeout_s})


def ran(output: str) -> bool:
    """Whether a command made with :func:`sh` ran to its last line."""
    return "SHELL-RAN-42" in output


def spawn(agent_type: str, prompt: str, **kw: Any) -> Call:
    return ("spawn_agent", {"agent_type": agent_type, "prompt": prompt, "description": prompt[:30], **kw})


# --- running an agent -----------------------------------------------------------------------------


@dataclass(slots=True)
class Step:
    """One tool call of the attacking agent and what came back."""

    depth: int
    tool: str
    arguments: dict[str, Any]
    content: str
    is_error: bool


@dataclass(slots=True)
class Attack:
    """What one attacking run produced."""

    result: RunResult
    steps: list[Step]
    expected: int
    elapsed: float
    seeds: list[RunResult] = field(default_factory=list)

    @property
    def everything(self) -> str:
        """Every tool result and the final text: where a leaked secret would show up."""
        return "\n".join([*(s.content for s in self.steps), self.result.text])

    def leaked(self, *secrets: str) -> list[str]:
        return [s for s in secrets if s and s in self.everything]

    def assert_no_leak(self, *secrets: str) -> None:
        found = self.leaked(*secrets)
        assert not found, f"secret(s) {found} reached the agent:\n{self.transcript()}"

    def assert_completed(self) -> None:
        """The run went on: refused calls came back as tool errors and the run ended normally."""
        assert self.result.outcome is Outcome.OK, (
            f"the run did not complete normally: outcome {self.result.outcome}, error {self.result.error!r}\n"
            f"{self.transcript()}")
        mine = [s for s in self.steps if s.depth == 0]
        assert len(mine) == self.expected, f"{len(mine)} of {self.expected} calls ran:\n{self.transcript()}"

    @property
    def run_id(self) -> str:
        return self.result.id

    def step(self, i: int) -> Step:
        return [s for s in self.steps if s.depth == 0][i]

    def transcript(self, limit: int = 600) -> str:
        lines = []
        for s in self.steps:
            body = s.content if len(s.content) <= limit else s.content[:limit] + " [...]"
            lines.append(f"  [{s.depth}] {s.tool}({s.arguments}) -> {'ERROR ' if s.is_error else ''}{body!r}")
        return "\n".join(lines)


def _script(calls: Sequence[Call], child_calls: Sequence[Call], seeds: Sequence[str],
            steps: list[Step]) -> Callable[[ModelRequest], ModelResponse]:
    """One tool call per turn from ``calls`` (``child_calls`` for sub-agents), then echo every result."""
    def fn(req: ModelRequest) -> ModelResponse:
        prompt = req.messages[0].text if req.messages else ""
        depth = req.agent.depth
        if depth == 0 and prompt in seeds:
            return ModelResponse(f"noted: {prompt}")
        script = calls if depth == 0 else child_calls
        results = [r for m in req.messages for r in m.tool_results]
        if results:
            last = results[-1]
            args = _asked(req, last.tool_use_id)
            steps.append(Step(depth, args[0], args[1], last.content, last.is_error))
        if len(results) < len(script):
            name, args = script[len(results)]
            return ModelResponse("", [ToolCall(name, dict(args))])
        return ModelResponse("\n".join(r.content for r in results) or "nothing to report")
    return fn


def _asked(req: ModelRequest, call_id: str) -> tuple[str, dict[str, Any]]:
    for m in req.messages:
        for b in m.tool_uses:
            if b.id == call_id:
                return b.name, b.arguments
    return "?", {}


async def attack(workdir: Path, calls: Sequence[Call], *, mode: str = "yolo", seeds: Sequence[str] = (),
                 child_calls: Sequence[Call] = (), timeout: float = 30.0, **runtime_kw: Any) -> Attack:
    """Run ``calls`` as one agent in a real ``Runtime`` over ``workdir`` (default SQLite store, ``mode``).

    ``seeds`` are prompts run first in the same runtime (so their transcripts sit in the store, and in
    its -wal file, while the attack runs).  A hang fails the test after ``timeout`` seconds.
    """
    steps: list[Step] = []
    model = FunctionModel(_script(calls, child_calls, seeds, steps))
    t0 = time.monotonic()
    async with asyncio.timeout(timeout):
        async with Runtime(model, workdir=workdir, permission_mode=mode, **runtime_kw) as rt:
            seeded = [await rt.run(p) for p in seeds]
            result = await rt.run(ATTACK_PROMPT)
    return Attack(result, steps, len(calls), time.monotonic() - t0, seeded)


# --- the runtime in a process of its own -----------------------------------------------------

CHILD = Path(__file__).with_name("child_runtime.py")


@dataclass(slots=True)
class ChildRun:
    """What ``child_runtime.py`` reported (``result`` is None when it died or was killed)."""

    pid: int
    returncode: int | None
    timed_out: bool
    result: dict[str, Any] | None
    stderr: str

    @property
    def run_id(self) -> str | None:
        return None if self.result is None else str(self.result["run_id"])

    @property
    def everything(self) -> str:
        if self.result is None:
            return ""
        return "\n".join([*(s["content"] for s in self.result["steps"]), self.result["text"]])

    def leaked(self, *secrets: str) -> list[str]:
        return [s for s in secrets if s and s in self.everything]

    def transcript(self) -> str:
        if self.result is None:
            return f"(no result; exit status {self.returncode}, timed out: {self.timed_out})\n{self.stderr[-3000:]}"
        return "\n".join(f"  {s['tool']}({s['arguments']}) -> {'ERROR ' if s['is_error'] else ''}{s['content'][:600]!r}"
                         for s in self.result["steps"])

    def assert_completed(self) -> None:
        assert not self.timed_out, f"the runtime process hung (or was stopped) and was killed:\n{self.transcript()}"
        assert self.returncode == 0, f"the runtime process died with status {self.returncode}:\n{self.transcript()}"
        assert self.result is not None, f"the runtime process printed no result:\n{self.transcript()}"
        assert self.result["outcome"] == "ok", f"outcome {self.result['outcome']}: {self.result['error']}"
        mine = [s for s in self.result["steps"] if s["depth"] == 0]
        assert len(mine) == self.result["expected"], f"not every call ran:\n{self.transcript()}"


def run_child(workdir: Path, calls: Sequence[Call], *, env: dict[str, str] | None = None, mode: str = "yolo",
              timeout: float = 30.0, tag: str = "") -> ChildRun:
    """Run ``calls`` in a runtime in a new process (its own session); kill it after ``timeout`` seconds."""
    spec = json.dumps({"workdir": str(workdir), "calls": [list(c) for c in calls], "mode": mode,
                       "timeout": timeout})
    argv = [sys.executable, str(CHILD), spec, *([tag] if tag else [])]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ) if env is None else env, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    result = None
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    return ChildRun(proc.pid, proc.returncode, timed_out, result, err)


# --- looking at effects ---------------------------------------------------------------------------

Snapshot = dict[str, tuple[Any, ...]]


def snapshot(root: Path, skip: Callable[[str], bool] = lambda rel: False) -> Snapshot:
    """Every entry under ``root`` (not following symlinks): type, mode, content or link target."""
    out: Snapshot = {}
    if not os.path.lexists(root):
        return out
    out["."] = _entry(root)
    if not root.is_dir() or root.is_symlink():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            if not skip(rel):
                out[rel] = _entry(p)
    return out


def _entry(p: Path) -> tuple[Any, ...]:
    st = p.lstat()
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return ("symlink", os.readlink(p))
    if stat.S_ISREG(st.st_mode):
        return ("file", mode, p.read_bytes())
    if stat.S_ISDIR(st.st_mode):
        return ("dir", mode)
    return ("special", st.st_mode, st.st_rdev)


def diff(before: Snapshot, after: Snapshot) -> str:
    """A short account of what changed between two snapshots ("" when nothing did)."""
    lines = []
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a != b:
            what = "created" if a is None else "deleted" if b is None else "changed"
            lines.append(f"  {k}: {what}" + (f" -> {b[:2]!r}" if b is not None and what != "deleted" else ""))
    return "\n".join(lines)


def is_store_file(rel: str) -> bool:
    """The store's own files change on every run; snapshots of ``.subagents`` leave them out."""
    return Path(rel).name.startswith("state.db")


def store_runs(workdir: Path, db: Path | None = None) -> set[str]:
    """The run ids the workspace's store (default: ``.subagents/state.db``) holds; it must exist and open."""
    from subagents.store.sqlite import SQLiteStore

    db = db or workdir / ".subagents" / "state.db"
    assert db.is_file(), f"the run store {db} is gone"
    store = SQLiteStore(db)
    try:
        return {r.run_id for r in store.list_runs(include_archived=True)}
    finally:
        store.close()


# --- processes ------------------------------------------------------------------------------------


def tagged_processes(tag: str) -> list[int]:
    """Live (not zombie) processes whose command line contains ``tag``, seen from the host."""
    needle = tag.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path("/proc", name, "cmdline").read_bytes()
            st = Path("/proc", name, "stat").read_text()
        except OSError:
            continue
        if needle in cmdline and st[st.rfind(")") + 2:].split()[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def wait_gone(tag: str, timeout: float = 3.0) -> list[int]:
    """Poll until no process carries ``tag`` (up to ``timeout``); return the survivors."""
    deadline = time.monotonic() + timeout
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def kill_tagged(tag: str) -> None:
    for pid in tagged_processes(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


# --- FIFOs, devices and other things a tool could block on ---------------------------------------


class Unjammer:
    """Watches for a tool blocked on a FIFO or a terminal, and frees it after ``after`` seconds.

    A thread blocked in ``open()`` on a FIFO cannot be cancelled, and would keep the event loop (and
    pytest) from ever closing; after the grace this opens the other end of each FIFO (and pokes each
    terminal) until the test leaves the ``with`` block.  ``fired`` says whether the grace ran out
    while the block was still open, i.e. something hung.
    """

    def __init__(self, fifos: Sequence[Path] = (), ttys: Sequence[int] = (), after: float = 4.0) -> None:
        self.fifos = list(fifos)
        self.ttys = list(ttys)
        self.after = after
        self.fired = False
        self.captured = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Unjammer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        if self._stop.wait(self.after):
            return
        self.fired = True
        while not self._stop.is_set():
            self.poke()
            time.sleep(0.02)

    def poke(self) -> None:
        for f in self.fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))  # frees a reader blocked in open()
            with contextlib.suppress(OSError):
                fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK)  # frees a writer blocked in open()
                try:
                    time.sleep(0.01)
                    with contextlib.suppress(BlockingIOError):
                        self.captured += os.read(fd, 1 << 16)
                finally:
                    os.close(fd)
        for master in self.ttys:
            with contextlib.suppress(OSError):
                os.write(master, b"\n\x04")


# --- swapping paths while a tool runs -----------------------------------------------------------

_SWAPPER = r"""
import ctypes, os, sys
mode, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
tmp = a + ".swap%d" % os.getpid()
if mode == "exchange":          # a and b trade places atomically (renameat2 RENAME_EXCHANGE)
    ea, eb = a.encode(), b.encode()
    while True:
        libc.renameat2(-100, ea, -100, eb, 2)
elif mode == "symlink":         # a is a regular file, then a symlink to b, then a file again...
    while True:
        try:
            with open(tmp, "w") as f:
                f.write("token inside\n")
            os.rename(tmp, a)
            os.symlink(b, tmp)
            os.rename(tmp, a)
        except OSError:
            pass
elif mode == "fifo":            # a is a regular file, then a FIFO (a hard link of b, so it can be unjammed)
    fifo_tmp = tmp + ".fifo"
    while True:                 # each state lasts about three system calls
        try:
            with open(tmp, "w") as f:
                f.write("token inside\n")
            os.rename(tmp, a)
            os.link(b, fifo_tmp)
            os.stat(fifo_tmp)
            os.stat(fifo_tmp)
            os.rename(fifo_tmp, a)
        except OSError:
            pass
"""


@contextlib.contextmanager
def swapping(mode: str, a: Path, b: Path, processes: int = 2) -> Iterator[None]:
    """Swap ``a`` in a tight loop (see ``_SWAPPER``) from ``processes`` separate processes.

    Separate processes rather than threads: a thread shares the GIL with the tool's worker thread, and
    on a small machine the two then rarely interleave between a check and a use.  Two swappers keep
    the state of the path changing all the time.
    """
    procs = [subprocess.Popen([sys.executable, "-c", _SWAPPER, mode, str(a), str(b)]) for _ in range(processes)]
    try:
        time.sleep(0.05)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def renameat2_available() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return hasattr(libc, "renameat2")


# --- workspaces ---------------------------------------------------------------------------------

PROJECT_CONFIG = """\
# the project's own settings: an agent must not be able to change them
[agents]
max_threads = 4

[providers.anthropic]
base_url = "http://127.0.0.1:9/"
"""

HELPER_AGENT = """\
---
name: helper
description: A harmless project agent.
tools: [read_file]
---
Help with the project.
"""


def populate_workspace(root: Path) -> Path:
    """A small project worth attacking: sources, a git repository, the runtime's config and an agent."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("# demo project\nThe readme says hello.\n")
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\nexit 0\n")
    (root / ".subagents" / "agents").mkdir(parents=True, exist_ok=True)
    (root / ".subagents" / "config.toml").write_text(PROJECT_CONFIG)
    (root / ".subagents" / "agents" / "helper.md").write_text(HELPER_AGENT)
    # as the store writes it on first use: present before any snapshot, so a change by an agent shows
    (root / ".subagents" / ".gitignore").write_text("*\n!.gitignore\n!config.toml\n!agents/\n")
    add_trusted(root, user_config_dir())  # the user's own project: its settings apply (not its subdirectories')
    return root.resolve()


# --- network ------------------------------------------------------------------------------------


class Trap:
    """A server the sandboxed shell must not reach: records every connection and what it sent."""

    def __init__(self, family: int, address: Any) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.address = self.sock.getsockname()
        self.hits: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @classmethod
    def tcp(cls) -> Trap:
        return cls(socket.AF_INET, ("127.0.0.1", 0))

    @classmethod
    def unix(cls, path: str) -> Trap:
        return cls(socket.AF_UNIX, path)

    @property
    def port(self) -> int:
        return int(self.address[1])

    def __enter__(self) -> Trap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1.0)
                data = b""
                with contextlib.suppress(OSError):
                    while chunk := conn.recv(65536):
                        data += chunk
                        if b"\r\n\r\n" in data:  # an HTTP request: answer so the client gives up at once
                            conn.sendall(b"HTTP/1.1 500 no\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            break
                self.hits.append(data or b"(connected)")


class UdpTrap:
    """A UDP socket the sandboxed shell must not reach (DNS-style exfiltration)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.hits: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> UdpTrap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.hits.append(data)
