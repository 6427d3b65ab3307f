"""Smoke run of every benchmark workload with tiny sizes, so bench/ cannot rot (no timing asserted)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import ours  # noqa: E402
from _common import store_url  # noqa: E402
from loop_overhead import main as loop_overhead  # noqa: E402


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path), store_url(request.param, str(tmp_path))[0]


def test_delegation_cycle_and_bare_run(store: tuple[str, str]) -> None:
    r = asyncio.run(ours.seq(*store, iters=5, warmup=2))
    assert r["cycle"]["n"] == 5
    assert r["model_calls"] == {"parent": 14, "child": 7, "bare": 7}


@pytest.mark.parametrize("n", [1, 3, 250])
def test_fanout(store: tuple[str, str], n: int) -> None:
    r = asyncio.run(ours.fanout(*store, n=n, warmup_n=2))
    assert r["n"] == n
    assert r["model_calls"]["child"] == 1 + 2 + n


def test_wait_wakeup(store: tuple[str, str]) -> None:
    r = asyncio.run(ours.wakeup(*store, reps=3, warmup=1))
    assert r["wait_tool"]["n"] == 3
    assert r["rt_wait"]["n"] == 3


def test_restore(tmp_path: Path) -> None:
    r = asyncio.run(ours.restore(str(tmp_path), finished=20, open_=3))
    assert r["finished"] == 20
    assert r["open"] == 3


def test_cli_prints_one_json_line() -> None:
    p = subprocess.run([sys.executable, str(BENCH / "ours.py"), "--store", "memory", "fanout", "2",
                        "--warmup-n", "1"], capture_output=True, text=True, timeout=60, check=True)
    (line,) = p.stdout.strip().splitlines()
    assert json.loads(line)["n"] == 2


def test_table_renders() -> None:
    import run

    s = {"subagents": {"cycle_us": 100.0, "bare_us": 50.0, "fan100_ms": 10.0, "fan100_mb": 30.0,
                       "fan100_child_us": 100.0, "python_ms": 20.0, "import_ms": 90.0, "help_ms": 200.0},
         "pydantic-ai": {"cycle_us": 5000.0, "fan100_ms": 200.0}}
    out = run.render(s, ["pydantic-ai"], [100], {"pydantic-ai": "x"}, "memory", 1, 10,
                     {"nproc": 2, "cpu": "cpu", "python": "3.11", "platform": "linux"}, [])
    assert "| (1) delegation cycle" in out
    assert "50.0×" in out


def test_loop_overhead(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(loop_overhead(turns=5, runs=3))
    assert "agent loop, 5 turns per run, 3 runs: median " in capsys.readouterr().out


def test_watched_cycle_prints_every_variant_with_the_floor() -> None:
    p = subprocess.run([sys.executable, str(BENCH / "watched.py"), "--iters", "20", "--rounds", "2"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["floor"]["mean_us"] > 0
    for v in ("memory", "sqlite", "memory+listener", "sqlite+listener"):
        assert r[v]["x_floor_mean"] == pytest.approx(r[v]["mean_us"] / r["floor"]["mean_us"], rel=0.02)
        assert 0.0 <= r[v]["gc_share"] < 1.0
        if v.startswith("memory"):  # the floor alternated 1:1 with the runtime's cycle
            p = r[v]["paired"]
            assert p["x_floor_mean"] == pytest.approx(p["mean_us"] / p["floor_mean_us"], rel=0.02)
        else:
            assert "paired" not in r[v]


def test_goal_table_marks_what_is_met() -> None:
    import run

    out = run.render_goals({"w_floor_mean": 40.0, "w_floor_median": 30.0, "w_memory_median": 250.0,
                            "w_memory_mean": 320.0, "w_memory_x": 8.0, "w_sqlite_x": 12.5,
                            "fan1000_ms": 120.0, "fan1000_mb": 70.0, "fan1000_x": 7.5})
    assert "machine instructions" not in out  # (only with --instructions)
    out = run.render_goals({"w_floor_mean": 40.0, "w_floor_median": 30.0, "w_memory_median": 250.0,
                            "w_memory_mean": 320.0, "w_memory_x": 8.0, "w_sqlite_x": 12.5,
                            "fan1000_ms": 120.0, "fan1000_mb": 70.0, "fan1000_x": 7.5, "i_memory_x": 7.45,
                            "i_sqlite_x": 7.63, "i_memory+listener_x": 8.87, "i_sqlite+listener_x": 8.59,
                            "w_memory_pfloor": 16.8, "w_memory_xp": 7.5, "w_memory+listener_xp": 9.0})
    lines = out.splitlines()
    assert "| 7.45× / 7.63× / 8.87× / 8.59× |" in next(x for x in lines if "machine instructions" in x)
    assert "| 16.8; 7.5× / 9.0× |" in next(x for x in lines if "right after one floor cycle" in x)
    assert "; 7.5×)" in next(x for x in lines if "fan-out of 1,000" in x)  # per child ÷ a plain task
    assert next(x for x in lines if "memory store, nobody listening" in x).endswith("| yes |")
    assert next(x for x in lines if "sqlite store, nobody listening" in x).endswith("| **no** |")
    assert next(x for x in lines if "fan-out of 1,000" in x).endswith("| **no** |")  # 70 MB is over 60


def _opcodes(*args: str) -> subprocess.CompletedProcess[str]:
    # (a process of its own: bench/authority.py, which it imports, shares its name with the tests' package)
    return subprocess.run([sys.executable, str(BENCH / "opcodes.py"), *args], capture_output=True, text=True,
                          timeout=300)


def _opcodes_json(*args: str) -> dict[str, Any]:
    p = _opcodes(*args)
    assert p.returncode == 0, p.stderr
    (line,) = p.stdout.strip().splitlines()
    out: dict[str, Any] = json.loads(line)
    return out


def test_opcode_counts_are_per_unit_ranked_and_repeatable() -> None:
    first = _opcodes_json("cycle", "--store", "memory", "--n", "12", "--top", "5")
    assert first["sizes"] == [3, 12]
    assert first["per"] == "cycle"
    shares = [row[0] for row in first["top"]]
    assert len(shares) == 5
    assert shares == sorted(shares, reverse=True)
    assert any("runtime/manager.py" in row[2] for row in first["top"])  # the spawn pipeline is there, by name
    assert 1_000 < first["opcodes"] < 100_000  # a cycle is thousands of opcodes, not a handful nor millions
    again = _opcodes_json("cycle", "--store", "memory", "--n", "12", "--top", "5")
    assert abs(again["opcodes"] - first["opcodes"]) <= first["opcodes"] * 0.002  # the point: no timing noise
    fan = _opcodes_json("fanout", "--store", "sqlite", "--n", "8", "--top", "3")
    assert fan["per"] == "child"
    assert fan["opcodes"] > 1_000
    queued = _opcodes_json("fanout", "--store", "memory", "--n", "8", "--threads", "2", "--top", "1000")
    assert queued["threads"] == 2
    assert any("slots.py:" in row[2] and "(enqueue)" in row[2] for row in queued["top"])  # the queue is used


def test_opcodes_refuses_a_size_it_cannot_split() -> None:
    p = _opcodes("cycle", "--n", "2")
    assert p.returncode == 2
    assert "--n must be at least 4" in p.stderr
    p = _opcodes("fanout", "--threads", "0")
    assert p.returncode == 2
    assert "--threads must be at least 1" in p.stderr


def _instructions(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH / "instructions.py"), *args], capture_output=True, text=True,
                          timeout=600)


def test_instruction_counts_include_c_and_the_floor() -> None:
    """Under valgrind: a cycle's instructions, C included, per cycle and as a multiple of the plain-asyncio floor's."""
    p = _instructions("cycle", "--store", "memory", "--n", "8", "--top", "6")
    assert p.returncode == 0, p.stderr
    (line,) = p.stdout.strip().splitlines()
    out = json.loads(line)
    assert out["sizes"] == [2, 8]
    assert out["per"] == "cycle"
    assert 100_000 < out["instructions"] < 50_000_000  # hundreds of thousands: not a handful, not the start-up
    assert 0 < out["floor_instructions"] < out["instructions"]
    assert out["x_floor"] == round(out["instructions"] / out["floor_instructions"], 2)
    assert out["x_floor"] > 2  # the runtime does more than twenty lines of asyncio
    counts = [row[0] for row in out["top"]]
    assert counts == sorted(counts, reverse=True)
    assert len(counts) == 6
    assert "_PyEval_EvalFrameDefault" in [row[2] for row in out["top"]]  # the interpreter, by its C name


def test_instructions_refuses_bad_sizes_and_options() -> None:
    p = _instructions("cycle", "--n", "3")
    assert p.returncode == 2
    assert "--n must be at least 4" in p.stderr
    p = _instructions("fanout", "--listener")
    assert p.returncode == 2
    assert "--listener applies to the cycle workload only" in p.stderr
