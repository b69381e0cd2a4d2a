"""NDlib and EoN, the independent references for ``desim.diffusion``, run in a venv of their own.

``benchmarks/.venv-diffusion`` is created on first use (git-ignored) with ``ndlib==6.0.1``,
``EoN==2.0``, ``six`` and ``scikit-learn`` (NDlib 6.0.1 imports both without declaring them;
scikit-learn only for its opinion models). Nothing of NDlib or
EoN is imported by desim or its tests' interpreter: a job goes to the venv's Python as JSON
and the results come back as JSON.

A job (``run_job``)::

    {"tool": "ndlib" | "eon", "model": "SIR" | "SIS" | "SEIR" | "SI" | "IC" | "threshold" |
     "voter" | "majority", "n": N, "edges": [[u, v], ...] (positions), "directed": false,
     "params": {...}, "initial": [[positions of replicate 0's seeds], ...] | {"fraction": f},
     "replicates": R, "steps": T, "seed": S, "edge_values": [...], "node_values": [...],
     "node_states": false}

and its answer: per replicate the counts per state after each step (``curves``: state -> list of
lists, step 0 first), the final counts, wall and CPU seconds of each replicate's simulation
(graph construction excluded and timed apart, ``graph_seconds``), and with ``node_states`` the
state of every node after each step (for the deterministic threshold model).

What each tool is asked to do (read in their sources, NDlib 6.0.1 and EoN 2.0):

* NDlib ``SIRModel``/``SISModel``/``SEIRModel``/``SIModel``: ``iteration_bunch``-style
  ``iteration()`` calls; iteration 0 returns the initial state, each later one is a step. The
  initial infected are given as a list (``add_model_initial_configuration("Infected", ...)``).
  NDlib seeds ``np.random`` globally from the model's ``seed`` argument.
* NDlib ``IndependentCascadesModel`` with per-edge ``threshold`` (the edge probability), and
  ``ThresholdModel`` with per-node ``threshold``.
* NDlib ``VoterModel`` (one elementary update per iteration: ``steps * n`` iterations make
  ``steps`` desim steps) and ``MajorityRuleModel`` (one group per iteration).
* EoN ``basic_discrete_SIR(G, p, initial_infecteds=..., rng=...)``: infectious for one step,
  i.e. desim's SIR with ``gamma = 1``; and ``basic_discrete_SIS`` is not used (it is not
  the same process: it has no recovery probability).

Run ``python benchmarks/diffusion_reference.py ensure`` to build the venv,
``python benchmarks/diffusion_reference.py JOB.json OUT.json`` to run a job (it re-runs itself
in the venv).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-diffusion"
PACKAGES = ["ndlib==6.0.1", "EoN==2.0", "six", "scikit-learn"]   # NDlib imports six and sklearn undeclared


def venv_python() -> Path:
    return VENV / "bin" / "python"


def have_venv() -> bool:
    """True when the venv exists with both references importable (checked cheaply by path)."""
    site = list(VENV.glob("lib/python*/site-packages"))
    return venv_python().exists() and bool(site) and all((site[0] / p).exists() for p in ("ndlib", "EoN", "six.py",
                                                                                          "sklearn"))


def ensure_venv() -> Path:
    """The venv's interpreter, creating the venv (``python -m venv``, then pip) when missing."""
    if not have_venv():
        if not venv_python().exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(venv_python()), "-m", "pip", "install", "-q", *PACKAGES], check=True)
    return venv_python()


def run_job(job: dict, workdir: Path) -> dict:
    """Run ``job`` in the venv and return its answer (from any interpreter)."""
    python = ensure_venv()
    workdir.mkdir(parents=True, exist_ok=True)
    src, out = workdir / f"job-{os.getpid()}-{time.monotonic_ns()}.json", workdir / f"out-{os.getpid()}.json"
    src.write_text(json.dumps(job), encoding="utf-8")
    subprocess.run([str(python), str(Path(__file__).resolve()), str(src), str(out)], check=True)
    return json.loads(out.read_text(encoding="utf-8"))


# --- inside the venv ---------------------------------------------------------------------
STATUS = {  # NDlib's status codes, by model, in the order desim names its states
    "SIR": {"S": 0, "I": 1, "R": 2}, "SIS": {"S": 0, "I": 1}, "SI": {"S": 0, "I": 1},
    "SEIR": {"S": 0, "E": 2, "I": 1, "R": 3}, "IC": {"inactive": 0, "active": 1, "spent": 2},
    "threshold": {"inactive": 0, "active": 1}, "voter": {"0": 0, "1": 1}, "majority": {"0": 0, "1": 1},
}


def _graph(job):
    import networkx as nx
    g = nx.DiGraph() if job.get("directed") else nx.Graph()
    g.add_nodes_from(range(job["n"]))
    g.add_edges_from(map(tuple, job["edges"]))
    return g


