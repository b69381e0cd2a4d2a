"""desim.diffusion: each model checked against something nobody here wrote into the model.

Fast checks (deterministic or analytic):

* SIR final size against the final-size relation of bond percolation on Erdős–Rényi graphs;
* linear threshold and neighbour majority node for node against brute-force loops written
  here, straight from the definitions; the independent cascade against breadth-first layers;
* SI, SIS, SEIR sanity (monotone, absorbing, parameters at their extremes), heterogeneous
  per-node and per-edge parameters; the voter model's martingale; Deffuant's conserved mean;
* the same seed gives the same panel bit for bit; a branch replays the parent's steps;
* bad input stops ``desim run`` with ``desim: error: <file>: <field>: ...`` before anything is written.

Slow checks (``-m slow``): NDlib 6.0.1 and EoN 2.0 in ``benchmarks/.venv-diffusion`` run the
same processes on the same graphs; final sizes compared with two-sample tests, curves step by
step within their standard errors, the threshold model node for node.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import desim
from desim.cli import main
from diffusion_studies import edges_population, run, states, write_study

ROOT = Path(__file__).resolve().parent.parent


def final_size(r0: float) -> float:
    """The positive root of z = 1 - exp(-r0 z) (bisection; 0 when r0 <= 1)."""
    if r0 <= 1:
        return 0.0
    lo, hi = 1e-9, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid - (1 - math.exp(-r0 * mid)) < 0:
            lo = mid
        else:
            hi = mid
    return lo


def random_edges(n: int, p: float, seed: int, directed: bool = False):
    g = nx.gnp_random_graph(n, p, seed=seed, directed=directed)
    return list(g.edges())


def panel_hash(result) -> str:
    rows = result.panel().drop_columns(["run_id"]).to_pylist()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


# --- epidemics ----------------------------------------------------------------------------
def test_sir_final_size_matches_the_final_size_relation_on_erdos_renyi(tmp_path):
    """SIR with gamma = 1 is bond percolation with occupation probability beta: on ER(n, c/n)
    (Poisson degrees) a major outbreak reaches z with z = 1 - exp(-c beta z) (Newman 2002).
    n = 4000, c = 5, beta = 0.5: z = 0.8926. Six seeds; each run's graph is its own ER draw.
    The sd of a major outbreak's size at this n is below 0.01 (measured: 0.004-0.006), so the
    mean of six is within 0.015 of z with a wide margin; minor outbreaks (< 10 %) are left out."""
    n, c, beta = 4000, 5.0, 0.5
    root = write_study(tmp_path / "sir_er", "SIR", {"beta": beta, "gamma": 1.0}, env={"seeds": 5}, n_steps=40,
                       population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                                   "interaction": {"kind": "erdos_renyi", "p": c / n}})
    z = final_size(c * beta)
    sizes = []
    for seed in range(1, 7):
        m = run(root, seed=seed).metrics().to_pydict()
        assert m["count_I"][-1] == 0                          # the epidemic is over
        sizes.append(m["share_R"][-1])
    major = [s for s in sizes if s > 0.1]
    assert len(major) >= 4
    assert abs(np.mean(major) - z) < 0.015, (sizes, z)


def test_sir_states_move_only_forward_and_infectors_are_infectious_neighbours(tmp_path):
    edges = random_edges(300, 0.02, seed=3)
    root = write_study(tmp_path / "sir", "SIR", {"beta": 0.3, "gamma": 0.3}, env={"seeds": 3}, n_steps=25,
                       population=edges_population(300, edges))
    result = run(root)
    panel = result.panel(columns=["state", "since", "infected_by", "action_kind"]).to_pydict()
    by_step = states(result)
    order = {"S": 0, "I": 1, "R": 2}
    for t in range(1, 26):
        assert all(order[b] >= order[a] for a, b in zip(by_step[t - 1], by_step[t]))
    g = nx.Graph(edges)
    ids = [f"n{i:03d}" for i in range(300)]
    pos = {a: i for i, a in enumerate(ids)}
    seen_infection = 0
    for step, agent, state, since, by, kind in zip(panel["step"], panel["agent_id"], panel["state"],
                                                   panel["since"], panel["infected_by"], panel["action_kind"]):
        if kind == "infect":
            seen_infection += 1
            assert state == "I" and since == step and by is not None
            assert g.has_edge(pos[agent], pos[by])
            assert by_step[step - 1][pos[by]] == "I"         # infectious at the start of the step
    assert seen_infection > 10


def test_si_reaches_everyone_on_a_connected_graph_and_sis_never_with_beta_zero(tmp_path):
    n = 150
    edges = list(nx.connected_watts_strogatz_graph(n, 4, 0.1, seed=1).edges())
    pop = edges_population(n, edges)
    si = run(write_study(tmp_path / "si", "SI", {"beta": 0.5}, env={"seeds": 1}, n_steps=60, population=pop))
    m = si.metrics().to_pydict()
    assert m["share_I"][-1] == 1.0 and all(b >= a for a, b in zip(m["share_I"], m["share_I"][1:]))
    sis = run(write_study(tmp_path / "sis", "SIS", {"beta": 0.0, "gamma": 0.5}, env={"seeds": 20}, n_steps=30,
                          population=pop))
    m = sis.metrics().to_pydict()
    assert m["count_I"][0] == 20 and m["count_I"][-1] == 0 and sum(m["new_I"]) == 0
    # SIS with gamma = 0 is SI: the same draws, the same panel
    a = run(write_study(tmp_path / "sis0", "SIS", {"beta": 0.3, "gamma": 0.0}, env={"seeds": 2}, n_steps=10,
                        population=pop))
    b = run(write_study(tmp_path / "si0", "SI", {"beta": 0.3}, env={"seeds": 2}, n_steps=10, population=pop))
    assert states(a) == states(b)


def test_seir_new_cases_are_exposed_first_and_infectious_a_step_later(tmp_path):
    edges = random_edges(400, 0.02, seed=5)
    root = write_study(tmp_path / "seir", "SEIR", {"beta": 0.4, "alpha": 0.5, "gamma": 0.3}, env={"seeds": 4},
                       n_steps=30, population=edges_population(400, edges))
    result = run(root)
    by_step = states(result)
    allowed = {"S": {"S", "E"}, "E": {"E", "I"}, "I": {"I", "R"}, "R": {"R"}}
    for t in range(1, 31):
        for a, b in zip(by_step[t - 1], by_step[t]):
            assert b in allowed[a]
    m = result.metrics().to_pydict()
    assert sum(m["new_E"]) > 20 and m["cumulative_incidence"][-1] == pytest.approx(1 - m["share_S"][-1])


def test_per_node_recovery_from_a_roster_attribute(tmp_path):
    """gamma from each node's attribute: 1 recovers after one step, 0 never does."""
    n = 40
    edges = [(i, i + 1) for i in range(n - 1)]
    pop = edges_population(n, edges, attributes={"recovery_rate": [1.0 if i % 2 else 0.0 for i in range(n)]})
    root = write_study(tmp_path / "hetero", "SIR", {"beta": 0.0, "gamma": {"attribute": "recovery_rate"}},
                       env={"seed_nodes": [f"n{i:02d}" for i in range(n)]}, n_steps=3, population=pop)
    final = states(run(root))[3]
    assert final == ["I" if i % 2 == 0 else "R" for i in range(n)]


