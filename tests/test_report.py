"""Reports from real runs: valid self-contained HTML, the expected figures,
the intervention steps named, and numbers that match the store."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import matplotlib.image as mpimg
import numpy as np
import pytest

import desim
from desim.experiments.branches import branch
from desim.cli import main
from desim.report import write_report
from storeq import store_path
from images import decode
from storeq import sql

N_AGENTS = 40
VOID = {"meta", "img", "br", "input", "hr", "link"}


class Page(HTMLParser):
    """Collects images, headings, paragraphs and table rows; checks that tags nest properly."""

    def __init__(self):
        super().__init__()
        self.stack, self.images, self.h2, self.text, self.rows = [], [], [], [], []
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "tr":
            self._row = []
        if tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag in ("td", "th"):
            self._row.append(self._cell)
            self._cell = None
        if tag == "tr":
            self.rows.append(self._row)

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell += data
        if self.stack and self.stack[-1] == "h2":
            self.h2.append(data)


def parse(path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert page.stack == [], f"unclosed tags {page.stack}"
    return page


def assert_real_image(img: np.ndarray, width: int, height: int) -> None:
    assert img.shape[1] == width and img.shape[0] == height
    rgb = img[..., :3]
    assert rgb.std() > 0.05, "the figure is (nearly) blank"
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20


def metric_table(page: Page, name: str) -> dict[int, float]:
    """step -> value of ``name`` from the metrics table (header row starts with 'step')."""
    for i, row in enumerate(page.rows):
        if row and row[0] == "step" and name in row:
            col = row.index(name)
            out = {}
            for r in page.rows[i + 1:]:
                if not r or not r[0].isdigit():
                    break
                out[int(r[0])] = float(r[col])
            return out
    raise AssertionError(f"no metrics table with {name}")


@pytest.fixture
def opinion(study_copy):
    root = study_copy("opinion_diffusion")
    run = desim.run_study(desim.load_study(root, params={"n_agents": N_AGENTS}))
    return root, run.run_id


def test_report_of_one_run(opinion):
    root, run_id = opinion
    paths = write_report(root)  # the latest completed run
    assert paths["dir"] == root / "runs" / "reports" / run_id
    page = parse(paths["html"])
    # study card, metrics, states, events: 1 metrics figure + 1 per display state
    assert page.h2 == ["Study card", "Metrics over time", "State distributions over time", "Events"]
    assert len(page.images) == 2
    metrics_img = decode(page.images[0])
    assert_real_image(metrics_img, 900, int(100 * (0.7 + 2.3 * 3)))  # three display metrics
    assert_real_image(decode(page.images[1]), 900, int(100 * (0.7 + 2.3 * 2)))  # its density above its bands
    # self-contained: nothing fetched from elsewhere
    html = paths["html"].read_text()
    assert not re.search(r'(src|href)="(http|//|[^d#])', html)
    text = " ".join(page.text)
    assert "step 2: campaign_starts, tv_campaign" in text
    card = {r[0]: r[1] for r in page.rows if len(r) == 2}
    assert card["population size"] == str(N_AGENTS)
    assert card["seed"] == "42" and card["propagation"] == "broadcast_then_local"
    assert card["status"] == "completed"
    (edges,) = sql(root, "SELECT count(*) FROM edges WHERE run_id = ?", [run_id])[0]
    (config,) = sql(root, "SELECT config FROM runs WHERE run_id = ?", [run_id])[0]
    config = json.loads(config)
    net = config["population"]["interaction"]
    # the settings its kind reads, and what was simulated: the model and the environment with their arguments
    assert net.get("graph_seed") is None        # drawn from the run's seed: no setting to show
    assert card["network"] == f"watts_strogatz k={net['k']}, p={net['p']} ({edges:,} edges)"
    decision = config["simulation"]["decision"]
    assert card["behaviour model"] == f"{decision['ref']} {json.dumps(decision['args'], sort_keys=True)}"
    assert card["environment"].startswith(config["environment"]["provider"]["ref"])
    assert "LLM calls" not in card
    for name in ("mean_opinion", "support_share"):
        shown = metric_table(page, name)
        stored = dict(sql(root, "SELECT step, value FROM metrics WHERE run_id = ? AND name = ?", [run_id, name]))
        assert sorted(shown) == list(range(13))
        for step, value in stored.items():
            assert shown[step] == pytest.approx(value, rel=1e-5, abs=1e-9)
    # the events table names both interventions at step 2
    events = [r for r in page.rows if len(r) == 4 and r[1] in ("event", "broadcast")]
    assert {(r[0], r[1], r[2]) for r in events} == {("2", "event", "campaign_starts"), ("2", "broadcast", "tv_campaign")}
    # the Markdown twin points at PNG files that exist and match the embedded ones
    md = paths["markdown"].read_text()
    files = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert files == ["metrics.png", "state_opinion.png"]
    for f in files:
        img = mpimg.imread(paths["dir"] / f)
        assert img.shape[1] == 900
    assert "| step | mean_opinion | support_share | opinion_sd |" in md
    assert "campaign_starts" in md


def test_a_description_names_parameters_by_the_values_the_run_used(study_copy):
    """"From week $campaign_week" on the card reads the run's value, on the dashboard the study's own; a
    $word that is no parameter is left as written."""
    root = study_copy("opinion_diffusion")
    study = json.loads((root / "study.json").read_text())
    study["description"] = "Campaign from week $campaign_week at weight $campaign_weight; $nope and $5 stay."
    (root / "study.json").write_text(json.dumps(study))
    desim.run_study(desim.load_study(root, steps=3, params={"n_agents": N_AGENTS, "campaign_week": 1,
                                                           "campaign_weight": 0.25}))
    text = " ".join(parse(write_report(root)["html"]).text)
    assert "Campaign from week 1 at weight 0.25; $nope and $5 stay." in text
    from desim.dashboard.data import _study_config
    assert _study_config(root)["study"]["description"] == \
        "Campaign from week 2 at weight 0.4; $nope and $5 stay."         # simulation.json's values


def test_report_compares_two_runs(opinion):
    root, control = opinion
    treat = desim.run_study(desim.load_study(root, params={"n_agents": N_AGENTS, "campaign_weight": 0.9})).run_id
    paths = write_report(root, run_id=treat, compare=control)
    assert paths["dir"].name == f"{treat}-vs-{control}"
    page = parse(paths["html"])
    assert "Treatment minus control" in page.h2
    card = {r[0]: r[1] for r in page.rows if len(r) == 2}
    assert card["control run"].startswith(f"{control} (run, completed), seed 42, parameters ")
    assert '"campaign_weight": 0.4' in card["control run"] and '"campaign_weight": 0.9' in card["parameters"]
    # metrics (both runs), opinion bands, metric differences, paired per-agent differences
    assert len(page.images) == 4
    for src in page.images:
        assert_real_image(decode(src), 900, decode(src).shape[0])
    header = next(r for r in page.rows if r and r[0] == "step" and "mean_opinion diff" in r)
    i = page.rows.index(header)
    col = header.index("mean_opinion diff")
    diffs = dict(sql(root, "SELECT t.step, t.value - c.value FROM metrics t JOIN metrics c "
                           "ON t.step = c.step AND t.name = c.name WHERE t.run_id = ? AND c.run_id = ? "
                           "AND t.name = 'mean_opinion'", [treat, control]))
    shown = {int(r[0]): float(r[col]) for r in page.rows[i + 1:i + 14]}
    assert shown.keys() == diffs.keys()
    for step, d in diffs.items():
        assert shown[step] == pytest.approx(d, rel=1e-4, abs=1e-6)
    assert max(abs(d) for d in diffs.values()) > 0.001  # the campaign weight matters
    # per-agent paired difference at the last step, against SQL over the joined panels
    (mean_diff,) = sql(root, "SELECT avg(CAST(t.state.opinion AS DOUBLE) - CAST(c.state.opinion AS DOUBLE)) "
                             "FROM panel t JOIN panel c ON t.step = c.step AND t.agent_id = c.agent_id "
                             "WHERE t.run_id = ? AND c.run_id = ? AND t.step = 12", [treat, control])[0]
    para = next(t for t in page.text if t.startswith("'opinion' at step 12: mean per-agent difference"))
    assert float(re.search(r"difference (\S+) \(", para).group(1)) == pytest.approx(mean_diff, rel=1e-4)
    assert f"({N_AGENTS} agent pairs)" in para


def test_branch_report_marks_the_fork(opinion):
    root, parent = opinion
    env_file = root / "environment" / "environment.json"
    env = json.loads(env_file.read_text())
    env["scheduled_events"][0]["at_step"] = 6   # the campaign starts later in the branch
    env["broadcasts"][0]["at_step"] = 6
    env_file.write_text(json.dumps(env))
    # the parent fired its campaign at step 2; a branch may only change steps >= the fork, so fork at 2
    child = branch(root, parent, 2, spec=desim.load_study(root, params={"n_agents": N_AGENTS})).run_id
    paths = write_report(root, run_id=child)  # a branch is compared with its parent by default
    assert paths["dir"].name == child
    page = parse(paths["html"])
    text = " ".join(page.text)
    assert f"{child} is a branch of {parent} forked at step 2" in text
    # each arm's own interventions say whose they are
    assert ("step 2: campaign_starts (control only), tv_campaign (control only); "
            "step 6: campaign_starts (treatment only), tv_campaign (treatment only)") in text
    assert len(page.images) == 4
    card = {r[0]: r[1] for r in page.rows if len(r) == 2}
    assert card["parent run"] == f"{parent} (fork at step 2)"
    # before the fork the branch replays the parent: zero difference; afterwards the delay shows
    diffs = dict(sql(root, "SELECT t.step, t.value - c.value FROM metrics t JOIN metrics c "
                           "ON t.step = c.step AND t.name = c.name WHERE t.run_id = ? AND c.run_id = ? "
                           "AND t.name = 'mean_opinion'", [child, parent]))
    assert diffs[1] == 0
    assert abs(diffs[3]) > 1e-4
    # the parent as the treatment: still the child that is the branch
    back = " ".join(parse(write_report(root, run_id=parent, compare=child, out_dir=root / "back")["html"]).text)
    assert f"{parent} (treatment) compared with {child} (control); {child} is a branch of {parent}" in back
    assert "step 2: campaign_starts (treatment only), tv_campaign (treatment only)" in back


def test_llm_calls_appear_on_the_card(opinion):
    root, run_id = opinion
    # the run's data files, edited as a run with LLM calls would have written them
    folder = store_path(root).parent / "data" / f"run_id={run_id}"
    # two paid replies, a cache hit and a scripted one: only the paid ones are calls with tokens
    calls = pa.table({"step": pa.array([1, 1, 2, 2], pa.int32()), "round": pa.array([0, 0, 0, 0], pa.int32()),
                      "agent_id": ["a00", "a01", "a00", "a01"], "model": ["m", "m", "m", "scripted"],
                      "prompt_hash": ["h1", "h2", "h1", "h3"], "tokens_in": [100, 120, 100, 50],
                      "tokens_out": [20, 0, 20, 10], "latency_ms": [5.0, 9.0, 0.1, 0.0],
                      "cached": [False, False, True, False], "outcome": ["ok", "fallback", "ok", "ok"],
                      "attempts": [1, 3, 1, 0]})
    pq.write_table(calls, folder / "llm_calls.parquet")
    panel = pq.read_table(folder / "panel.parquet")
    hit = pc.and_(pc.equal(panel["step"], 1), pc.equal(panel["agent_id"], "a01"))
    source = pc.if_else(hit, "fallback", panel["action_source"])
    pq.write_table(panel.set_column(panel.column_names.index("action_source"), "action_source", source),
                   folder / "panel.parquet")
    page = parse(write_report(root, run_id=run_id)["html"])
    card = {r[0]: r[1] for r in page.rows if len(r) == 2}
    assert card["LLM calls"] == ("2 paid (tokens in 220, out 20); 1 from the cache, 1 scripted; 4 rows in all "
                                 "(fallback 1, ok 3)")
    assert card["fallbacks"] == ("1 replies unusable or unanswered in all rounds; 1 final-round panel actions "
                                 "decided by the rule")


def test_cli_report_and_errors(opinion, capsys):
    root, run_id = opinion
    out = root / "elsewhere"
    assert main(["report", str(root), "--run", run_id, "--out", str(out)]) == 0
    assert (out / "report.html").exists() and (out / "report.md").exists()
    assert str(out / "report.html") in capsys.readouterr().out
    assert main(["report", str(root), "--run", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["report", str(root), "--compare", run_id, "--run", run_id]) == 2


def test_a_study_without_metrics_still_reports(study_copy):
    root = study_copy("opinion_diffusion")
    sim_file = root / "simulation" / "simulation.json"
    sim = json.loads(sim_file.read_text())
    del sim["collector"]
    sim_file.write_text(json.dumps(sim))
    a = desim.run_study(desim.load_study(root, params={"n_agents": 20})).run_id
    b = desim.run_study(desim.load_study(root, params={"n_agents": 20, "mu": 0.1})).run_id
    page = parse(write_report(root, run_id=b, compare=a)["html"])
    assert "The run recorded no metrics (the study has no collector)." in page.text
    assert len(page.images) == 2  # the opinion bands and the paired differences


def test_binary_and_small_integer_states_are_drawn_as_shares(study_copy):
    root = study_copy("schelling")
    run = desim.run_study(desim.load_study(root, steps=3, params={"width": 12, "height": 12}))
    text = " ".join(parse(write_report(root, run_id=run.run_id)["html"]).text)
    # Schelling's type (0/1, an integer) and happy (a boolean): shares per category, never a 0-1 band
    assert "'type': share of agents in each category at each step." in text
    assert "'happy': share of agents in each category at each step." in text
    (zeros, ones), = sql(root, "SELECT count(*) FILTER (WHERE state.type = 0), count(*) FILTER (WHERE state.type = 1) "
                               "FROM panel WHERE run_id = ? AND step = 3", [run.run_id])
    assert f"'type' at step 3: 0 {zeros}, 1 {ones} agents." in text
