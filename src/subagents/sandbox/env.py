"""The environment of every process the runtime starts for an agent (``bash``, hooks, MCP servers).

Built from an allowlist, never by removing known secrets from the runtime's own environment: a
variable passes only if it is one of :data:`ALLOWED`, starts with ``LC_``, or is named in
``[sandbox] env_passthrough``.  Names that look like secrets (``*_KEY``, ``*_TOKEN``, ``*_SECRET``,
``*_PASSWORD``, ``*_CREDENTIALS``) pass only when named exactly in the passthrough list, never through
a pattern.

>>> env = scrubbed_env(base={"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-1", "LC_ALL": "C", "EDITOR": "vi"})
>>> sorted(env)
['LC_ALL', 'PATH']
>>> scrubbed_env(["EDITOR"], base={"EDITOR": "vi"})["EDITOR"]
'vi'
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["ALLOWED", "SECRET_NAME", "is_secret_name", "scrubbed_env"]

ALLOWED = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "COLORTERM",
                     "NO_COLOR"})
"""Variables every child process gets (when the runtime has them)."""

SECRET_NAME = re.compile(r"(?:^|_)(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)$|API_?KEY", re.I)
"""Names that look like secrets: they never pass through a pattern, only when named exactly."""

_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def is_secret_name(name: str) -> bool:
    """Whether a variable name looks like it holds a secret (``OPENAI_API_KEY``, ``GH_TOKEN``...)."""
    return SECRET_NAME.search(name) is not None


def _by_pattern(name: str, patterns: list[str]) -> bool:
    return bool(patterns) and not is_secret_name(name) and any(fnmatch.fnmatchcase(name, p) for p in patterns)


def scrubbed_env(passthrough: Iterable[str] = (), *, base: Mapping[str, str] | None = None,
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: the allowlist, ``LC_*``, and ``passthrough``.

    ``passthrough`` entries are exact names or shell-style patterns (``MYAPP_*``); a pattern never
    lets a secret-looking name through, an exact name does.  ``extra`` is set last (the runtime's
    own additions such as ``TMPDIR``).
    """
    src = os.environ if base is None else base
    exact = {p for p in passthrough if not any(c in p for c in "*?[")}
    patterns = [p for p in passthrough if p not in exact]
    out: dict[str, str] = {}
    for name, value in src.items():
        if name in ALLOWED or name in exact or name.startswith("LC_") or _by_pattern(name, patterns):
            out[name] = value
    out.setdefault("PATH", _DEFAULT_PATH)
    if extra:
        out.update(extra)
    return out