WEIGHTED_MODEL = '''
from desim.diffusion import IndependentCascade, LinearThreshold


class EdgesFromPositions:
    """Sets each edge's attribute from its ends' positions before the model reads it (edges from
    population.json carry no attributes yet)."""

    def reset(self, seed):
        index = self.ctx.index
        for u, v, data in self.ctx.graph.edges(data=True):
            data["p"] = 1.0 if abs(index[u] - index[v]) == 1 else 0.0
            data["w"] = 0.25 * (1 + (index[u] + index[v]) % 3)
        super().reset(seed)


class PathCascade(EdgesFromPositions, IndependentCascade):
    pass


class WeightedThreshold(EdgesFromPositions, LinearThreshold):
    pass
'''


def test_independent_cascade_with_per_edge_probabilities_follows_breadth_first_layers(tmp_path):
    """p = 1 on the path edges i - (i+1), 0 on every other edge: the cascade from node 0 activates
    node k at step k exactly, whatever the other edges."""
    n = 30
    edges = [(i, i + 1) for i in range(n - 1)] + random_edges(n, 0.15, seed=2)
    edges = sorted({tuple(sorted(e)) for e in edges if e[0] != e[1]})
    root = write_study(tmp_path / "ic", "IndependentCascade", {"p": {"edge": "p"}},
                       env={"seed_nodes": ["n00"]}, n_steps=n + 1, population=edges_population(n, edges))
    sim = json.loads((root / "simulation/simulation.json").read_text())
    sim["decision"]["ref"] = "model:PathCascade"
    (root / "simulation/simulation.json").write_text(json.dumps(sim))
    (root / "model.py").write_text(WEIGHTED_MODEL)
    result = run(root)
    panel = result.panel(columns=["state", "since", "infected_by"]).to_pydict()
    for step, agent, state, since, by in zip(panel["step"], panel["agent_id"], panel["state"], panel["since"],
                                             panel["infected_by"]):
        k = int(agent[1:])
        expected = "inactive" if step < k else "active" if step == k else "spent"
        assert state == expected, (step, agent)
        if k > 0 and step >= k:
            assert since == (k if state == "active" else k + 1) and by == f"n{k - 1:02d}"


