"""``desim compare`` and ``desim report --compare`` on runs that ended with their process (``stop_when``):
the run that ended first holds its last state against the other's later steps, as ``desim effect`` does,
and both say so; a categorical state field is paired too. Expected values come from plain SQL on the
store's tables, not from desim's paired macros."""
from __future__ import annotations

import json
import re

import pytest

from desim.cli import main
from desim.experiments.comparisons import compare
from desim.report import write_report
from storeq import sql


@pytest.fixture(scope="module")
def sir(tmp_path_factory):
    """The SIR template on 300 nodes, stopping when nobody is infected; two runs that end at different
    steps and one that merely has fewer steps. -> (root, early run, its last step, late run, its last
    step, short run)."""
    where = tmp_path_factory.mktemp("compare_ended")
    assert main(["new", "--template", "sir", "--dir", str(where), "sir"]) == 0
    root = where / "sir"
    sim_file = root / "simulation" / "simulation.json"
    sim = json.loads(sim_file.read_text())
    sim["parameters"]["n_nodes"] = 300
    sim["stop_when"] = [{"metric": "count_I", "op": "<=", "value": 0}]
    sim_file.write_text(json.dumps(sim))
    ended = {}
    for seed in range(1, 8):
        assert main(["run", str(root), "--seed", str(seed), "--quiet"]) == 0
        (run_id, last, reason), = sql(root, "SELECT run_id, last_step, end_reason FROM runs WHERE seed = ?", [seed])
        assert reason and reason.startswith("stop_when: count_I <= 0")
        ended.setdefault(last, run_id)
        if len(ended) == 2:
            break
    (early_last, early), (late_last, late) = sorted(ended.items())
    assert early_last + 3 <= late_last
    assert main(["run", str(root), "--seed", "99", "--steps", str(early_last - 5), "--quiet"]) == 0
    (short, reason), = sql(root, "SELECT run_id, end_reason FROM runs WHERE seed = 99")
    assert reason is None
    return root, early, early_last, late, late_last, short


def last_metrics(root, run_id):
    """``{metric: value}`` at the run's last stored step."""
    return dict(sql(root, "SELECT name, value FROM metrics WHERE run_id = ? AND step = "
                          "(SELECT max(step) FROM metrics WHERE run_id = ?)", [run_id, run_id]))


def metrics_at(root, run_id):
    """``{(metric, step): value}`` of one run."""
    return {(n, s): v for n, s, v in sql(root, "SELECT name, step, value FROM metrics WHERE run_id = ?", [run_id])}


def differ_share(root, a, a_step, b, b_step):
    """The share of agents whose 'state' in run a at a_step differs from run b at b_step, and per category
    (share under a) - (share under b)."""
    (share,), = sql(root, "SELECT avg(CASE WHEN x.state.state <> y.state.state THEN 1.0 ELSE 0.0 END) FROM panel x "
                          "JOIN panel y ON x.agent_id = y.agent_id WHERE x.run_id = ? AND x.step = ? "
                          "AND y.run_id = ? AND y.step = ?", [a, a_step, b, b_step])
    shares = {}
    for run, step, sign in ((a, a_step, 1), (b, b_step, -1)):
        n = sql(root, "SELECT count(*) FROM panel WHERE run_id = ? AND step = ?", [run, step])[0][0]
        for cat, k in sql(root, "SELECT state.state, count(*) FROM panel WHERE run_id = ? AND step = ? "
                                "GROUP BY 1", [run, step]):
            shares[cat] = shares.get(cat, 0.0) + sign * k / n
    return share, shares


@pytest.mark.parametrize("ended_is", ["treatment", "control"])
def test_compare_holds_the_run_that_ended_first(sir, ended_is):
    root, early, early_last, late, late_last, _ = sir
    control, treatment = (late, early) if ended_is == "treatment" else (early, late)
    data = compare(root, control, treatment)
    held, going = last_metrics(root, early), metrics_at(root, late)
    rows = {(m["name"], m["step"]): m for m in data["metrics"]}
    assert {s for _, s in rows} == set(range(late_last + 1))
    for name, value in held.items():
        for step in range(early_last + 1, late_last + 1):
            row = rows[(name, step)]
            assert row[ended_is] == pytest.approx(value), (name, step)
            other = "control" if ended_is == "treatment" else "treatment"
            assert row[other] == pytest.approx(going[(name, step)])
            assert row["diff"] == pytest.approx(row["treatment"] - row["control"])
    assert [(h["run_id"], h["role"], h["last_step"], h["held_to"]) for h in data["held"]] == [
        (early, ended_is, early_last, late_last)]
    # the per-agent pairing of the categorical state covers the same steps, the ended run held
    shares = {c["step"]: c for c in data["categorical"] if c["field"] == "state"}
    assert sorted(shares) == list(range(1, late_last + 1))
    share, cats = differ_share(root, treatment, late_last if ended_is == "control" else early_last,
                               control, late_last if ended_is == "treatment" else early_last)
    assert shares[late_last]["differ"] == pytest.approx(share) and shares[late_last]["n"] == 300
    assert {k: v["diff"] for k, v in shares[late_last]["shares"].items()} == pytest.approx(
        {k: cats.get(k, 0.0) for k in shares[late_last]["shares"]})


