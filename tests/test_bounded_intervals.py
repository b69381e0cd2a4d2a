"""Intervals of bounded quantities stay inside their bounds, and say so (issue 31, item 4).

A Student-t interval from two replicates is wide: a share near 1 gets an upper end past 1. With
``metric_bounds`` in study.json a sweep clips the interval to the metric's bounds; an effect clips a metric's
difference to [low - high, high - low] and a category's share difference (and a boolean state's mean
difference) to [-1, 1]. The clipped end is marked with a dagger in the printed and HTML tables, with a note
under the table. Expected values come from scipy's t quantile over the values read back with SQL."""
from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.axes
import pytest
from scipy import stats

import desim
from desim.cli import main
from desim.errors import StudyConfigError
from desim.experiments.effects import effect_table
from desim.experiments.sweep import SweepError, describe, run_sweep, sweep_table
from desim.report import write_sweep_report
from storeq import sql

DAGGER = "\u2020"
NOTE_WORDS = ("clipped at the quantity's bounds", "few replicates")

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Town(EnvironmentProvider):
    """Agents adopt, once and for good, with the probability the layer 'rate' holds this step."""

    def reset(self, seed):
        self.adopted = {a: False for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        rate = self.ctx.interventions.value("rate")
        return [Observation(agent_id=a, step=t, local_physical={"adopted": self.adopted[a], "rate": rate})
                for a in ids]

    def apply(self, actions):
        for a in actions:
            if a.kind == "adopt":
                self.adopted[a.agent_id] = True

    def agent_state(self, agent_id):
        return {"adopted": self.adopted[agent_id]}


class Adopt(DecisionModel):
    def decide_batch(self, observations, memories):
        rng = self.ctx.rng("adopt")
        draws = rng.random(len(observations))
        return [Action(agent_id=o.agent_id, step=o.step,
                       kind="adopt" if o.local_physical["adopted"] or u < o.local_physical["rate"] else "wait",
                       payload={}) for o, u in zip(observations, draws)]


class Shares(MetricCollector):
    def collect(self, t, environment, actions):
        values = list(environment.adopted.values())
        return {"adopted_share": sum(values) / len(values), "adopters": float(sum(values))}
'''


def write_town(root: Path, *, bounds: dict | None = None, n_agents: int = 10, n_steps: int = 4) -> Path:
    """A tiny adoption study: 'rate' is ``base_rate`` until the event at ``push_day`` sets it to
    ``push_rate``; ``adopted_share`` is a share, ``adopted`` a boolean state."""
    study = {"id": root.name, "display_metrics": ["adopted_share"], "display_states": ["adopted"]}
    if bounds is not None:
        study["metric_bounds"] = bounds
    files = {
        "study.json": study,
        "simulation/simulation.json": {
            "n_steps": n_steps, "seed": 3, "memory_window": 0,
            "parameters": {"base_rate": 0.6, "push_rate": 0.6, "push_day": n_steps},
            "decision": {"ref": "model:Adopt"}, "collector": {"ref": "model:Shares"}},
        "population/population.json": {"personas": [{"agent_id": f"a{i}"} for i in range(n_agents)]},
        "environment/environment.json": {
            "provider": {"ref": "model:Town"}, "layers": {"rate": "$base_rate"},
            "scheduled_events": [{"at_step": "$push_day", "name": "push", "target": "rate", "op": "set",
                                  "value": "$push_rate"}]},
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    (root / "model.py").write_text(MODEL)
    return root


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and the unclipped Student-t 95 % interval, from scipy."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def close_to(printed: str, value: float) -> bool:
    """``printed`` (a rounded number) is within half a unit of its last digit of ``value``."""
    places = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - value) <= 0.5 * 10 ** -places + 1e-12


def marked(printed: str, end: float, bound: float) -> bool:
    """An interval end as printed: the bound with a dagger where the t interval passed it, else the end
    itself, rounded, with no dagger."""
    passed = end < bound if bound <= 0 else end > bound
    if passed:
        return printed.endswith(DAGGER) and float(printed[:-1]) == bound
    return DAGGER not in printed and close_to(printed, end)


class Tables(HTMLParser):
    """Each table's rows under its section's heading, and the note paragraph that follows the table."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self.heading, self._text, self._row, self._in = "", None, None, None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "td", "th") or (tag == "p" and ("class", "note") in attrs):
            self._in, self._text = tag, ""
        if tag == "table":
            self.tables.append({"heading": self.heading, "rows": [], "note": ""})
        elif tag == "tr":
            self._row = []

    def handle_endtag(self, tag):
        if tag == self._in:
            if tag == "h2":
                self.heading = self._text
            elif tag in ("td", "th"):
                self._row.append(self._text)
            elif tag == "p":
                self.tables[-1]["note"] = self._text
            self._in = None
        elif tag == "tr":
            self.tables[-1]["rows"].append(self._row)

    def handle_data(self, data):
        if self._in is not None:
            self._text += data


def html_tables(path: Path) -> list[dict]:
    page = Tables()
    page.feed(path.read_text(encoding="utf-8"))
    return page.tables


def test_describe_clips_an_interval_to_the_bounds_and_says_which_end():
    mean, low, high = t_interval([0.99, 1.0])
    assert high > 1                                               # two replicates reach past a share's 1
    free = describe([0.99, 1.0])
    assert free["ci_high"] == pytest.approx(high, abs=1e-9) and free["ci_clipped"] is False
    row = describe([0.99, 1.0], (0.0, 1.0))
    assert row["ci_high"] == 1.0 and row["ci_low"] == pytest.approx(low, abs=1e-9)
    assert row["mean"] == pytest.approx(mean, abs=1e-12) and row["n"] == 2
    assert (row["ci_clipped"], row["ci_low_clipped"], row["ci_high_clipped"]) == (True, False, True)
    both = describe([0.0, 1.0], (0.0, 1.0))                        # wide both ways: clipped at both ends
    assert (both["ci_low"], both["ci_high"]) == (0.0, 1.0)
    assert (both["ci_low_clipped"], both["ci_high_clipped"]) == (True, True)
    inside = describe([0.4, 0.5, 0.6], (0.0, 1.0))                 # an interval inside the bounds is kept
    _, low3, high3 = t_interval([0.4, 0.5, 0.6])
    assert (inside["ci_low"], inside["ci_high"]) == (pytest.approx(low3, abs=1e-9), pytest.approx(high3, abs=1e-9))
    assert inside["ci_clipped"] is False
    # the keys are the same whatever the case, so tables of rows stay rectangular
    assert list(describe([])) == list(describe([0.5], (0.0, 1.0))) == list(row) == list(free)
    with pytest.raises(ValueError, match=r"1\.5 is outside \[0, 1\]"):
        describe([0.5, 1.5], (0.0, 1.0))


def test_a_sweep_of_a_share_with_two_replicates_is_clipped_in_the_table_the_cli_and_the_report(
        tmp_path, capsys, monkeypatch):
    root = write_town(tmp_path / "town", bounds={"adopted_share": [0, 1]})
    assert main(["sweep", str(root), "--set", "base_rate=0.3,0.5", "--replicates", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    sweep_id = re.search(r"sweep (sw\w+):", out).group(1)
    finals = sql(root, """SELECT CAST(r.parameters->>'base_rate' AS DOUBLE), list(m.value ORDER BY r.run_id)
                          FROM runs r JOIN metrics m USING (run_id)
                          WHERE r.sweep_id = ? AND m.name = 'adopted_share' AND m.step = 4 GROUP BY ALL""",
                 [sweep_id])
    expected = {rate: t_interval(values) for rate, values in finals}
    assert len(expected) == 2 and any(high > 1 for _, _, high in expected.values())   # the case at issue
    table = {r["base_rate"]: r for r in sweep_table(root, sweep_id)}
    lines = {float(line.split()[0]): line.split() for line in out.splitlines()
             if line.split()[:1] and line.split()[0] in ("0.3", "0.5") and "adopted_share" in line}
    for rate, (mean, low, high) in expected.items():
        row = table[rate]
        assert row["ci_low"] == (0.0 if low < 0 else pytest.approx(low, abs=1e-9))
        assert row["ci_high"] == (1.0 if high > 1 else pytest.approx(high, abs=1e-9))
        assert (row["ci_low_clipped"], row["ci_high_clipped"], row["ci_clipped"]) == (low < 0, high > 1,
                                                                                       low < 0 or high > 1)
        _, _, p_mean, _, p_low, p_high, _ = lines[rate]            # base_rate metric mean sd low high n
        assert close_to(p_mean, mean)
        assert marked(p_low, low, 0.0) and marked(p_high, high, 1.0)
    note = [line for line in out.splitlines() if line.strip().startswith(DAGGER)]
    assert len(note) == 1 and all(w in note[0] for w in NOTE_WORDS)

    # the HTML report: the same mark and the note under the table; the error bars end at 1
    bars = []
    errorbar = matplotlib.axes.Axes.errorbar

    def record(self, x, y, yerr=None, **kwargs):
        bars.append((list(y), yerr))
        return errorbar(self, x, y, yerr=yerr, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", record)
    paths = write_sweep_report(root, sweep_id, ["adopted_share"])
    (shown,) = [t for t in html_tables(paths["html"]) if t["heading"] == "adopted_share"]
    header, *rows = shown["rows"]
    for row in rows:
        mean, low, high = expected[float(row[0])]
        assert marked(row[header.index("95 % low")], low, 0.0)
        assert marked(row[header.index("95 % high")], high, 1.0)
    assert all(w in shown["note"] for w in NOTE_WORDS)
    assert DAGGER in paths["markdown"].read_text(encoding="utf-8")
    (means, (down, up)), = bars
    assert max(m + u for m, u in zip(means, up)) == pytest.approx(1.0, abs=1e-12)
    assert min(m - d for m, d in zip(means, down)) >= -1e-12


def test_without_metric_bounds_the_interval_is_the_plain_t_interval(tmp_path, capsys):
    root = write_town(tmp_path / "town")
    result = run_sweep(root, {"base_rate": ["0.5"]}, replicates=2, workers=1)
    values = [v for (v,) in sql(root, "SELECT value FROM metrics WHERE name = 'adopted_share' AND step = 4 AND "
                                      "run_id LIKE ?", [f"{result.sweep_id}-%"])]
    _, low, high = t_interval(values)
    (row,) = [r for r in result.table if r["metric"] == "adopted_share"]
    assert row["ci_high"] == pytest.approx(high, abs=1e-9) and high > 1 and row["ci_clipped"] is False
    assert "metric_bounds" not in desim.load_study(root).resolved()["study"]   # stored configs as before


def category_differences(root: Path, effect_id: str) -> dict[tuple[int, str], list[float]]:
    """Per step and category of 'adopted', each pair's share treatment - control, from the panel."""
    rows = sql(root, """
        WITH cells AS (
            SELECT p.replicate, t.step, CAST(t.state.adopted AS VARCHAR) AS tv, CAST(c.state.adopted AS VARCHAR) AS cv
            FROM effect_pairs p JOIN panel t ON t.run_id = p.treatment_run_id
            JOIN panel c ON c.run_id = p.control_run_id AND c.step = t.step AND c.agent_id = t.agent_id
            WHERE p.effect_id = ?),
        cats AS (SELECT DISTINCT tv AS k FROM cells UNION SELECT DISTINCT cv FROM cells)
        SELECT step, k, replicate, avg(CASE WHEN tv = k THEN 1.0 ELSE 0.0 END)
                                   - avg(CASE WHEN cv = k THEN 1.0 ELSE 0.0 END)
        FROM cells, cats GROUP BY step, k, replicate ORDER BY step, k, replicate""", [effect_id])
    out: dict[tuple[int, str], list[float]] = {}
    for step, k, _, d in rows:
        out.setdefault((step, k), []).append(d)
    return out


def test_an_effect_clips_share_and_metric_differences_and_marks_them(tmp_path, capsys, monkeypatch):
    """Controls adopt slowly (rate 0.05), treatments fast from step 2 (0.8): with two pairs the t interval
    of the difference in a share passes 1, and that of the 'false' category's share passes -1."""
    root = write_town(tmp_path / "town", bounds={"adopted_share": [0, 1]}, n_steps=5)
    assert main(["effect", str(root), "--at-step", "2", "--set", "push_day=2", "--control-set", "base_rate=0.05",
                 "--control-set", "push_rate=0.8", "--replicates", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    effect_id = re.search(r"effect (ef\w+):", out).group(1)
    data = effect_table(root, effect_id)

    # the metric: differences of a share declared in [0, 1] are clipped to [-1, 1]
    diffs = sql(root, """SELECT c.step, list(t.value - c.value ORDER BY p.replicate)
                         FROM effect_pairs p JOIN metrics c ON c.run_id = p.control_run_id
                         JOIN metrics t ON t.run_id = p.treatment_run_id AND t.step = c.step AND t.name = c.name
                         WHERE p.effect_id = ? AND c.name = 'adopted_share' GROUP BY ALL""", [effect_id])
    expected = {step: t_interval(values) for step, values in diffs}
    past = [s for s, (_, low, high) in expected.items() if high > 1 or low < -1]
    assert past                                                    # the case at issue occurs
    got = {m["step"]: m for m in data["metrics"] if m["name"] == "adopted_share"}
    for step, (mean, low, high) in expected.items():
        m = got[step]
        assert m["ci_low"] == (-1.0 if low < -1 else pytest.approx(low, abs=1e-9))
        assert m["ci_high"] == (1.0 if high > 1 else pytest.approx(high, abs=1e-9))
        assert m["ci_clipped"] is (step in past)
    printed = {int(line.split()[1]): line.split() for line in out.splitlines()
               if line.split()[:1] == ["adopted_share"]}
    for step in past:
        _, _, p_mean, p_low, p_high, _, _ = printed[step]           # metric step mean low high sd n
        assert p_high.endswith(DAGGER) and float(p_high[:-1]) == 1.0
        assert close_to(p_mean, expected[step][0])
    first_table = out.split("per-agent paired differences")[0]
    assert any(line.strip().startswith(DAGGER) and all(w in line for w in NOTE_WORDS)
               for line in first_table.splitlines())

    # the boolean state's per-agent mean difference: clipped to [-1, 1] too, and marked in its table
    states = [s for s in data["states"] if s["field"] == "adopted"]
    assert states and all(-1.0 <= s["ci_low"] <= s["ci_high"] <= 1.0 for s in states if s["ci_low"] is not None)
    assert any(s["ci_clipped"] for s in states)
    state_lines = [line.split() for line in out.split("per-agent paired differences")[1].splitlines()
                   if line.split()[:1] == ["adopted"]]
    assert any(cell.endswith(DAGGER) for line in state_lines for cell in line)

    # each category's share difference stays inside [-1, 1]; its unclipped ends match the t interval
    shares = category_differences(root, effect_id)
    rows = {(c["step"], c["category"]): c for c in data["categories"] if c["field"] == "adopted"}
    assert set(rows) == set(shares)
    clipped = 0
    for key, values in shares.items():
        mean, low, high = t_interval(values)
        c = rows[key]
        assert -1.0 <= c["ci_low"] <= c["mean"] <= c["ci_high"] <= 1.0
        assert c["ci_low"] == (-1.0 if low < -1 else pytest.approx(low, abs=1e-9))
        assert c["ci_high"] == (1.0 if high > 1 else pytest.approx(high, abs=1e-9))
        assert (c["ci_low_clipped"], c["ci_high_clipped"]) == (low < -1, high > 1)
        clipped += c["ci_clipped"]
    assert clipped >= 2                                            # 'true' past 1 and 'false' past -1
    tidy = desim.effect_rows(root, effect_id)
    assert len({tuple(r) for r in tidy}) == 1 and "ci_clipped" in tidy[0]

    # the HTML report: marks, the note under the table, and the band drawn inside [-1, 1]
    bands = []
    fill = matplotlib.axes.Axes.fill_between

    def record(self, x, y1, y2=0, **kwargs):
        bands.append((list(y1), list(y2)))
        return fill(self, x, y1, y2, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between", record)
    assert main(["report", str(root), "--effect", effect_id]) == 0
    page = root / "runs" / "reports" / f"effect-{effect_id}" / "report.html"
    (shown,) = [t for t in html_tables(page) if t["heading"] == "adopted_share"]
    header, *cells = shown["rows"]
    by_step = {int(r[0]): r for r in cells}
    for step in past:
        assert by_step[step][header.index("95 % high")].endswith(DAGGER)
    assert all(w in shown["note"] for w in NOTE_WORDS)
    (state_table,) = [t for t in html_tables(page) if t["heading"] == "state adopted"]
    assert any(DAGGER in cell for row in state_table["rows"] for cell in row)
    assert all(w in state_table["note"] for w in NOTE_WORDS)
    assert bands and all(-1.0 <= v <= 1.0 for low, high in bands for v in low + high)


@pytest.mark.parametrize("bounds, words", [
    ({"adopted_share": [1, 0]}, "'adopted_share': low 1 is not below high 0"),
    ({"adopted_share": [0.5, 0.5]}, "'adopted_share': low 0.5 is not below high 0.5"),
    ({"adopted_share": ["0", 1]}, "metric_bounds.adopted_share[0]: Input should be a valid number"),
    ({"adopted_share": [0, True]}, "metric_bounds.adopted_share[1]: Input should be a valid number"),
    ({"adopted_share": [0]}, "metric_bounds.adopted_share[1]: required field is missing"),
    ({"adopted_share": [None, None]}, "'adopted_share': no bound on either side"),
])
def test_invalid_metric_bounds_are_refused_naming_the_metric(tmp_path, capsys, bounds, words):
    root = write_town(tmp_path / "town", bounds=bounds)
    with pytest.raises(StudyConfigError) as err:
        desim.load_study(root)
    assert "study.json" in str(err.value) and words in str(err.value)
    assert main(["validate", str(root)]) == 2
    assert words in capsys.readouterr().err


def test_infinite_bounds_and_bounds_of_no_metric_are_refused(tmp_path, capsys):
    root = write_town(tmp_path / "town")
    study = root / "study.json"
    study.write_text(study.read_text().replace("}", ', "metric_bounds": {"adopted_share": [0, Infinity]}}'))
    with pytest.raises(StudyConfigError, match=r"study\.json: malformed JSON at line 1 column \d+: Infinity is not "
                                                r"a JSON number"):
        desim.load_study(root)
    write_town(root, bounds={"adopted_shares": [0, 1]})              # a typo: no metric of that name
    assert main(["validate", str(root)]) == 2
    err = capsys.readouterr().err
    assert "metric_bounds.adopted_shares: unknown metric 'adopted_shares'" in err and "adopted_share" in err


def test_a_sweep_whose_values_leave_the_declared_bounds_says_the_bounds_are_wrong(tmp_path):
    root = write_town(tmp_path / "town", bounds={"adopters": [0, 1]})      # a count, declared as a share
    result = run_sweep(root, {"base_rate": ["0.9"]}, replicates=2, workers=1, metrics=None)
    assert result.completed == 2
    with pytest.raises(SweepError, match=r"metric 'adopters' of sweep sw\w+: a run's final value \d+\.0 is "
                                         r"outside \[0, 1\], its metric_bounds in study.json"):
        sweep_table(root, result.sweep_id, ["adopters"])


def test_an_open_side_is_no_bound_on_that_side():
    """[0, null]: a count, clipped below at 0 and never above (a stand-in like 1e300 is not needed)."""
    from desim.experiments.sweep.summary import describe
    inf = float("inf")
    low = describe([0.0, 1.0], (0.0, inf))
    assert low["ci_low"] == 0.0 and low["ci_low_clipped"] and not low["ci_high_clipped"]
    big = describe([1e6, 3e6], (0.0, inf))
    assert big["ci_high"] > 3e6 and not big["ci_high_clipped"]
