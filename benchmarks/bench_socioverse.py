"""desim side by side with SocioVerse2 0.2.0, the published loop desim's design follows.

    python benchmarks/bench_socioverse.py [--n 2000]
    python benchmarks/bench_socioverse.py --n 200 --no-socioverse   # smoke: desim's side only (a test runs it)
    python benchmarks/bench_socioverse.py --json PATH               # the figures also as one JSON object at PATH

Creates ``benchmarks/.venv-socioverse`` (if missing) with ``socioverse2==0.2.0``
and runs every configuration in a fresh process (desim's in this interpreter,
SocioVerse2's in the venv's), so each peak memory is that run's own. Prints a
Markdown section and writes the raw figures to ``benchmarks/out/socioverse.json``.

``--no-socioverse`` runs desim's side only: no venv, no SocioVerse2 run, so no
larger N (chosen from SocioVerse2's time) and no same-model check; it prints
the figures and the section but writes nothing to ``benchmarks/out``.
``--n`` is the first N of the ring and messaging runs (default 2,000).

1. Ring bounded confidence (epsilon 0.3, mu 0.5, 12 steps, K = 1 and 3, DuckDB
   store on): desim's columnar ``benchmarks/studies/ring_bc``, desim's per-agent
   ``studies/opinion_diffusion`` rewired to a ring with its campaign removed
   (opinions travel on its message bus, carried over from the previous step),
   and the same rule written for SocioVerse2 (``benchmarks/socioverse_study``).
   N = 2,000, then the largest of 20,000 / 10,000 / 5,000 that SocioVerse2 is
   predicted (linearly, from its N = 2,000 run) to finish in under ~5 minutes.
2. Same model check: SocioVerse2 started from desim's initial opinions (N = 500,
   K = 3) must end at desim's final opinions.
3. Messaging: every agent posts every round, Watts-Strogatz k = 10 (the same
   graph on both sides), K = 3, 12 steps, N = 2,000 (and 20,000 if SocioVerse2
   is predicted to finish it in ~5 minutes): desim's ``InMemoryMessageBus`` +
   ``NeighborFeed`` (and its ``ColumnarFeed``) through benchmarks/bench_messaging.py
   against SocioVerse2's ``InMemoryMessageBus`` + ``NeighborFeed``.

Wall time is the study's build plus run (imports excluded); CPU time is the
child process's user + system time, imports included, which is steadier than
wall time on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonout

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "benchmarks" / ".venv-socioverse"
SV_PY = VENV / "bin" / "python"
SV_RUN = ROOT / "benchmarks" / "socioverse_study" / "run_one.py"
N_STEPS = 12
BUDGET_S = 300          # "under ~5 minutes per run" for SocioVerse2
HARD_TIMEOUT_S = 1500   # a SocioVerse2 run that takes longer is stopped


def ensure_venv() -> str:
    """The venv with socioverse2 0.2.0; returns the installed version."""
    if not SV_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = subprocess.run([str(SV_PY), "-c", "import socioverse; print(socioverse.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode or probe.stdout.strip() != "0.2.0":
        subprocess.run([str(SV_PY), "-m", "pip", "install", "-q", "socioverse2==0.2.0"], check=True)
        probe = subprocess.run([str(SV_PY), "-c", "import socioverse; print(socioverse.__version__)"],
                               capture_output=True, text=True, check=True)
    return probe.stdout.strip()


def child(cmd: list[str], timeout: float | None = None) -> dict:
    """Run one configuration in a fresh process; its last stdout line is JSON.

    Adds the child's CPU seconds (user + system, all threads, imports included).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout:.0f} s"}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        print(out.stderr, file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r


# --- desim ------------------------------------------------------------------------------

def prepare(kind: str, tmp: Path) -> Path:
    """A copy of the study on a ring; opinion_diffusion loses its campaign (not in the model)."""
    src = ROOT / ("benchmarks/studies/ring_bc" if kind == "columnar" else "studies/opinion_diffusion")
    dest = tmp / kind
    if dest.exists():
        return dest
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    pop = dest / "population" / "population.json"
    data = json.loads(pop.read_text())
    data["interaction"] = {"kind": "ring", "k": 2}
    pop.write_text(json.dumps(data))
    env = dest / "environment" / "environment.json"
    data = json.loads(env.read_text())
    data.pop("scheduled_events", None)
    data.pop("broadcasts", None)
    env.write_text(json.dumps(data))
    return dest


