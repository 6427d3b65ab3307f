"""Landlock handles truncation only from ABI 3 (Linux 6.2): on the kernels before it (Ubuntu 22.04's 5.15, Debian
12's 6.1, RHEL 9's 5.14) ``truncate(2)`` by path was never checked, and a command emptied any file of the user's —
the run store, ``.git``, ``~/.bashrc`` — with ``os.truncate(path, 0)``.  There the command's seccomp filter refuses
``truncate(2)`` (``sandbox/seccomp.py``); opening with ``O_TRUNC`` and ``ftruncate`` stay Landlock's writes."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from procutil import SANDBOX_PYTHON
from subagents.sandbox import landlock
from subagents.sandbox.seccomp import _TRUNCATE, no_truncate_filter
from subagents.tools.base import ToolContext

from .attacks import OneBackend, run
from .test_signals import ALLOW, EPERM, _rcs, _verdict

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux only")

TRUNCATE = """{python} - <<'EOF'
import os
for name, path, size in (("outside", "{outside}", 0), ("workspace", "src/f.txt", 2)):
    try:
        os.truncate(path, size)
        print(f"{{name}}=0")
    except OSError as e:
        print(f"{{name}}={{e.errno}}")
EOF
truncate -s 3 src/g.txt; echo shrink=$?; : > src/h.txt; echo otrunc=$?; cat src/g.txt; echo; wc -c < src/h.txt
"""


@pytest.mark.parametrize("machine", list(_TRUNCATE))
def test_the_filter_refuses_truncate_only(machine: str) -> None:
    prog = no_truncate_filter(machine)
    assert prog is not None
    hexprog = prog.hex()
    for arch, nrs in _TRUNCATE[machine]:
        for nr in nrs:
            assert _verdict(hexprog, arch, nr) == EPERM, (arch, nr)
        for nr in (0, 1, 46, 77, 93, 194):  # read, write, ftruncate (x86-64 77, i386 93, 194)...
            if nr not in nrs:
                assert _verdict(hexprog, arch, nr) == ALLOW, (arch, nr)
    assert _verdict(hexprog, 0x12345678, 76) == ALLOW
    assert no_truncate_filter("sparc64") is None


@pytest.fixture
def outside() -> Iterator[Path]:
    """A file of the user's outside the workspace (where the sandbox grants no write)."""
    p = Path("/var/tmp") / f"subagents-truncate-{uuid.uuid4().hex}.txt"
    p.write_text("precious\n")
    yield p
    p.unlink(missing_ok=True)


def _fill(where: Path, *names: str) -> None:
    for name in names:
        (where / name).write_text("hello\n")


def _text(p: Path) -> str:
    return p.read_text()


class _Truncation(OneBackend):
    mode = "landlock"

    async def test_a_command_cannot_truncate_what_it_may_not_write(self, ctx: ToolContext, ws: Path,
                                                                   outside: Path) -> None:
        _fill(ws / "src", "f.txt", "g.txt", "h.txt")
        out = await run(ctx, TRUNCATE.format(python=SANDBOX_PYTHON, outside=outside))
        assert _text(outside) == "precious\n", out
        rcs = _rcs(out)
        assert rcs["outside"] in ("1", "13"), out  # EPERM (the filter) or EACCES (Landlock, ABI >= 3)
        assert (rcs["shrink"], rcs["otrunc"]) == ("0", "0"), out  # open + ftruncate, O_TRUNC: writes, granted
        assert "hel\n0" in out, out
        self.check_own(rcs["workspace"], _text(ws / "src" / "f.txt"))

    def check_own(self, rc: str, text: str) -> None:
        assert (rc, text) == ("0", "he")  # truncate(2) of a file it may write: Landlock's own check


class TestOldKernel(_Truncation):
    """Landlock's ABI taken as 2: no truncation right; the filter refuses truncate(2)."""

    @pytest.fixture(autouse=True)
    def abi_2(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(landlock, "abi_version", lambda: 2)

    def check_own(self, rc: str, text: str) -> None:
        assert (rc, text) == ("1", "hello\n")  # EPERM there, even where it may write (programs see an error)


class TestCurrentKernel(_Truncation):
    pass
