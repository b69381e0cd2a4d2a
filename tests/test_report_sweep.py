"""Sweep reports from a real sweep on the local pool: valid self-contained HTML
with one real figure per metric, and a summary table whose means and 95 %
intervals match the metrics table recomputed in SQL."""
from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import duckdb
import matplotlib.image as mpimg
import numpy as np
import pytest
from scipy import stats

from desim.cli import main
from desim.report import write_sweep_report
from storeq import store_path
from desim.experiments.sweep import run_sweep
from desim.experiments.sweep.summary import metric_bounds
from images import decode

# n_agents has one value: fixed for the sweep, so epsilon (the first varied parameter) is the x axis
GRID = {"n_agents": [20], "epsilon": [0.2, 0.3, 0.4], "mu": [0.3, 0.5]}
REPLICATES = 3
STEPS = 4
VOID = {"meta", "img", "br", "input", "hr", "link"}


class Page(HTMLParser):
    """Images, and the rows of every table under the heading (h2) of its section; checks nesting."""

    def __init__(self):
        super().__init__()
        self.stack, self.images, self.tables = [], [], []
        self.heading, self._h2, self._row, self._cell = "", None, None, None

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        elif tag == "h2":
            self._h2 = ""
        elif tag == "table":
            self.tables.append((self.heading, []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag == "h2":
            self.heading, self._h2 = self._h2, None
        elif tag in ("td", "th"):
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr":
            self.tables[-1][1].append(self._row)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._h2 is not None:
            self._h2 += data


def parse(path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert page.stack == [], f"unclosed tags {page.stack}"
    return page


def assert_real_image(img: np.ndarray, heights=(420, 440)) -> None:
    """A drawn figure 900 px wide: 420 px high for a metric against the swept parameter, 440 for its curves."""
    assert img.shape[1] == 900 and img.shape[0] in heights
    rgb = img[..., :3]
    assert rgb.std() > 0.05, "the figure is (nearly) blank"
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20


def query(root, sql: str, params: list) -> list[tuple]:
    con = duckdb.connect(str(store_path(root)), read_only=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def expected_summary(root, sweep_id: str) -> dict[tuple, tuple]:
    """(metric, epsilon, mu) -> (mean, sd, ci_low, ci_high, n, low clipped, high clipped) from SQL over the
    metrics table, each run's last recorded step, intervals with scipy's t quantile clipped to the study's
    metric_bounds."""
    rows = query(root, """
        SELECT m.name, CAST(r.parameters->>'epsilon' AS DOUBLE), CAST(r.parameters->>'mu' AS DOUBLE),
               avg(m.value), stddev_samp(m.value), count(*)
        FROM runs r JOIN metrics m USING (run_id)
        WHERE r.sweep_id = ? AND r.status = 'completed'
          AND m.step = (SELECT max(step) FROM metrics x WHERE x.run_id = m.run_id)
        GROUP BY ALL""", [sweep_id])
    bounds = metric_bounds(root)
    out = {}
    for name, eps, mu, mean, sd, n in rows:
        half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
        low, high = bounds.get(name, (-math.inf, math.inf))
        out[(name, eps, mu)] = (mean, sd, max(mean - half, low), min(mean + half, high), n,
                                mean - half < low, mean + half > high)
    return out


@pytest.fixture
def swept(study_copy):
    """opinion_diffusion (20 agents, 4 steps) swept over 3 x 2 combinations x 3 replicates on 2 workers."""
    root = study_copy("opinion_diffusion")
    result = run_sweep(root, GRID, replicates=REPLICATES, workers=2, steps=STEPS)
    assert result.completed == 3 * 2 * REPLICATES
    return root, result.sweep_id


@pytest.mark.slow
def test_sweep_report_figures_and_table_match_sql(swept):
    root, sweep_id = swept
    paths = write_sweep_report(root, sweep_id)
    assert paths["dir"] == root / "runs" / "reports" / f"sweep-{sweep_id}"
    metrics = json.loads((root / "study.json").read_text())["display_metrics"]
    page = parse(paths["html"])

    # two embedded, real figures per metric (its final step against the swept parameter, and its curves
    # over time with bands), also written beside the Markdown
    assert len(page.images) == 2 * len(metrics)
    for src in page.images:
        assert_real_image(decode(src))
    md = paths["markdown"].read_text(encoding="utf-8")
    for metric in metrics:
        for png, height in ((paths["dir"] / f"sweep_{metric}.png", 420),
                            (paths["dir"] / f"sweep_curves_{metric}.png", 440)):
            assert f"]({png.name})" in md
            assert_real_image(mpimg.imread(png), heights=(height,))
    # the curves' axes follow the study's metric_bounds (every display metric here declares both), as a run's do
    assert md.count("at least 10 % of the range declared") == len(metrics)

    # the card: runs and seeds as stored
    assert query(root, "SELECT max(step) FROM metrics WHERE run_id LIKE ?", [f"{sweep_id}-%"])[0][0] == STEPS
    card = dict(row for row in next(rows for heading, rows in page.tables if heading == "Sweep card")[1:])
    n_runs, n_done, n_seeds = query(root, "SELECT count(*), count(*) FILTER (WHERE status = 'completed'), "
                                          "count(DISTINCT seed) FROM runs WHERE sweep_id = ?", [sweep_id])[0]
    assert card["runs"] == f"{n_done} completed, 0 failed" and n_runs == 18
    assert f"{n_seeds} distinct seeds for {n_runs} runs" in card["seeds"]
    # a parameter swept over one value is set for every run, not part of the grid; the rest keep the study's
    assert card["grid"] == "epsilon = 0.2, 0.3, 0.4; mu = 0.3, 0.5"
    assert card["set for every run"] == "n_agents=20"
    assert "n_agents" not in card["study values"] and "campaign_weight=" in card["study values"]
    assert card["replicates"].startswith(f"{REPLICATES} per combination (6 combinations")
    # the behaviour model as the runs built it: the swept arguments said to vary, the others as resolved
    model = card["behaviour model"]
    assert model.startswith("model:BoundedConfidence {")
    args = json.loads(model.split(" ", 1)[1])
    assert args["epsilon"] == args["mu"] == "(varies with the sweep)" and args["campaign_weight"] == 0.4

    # the runs table lists every run with its stored seed
    runs_rows = next(rows for heading, rows in page.tables if heading == "Runs")
    seeds = dict(query(root, "SELECT run_id, seed FROM runs WHERE sweep_id = ?", [sweep_id]))
    shown = {r[0]: int(r[-2]) for r in runs_rows[1:]}
    assert shown == seeds

    # each metric's table equals the SQL recomputation
    expected = expected_summary(root, sweep_id)
    checked = 0
    for metric in metrics:
        header, *rows = next(rows for heading, rows in page.tables if heading == metric)
        assert header == ["epsilon", "mu", "mean", "sd", "95 % low", "95 % high", "n"]
        assert len(rows) == 6
        for eps, mu, *values in rows:
            want = expected[(metric, float(eps), float(mu))]
            got = [float(v.removesuffix("\u2020")) for v in values]     # a dagger marks an end clipped at a bound
            assert (values[2].endswith("\u2020"), values[3].endswith("\u2020")) == want[5:], (metric, values)
            assert got[4] == want[4] == REPLICATES
            # printed to the digits the interval supports: each within half a unit of its last printed digit
            for text, value, true in zip(values[:4], got[:4], want[:4]):
                places = len(text.split(".")[1]) if "." in text else 0
                assert abs(value - true) <= 0.5 * 10 ** -places + 1e-12, (metric, text, true)
            half = (want[3] - want[2]) / 2
            if half > 0:            # no more digits than two significant ones of the half-width
                places = len(values[0].split(".")[1]) if "." in values[0] else 0
                assert 10 ** -places >= half / 100, (metric, values[0], half)
            # the interval holds the mean; it is a point only when the replicates agree (20 agents' shares
            # take few values)
            assert got[2] <= got[0] <= got[3] and (got[2] < got[3]) == (got[1] > 0)
            checked += 1
    assert checked == len([k for k in expected if k[0] in metrics]) == 6 * len(metrics)


@pytest.mark.slow
def test_cli_sweep_report_and_errors(swept, study_copy, capsys):
    root, sweep_id = swept
    out = root.parent / "sweep-report"
    assert main(["report", str(root), "--sweep", sweep_id, "--metrics", "opinion_sd", "--out", str(out)]) == 0
    assert str(out / "report.html") in capsys.readouterr().out
    page = parse(out / "report.html")
    assert len(page.images) == 2 and "opinion_sd" in [h for h, _ in page.tables]      # only the metric asked for
    assert_real_image(mpimg.imread(out / "sweep_opinion_sd.png"), heights=(420,))
    assert_real_image(mpimg.imread(out / "sweep_curves_opinion_sd.png"), heights=(440,))

    assert main(["report", str(root), "--sweep", "sw-nope"]) == 2
    err = capsys.readouterr().err
    assert "no sweep 'sw-nope'" in err and sweep_id in err          # names the sweeps there are
    assert main(["report", str(root), "--sweep", sweep_id, "--metrics", "no_such_metric"]) == 2
    assert "no_such_metric" in capsys.readouterr().err
    assert main(["report", str(root), "--sweep", sweep_id, "--run", f"{sweep_id}-0-0"]) == 2
    assert "--sweep" in capsys.readouterr().err
    assert main(["report", str(root), "--metrics", "opinion_sd"]) == 2
    assert "--sweep" in capsys.readouterr().err

    fresh = study_copy("opinion_diffusion", "never_run")
    assert main(["report", str(fresh), "--sweep", sweep_id]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_sweep_of_replicates_alone_needs_no_grid(tmp_path, capsys):
    """--replicates N with no --set: N runs of the study's own values, different seeds; the report gives each
    metric's final values over them. One replicate and no grid is refused (that is desim run)."""
    from walk_study import write_walk_study
    root = write_walk_study(tmp_path / "walk", n_agents=4, n_steps=3)
    assert main(["sweep", str(root), "--steps", "3", "-q"]) == 2
    assert "--replicates N (N >= 2) for replicates of the study's values" in capsys.readouterr().err
    assert main(["sweep", str(root), "--replicates", "3", "--workers", "1", "-q"]) == 0
    con = duckdb.connect(str(store_path(root)), read_only=True)
    rows = con.execute("SELECT r.seed, r.parameters, m.value FROM runs r JOIN metrics m USING (run_id) "
                       "WHERE m.name = 'mean_x' AND m.step = r.last_step").fetchall()
    (sweep_id,) = con.execute("SELECT DISTINCT sweep_id FROM runs").fetchone()
    con.close()
    assert len(rows) == 3 and len({s for s, _, _ in rows}) == 3 and len({p for _, p, _ in rows}) == 1
    md = write_sweep_report(root, sweep_id)["markdown"].read_text()
    assert "3 replicates of the study's values" in md
    line = next(x for x in md.splitlines() if x.startswith("| mean_x |"))
    shown = float(line.split("|")[2])
    finals = [v for _, _, v in rows]
    assert shown == pytest.approx(np.mean(finals), abs=0.5 * 10 ** -(len(line.split("|")[2].strip().split(".")[-1])))
