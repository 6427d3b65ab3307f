"""Issue 13's goals and the table that puts each figure measured by ``bench/run.py`` next to its goal."""

from __future__ import annotations

from typing import Any

__all__ = ["TARGETS", "WATCHED", "fmt", "render_goals"]

# (row key -> target value, lower is better) - from the issues (issue 13 for the cycle, fan-out, sweeper, clients)
TARGETS = {
    "fan1000_ms": 150.0, "fan1000_mb": 60.0, "fan10000_ms": 1000.0, "fan10000_mb": 200.0, "fan100000_ms": 12000.0,
    "fan100000_mb": 1024.0, "wake_us": 1000.0, "restore_ms": 2000.0, "import_ms": 150.0, "help_ms": 300.0,
    "bash_bwrap_added_ms": 10.0, "w_memory_x": 10.0, "w_sqlite_x": 10.0, "w_memory+listener_x": 10.0,
    "w_sqlite+listener_x": 10.0, "sweep_lag_ms": 5.0, "client_connections": 1.0}
WATCHED = ["memory", "sqlite", "memory+listener", "sqlite+listener"]


def fmt(x: float | None, nd: int = 0) -> str:
    return "–" if x is None else f"{x:,.{nd}f}"


def render_goals(ours: dict[str, Any]) -> str:
    """Issue 13's table: every figure next to its goal, the floor measured in the same run."""
    fl = ours.get("w_floor_mean")
    rows: list[tuple[str, str, str, bool | None]] = []  # figure, value, goal, met

    def met(key: str) -> bool | None:
        v, t = ours.get(key), TARGETS.get(key)
        return None if v is None or t is None else v <= t

    if fl is not None:
        rows.append(("plain-asyncio floor of the delegation cycle (same run), median / mean µs",
                     f"{fmt(ours.get('w_floor_median'))} / {fmt(fl)}", "", None))
        for v in WATCHED:
            who = "one on_event listener" if v.endswith("+listener") else "nobody listening"
            rows.append((f"delegation cycle, {v.split('+')[0]} store, {who}: "
                         "median / mean µs (mean ÷ floor mean)",
                         f"{fmt(ours.get(f'w_{v}_median'))} / {fmt(ours.get(f'w_{v}_mean'))} "
                         f"({fmt(ours.get(f'w_{v}_x'), 1)}×)", "mean ≤ 10× floor", met(f"w_{v}_x")))
        if ours.get("w_memory_xp") is not None:
            rows.append(("the memory cycles again, each right after one floor cycle (the floor in the CPU state the "
                         "runtime runs in, not trained on itself): floor mean µs; mean ÷ that floor, memory / memory + "
                         "listener", f"{fmt(ours.get('w_memory_pfloor'), 1)}; {fmt(ours.get('w_memory_xp'), 1)}× / "
                         f"{fmt(ours.get('w_memory+listener_xp'), 1)}×", "", None))
        if ours.get("i_memory_x") is not None:
            rows.append(("the same cycles' machine instructions ÷ the floor's (valgrind, no noise; the time ratio is "
                         "higher: the floor's tight loop runs more instructions per ns)",
                         " / ".join(f"{fmt(ours.get(f'i_{v}_x'), 2)}×" for v in WATCHED), "", None))
        rows.append(("share of the cycle spent in the garbage collector, memory / SQLite %",
                     f"{fmt(ours.get('w_memory_gc'), 1)} / {fmt(ours.get('w_sqlite_gc'), 1)}", "", None))
    for n in (1000, 10000, 100000):
        if ours.get(f"fan{n}_ms") is not None:
            extra = " (max_threads 1,000, queued)" if n == 100000 else ""
            rows.append((f"fan-out of {n:,} background children{extra}: wall ms / peak RSS MB (process CPU ms; "
                         "per child ÷ one plain-asyncio task)",
                         f"{fmt(ours.get(f'fan{n}_ms'))} / {fmt(ours.get(f'fan{n}_mb'))} "
                         f"({fmt(ours.get(f'fan{n}_cpu_ms'))}; {fmt(ours.get(f'fan{n}_x'), 1)}×)",
                         f"≤ {TARGETS[f'fan{n}_ms']:,.0f} ms, ≤ {TARGETS[f'fan{n}_mb']:,.0f} MB",
                         None if met(f"fan{n}_ms") is None else bool(met(f"fan{n}_ms") and met(f"fan{n}_mb"))))
    if ours.get("sweep_lag_ms") is not None:
        rows.append(("sweeper over 100,000 finished runs: longest loop stall ms (idle-loop floor); "
                     "one step, median / longest ms",
                     f"{fmt(ours.get('sweep_lag_ms'), 2)} ({fmt(ours.get('sweep_floor_lag_ms'), 2)}); "
                     f"{fmt(ours.get('sweep_step_median_ms'), 2)} / {fmt(ours.get('sweep_step_ms'), 2)}", "≤ 5",
                     met("sweep_lag_ms")))
    if ours.get("client_connections") is not None:
        rows.append(("model calls over the SDK (loopback): µs per call / TCP connections for 200 calls",
                     f"{fmt(ours.get('client_model_us'))} / {fmt(ours.get('client_connections'))}  (a client per "
                     f"call: {fmt(ours.get('client_per_call_us'))} / {fmt(ours.get('client_per_call_connections'))};"
                     f" plain httpx: {fmt(ours.get('client_httpx_us'))})", "1 connection", met("client_connections")))
    lines = ["| issue 13 figure | value | goal | met? |", "|---|---|---|---|"]
    for label, value, goal, ok in rows:
        lines.append(f"| {label} | {value} | {goal} | {'' if ok is None else ('yes' if ok else '**no**')} |")
    return "\n".join(lines)
