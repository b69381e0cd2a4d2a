"""Study folders for the diffusion tests: the four JSON files of a study that runs a
``desim.diffusion`` model with no ``model.py``, written into a temporary folder."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import desim


def write_study(root: Path, model: str, args: dict[str, Any] | None = None, *, env: dict[str, Any] | None = None,
                population: dict[str, Any] | None = None, n_steps: int = 10, seed: int = 1,
                parameters: dict[str, Any] | None = None, rounds: int = 1,
                collector: dict[str, Any] | None = None) -> Path:
    """A study folder at ``root`` running ``desim.diffusion:<model>``; returns ``root``."""
    root = Path(root)
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    files = {
        "study.json": {"id": root.name.replace(".", "_"), "title": f"{model} test study"},
        "simulation/simulation.json": {
            "n_steps": n_steps, "seed": seed, "interaction_rounds": rounds, "memory_window": 0,
            "agent_processes": False,
            "decision": {"ref": f"desim.diffusion:{model}", "args": args or {}},
            "collector": collector if collector is not None else {"ref": "desim.diffusion:Prevalence"},
            "parameters": parameters or {}},
        "population/population.json": population or {
            "provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 200}},
            "interaction": {"kind": "erdos_renyi", "p": 0.03}, "propagation": "network"},
        "environment/environment.json": {"provider": {"ref": "desim.diffusion:NetworkState", "args": env or {}}},
    }
    for rel, data in files.items():
        (root / rel).write_text(json.dumps(data, indent=1), encoding="utf-8")
    return root


def edges_population(n: int, edges, prefix: str = "n", attributes: dict[str, list] | None = None,
                     directed: bool = False) -> dict[str, Any]:
    """``population.json`` with personas ``n0..`` inline and explicit edges (pairs of positions)."""
    width = len(str(n - 1))
    ids = [f"{prefix}{i:0{width}d}" for i in range(n)]
    personas = []
    for i, a in enumerate(ids):
        attrs = {k: v[i] for k, v in (attributes or {}).items()}
        personas.append({"agent_id": a, "attributes": attrs})
    return {"personas": personas,
            "interaction": {"kind": "edges", "edges": [[ids[u], ids[v]] for u, v in edges], "directed": directed},
            "propagation": "network"}


def run(root: Path, **overrides):
    """Run the study once through the public API; returns the ``RunResult``."""
    return desim.run_study(desim.load_study(root, **overrides))


def states(result, field: str = "state"):
    """The panel as {step: [state of each agent in population order]} plus the initial states at step 0."""
    panel = result.panel(columns=[field]).to_pydict()
    out: dict[int, list] = {}
    for step, value in zip(panel["step"], panel[field]):
        out.setdefault(step, []).append(value)
    out[0] = result.initial_states().to_pydict()[field]
    return out