def desim_one(cfg: dict) -> dict:
    """One desim ring run in this process (called through ``--desim-one``)."""
    import duckdb

    import desim
    from desim import run_study
    spec = desim.load_study(cfg["study"], params={"n_agents": cfg["n"]}, rounds=cfg["k"])
    t0 = time.perf_counter()
    result = run_study(spec, db_path=cfg["db"])
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    con = duckdb.connect(cfg["db"], read_only=True)
    metrics = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ? AND step = ?",
                               [result.run_id, N_STEPS]).fetchall())
    out = {"wall_s": wall, "peak_mib": peak, "panel_rows": result.rows_written, "status": result.status,
           "final_mean": metrics["mean_opinion"], "final_sd": metrics["opinion_sd"]}
    if cfg.get("export"):
        initial = con.execute("SELECT state.opinion FROM initial_states "
                              "WHERE run_id = ? ORDER BY agent_id", [result.run_id]).fetchall()
        final = con.execute("SELECT state.opinion FROM panel "
                            "WHERE run_id = ? AND step = ? ORDER BY agent_id", [result.run_id, N_STEPS]).fetchall()
        Path(cfg["export"]).write_text(json.dumps({"initial": [r[0] for r in initial],
                                                   "final": [r[0] for r in final]}))
    con.close()
    return out


def desim_ring(kind: str, n: int, k: int, tmp: Path, export: Path | None = None) -> dict:
    cfg = {"study": str(prepare(kind, tmp)), "n": n, "k": k,
           "db": str(tmp / f"desim-{kind}-{n}-{k}.duckdb"), "export": str(export) if export else None}
    return child([sys.executable, __file__, "--desim-one", json.dumps(cfg)])


def desim_messaging(n: int, path: str) -> dict:
    r = child([sys.executable, str(ROOT / "benchmarks" / "bench_messaging.py"), "--one", "--n", str(n),
               "--path", path, "--messages", "objects"])
    r["peak_mib"] = r["peak_rss_gib"] * 1024
    r["wall_s"] = r["engine_build_s"] + r["run_s"]      # its own wall_s includes imports
    return r


# --- SocioVerse2 ---------------------------------------------------------------------------

def sv(cfg: dict, tmp: Path) -> dict:
    cfg = {**cfg, "out": str(tmp / f"sv-{cfg['model']}-{cfg['n']}-{cfg['k']}-{len(list(tmp.iterdir()))}")}
    return child([str(SV_PY), str(SV_RUN), json.dumps(cfg)], timeout=HARD_TIMEOUT_S)


def ws_edges(n: int, path: Path) -> Path:
    """desim's Watts-Strogatz graph of bench_messaging (seed 1), as id pairs for SocioVerse2."""
    import networkx as nx
    width = len(str(n - 1))
    g = nx.watts_strogatz_graph(n, 10, 0.1, seed=1)
    path.write_text(json.dumps([[f"a{a:0{width}d}", f"a{b:0{width}d}"] for a, b in g.edges()]))
    return path


# --- report --------------------------------------------------------------------------------