def brute_force_threshold(n, edges, directed, theta, seeds, steps, weight=None):
    """Linear threshold from the definition: synchronous; v activates when the summed influence of
    its active in-neighbours reaches theta[v] (influence 1/in-degree, or weight(u, v))."""
    into = {v: [] for v in range(n)}
    for u, v in edges:
        into[v].append(u)
        if not directed:
            into[u].append(v)
    active = set(seeds)
    history = [set(active)]
    for _ in range(steps):
        new = set(active)
        for v in range(n):
            if v in active or not into[v]:
                continue
            if weight is None:
                k = sum(1 for u in into[v] if u in active)
                if float(k) / len(into[v]) >= theta[v]:
                    new.add(v)
            elif sum(weight(u, v) for u in into[v] if u in active) >= theta[v]:
                new.add(v)
        active = new
        history.append(set(active))
    return history


@pytest.mark.parametrize("directed", [False, True])
def test_linear_threshold_node_for_node_against_brute_force(tmp_path, directed):
    n, steps = 80, 12
    rng = np.random.default_rng(4)
    theta = np.round(rng.random(n) * 0.6, 3).tolist()
    edges = random_edges(n, 0.07, seed=9, directed=directed)
    seeds = [0, 5, 17, 33]
    pop = edges_population(n, edges, attributes={"theta": theta}, directed=directed)
    root = write_study(tmp_path / f"lt{directed}", "LinearThreshold", {"threshold": {"attribute": "theta"}},
                       env={"seed_nodes": [f"n{i:02d}" for i in seeds]}, n_steps=steps, population=pop)
    got = states(run(root))
    want = brute_force_threshold(n, edges, directed, theta, seeds, steps)
    for t in range(steps + 1):
        assert [i for i, s in enumerate(got[t]) if s == "active"] == sorted(want[t]), t
    assert len(want[-1]) > len(seeds)                    # something happened


def test_weighted_linear_threshold_reads_edge_attributes(tmp_path):
    n, steps = 60, 10
    edges = sorted({tuple(sorted(e)) for e in random_edges(n, 0.1, seed=6)})
    theta = [0.4] * n
    root = write_study(tmp_path / "wlt", "LinearThreshold", {"threshold": 0.4, "weight": {"edge": "w"}},
                       env={"seed_nodes": ["n00", "n01", "n02", "n03"]}, n_steps=steps,
                       population=edges_population(n, edges))
    sim = json.loads((root / "simulation/simulation.json").read_text())
    sim["decision"]["ref"] = "model:WeightedThreshold"
    (root / "simulation/simulation.json").write_text(json.dumps(sim))
    (root / "model.py").write_text(WEIGHTED_MODEL)
    got = states(run(root))
    want = brute_force_threshold(n, edges, False, theta, [0, 1, 2, 3], steps,
                                 weight=lambda u, v: 0.25 * (1 + (u + v) % 3))
    for t in range(steps + 1):
        assert [i for i, s in enumerate(got[t]) if s == "active"] == sorted(want[t]), t


# --- opinions -----------------------------------------------------------------------------
def test_neighbour_majority_node_for_node_against_brute_force(tmp_path):
    n, steps = 70, 6
    edges = random_edges(n, 0.08, seed=12)
    root = write_study(tmp_path / "mr", "MajorityRule", {}, env={"seed_fraction": 0.5}, n_steps=steps,
                       population=edges_population(n, edges))
    result = run(root)
    got = states(result)
    m = result.metrics().to_pydict()
    changed = dict(zip(m["step"], m["changed"]))
    nbrs = {v: [] for v in range(n)}
    for u, v in edges:
        nbrs[u].append(v)
        nbrs[v].append(u)
    unsettled = dict(zip(m["step"], m["unsettled"]))
    x = [int(s) for s in got[0]]
    history = [x]
    assert changed[0] == unsettled[0] == 0
    for t in range(1, steps + 1):
        nxt = []
        for v in range(n):
            ones = sum(x[u] for u in nbrs[v])
            zeros = len(nbrs[v]) - ones
            nxt.append(1 if ones > zeros else 0 if zeros > ones else x[v])
        assert changed[t] == sum(a != b for a, b in zip(x, nxt)), t       # the nodes that changed in the step
        x = nxt
        assert [int(s) for s in got[t]] == x, t
        # the nodes unlike two steps before (step 0, at step 1)
        assert unsettled[t] == sum(a != b for a, b in zip(history[max(t - 2, 0)], x)), t
        history.append(x)


