"""docs/seed-audit.md cannot rot: every row has a known status, every test it cites exists (file and function),
every source file it names exists, and every seed has its rows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AUDIT = ROOT / "docs" / "seed-audit.md"
SRC = ROOT / "src" / "subagents"

ROW = re.compile(r"^\|\s*((?:\d{3}|I17)\.\d+)\s*\|(.*)\|\s*$")
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
SOURCE_REF = re.compile(r"`((?:[a-z_]+/)*[a-z_][\w-]*\.(?:py|md))`")
STATUS = re.compile(r"\A(✓|✓ n/a|in progress: \S.*)\Z")
NA_REASON = re.compile(r"does not apply|not a requirement|not a behaviour")


def rows() -> list[tuple[str, list[str]]]:
    out = []
    for line in AUDIT.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            out.append((m.group(1), [c.strip() for c in m.group(2).split("|")]))
    return out


def defined_tests(path: Path) -> set[str]:
    return set(re.findall(r"^(?:async )?def (test_\w+)\(", path.read_text(encoding="utf-8"), re.M))


def test_the_table_has_rows_for_every_seed_and_unique_ids() -> None:
    ids = [i for i, _ in rows()]
    assert len(ids) == len(set(ids)), "a row id is used twice"
    for seed in ("000", "001", "002", "003", "004", "I17"):
        assert any(i.startswith(seed + ".") for i in ids), f"no rows for seed {seed}"
    assert all(len(cells) == 4 for _, cells in rows()), "each row has: statement, implemented in, tested by, status"


def test_every_row_is_ticked_or_named_as_in_progress() -> None:
    bad = {i: cells[3] for i, cells in rows() if not STATUS.match(cells[3])}
    assert bad == {}, "rows neither ticked (✓, ✓ n/a) nor 'in progress: <who>'"


def test_every_ticked_row_cites_a_test() -> None:
    bare = [i for i, cells in rows() if cells[3].startswith("✓") and not TEST_REF.search(cells[2])]
    assert bare == [], "ticked rows must name the test that shows them"


def test_every_row_that_does_not_apply_says_why() -> None:
    silent = [i for i, cells in rows() if cells[3] == "✓ n/a" and not NA_REASON.search(cells[1])]
    assert silent == [], "a '✓ n/a' row must say why in its 'implemented in' cell"


def test_every_cited_test_exists() -> None:
    missing = []
    cache: dict[str, set[str]] = {}
    for i, cells in rows():
        for path, name in TEST_REF.findall(cells[2]):
            f = ROOT / path
            if not f.is_file():
                missing.append(f"{i}: {path} (no such file)")
                continue
            if name not in cache.setdefault(path, defined_tests(f)):
                missing.append(f"{i}: {path}::{name} (no such test)")
    assert missing == []


def test_every_named_source_file_exists() -> None:
    missing = [f"{i}: {p}" for i, cells in rows() for p in SOURCE_REF.findall(cells[1])
               if not (SRC / p).exists() and not (ROOT / p).exists()]
    assert missing == []


def test_the_checker_catches_a_missing_test(tmp_path: Path) -> None:
    """The parser really reads the cells it checks (a table whose tests all vanished would fail)."""
    line = "| 000.1 | s | `runtime/loop.py` | `tests/runtime/test_loop.py::test_no_such_thing` | ✓ |"
    m = ROW.match(line)
    assert m is not None
    cells = [c.strip() for c in m.group(2).split("|")]
    assert TEST_REF.findall(cells[2]) == [("tests/runtime/test_loop.py", "test_no_such_thing")]
    assert "test_no_such_thing" not in defined_tests(ROOT / "tests/runtime/test_loop.py")
    assert SOURCE_REF.findall(cells[1]) == ["runtime/loop.py"]
    assert STATUS.match(cells[3])
    assert not STATUS.match("open")
