"""Path confinement: every file tool resolves paths through the agent's :class:`Workspace`."""

from __future__ import annotations

import os
from pathlib import Path

from ..exceptions import ToolError

__all__ = ["Workspace"]


class Workspace:
    """The directory an agent may touch.  ``resolve`` refuses anything that lands outside it.

    Relative paths are taken from the root; absolute paths are accepted only when they lie inside
    it.  Symlinks are resolved (for a path that does not exist yet, through its nearest existing
    parent), so a link that points outside is refused too.
    """

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(f"workspace root {self.root} is not a directory")

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real, absolute path for ``path``; :class:`ToolError` if it escapes the root."""
        raw = os.fspath(path)
        if "\x00" in raw:
            raise ToolError(f"path {raw!r} contains a NUL byte")
        p = Path(raw)
        candidate = p if p.is_absolute() else self.root / p
        real = self._real(candidate)
        if real != self.root and self.root not in real.parents:
            raise ToolError(
                f"path {raw!r} resolves to {real}, outside the workspace {self.root}; "
                "use a path inside the workspace"
            )
        return real

    @staticmethod
    def _real(p: Path) -> Path:
        # Path.resolve(strict=False) resolves symlinks of the existing prefix and normalises the
        # rest, which is exactly "resolve via the nearest existing parent".
        return p.resolve(strict=False)

    def relative(self, p: Path) -> str:
        """``p`` relative to the root, for display."""
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            return str(p)
        return str(rel) or "."

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"