def test_majority_on_a_cycle_of_two_steps_ends_at_unsettled_zero_where_changed_never_does(tmp_path):
    """A path a - b - c - d with opinions 1 0 1 0 flips every node at every step for ever (a cycle of two
    steps): changed stays 4, the majority template's old stop (changed <= 0) never held and the run went to
    n_steps. unsettled is 0 from step 2 on, and a stop on it ends the run there."""
    root = write_study(tmp_path / "cycle", "MajorityRule", {}, n_steps=40,
                       population=edges_population(4, [(0, 1), (1, 2), (2, 3)],
                                                   attributes={"side": ["1", "0", "1", "0"]}),
                       env={"initial": {"attribute": "side"}})
    m = run(root, steps=6).metrics().to_pydict()
    assert m["changed"][1:] == [4] * 6 and m["unsettled"][1:] == [4] + [0] * 5
    path = root / "simulation" / "simulation.json"
    config = json.loads(path.read_text())
    config["stop_when"] = [{"metric": "unsettled", "op": "<=", "value": 0}]
    path.write_text(json.dumps(config))
    result = run(root)
    assert result.status == "completed" and result.steps_done == 2 and "unsettled" in result.end_reason


@pytest.mark.slow      # 13 s of replicates: the full suite runs it, the quick check of an install does not
def test_voter_degree_weighted_share_is_a_martingale_on_a_regular_graph(tmp_path):
    """On a k-regular graph the share of "1" is a martingale under the (asynchronous) voter model:
    over replicates its mean after 5 sweeps equals the initial 0.3 within 4 standard errors."""
    n = 400
    root = write_study(tmp_path / "voter", "Voter", {}, env={"seed_fraction": 0.3}, n_steps=5,
                       population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                                   "interaction": {"kind": "ring", "k": 4}})
    drift = []
    for seed in range(1, 31):
        m = run(root, seed=seed).metrics().to_pydict()
        assert m["share_1"][0] == 0.3
        drift.append(m["share_1"][-1] - m["share_1"][0])
    se = np.std(drift, ddof=1) / math.sqrt(len(drift))
    assert np.std(drift) > 0 and abs(np.mean(drift)) < 4 * se + 1e-9


def test_majority_groups_lead_to_the_initial_majority(tmp_path):
    root = write_study(tmp_path / "groups", "MajorityRule", {"rule": "groups", "q": 3}, env={"seed_fraction": 0.35},
                       n_steps=40, population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 300}},
                                               "interaction": {"kind": "none"}})
    for seed in (1, 2, 3):
        assert run(root, seed=seed).metrics().to_pydict()["share_1"][-1] == 0.0


def test_deffuant_conserves_the_mean_and_hk_with_full_confidence_reaches_the_mean(tmp_path):
    n = 200
    pop = {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
           "interaction": {"kind": "watts_strogatz", "k": 6, "p": 0.1}}
    m = run(write_study(tmp_path / "deffuant", "Deffuant", {"epsilon": 0.3, "mu": 0.5}, n_steps=15,
                        population=pop)).metrics().to_pydict()
    assert max(m["mean_opinion"]) - min(m["mean_opinion"]) < 1e-12 and m["opinion_sd"][-1] < m["opinion_sd"][0]
    complete = {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 50}}, "interaction": {"kind": "complete"}}
    result = run(write_study(tmp_path / "hk", "HegselmannKrause", {"epsilon": 1.0}, n_steps=2, population=complete))
    x0 = np.array(states(result, "opinion")[0])
    assert np.allclose(states(result, "opinion")[1], x0.mean())


# --- the run itself ------------------------------------------------------------------------
def test_the_same_seed_gives_the_same_panel_and_another_seed_another(tmp_path):
    root = write_study(tmp_path / "det", "SEIR", {"beta": 0.3, "alpha": 0.4, "gamma": 0.2}, env={"seeds": 3},
                       n_steps=12)
    a, b, c = run(root, seed=5), run(root, seed=5), run(root, seed=6)
    assert panel_hash(a) == panel_hash(b) != panel_hash(c)


def test_a_branch_replays_the_parents_steps_exactly(tmp_path):
    root = write_study(tmp_path / "branch", "SIR", {"beta": "$beta", "gamma": 0.2}, env={"seeds": 3}, n_steps=10,
                       parameters={"beta": 0.3})
    parent = run(root)
    child = desim.branch(root, parent.run_id, 5)
    p, c = states(parent), states(child)
    for t in range(0, 5):
        assert p[t] == c[t]
    ip = parent.panel(columns=["infected_by"]).to_pydict()
    ic = child.panel(columns=["infected_by"]).to_pydict()
    k = sum(1 for s in ip["step"] if s < 5)
    assert ip["infected_by"][:k] == ic["infected_by"][:k]