def fmt(x: float, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def ring_section(rows: list[dict]) -> list[str]:
    lines = ["| N | K | system | wall s | CPU s | decisions/s | peak MiB | final mean | final sd | "
             "desim/SV2 wall | desim/SV2 peak |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        n, k, base = row["n"], row["k"], row.get("socioverse2")
        for name in ("desim columnar (ring_bc)", "desim per-agent (opinion_diffusion, bus)", "socioverse2"):
            if name not in row:      # --no-socioverse
                continue
            r = row[name]
            if "error" in r:
                lines.append(f"| {n:,} | {k} | {name} | {r['error']} | | | | | | | |")
                continue
            ratio = "" if name == "socioverse2" or base is None or "error" in base else \
                f"{r['wall_s'] / base['wall_s']:.4f} | {r['peak_mib'] / base['peak_mib']:.2f}"
            extra = ""
            if name == "socioverse2":
                extra = f" (panel inserts {fmt(r['panel_insert_s'], 1)} s, finalize {fmt(r['finalize_s'], 1)} s)"
            lines.append(f"| {n:,} | {k} | {name}{extra} | {fmt(r['wall_s'])} | {fmt(r['cpu_s'], 1)} | "
                         f"{n * N_STEPS * k / r['wall_s']:,.0f} | {r['peak_mib']:.0f} | {r['final_mean']:.4f} | "
                         f"{r['final_sd']:.4f} | {ratio or ' | '} |")
    return lines


def messaging_section(rows: list[dict]) -> list[str]:
    lines = ["| N | system | wall s | CPU s | observe µs / agent-round | read (feed) µs / agent-round | "
             "messages stored | peak MiB |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for name, r in row.items():
            if name == "n":
                continue
            if "error" in r:
                lines.append(f"| {row['n']:,} | {name} | {r['error']} | | | | | |")
                continue
            lines.append(f"| {row['n']:,} | {name} | {fmt(r['wall_s'])} | {fmt(r['cpu_s'], 1)} | "
                         f"{r['observe_us_per_agent_round']:,.2f} | {r['feed_us_per_agent_round']:,.2f} | "
                         f"{r['messages_stored']:,} | {r['peak_mib']:.0f} |")
    return lines


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--desim-one":
        print(json.dumps(desim_one(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="the first N of the ring and messaging runs (smoke: 200)")
    ap.add_argument("--no-socioverse", action="store_true",
                    help="desim's side only: no venv, no SocioVerse2 run, nothing written (the smoke test)")
    jsonout.add_option(ap)
    args = ap.parse_args()
    n0, with_sv = args.n, not args.no_socioverse
    if not with_sv:
        desim_only(n0, args.json)
        return
    version = ensure_venv()
    tmp = Path(tempfile.mkdtemp(prefix="bench-socioverse-"))
    started = time.time()
    figures: dict = {"socioverse2_version": version, "ring": [], "messaging": [], "notes": []}

    def ring_row(n: int, k: int) -> dict:
        row = {"n": n, "k": k,
               "desim columnar (ring_bc)": desim_ring("columnar", n, k, tmp),
               "desim per-agent (opinion_diffusion, bus)": desim_ring("per-agent", n, k, tmp),
               "socioverse2": sv({"model": "ring", "n": n, "k": k}, tmp)}
        print(json.dumps(row), flush=True)
        figures["ring"].append(row)
        return row

    for k in (1, 3):
        ring_row(n0, k)
    base = figures["ring"][-1]["socioverse2"]
    larger = next((n for n in (20_000, 10_000, 5_000) if n > n0 and base["wall_s"] * n / n0 < BUDGET_S), None)
    figures["notes"].append(f"SocioVerse2 ring N={n0:,} K=3 took {base['wall_s']:.1f} s; larger N chosen: {larger} "
                            f"(predicted {base['wall_s'] * (larger or 20_000) / n0:.0f} s at "
                            f"N={larger or 20_000:,}, budget {BUDGET_S} s)")
    if larger:
        for k in (1, 3):
            ring_row(larger, k)

    # same model: SocioVerse2 from desim's starting opinions ends where desim ends
    export = tmp / "desim-start.json"
    desim_ring("columnar", 500, 3, tmp, export=export)
    both = json.loads(export.read_text())
    (tmp / "initial.json").write_text(json.dumps(both["initial"]))
    sv({"model": "ring", "n": 500, "k": 3, "initial": str(tmp / "initial.json"),
        "final": str(tmp / "sv-final.json")}, tmp)
    sv_final = json.loads((tmp / "sv-final.json").read_text())
    diff = max(abs(a - b) for a, b in zip(both["final"], sv_final))
    moved = max(abs(a - b) for a, b in zip(both["final"], both["initial"]))
    figures["same_start"] = {"n": 500, "k": 3, "agents": len(sv_final), "max_abs_diff": diff,
                             "max_abs_move": moved}
    print(json.dumps(figures["same_start"]), flush=True)

    # messaging: every agent posts every round
    def messaging_row(n: int) -> dict:
        edges = ws_edges(n, tmp / f"ws-{n}.json")
        row = {"n": n, "desim InMemoryMessageBus + NeighborFeed": desim_messaging(n, "objects"),
               "desim ColumnarFeed": desim_messaging(n, "columnar"),
               "socioverse2 InMemoryMessageBus + NeighborFeed": sv({"model": "feed", "n": n, "k": 3,
                                                                    "edges": str(edges)}, tmp)}
        print(json.dumps(row), flush=True)
        figures["messaging"].append(row)
        return row["socioverse2 InMemoryMessageBus + NeighborFeed"]

    r = messaging_row(n0)
    if "error" not in r and n0 < 20_000:
        # reads scan every stored message (quadratic in N); the rest is linear in N
        scale = 20_000 / n0
        predicted = scale ** 2 * r["feed_s"] + scale * (r["wall_s"] - r["feed_s"])
        figures["notes"].append(f"SocioVerse2 messaging N=20,000 predicted {predicted:.0f} s "
                                f"({scale ** 2:g} x its reads + {scale:g} x the rest at N={n0:,}); "
                                f"budget {BUDGET_S} s")
        if predicted < BUDGET_S:
            messaging_row(20_000)

    shutil.rmtree(tmp, ignore_errors=True)
    out_dir = ROOT / "benchmarks" / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "socioverse.json").write_text(json.dumps(figures, indent=1))
    jsonout.write(args.json, {"n": n0, "socioverse2": True, **figures})
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    same = figures["same_start"]
    section = [
        "", "## desim vs SocioVerse2 0.2.0 side by side (issues 2 and 3)", "",
        f"Machine: {cpu}, 2 cores, Python {platform.python_version()}; shared and busy (load average "
        f"{open('/proc/loadavg').read().split()[0]} at the end). Command: `python benchmarks/bench_socioverse.py` "
        f"(one run, {time.time() - started:.0f} s); socioverse2 {version} in benchmarks/.venv-socioverse; "
        "each row a fresh process; wall = build + run, CPU = the process's user + system time.", "",
        "### Ring bounded confidence, epsilon 0.3, mu 0.5, 12 steps, DuckDB store on", "",
        *ring_section(figures["ring"]), "",
        f"Same model: SocioVerse2 started from desim's initial opinions (N = {same['n']}, K = {same['k']}) ends "
        f"at desim's final opinions within {same['max_abs_diff']:.3g} (largest move of an agent "
        f"{same['max_abs_move']:.3g}).", "",
        *[f"- {note}" for note in figures["notes"]], "",
        "### Every agent posts every round, Watts-Strogatz k = 10 (same graph), K = 3, 12 steps", "",
        *messaging_section(figures["messaging"]), "",
    ]
    print("\n".join(section))


def desim_only(n: int, json_path: Path | None = None) -> None:
    """``--no-socioverse``: desim's rows of sections 1 and 3 at N = ``n``, printed; nothing written but the
    figures at ``json_path`` (``--json``)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-socioverse-"))
    started = time.time()
    try:
        ring, messaging = [], []
        for k in (1, 3):
            row = {"n": n, "k": k,
                   "desim columnar (ring_bc)": desim_ring("columnar", n, k, tmp),
                   "desim per-agent (opinion_diffusion, bus)": desim_ring("per-agent", n, k, tmp)}
            print(json.dumps(row), flush=True)
            ring.append(row)
        row = {"n": n, "desim InMemoryMessageBus + NeighborFeed": desim_messaging(n, "objects"),
               "desim ColumnarFeed": desim_messaging(n, "columnar")}
        print(json.dumps(row), flush=True)
        messaging.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join([
        "", "## desim's side only (--no-socioverse: SocioVerse2 not run)", "",
        f"Command: `python benchmarks/bench_socioverse.py --n {n} --no-socioverse` ({time.time() - started:.0f} s); "
        "each row a fresh process; wall = build + run, CPU = the process's user + system time.", "",
        "### Ring bounded confidence, epsilon 0.3, mu 0.5, 12 steps, DuckDB store on", "",
        *ring_section(ring), "",
        "### Every agent posts every round, Watts-Strogatz k = 10, K = 3, 12 steps", "",
        *messaging_section(messaging), ""]))
    jsonout.write(json_path, {"n": n, "socioverse2": False, "ring": ring, "messaging": messaging})


if __name__ == "__main__":
    main()