def table(out: str, first: str) -> dict:
    """Rows of the printed table whose header starts with ``first``: ``{(cell 0, int(cell 1)): cells}``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [first])
    rows = {}
    for line in lines[start + 2:]:
        cells = line.split()
        if not cells:
            break
        rows[(cells[0], int(cells[1]))] = cells
    return rows


def test_the_compare_command_prints_held_values_a_note_and_the_categorical_field(sir, capsys):
    root, early, early_last, late, late_last, _ = sir
    capsys.readouterr()
    assert main(["compare", str(root), late, early, "--state", "state,nosuch"]) == 0
    out = capsys.readouterr().out
    assert (f"note: treatment {early} ended at step {early_last} (stop_when: count_I <= 0 at step {early_last}); "
            f"its last step is held for steps {early_last + 1}-{late_last}") in out
    metrics = table(out, "metric")
    assert "NULL" not in {c for cells in metrics.values() for c in cells}
    held, going = last_metrics(root, early), metrics_at(root, late)
    for step in (early_last + 1, late_last):
        control_v, treatment_v = map(float, metrics[("share_I", step)][2:4])
        assert treatment_v == pytest.approx(held["share_I"], rel=1e-5)
        assert control_v == pytest.approx(going[("share_I", step)], rel=1e-5, abs=1e-9)
    states = table(out, "field")
    share, _ = differ_share(root, early, early_last, late, late_last)
    assert float(states[("state", late_last)][3]) == pytest.approx(share, rel=1e-5)
    assert "state field 'nosuch' not compared: neither run's panel has a state field 'nosuch'" in out


def test_a_run_with_fewer_steps_is_not_held(sir):
    root, early, early_last, _, _, short = sir
    data = compare(root, short, early)
    assert data["held"] == []                       # the ended run is the longer one: nothing to hold
    data = compare(root, early, short)
    rows = {(m["name"], m["step"]): m for m in data["metrics"]}
    assert rows[("count_I", early_last)]["treatment"] is None     # the short run holds nothing
    assert rows[("count_I", early_last)]["control"] is not None


def md_tables(md: str) -> list[list[list[str]]]:
    """The Markdown tables of a report, as rows of cells (header first)."""
    out, current = [], None
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set(line) <= set("|-"):
                continue
            current = current if current is not None else []
            current.append(cells)
        elif current is not None:
            out.append(current)
            current = None
    if current:
        out.append(current)
    return out


def test_report_compare_carries_the_ended_run_in_its_tables_and_its_agent_statement(sir, tmp_path):
    root, early, early_last, late, late_last, _ = sir
    md = write_report(root, run_id=early, compare=late, out_dir=tmp_path / "report")["markdown"].read_text()
    comparison = md[md.index("## Treatment minus control"):]
    assert (f"treatment {early} ended at step {early_last} (stop_when: count_I <= 0 at step {early_last}); "
            f"its last step is held for steps {early_last + 1}-{late_last}") in comparison
    held, going = last_metrics(root, early), metrics_at(root, late)
    shown = {}
    for t in md_tables(comparison):
        header = t[0]
        if header[0] == "step" and header[1].endswith(" treatment"):
            name = header[1][:-len(" treatment")]
            shown[name] = {int(r[0]): (float(r[1]), float(r[2]), float(r[3])) for r in t[1:]}
    assert "share_I" in shown
    for name, rows in shown.items():
        assert sorted(rows) == list(range(late_last + 1))          # the same steps as the agent statement
        for step in range(early_last + 1, late_last + 1):
            t, c, d = rows[step]
            assert t == pytest.approx(held[name], rel=1e-5)
            assert c == pytest.approx(going[(name, step)], rel=1e-5, abs=1e-9)
            assert d == pytest.approx(t - c, rel=1e-4, abs=1e-6)
    para = re.search(r"'state' at step (\d+): (\S+) % of agents differ \((\d+) agent pairs\)", comparison)
    assert int(para.group(1)) == late_last
    share, _ = differ_share(root, early, early_last, late, late_last)
    assert float(para.group(2)) == pytest.approx(100 * share, abs=0.05)      # printed to one decimal
    # the difference figure's caption says what its shaded steps are
    assert "_Bars: treatment minus control per step; shaded: a run that ended is held at its last step._" in comparison