def test_prevalence_counts_add_up(tmp_path):
    result = run(write_study(tmp_path / "prev", "SIR", {"beta": 0.2, "gamma": 0.3}, env={"seeds": 4}, n_steps=15))
    m = result.metrics().to_pydict()
    for t in range(16):
        assert m["count_S"][t] + m["count_I"][t] + m["count_R"][t] == 200
        assert m["share_I"][t] == m["count_I"][t] / 200
    assert m["count_I"][0] == 4 and m["new_I"][0] == 0
    assert sum(m["new_I"]) + 4 == m["count_I"][-1] + m["count_R"][-1]


# --- bad input ------------------------------------------------------------------------------
def cli_error(capsys, root) -> str:
    code = main(["run", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("desim: error: "), err
    assert not (root / "runs" / "desim.duckdb").exists()       # nothing written
    return err


@pytest.mark.parametrize("model, args, env, where", [
    ("SIRR", {"beta": 0.1, "gamma": 0.1}, {}, "decision.ref: cannot resolve 'desim.diffusion:SIRR'"),
    ("SIR", {"beta": 1.5, "gamma": 0.1}, {}, "decision.args.beta: must be in [0, 1] (got 1.5)"),
    ("SIR", {"betta": 0.1, "gamma": 0.1}, {}, "decision.args.betta: unknown parameter of desim.diffusion:SIR"),
    ("SIR", {"gamma": 0.1}, {}, "decision.args.beta: required by desim.diffusion:SIR"),
    ("SIR", {"beta": "high", "gamma": 0.1}, {}, "decision.args.beta: must be a number in [0, 1] (got str 'high')"),
    ("SIR", {"beta": {"attribute": "x"}, "gamma": {"edge": "y"}}, {}, "decision.args.gamma: a per-node value is"),
    ("MajorityRule", {"rule": "plurality"}, {}, "decision.args.rule: must be one of neighbours, groups"),
    ("SIR", {"beta": 0.1, "gamma": 0.1}, {"seeds": -2}, "environment.json: provider.args.seeds: must be an integer"),
    ("SIR", {"beta": 0.1, "gamma": 0.1}, {"seeds": 2, "seed_fraction": 0.1},
     "environment.json: provider.args.seed_fraction: give one of seeds"),
    ("SIR", {"beta": 0.1, "gamma": 0.1}, {"seed_state": "X"}, "environment.json: provider.args.seed_state: 'X' is "
                                                              "not a state of SIR"),
    ("SIR", {"beta": 0.1, "gamma": 0.1}, {"seeds": 500}, "environment.json: provider.args.seeds: 500 seeds for 200"),
    ("SIR", {"beta": 0.1, "gamma": 0.1}, {"seed_nodes": ["n001", "n007", "n001"]},
     "environment.json: provider.args.seed_nodes: lists 'n001' more than once"),
    ("SIR", {"beta": 0.1, "gamma": {"attribute": "recovery"}}, {}, "population.json: personas: no agent has "
                                                                   "attribute 'recovery' (their attributes: none)"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, capsys, model, args, env, where):
    root = write_study(tmp_path / "bad", model, args, env=env)
    err = cli_error(capsys, root)
    assert where in err, err
    file = "environment/environment.json" if "environment.json" in where else \
        "population/population.json" if "population.json" in where else "simulation/simulation.json"
    assert file in err


def test_a_bad_parameter_set_on_the_command_line_names_the_field(tmp_path, capsys):
    root = write_study(tmp_path / "set", "SIR", {"beta": "$beta", "gamma": 0.1}, parameters={"beta": 0.1})
    assert main(["run", str(root), "--set", "beta=2.5"]) == 2
    err = capsys.readouterr().err
    assert "simulation/simulation.json: parameters.beta (--set, used as decision.args.beta): must be in [0, 1] (got 2.5)" in err
    assert not (root / "runs" / "desim.duckdb").exists()


def test_a_per_node_value_out_of_range_names_the_agent(tmp_path, capsys):
    pop = edges_population(5, [(0, 1)], attributes={"rate": [0.1, 0.2, 7.0, 0.1, 0.1]})
    root = write_study(tmp_path / "range", "SIR", {"beta": 0.1, "gamma": {"attribute": "rate"}}, population=pop)
    err = cli_error(capsys, root)
    assert "population/population.json: agent 'n2': attribute 'rate' = 7" in err and "must be in [0, 1]" in err


# --- against NDlib and EoN (slow: they run in benchmarks/.venv-diffusion) ----------------------
def reference():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import diffusion_reference
    return diffusion_reference


def desim_curves(root: Path, replicates: int, names: list[str]) -> dict[str, np.ndarray]:
    """Every replicate's counts per state after each step (steps 1..T), run in memory (no store:
    the store is tested above), read through the engine's ``on_step``."""
    out = {name: [] for name in names}
    for seed in range(1, replicates + 1):
        rows = []
        desim.run_study(desim.load_study(root, seed=seed), db_path=":memory:",
                        on_step=lambda step, metrics: rows.append(metrics))
        for name in names:
            out[name].append([m[f"count_{name}"] for m in rows])
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def reference_curves(answer: dict, names: list[str]) -> dict[str, np.ndarray]:
    return {name: np.array([[c[name] for c in curve[1:]] for curve in answer["curves"]], dtype=np.float64)
            for name in names}


def assert_same_distribution(a: np.ndarray, b: np.ndarray, what: str) -> dict:
    """Two samples of one figure: Kolmogorov-Smirnov and Anderson-Darling k-sample, each at the
    0.001 level. With the handful of comparisons made here (a few per model), a true match fails
    one with probability well under 1 %; a mismatch in the update rule (a transmission a step
    late, per-node instead of per-edge draws, a recovery before transmitting) moves the mean
    final size by several standard errors at these sample sizes and is caught."""
    from scipy import stats
    ks = stats.ks_2samp(a, b)
    ad = stats.anderson_ksamp([a, b], method=stats.PermutationMethod(n_resamples=999, random_state=1))
    assert ks.pvalue > 0.001, f"{what}: KS p = {ks.pvalue:.2g} (means {a.mean():.4g} vs {b.mean():.4g})"
    assert ad.pvalue > 0.001, f"{what}: Anderson-Darling p = {ad.pvalue:.2g}"
    return {"ks_p": ks.pvalue, "ad_p": ad.pvalue, "mean_desim": a.mean(), "mean_reference": b.mean()}


def assert_same_curve(a: np.ndarray, b: np.ndarray, what: str, z: float = 4.0) -> float:
    """The per-step means of two samples of curves agree within ``z`` standard errors of their
    difference at every step (z = 4: over ~50 steps of correlated curves a true match crosses it
    with probability below 0.5 %). Returns the largest |difference| / SE seen."""
    steps = min(a.shape[1], b.shape[1])
    worst = 0.0
    for t in range(steps):
        x, y = a[:, t], b[:, t]
        se = math.sqrt(x.var(ddof=1) / len(x) + y.var(ddof=1) / len(y))
        diff = abs(x.mean() - y.mean())
        if se == 0:
            assert diff == 0, f"{what}: step {t + 1}: means {x.mean()} vs {y.mean()} with no variance"
            continue
        worst = max(worst, diff / se)
        assert diff <= z * se, f"{what}: step {t + 1}: means {x.mean():.3f} vs {y.mean():.3f}, SE {se:.3f}"
    return worst


REF_N = 1000


def ref_graph(n: int = REF_N, m: int = 3):
    return [(int(u), int(v)) for u, v in nx.barabasi_albert_graph(n, m, seed=11).edges()]


def ref_study(tmp_path, name, model, args, edges, n, env, steps, attributes=None):
    return write_study(tmp_path / name, model, args, env=env, n_steps=steps,
                       population=edges_population(n, edges, attributes=attributes))


REPORT: dict = {}


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    mod = reference()
    mod.ensure_venv()
    return mod, tmp_path_factory.mktemp("reference")


def _record(name, figures):
    REPORT[name] = figures
    print(f"\n{name}: " + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


@pytest.mark.slow
@pytest.mark.parametrize("model, args, ndlib_params, states_, steps", [
    ("SIR", {"beta": 0.05, "gamma": 0.2}, {"beta": 0.05, "gamma": 0.2}, ["S", "I", "R"], 80),
    ("SIS", {"beta": 0.05, "gamma": 0.2}, {"beta": 0.05, "lambda": 0.2}, ["S", "I"], 50),
    ("SEIR", {"beta": 0.08, "alpha": 0.3, "gamma": 0.2}, {"beta": 0.08, "alpha": 0.3, "gamma": 0.2},
     ["S", "E", "I", "R"], 80),
    ("SI", {"beta": 0.02}, {"beta": 0.02}, ["S", "I"], 30),
])
def test_epidemics_match_ndlib(tmp_path, ref, model, args, ndlib_params, states_, steps):
    """NDlib 6.0.1's model of the same name on the same BA(1000, 3) graph, 10 random seeds: the final
    counts and every step's mean counts, over 200 of desim's replicates and 100 of NDlib's (NDlib's
    take two thirds of the test's time; with half as many on its side the standard error of a
    difference grows by a fifth, and an update-rule mismatch still moves the means by several)."""
    mod, work = ref
    k, edges = 10, ref_graph()
    root = ref_study(tmp_path, model.lower(), model, args, edges, REF_N, {"seeds": k}, steps)
    ours = desim_curves(root, 200, states_)
    answer = mod.run_job({"tool": "ndlib", "model": model, "n": REF_N, "edges": edges, "params": ndlib_params,
                          "initial": {"count": k}, "replicates": 100, "steps": steps, "seed": 3}, work)
    theirs = reference_curves(answer, states_)
    figures = {}
    last = "R" if "R" in states_ else "I"
    figures.update(assert_same_distribution(ours[last][:, -1], theirs[last][:, -1], f"{model} final {last}"))
    figures["worst_z"] = max(assert_same_curve(ours[s], theirs[s], f"{model} {s}(t)") for s in states_)
    _record(f"{model} vs NDlib", figures)


@pytest.mark.slow
def test_sir_with_one_step_infections_matches_eon(tmp_path, ref):
    """EoN 2.0's basic_discrete_SIR (infectious for one step) is SIR with gamma = 1."""
    mod, work = ref
    R, k, edges = 300, 5, ref_graph()
    root = ref_study(tmp_path, "sir1", "SIR", {"beta": 0.12, "gamma": 1.0}, edges, REF_N, {"seeds": k}, 30)
    ours = desim_curves(root, R, ["S", "I", "R"])
    answer = mod.run_job({"tool": "eon", "model": "SIR", "n": REF_N, "edges": edges, "params": {"p": 0.12},
                          "initial": {"count": k}, "replicates": R, "steps": 30, "seed": 5}, work)
    theirs = reference_curves(answer, ["S", "I", "R"])
    figures = assert_same_distribution(ours["R"][:, -1], theirs["R"][:, -1], "SIR(gamma=1) final R")
    figures["worst_z"] = assert_same_curve(ours["I"], theirs["I"], "SIR(gamma=1) I(t)")
    _record("SIR gamma=1 vs EoN", figures)


@pytest.mark.slow
def test_independent_cascade_with_per_edge_probabilities_matches_ndlib(tmp_path, ref):
    """Per-edge probabilities p(u, v) = 0.05 + 0.1 * ((u + v) mod 3) as edge attributes on desim's
    side (set before the model reads them), as NDlib's per-edge thresholds on its side."""
    mod, work = ref
    R, k, edges = 300, 5, ref_graph()
    root = ref_study(tmp_path, "icref", "IndependentCascade", {"p": {"edge": "p"}}, edges, REF_N, {"seeds": k}, 30)
    sim = json.loads((root / "simulation/simulation.json").read_text())
    sim["decision"]["ref"] = "model:ModCascade"
    (root / "simulation/simulation.json").write_text(json.dumps(sim))
    (root / "model.py").write_text('''
from desim.diffusion import IndependentCascade


class ModCascade(IndependentCascade):
    def reset(self, seed):
        index = self.ctx.index
        for u, v, data in self.ctx.graph.edges(data=True):
            data["p"] = 0.05 + 0.1 * ((index[u] + index[v]) % 3)
        super().reset(seed)
''')
    ours = desim_curves(root, R, ["inactive", "active", "spent"])
    answer = mod.run_job({"tool": "ndlib", "model": "IC", "n": REF_N, "edges": edges, "params": {},
                          "edge_values": [0.05 + 0.1 * ((u + v) % 3) for u, v in edges],
                          "initial": {"count": k}, "replicates": R, "steps": 30, "seed": 9}, work)
    theirs = reference_curves(answer, ["inactive", "active", "spent"])
    reached_ours = REF_N - ours["inactive"][:, -1]
    reached_theirs = REF_N - theirs["inactive"][:, -1]
    figures = assert_same_distribution(reached_ours, reached_theirs, "IC reached")
    figures["worst_z"] = assert_same_curve(ours["active"], theirs["active"], "IC active(t)")
    _record("IC per-edge vs NDlib", figures)


@pytest.mark.slow
def test_linear_threshold_node_for_node_against_ndlib(tmp_path, ref):
    """Fixed thresholds and seeds make the threshold model deterministic: every node's state at every
    step equals NDlib ThresholdModel's."""
    mod, work = ref
    n, steps = 600, 15
    edges = ref_graph(n, 2)
    theta = np.round(np.random.default_rng(8).random(n) * 0.5, 3).tolist()
    seeds = sorted(np.random.default_rng(9).choice(n, 30, replace=False).tolist())
    width = len(str(n - 1))
    root = ref_study(tmp_path, "ltref", "LinearThreshold", {"threshold": {"attribute": "theta"}}, edges, n,
                     {"seed_nodes": [f"n{i:0{width}d}" for i in seeds]}, steps, attributes={"theta": theta})
    got = states(run(root))
    answer = mod.run_job({"tool": "ndlib", "model": "threshold", "n": n, "edges": edges, "params": {},
                          "node_values": theta, "initial": [seeds], "replicates": 1, "steps": steps,
                          "node_states": True}, work)
    theirs = answer["node_states"][0]
    for t in range(steps + 1):
        assert got[t] == theirs[t], f"step {t}: {sum(a != b for a, b in zip(got[t], theirs[t]))} nodes differ"
    active = sum(s == "active" for s in got[steps])
    assert active > len(seeds)
    _record("LT vs NDlib", {"nodes": n, "steps": steps, "active_at_end": active, "equal": True})


@pytest.mark.slow
def test_voter_matches_ndlib(tmp_path, ref):
    """NDlib's VoterModel makes one elementary update per iteration: n iterations per desim step."""
    mod, work = ref
    n, R, steps, k = 100, 200, 10, 30
    edges = ref_graph(n, 2)
    root = ref_study(tmp_path, "voterref", "Voter", {}, edges, n, {"seeds": k}, steps)
    ours = desim_curves(root, R, ["1"])
    answer = mod.run_job({"tool": "ndlib", "model": "voter", "n": n, "edges": edges, "params": {},
                          "initial": {"count": k}, "replicates": R, "steps": steps, "seed": 4}, work)
    theirs = reference_curves(answer, ["1"])
    figures = assert_same_distribution(ours["1"][:, -1], theirs["1"][:, -1], "voter share of 1")
    figures["worst_z"] = assert_same_curve(ours["1"], theirs["1"], "voter count of 1")
    _record("voter vs NDlib", figures)


@pytest.mark.slow
def test_majority_groups_match_ndlib(tmp_path, ref):
    """NDlib's MajorityRuleModel discusses one group per iteration: round(n / q) iterations per step."""
    mod, work = ref
    n, q, R, steps, k = 99, 3, 200, 4, 45
    root = write_study(tmp_path / "mrref", "MajorityRule", {"rule": "groups", "q": q}, env={"seeds": k},
                       n_steps=steps, population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                                                  "interaction": {"kind": "none"}})
    ours = desim_curves(root, R, ["1"])
    answer = mod.run_job({"tool": "ndlib", "model": "majority", "n": n, "edges": [], "params": {"q": q},
                          "iterations_per_step": n // q, "initial": {"count": k}, "replicates": R,
                          "steps": steps, "seed": 6}, work)
    theirs = reference_curves(answer, ["1"])
    figures = assert_same_distribution(ours["1"][:, -1], theirs["1"][:, -1], "majority share of 1")
    figures["worst_z"] = assert_same_curve(ours["1"], theirs["1"], "majority count of 1")
    _record("majority groups vs NDlib", figures)


@pytest.mark.slow
def test_bench_diffusion_smoke(tmp_path):
    """The benchmark's smoke configuration (desim's side only unless the reference venv exists):
    every figure it reports means what it says."""
    import subprocess
    out = tmp_path / "bench.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_diffusion.py"), "--smoke", "--json", str(out)],
                   check=True, cwd=tmp_path, capture_output=True, text=True)
    f = json.loads(out.read_text())
    c, d = f["config"], f["sides"]["desim"]
    assert c["smoke"] and len(d["wall"]) == len(d["cpu"]) == c["replicates"]
    assert all(w > 0 for w in d["wall"]) and all(x > 0 for x in d["cpu"])
    # each run ends when nobody is infectious (stop_when), with one row per node per step it ran
    assert d["rows"] == sum(c["n"] * p["steps"] for p in d["phases"])
    assert all(p["steps"] == dur + 1 for p, dur in zip(d["phases"], d["duration"]))
    assert all(0 < s <= 1 for s in d["final_share"]) and max(d["duration"]) < c["steps"]
    assert d["summary"]["wall_total"] == pytest.approx(sum(d["wall"]))
    for p in d["phases"]:
        assert min(p.values()) > 0
    # the storage floor re-encodes the last replicates' own panels: their rows, nothing else
    fl = f["storage_floor"]
    sampled = d["phases"][-fl["sample"]:]
    assert fl["sample"] == min(3, c["replicates"]) and len(d["run_ids"]) == c["replicates"]
    assert fl["rows"] == pytest.approx(sum(c["n"] * p["steps"] for p in sampled) / len(sampled))
    assert fl["parquet_cpu"] > 0 and fl["journal_cpu"] > 0
    for name, side in f["sides"].items():
        if name != "desim":
            assert f["ratios"][name]["wall"] == pytest.approx(side["summary"]["wall_total"] / d["summary"]["wall_total"])
            assert all(0 < s <= 1 for s in side["final_share"])
    b = f["big"]
    assert b["status"] == "completed" and b["steps_done"] < b["steps"]
    assert b["rows"] == b["n"] * b["steps_done"] and b["wall"] >= b["run"] > 0
