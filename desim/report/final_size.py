"""An analytic reference for prevalence curves: the final size of an SIR epidemic on the run's network.

For ``desim.diffusion:SIR`` (and the independent cascade, the same process with recovery after one
step) on a network, the expected share of agents ever infected in a large outbreak is the
configuration-model final size (Newman 2002, Phys. Rev. E 66, 016128; with a share of seeds,
Miller 2011, J. Math. Biol. 62, 349):

    u = 1 - T + T (1 - rho) G1(u),        r_inf = 1 - (1 - rho) G0(u)

with ``G0(x) = sum_k p_k x^k`` over the network's degree sequence, ``G1(x) = G0'(x) / G0'(1)``,
``rho`` the share of seeds and ``T`` the chance that an infected agent infects a given susceptible
neighbour before it recovers. In desim's discrete-time SIR a case transmits once per step for
``K >= 1`` steps, ``P(K = k) = gamma (1 - gamma)^(k - 1)``, each try with probability ``beta``:
``T = 1 - E[(1 - beta)^K] = beta / (beta + gamma - beta gamma)``; the cascade has ``T = p``. On a
network with Poisson degrees this is the homogeneous-mixing relation ``r = 1 - (1 - rho)
exp(-T <k> r)``; on a scale-free one it differs from it, which is why the degree sequence is used.

Assumptions, checked before a line is drawn (:func:`reference` says why when it is not):
transmission and recovery are the same for every agent and edge (scalar ``beta``, ``gamma``) and
do not change during the run (no scheduled events or broadcasts); the network is undirected and
locally tree-like (global clustering under :data:`MAX_CLUSTERING`; a Watts-Strogatz lattice's
triangles make the formula overestimate the outbreak); seeds are few and chosen at random; the
network is large. Heterogeneous infectious periods change the chance of an outbreak, not its
expected size (Miller 2007, Phys. Rev. E 76, 010101). The value is the long-run share: a run that
stops while agents are still infected has not reached it yet.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from desim.records import is_number

MAX_CLUSTERING = 0.05       # global transitivity above which the tree-like assumption is not met
MODELS = {"desim.diffusion:SIR": "SIR", "desim.diffusion:IndependentCascade": "independent cascade"}


def transmissibility(model: str, args: dict[str, Any]) -> float | None:
    """``T`` of the model with scalar parameters, or None."""
    if model == "SIR":
        beta, gamma = args.get("beta"), args.get("gamma")
        if not all(is_number(v) for v in (beta, gamma)):
            return None
        if beta <= 0:
            return 0.0
        return float(beta) / (float(beta) + float(gamma) - float(beta) * float(gamma))
    p = args.get("p", 0.1)
    return float(p) if is_number(p) else None


def final_size(degrees: np.ndarray, T: float, rho: float) -> float:
    """The configuration-model final size for the degree sequence ``degrees``, transmissibility ``T``
    and a share ``rho`` of random seeds (the share of agents ever infected, seeds included)."""
    k = np.asarray(degrees, dtype=float)
    mean = k.mean() if len(k) else 0.0
    if mean == 0:
        return float(rho)
    u = 0.0
    for _ in range(10_000):
        g1 = float((k * u ** np.maximum(k - 1, 0)).mean() / mean)
        nxt = 1 - T + T * (1 - rho) * g1
        if abs(nxt - u) < 1e-12:
            u = nxt
            break
        u = nxt
    return float(1 - (1 - rho) * (u ** k).mean())


def clustering(n: int, edges: np.ndarray) -> float:
    """Global clustering (transitivity) of the undirected network: 3 x triangles / connected triples."""
    import igraph as ig
    if not len(edges):
        return 0.0
    value = ig.Graph(n=n, edges=np.asarray(edges, dtype=np.int64)).simplify().transitivity_undirected()
    return 0.0 if value != value else float(value)      # NaN: no connected triple


def reference(config: dict[str, Any], n: int, edges: np.ndarray, seed_share: float) -> dict[str, Any]:
    """The reference line for one run, or why there is none: ``{"value", "label", "assumptions"}`` or
    ``{"value": None, "why": ...}``. ``config`` is the run's stored configuration, ``edges`` its network
    as positions (m, 2), ``seed_share`` the share of agents not susceptible at step 0."""
    sim, pop, env = config.get("simulation", {}), config.get("population", {}), config.get("environment", {})
    ref = (sim.get("decision") or {}).get("ref", "")
    model = MODELS.get(ref)
    if model is None:
        return {"value": None, "why": f"no analytic reference for {ref or 'this model'} (only for SIR and the "
                                      "independent cascade of desim.diffusion)"}
    args = (sim.get("decision") or {}).get("args") or {}
    T = transmissibility(model, args)
    if T is None:
        return {"value": None, "why": "transmission or recovery varies by agent or edge: the final-size relation "
                                      "assumes one beta and one gamma"}
    if (pop.get("interaction") or {}).get("directed"):
        return {"value": None, "why": "the network is directed: the relation is for undirected networks"}
    if env.get("scheduled_events") or env.get("broadcasts"):
        return {"value": None, "why": "the study schedules interventions, which may change transmission during "
                                      "the run"}
    c = clustering(n, edges)
    if c > MAX_CLUSTERING:
        return {"value": None, "why": f"the network is clustered (transitivity {c:.2f} > {MAX_CLUSTERING}): the "
                                      "configuration-model final size assumes a tree-like network and would "
                                      "overestimate the outbreak"}
    degrees = np.bincount(np.asarray(edges, dtype=np.int64).ravel(), minlength=n)
    value = final_size(degrees, T, seed_share)
    what = (f"beta={args.get('beta')}, gamma={args.get('gamma')}" if model == "SIR" else f"p={args.get('p', 0.1)}")
    return {"value": value, "T": T, "clustering": c, "mean_degree": float(degrees.mean()) if n else 0.0,
            "label": f"final size, configuration model ({what}; T={T:.3f}): {value:.3f}",
            "assumptions": (f"{model}: the configuration-model final size on the run's degree sequence (mean degree "
                            f"{degrees.mean():.2f}, transitivity {c:.3f}), T = beta / (beta + gamma - beta gamma) = "
                            f"{T:.3f}, seeds {seed_share:.2%} at random; expected share ever infected in a large "
                            "outbreak, as the run's length goes to infinity (Newman 2002; Miller 2011)"),
            # the same for several groups at once (a sweep's): their figures differ, the legend gives each one's
            "assumptions_each": (f"{model}: for each group, the configuration-model final size on its runs' degree "
                                 "sequence, with T = beta / (beta + gamma - beta gamma) and the seeds at random (each "
                                 "group's T and value in the legend); expected share ever infected in a large "
                                 "outbreak, as the run's length goes to infinity (Newman 2002; Miller 2011)")}
