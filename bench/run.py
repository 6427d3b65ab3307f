"""Run every benchmark, each measurement in a fresh process, and print ONE table.

    .venv/bin/python bench/run.py                 # everything, 3 repetitions (~15 min on 2 cores)
    .venv/bin/python bench/run.py --quick         # fewer iterations, 1 repetition, N up to 1,000 (~2 min)
    .venv/bin/python bench/run.py --skip-peers    # only subagents
    .venv/bin/python bench/run.py --store memory  # the in-memory store instead of the durable SQLite one
    .venv/bin/python bench/run.py --instructions  # also the cycle's instructions ÷ the floor's (valgrind, ~5 min)

Peers run in bench/peers/.venv (create it with ``bash bench/peers/setup.sh``); without it they are
skipped with a note.  Repetitions are interleaved across frameworks, the figure is the median of
the per-process medians, and ratios are computed from figures measured in this same run.
Raw JSON lines go to bench/results/raw.jsonl, the summary to bench/results/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from goals import TARGETS, WATCHED, fmt, render_goals

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / "peers"
PEER_PY = PEERS / ".venv" / "bin" / "python"
PY = sys.executable
SUBAGENTS_CLI = str(Path(PY).parent / "subagents")

PEER_SCRIPTS = [("openai-agents", "bench_openai_agents.py"), ("pydantic-ai", "bench_pydantic_ai.py"),
                ("langgraph", "bench_langgraph.py")]
PEER_IMPORTS = {"openai-agents": "import agents", "pydantic-ai": "import pydantic_ai",
                "langgraph": "from langgraph.prebuilt import create_react_agent"}
# peers are not run at N=10,000: openai-agents is quadratic in concurrent runs of one Agent and
# all of them take minutes there (5-15 ms per child); the scaling is visible from 100 -> 1,000.
PEER_MAX_N = 1000



def run_json(cmd: list[str], cwd: Path, timeout: float = 1800) -> dict[str, Any]:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed rc={p.returncode}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def med(xs: list[float]) -> float | None:
    return statistics.median(ys) if (ys := [x for x in xs if x is not None]) else None


# launches write .pyc files as an installed package has them (PYTHONDONTWRITEBYTECODE, set on this project's
# machines, left each module changed since its last .pyc compiled again at every timed launch: ~15 ms for config.py)
_LAUNCH_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def launch_ms(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd="/tmp", stdout=subprocess.DEVNULL, env=_LAUNCH_ENV)
    return (time.perf_counter() - t0) * 1e3


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer iterations, 1 repetition, N <= 1,000, small restore")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--ns", default=None, help="fan-out sizes, comma separated (default 100,1000,10000)")
    ap.add_argument("--out", default=str(HERE / "results"),
                    help="directory for raw.jsonl and summary.json (default: bench/results)")
    ap.add_argument("--no-big", dest="big", action="store_false",
                    help="skip the 100,000-children fan-out (max_threads 1,000, queued); --quick skips it too")
    ap.add_argument("--instructions", action="store_true", help="also count the cycle's machine instructions ÷ the "
                    "floor's under valgrind (bench/instructions.py: the ratio without the box's noise; ~5 min)")
    a = ap.parse_args()

    reps = a.reps or (1 if a.quick else 3)
    a.big = a.big and not a.quick
    iters = a.iters or (300 if a.quick else 2000)
    warmup = 30 if a.quick else 200
    ns = [int(x) for x in (a.ns or ("100,1000" if a.quick else "100,1000,10000")).split(",")]
    cold_runs = 5 if a.quick else 10
    restore_args = ["--finished", "10000", "--open", "100"] if a.quick else []
    peers = [] if a.skip_peers else PEER_SCRIPTS
    notes: list[str] = []
    if peers and not PEER_PY.exists():
        notes.append("peers skipped: bench/peers/.venv is missing (run `bash bench/peers/setup.sh`)")
        peers = []

    out = Path(a.out)
    if out.exists() and not out.is_dir():
        sys.exit(f"--out {a.out} is a file; give a directory (raw.jsonl and summary.json are written into it)")
    out.mkdir(parents=True, exist_ok=True)
    raw = (out / "raw.jsonl").open("a")

    def log(label: str, rec: dict[str, Any]) -> dict[str, Any]:
        rec["label"], rec["ts"] = label, time.time()
        raw.write(json.dumps(rec) + "\n")
        raw.flush()
        return rec

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    ours = [PY, str(HERE / "ours.py"), "--store", a.store]
    res: dict[str, dict[str, list[Any]]] = {}

    def add(fw: str, key: str, v: Any) -> None:
        res.setdefault(fw, {}).setdefault(key, []).append(v)

    versions: dict[str, str] = {}
    store_label = "?"
    for rep in range(reps):
        # (1) delegation cycle + bare
        r = log("subagents", run_json([*ours, "seq", "--iters", str(iters), "--warmup", str(warmup)], ROOT))
        store_label = r["store"]
        add("subagents", "cycle_us", r["cycle"]["median_us"])
        add("subagents", "bare_us", r["bare"]["median_us"])
        progress(f"rep{rep} subagents seq: cycle {r['cycle']['median_us']:.0f} µs, "
                 f"bare {r['bare']['median_us']:.0f} µs")
        for fw, script in peers:
            r = log(fw, run_json([str(PEER_PY), script, "seq", "--iters", str(iters), "--warmup", str(warmup)], PEERS))
            versions[fw] = r["version"]
            add(fw, "cycle_us", r["cycle"]["median_us"])
            add(fw, "bare_us", r["bare"]["median_us"])
            progress(f"rep{rep} {fw} seq: cycle {r['cycle']['median_us']:.0f} µs, bare {r['bare']['median_us']:.0f} µs")
        # (2) fan-out
        for n in ns:
            r = log("subagents", run_json([*ours, "fanout", str(n)], ROOT))
            add("subagents", f"fan{n}_ms", r["wall_ms"])
            add("subagents", f"fan{n}_mb", r["peak_rss_mb"])
            add("subagents", f"fan{n}_child_us", r["per_child_us"])
            add("subagents", f"fan{n}_cpu_ms", r["cpu_ms"])
            add("subagents", f"fan{n}_x", r["x_floor"])  # per child ÷ a plain-asyncio task, same process
            progress(f"rep{rep} subagents fanout {n}: {r['wall_ms']:.0f} ms, peak {r['peak_rss_mb']:.0f} MB")
            for fw, script in peers:
                if n > PEER_MAX_N:
                    continue
                r = log(fw, run_json([str(PEER_PY), script, "fanout", str(n)], PEERS))
                add(fw, f"fan{n}_ms", r["wall_ms"])
                add(fw, f"fan{n}_mb", r["peak_rss_mb"])
                add(fw, f"fan{n}_child_us", r["per_child_us"])
                progress(f"rep{rep} {fw} fanout {n}: {r['wall_ms']:.0f} ms, peak {r['peak_rss_mb']:.0f} MB")
        # (3) wake-up
        r = log("subagents", run_json([*ours, "wakeup", "--reps", "200" if a.quick else "1000"], ROOT))
        add("subagents", "wake_us", r["wait_tool"]["median_us"])
        add("subagents", "wake_api_us", r["rt_wait"]["median_us"])
        progress(f"rep{rep} subagents wake-up: {r['wait_tool']['median_us']:.0f} µs (wait tool), "
                 f"{r['rt_wait']['median_us']:.0f} µs (rt.wait)")
        # (4) restore (the store generator is cached in bench/results/, not timed)
        r = log("subagents", run_json([*ours, "restore", "--cache-dir", str(out), *restore_args], ROOT))
        if "pending" in r:
            if rep == 0:
                notes.append(f"restore pending: {r['pending']}")
        else:
            add("subagents", "restore_ms", r["open_ms"])
            if rep == 0:
                orphans = r["left_non_final_after_open"] - r.get("taken_over", 0)
                notes.append(f"restore: the open includes the recovery pass; {r.get('taken_over', 0):,} of "
                             f"{r['open']:,} unfinished runs were taken over and resumed as live tasks"
                             + (f", {orphans:,} were not" if orphans else ""))
            progress(f"rep{rep} subagents restore {r['finished']:,}+{r['open']:,}: {r['open_ms']:.0f} ms")
            r = log("subagents", run_json([*ours, "restore", "--cache-dir", str(out), "--max-tokens", "1000000000",
                                           *restore_args], ROOT))  # the root's budget is charged with its tree's
            add("subagents", "restore_limit_ms", r["open_ms"])

        # (8) the cycle watched and unwatched, next to the floor (issue 13)
        r = log("subagents", run_json([PY, str(HERE / "watched.py"), "--iters", str(iters), "--rounds", "4"], ROOT))
        add("subagents", "w_floor_mean", r["floor"]["mean_us"])
        add("subagents", "w_floor_median", r["floor"]["median_us"])
        for v in WATCHED:
            add("subagents", f"w_{v}_median", r[v]["median_us"])
            add("subagents", f"w_{v}_mean", r[v]["mean_us"])
            add("subagents", f"w_{v}_x", r[v]["x_floor_mean"])
            add("subagents", f"w_{v}_gc", r[v]["gc_share"] * 100)
            if "paired" in r[v]:  # (the memory variants: the floor alternated 1:1 with the runtime's cycle)
                add("subagents", f"w_{v}_pfloor", r[v]["paired"]["floor_mean_us"])
                add("subagents", f"w_{v}_xp", r[v]["paired"]["x_floor_mean"])
        progress(f"rep{rep} watched: " + ", ".join(f"{v} {r[v]['mean_us']:.0f} µs mean ({r[v]['x_floor_mean']}x)"
                                                  for v in WATCHED) + f", floor {r['floor']['mean_us']:.0f}")
        # (6) permission checks and (7) the shell sandbox (each script interleaves its variants)
        r = log("subagents", run_json([PY, str(HERE / "authority.py"), "--iters", str(iters), "--rounds", "2"], ROOT))
        for k in ("floor", "default", "rules+hooks"):
            add("subagents", f"auth_{k}_us", r[k]["median_us"])
        r = log("subagents", run_json([PY, str(HERE / "sandbox.py"), "--n", "100" if a.quick else "200"], ROOT))
        for k in ("plain", "off", "bwrap", "landlock", "landlock<6"):
            add("subagents", f"bash_{k}_ms", r["rows"][k]["median_us"] / 1e3)
        add("subagents", "bash_bwrap_added_ms", r["added_over_plain"]["bwrap"]["median_us"] / 1e3)
        progress(f"rep{rep} authority and sandbox measured")

    # (9) once: the sweeper over 100,000 finished runs, model calls over the real SDK, 100,000 queued children
    r = log("subagents", run_json([PY, str(HERE / "sweeper.py"), "--runs", "10000" if a.quick else "100000"], ROOT))
    add("subagents", "sweep_lag_ms", r["lag_max_ms"])
    add("subagents", "sweep_floor_lag_ms", r["floor_lag_max_ms"])
    add("subagents", "sweep_step_ms", r["step_max_ms"])
    add("subagents", "sweep_step_median_ms", r["step_median_ms"])
    progress(f"sweeper: max loop lag {r['lag_max_ms']} ms (floor {r['floor_lag_max_ms']} ms)")
    r = log("subagents", run_json([PY, str(HERE / "model_client.py"), "--calls", "50" if a.quick else "200"], ROOT))
    m = r["modes"]
    add("subagents", "client_model_us", m["model"]["median_us"])
    add("subagents", "client_model_mean_us", m["model"]["mean_us"])
    add("subagents", "client_connections", m["model"]["connections"])
    add("subagents", "client_per_call_us", m["per_call_client"]["median_us"])
    add("subagents", "client_per_call_connections", m["per_call_client"]["connections"])
    add("subagents", "client_httpx_us", m["httpx_floor"]["median_us"])
    progress(f"model client: {m['model']['median_us']:.0f} µs/call, {m['model']['connections']} connection(s)")
    for v in WATCHED if a.instructions else ():  # (once: two runs of the same code agree to ~0.1-5%)
        r = log("subagents", run_json([PY, str(HERE / "instructions.py"), "cycle", "--store", v.split("+")[0],
                                       *(["--listener"] if v.endswith("+listener") else []), "--top", "1"], ROOT))
        add("subagents", f"i_{v}_x", r["x_floor"])
        progress(f"instructions, {v}: {r['instructions']:,.0f} per cycle, {r['x_floor']}x the floor's")
    if a.big:
        r = log("subagents", run_json([*ours, "fanout", "100000", "--max-threads", "1000", "--when-full", "queue"],
                                      ROOT))
        add("subagents", "fan100000_ms", r["wall_ms"])
        add("subagents", "fan100000_mb", r["peak_rss_mb"])
        add("subagents", "fan100000_child_us", r["per_child_us"])
        add("subagents", "fan100000_cpu_ms", r["cpu_ms"])
        add("subagents", "fan100000_x", r["x_floor"])
        progress(f"fanout 100,000 (max_threads 1,000, queued): {r['wall_ms']:.0f} ms, {r['peak_rss_mb']:.0f} MB")

    # (5) cold start: interleaved rounds of launches; median of round medians
    if not a.skip_cold:
        cold: list[tuple[str, str, list[str]]] = [
            ("subagents", "python_ms", [PY, "-c", "pass"]),
            # what a program pays: `import subagents` alone loads nothing else (its names load on first use)
            ("subagents", "import_ms", [PY, "-c", "from subagents import Runtime"]),
            ("subagents", "help_ms", [SUBAGENTS_CLI, "--help"]),
        ]
        for fw, _ in peers:
            cold.append((fw, "import_ms", [str(PEER_PY), "-c", PEER_IMPORTS[fw]]))
        if peers:
            cold.append(("peers-python", "python_ms", [str(PEER_PY), "-c", "pass"]))
        for _, _, cmd in cold:
            launch_ms(cmd)  # untimed: pyc files, page cache
        for rep in range(reps):
            per: dict[tuple[str, str], list[float]] = {(fw, k): [] for fw, k, _ in cold}
            for _ in range(cold_runs):
                for fw, k, cmd in cold:
                    per[(fw, k)].append(launch_ms(cmd))
            for (fw, k), xs in per.items():
                log(fw, {"cold": k, "ms": xs})
                add(fw, k, statistics.median(xs))
            progress(f"rep{rep} cold: " + ", ".join(f"{fw} {k} {statistics.median(xs):.0f}"
                                                     for (fw, k), xs in per.items()))

    summary = {fw: {k: med(v) for k, v in d.items()} for fw, d in res.items()}
    machine = {"nproc": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
               "platform": platform.platform(), "loadavg": os.getloadavg()}
    (out / "summary.json").write_text(json.dumps(
        {"machine": machine, "store": store_label, "reps": reps, "iters": iters, "ns": ns,
         "versions": versions, "summary": summary, "notes": notes}, indent=2))
    print(render(summary, [fw for fw, _ in peers], ns, versions, store_label, reps, iters, machine, notes))
    print()
    print(render_goals(summary.get("subagents", {})))


def render(s: dict[str, dict[str, Any]], peers: list[str], ns: list[int], versions: dict[str, str], store: str,
           reps: int, iters: int, machine: dict[str, Any], notes: list[str]) -> str:
    ours = s.get("subagents", {})
    py_ours = ours.get("python_ms")
    rows: list[tuple[str, str, int, str | None]] = [  # label, key, decimals, target key
        (f"(1) delegation cycle, µs (median of {iters:,})", "cycle_us", 0, "cycle_us"),
        ("(1) bare single-agent single-turn run, µs", "bare_us", 0, None),
    ]
    for n in ns:
        rows += [(f"(2) fan-out N={n:,}: wall ms", f"fan{n}_ms", 1, f"fan{n}_ms"),
                 (f"(2) fan-out N={n:,}: per child µs", f"fan{n}_child_us", 0, None),
                 (f"(2) fan-out N={n:,}: peak RSS MB", f"fan{n}_mb", 1, f"fan{n}_mb")]
    rows += [("(3) wait wake-up, µs (child's model returns → parent's next model call)", "wake_us", 0, "wake_us"),
             ("(3) wait wake-up, µs (child's model returns → `await rt.wait()` returns)", "wake_api_us", 0, None),
             ("(4) restore: open a store of 100,000 finished + 1,000 open runs, ms", "restore_ms", 0, "restore_ms"),
             ("(4) … its root with a token limit (charged with what its tree spent), ms", "restore_limit_ms", 0,
              "restore_ms"),
             ("(5) `python -c pass`, ms", "python_ms", 0, None),
             ("(5) `python -c \"import <framework>\"` (ours: `from subagents import Runtime`), ms", "import_ms", 0,
              "import_ms"),
             ("(5) … net of bare python, ms", "import_net", 0, None),
             ("(5) `subagents --help`, ms", "help_ms", 0, "help_ms"),
             ("(5) … net of bare python, ms", "help_net", 0, None),
             ("(6) delegation cycle, plain-asyncio floor, µs", "auth_floor_us", 0, None),
             ("(6) delegation cycle, `default` mode, memory store, µs", "auth_default_us", 0, None),
             ("(6) … with 20 rules + 2 callback hooks, µs", "auth_rules+hooks_us", 0, None),
             ("(7) `bash true`, no sandbox, no reaper, ms", "bash_plain_ms", 2, None),
             ("(7) `bash true`, no sandbox (mode off: the reaper), ms", "bash_off_ms", 2, None),
             ("(7) `bash true`, bubblewrap, ms", "bash_bwrap_ms", 2, None),
             ("(7) `bash true`, Landlock, ms", "bash_landlock_ms", 2, None),
             ("(7) `bash true`, Landlock before Linux 6.12 (reaper decides), ms", "bash_landlock<6_ms", 2, None),
             ("(7) … bubblewrap's added cost, ms", "bash_bwrap_added_ms", 2, "bash_bwrap_added_ms")]
    py_peer = s.get("peers-python", {}).get("python_ms")

    def val(fw: str, key: str) -> float | None:
        d = s.get(fw, {})
        if key == "import_net":
            base = py_ours if fw == "subagents" else py_peer
            return None if d.get("import_ms") is None or base is None else d["import_ms"] - base
        if key == "help_net":
            return None if d.get("help_ms") is None or py_ours is None else d["help_ms"] - py_ours
        if key == "python_ms" and fw != "subagents":
            return py_peer
        return d.get(key)

    head = ["workload", "subagents", *peers]
    if peers:
        head.append("fastest peer ÷ subagents")
    head += ["target", "met?"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, key, nd, tkey in rows:
        mine = val("subagents", key)
        if mine is None and all(val(p, key) is None for p in peers):
            if key == "restore_ms":
                lines.append("| " + " | ".join([label, "pending (no SQLite store yet)", *["n/a"] * len(peers),
                                                *(["–"] if peers else []), "≤ 2,000", "pending"]) + " |")
            continue
        cells = [label, fmt(mine, nd)]
        pv = [val(p, key) for p in peers]
        cells += [fmt(v, nd) if v is not None else "n/a" for v in pv]
        if peers:
            known = [v for v in pv if v is not None]
            ratio = (min(known) / mine) if known and mine and key != "python_ms" else None
            cells.append("–" if ratio is None else f"{ratio:,.1f}×")
        t = TARGETS.get(tkey or "")
        if t is None:
            cells += ["", ""]
        else:
            cells += [f"≤ {t:,.0f}", "–" if mine is None else ("yes" if mine <= t else "**no**")]
        lines.append("| " + " | ".join(cells) + " |")
    fanouts = [(n, ours.get(f"fan{n}_child_us")) for n in ns if ours.get(f"fan{n}_child_us")]
    info = [f"Store: {store}.  {reps} repetition(s), each measurement a fresh process; figures are medians of "
            "the per-process medians; ratios from this run.",
            f"Machine: {machine['nproc']} CPU(s), {machine['cpu']}, Python {machine['python']}, {machine['platform']}."]
    if versions:
        info.append("Peers: " + ", ".join(f"{k} {v}" for k, v in versions.items())
                    + f"; fan-out N > {PEER_MAX_N:,} not run for peers.")
    if len(fanouts) > 1:
        info.append("Per-child fan-out cost vs N (subagents): "
                    + " → ".join(f"N={n:,}: {v:,.0f} µs" for n, v in fanouts)
                    + f" (×{fanouts[-1][1] / fanouts[0][1]:.2f} from first to last).")
    info += notes
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {x}" for x in info)


if __name__ == "__main__":
    main()