def _ndlib_model(job, g, seed):
    import ndlib.models.ModelConfig as mc
    import ndlib.models.epidemics as ep
    kind, params = job["model"], job.get("params", {})
    if kind in ("voter", "majority"):
        import ndlib.models.opinions as op     # imports scikit-learn (for a model not used here)
        cls = {"voter": op.VoterModel, "majority": op.MajorityRuleModel}[kind]
    else:
        cls = {"SIR": ep.SIRModel, "SIS": ep.SISModel, "SI": ep.SIModel, "SEIR": ep.SEIRModel,
               "IC": ep.IndependentCascadesModel, "threshold": ep.ThresholdModel}[kind]
    model = cls(g, seed=seed)
    cfg = mc.Configuration()
    for name, value in params.items():
        cfg.add_model_parameter(name, value)
    if job.get("edge_values") is not None:          # IC: each edge's probability, in job["edges"] order
        for (u, v), p in zip(job["edges"], job["edge_values"]):
            cfg.add_edge_configuration("threshold", (u, v), p)
    if job.get("node_values") is not None:          # threshold: each node's threshold
        for i, th in enumerate(job["node_values"]):
            cfg.add_node_configuration("threshold", i, th)
    return model, cfg


def _ndlib_replicate(job, g, seeds, seed):
    import numpy as np
    model, cfg = _ndlib_model(job, g, seed)
    cfg.add_model_initial_configuration("Infected", list(seeds))
    model.set_initial_status(cfg)
    codes = STATUS[job["model"]]
    steps, n = job["steps"], job["n"]
    per_step = n if job["model"] == "voter" else job.get("iterations_per_step", 1)
    counts, states = [], []
    wall, cpu = time.perf_counter(), time.process_time()
    status = dict(model.status)
    for t in range(steps + 1):
        if t == 0:
            model.iteration(node_status=False)
        else:
            for _ in range(per_step):
                model.iteration(node_status=False)
        status = model.status
        values = np.fromiter((status[i] for i in range(n)), np.int64, n)
        counts.append({s: int((values == c).sum()) for s, c in codes.items()})
        if job.get("node_states"):
            inverse = {c: s for s, c in codes.items()}
            states.append([inverse[int(v)] for v in values])
        if job.get("until_quiet") and t > 0 and counts[-1].get(job["until_quiet"], 0) == 0:
            break
    return counts, states, time.perf_counter() - wall, time.process_time() - cpu


def _eon_replicate(job, g, seeds, seed):
    import EoN
    import numpy as np
    rng = np.random.default_rng(seed)
    wall, cpu = time.perf_counter(), time.process_time()
    t, S, I, R = EoN.basic_discrete_SIR(g, job["params"]["p"], initial_infecteds=list(seeds), rng=rng,
                                        tmax=job["steps"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    counts = [{"S": int(s), "I": int(i), "R": int(r)} for s, i, r in zip(S, I, R)]
    while len(counts) < job["steps"] + 1:              # EoN stops when nobody is infectious
        counts.append(dict(counts[-1]))
    return counts, [], wall, cpu


def _eon_full_replicate(job, g, seeds, seed):
    """EoN with ``return_full_data=True``: every node's history, what desim's panel stores."""
    import EoN
    import numpy as np
    rng = np.random.default_rng(seed)
    wall, cpu = time.perf_counter(), time.process_time()
    sim = EoN.basic_discrete_SIR(g, job["params"]["p"], initial_infecteds=list(seeds), rng=rng,
                                 tmax=job["steps"], return_full_data=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    t, D = sim.summary()                                # the counts, not timed: analysis, not simulation
    counts = [{"S": int(s), "I": int(i), "R": int(r)} for s, i, r in zip(D["S"], D["I"], D["R"])]
    while len(counts) < job["steps"] + 1:
        counts.append(dict(counts[-1]))
    return counts, [], wall, cpu


def main_in_venv(src: Path, out: Path) -> None:
    import numpy as np
    job = json.loads(src.read_text(encoding="utf-8"))
    started = time.perf_counter()
    g = _graph(job)
    graph_seconds = time.perf_counter() - started
    R, seed = job["replicates"], job.get("seed", 1)
    init = job["initial"]
    run = {"ndlib": _ndlib_replicate, "eon": _eon_replicate, "eon_full": _eon_full_replicate}[job["tool"]]
    rng = np.random.default_rng(seed)
    answer = {"curves": [], "node_states": [], "wall": [], "cpu": [], "graph_seconds": graph_seconds}
    for r in range(R):
        if isinstance(init, dict):
            k = int(round(init["fraction"] * job["n"])) if "fraction" in init else int(init["count"])
            seeds = sorted(rng.choice(job["n"], k, replace=False).tolist())
        else:
            seeds = init[r % len(init)]
        counts, states, wall, cpu = run(job, g, seeds, seed * 1000 + r)
        answer["curves"].append(counts)
        answer["wall"].append(wall)
        answer["cpu"].append(cpu)
        if states:
            answer["node_states"].append(states)
    answer["versions"] = _versions()
    out.write_text(json.dumps(answer), encoding="utf-8")


def _versions() -> dict:
    from importlib.metadata import version
    return {p: version(p) for p in ("ndlib", "EoN", "networkx", "numpy")}


if __name__ == "__main__":
    if sys.argv[1:] == ["ensure"]:
        print(ensure_venv())
    elif Path(sys.prefix).resolve() != VENV.resolve():      # not in the venv yet: go there
        sys.exit(subprocess.run([str(ensure_venv()), str(Path(__file__).resolve()), *sys.argv[1:]]).returncode)
    else:
        main_in_venv(Path(sys.argv[1]), Path(sys.argv[2]))
