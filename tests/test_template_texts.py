"""What the templates and docs/diffusion.md tell a reader stays true.

* a template's ``question`` and ``description`` are plain text: no ``$name`` (nothing substitutes it
  there) and no parameter's value baked in;
* every diffusion template declares ``metric_bounds`` [0, 1] for its shares, so a sweep's interval of a
  share never leaves [0, 1];
* every template, made by ``desim new``, validates with no warning and runs with ``desim run``;
* the error messages docs/diffusion.md shows are what ``desim run`` prints for those mistakes, and a ref
  to a misspelt name suggests the right one.

(tests/test_templates.py checks ``validate --strict`` and a run through the Python API.)
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import desim
from desim.cli import main
from desim.commands.core import TEMPLATES, templates
from desim.diffusion import MODELS
from desim.experiments.sweep import describe, run_sweep, sweep_table
from desim.study.refs import RefError, resolve
from storeq import sql

DOCS = Path(__file__).resolve().parent.parent / "docs" / "diffusion.md"
DIFFUSION = sorted(n for n in templates()
                   if json.loads((TEMPLATES / n / "simulation" / "simulation.json").read_text())["decision"]["ref"]
                   .startswith("desim.diffusion:"))
SHARE = re.compile(r"share_.+|cumulative_incidence")


def template_json(name: str, file: str) -> dict:
    return json.loads((TEMPLATES / name / file).read_text(encoding="utf-8"))


def test_the_diffusion_templates_are_found():
    assert {"si", "sir", "sis", "seir", "cascade", "threshold", "voter", "majority", "hk", "deffuant"} <= set(DIFFUSION)


@pytest.mark.parametrize("name", sorted(templates()))
def test_question_and_description_are_plain_text_with_no_value_baked_in(name):
    study = template_json(name, "study.json")
    parameters = template_json(name, "simulation/simulation.json").get("parameters", {})
    for key in ("question", "description"):
        text = study.get(key, "")
        assert "$" not in text, (key, text)
        for param, value in parameters.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert not re.search(rf"(?<![\w.]){re.escape(str(value))}(?![\w.])", text), (key, param, value, text)


@pytest.mark.parametrize("name", DIFFUSION)
def test_every_share_of_a_diffusion_template_is_bounded_to_0_1(name):
    bounds = template_json(name, "study.json").get("metric_bounds", {})
    model = MODELS[template_json(name, "simulation/simulation.json")["decision"]["ref"].split(":")[1]]
    if model.STATES:
        expected = {f"share_{s}": [0, 1] for s in model.STATES} | {"cumulative_incidence": [0, 1]}
    else:                                   # opinions in [0, 1]: their mean too, their sd at most 1/2
        expected = {"mean_opinion": [0, 1], "opinion_sd": [0, 0.5]}
    assert bounds == expected


def test_a_sweep_of_the_sir_template_keeps_share_intervals_inside_0_1(tmp_path, monkeypatch, capsys):
    """Five small replicates whose outbreaks mostly die out: share_I's plain t interval reaches below 0,
    the sweep's is clipped at 0 and marked."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "sir", "--template", "sir"]) == 0
    root = tmp_path / "studies" / "sir"
    result = run_sweep(root, {"n_nodes": [150], "beta": [0.05], "gamma": [0.5]}, replicates=5, workers=1,
                       steps=8, metrics=["share_S", "share_I", "share_R", "cumulative_incidence"])
    assert result.table and {r["n"] for r in result.table} == {5}
    for row in sweep_table(root, result.sweep_id, ["share_S", "share_I", "share_R", "cumulative_incidence"]):
        assert 0 <= row["ci_low"] <= row["mean"] <= row["ci_high"] <= 1, row
    (share_i,) = [r for r in result.table if r["metric"] == "share_I"]
    finals = [v for (v,) in sql(root, "SELECT m.value FROM metrics m JOIN runs r USING (run_id) "
                                            "WHERE r.sweep_id = ? AND m.name = 'share_I' AND m.step = "
                                            "(SELECT max(step) FROM metrics WHERE run_id = m.run_id)",
                                [result.sweep_id])]
    assert len(finals) == 5
    assert describe(finals)["ci_low"] < 0                    # what the interval was without the bounds
    assert share_i["ci_low"] == 0 and share_i["ci_low_clipped"] is True


@pytest.mark.parametrize("name", sorted(templates()))
def test_a_template_validates_without_warning_and_desim_run_runs_it(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "mine", "--template", name]) == 0
    capsys.readouterr()
    assert main(["validate", "studies/mine"]) == 0
    out = capsys.readouterr()
    assert "warning" not in (out.out + out.err).lower(), out
    small = ["--set", "n_nodes=150"] if "n_nodes" in desim.load_study("studies/mine").simulation.parameters else []
    assert main(["run", "studies/mine", "-q"] + small) == 0, capsys.readouterr().err
    assert "warning" not in capsys.readouterr().err.lower()


# --- docs/diffusion.md ----------------------------------------------------------------------------

def docs_section(title: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end > 0 else len(text)]


def docs_study(folder: Path) -> Path:
    """The docs' complete study (its four JSON blocks, each after a line naming its file)."""
    section = docs_section("## A complete study")
    blocks = re.findall(r"`([\w/]+\.json)`:\s*\n\s*```json\n(.*?)```", section, re.S)
    assert [f for f, _ in blocks] == ["study.json", "simulation/simulation.json", "population/population.json",
                                      "environment/environment.json"]
    for file, text in blocks:
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).write_text(text, encoding="utf-8")
    return folder


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_the_error_messages_docs_diffusion_shows_are_what_desim_run_prints(tmp_path, monkeypatch, capsys):
    block = re.search(r"```\n(desim: error:.*?)```", docs_section("### Errors"), re.S).group(1)
    sim, env = "simulation/simulation.json", "environment/environment.json"

    def betta(d):
        d["decision"]["args"]["betta"] = d["decision"]["args"].pop("beta")
    mistakes = [(["--set", "beta=1.5"], "", None), ([], sim, betta),
                ([], sim, lambda d: d["decision"].update(ref="desim.diffusion:sir")),
                ([], env, lambda d: d["provider"]["args"].update(seed_state="X"))]
    printed = []
    for i, (extra, file, change) in enumerate(mistakes):
        root = docs_study(tmp_path / f"s{i}")
        if change:
            edit(root / file, change)
        monkeypatch.chdir(root)
        capsys.readouterr()
        assert main(["run", "."] + extra) == 2
        printed.append(capsys.readouterr().err)
        assert not (root / "runs").exists() or not any((root / "runs").iterdir())   # nothing written
    assert "".join(printed) == block


def test_a_misspelt_ref_names_the_module_as_written_and_suggests_the_name(tmp_path):
    with pytest.raises(RefError) as info:
        resolve("desim.diffusion:sir", tmp_path)
    assert info.value.problem.startswith("desim.diffusion has no 'sir'; did you mean 'SIR'? (it defines SI, SIR, ")
    assert "MODELS" not in info.value.problem            # in __all__, but a table, not something a ref builds
    with pytest.raises(RefError, match=r"has no 'Seir'; did you mean 'SEIR'\?"):
        resolve("desim.diffusion:Seir", tmp_path)
    with pytest.raises(RefError, match=r"has no 'Prevalance'; did you mean 'Prevalence'\?"):
        resolve("desim.diffusion:Prevalance", tmp_path)
    with pytest.raises(RefError) as info:
        resolve("desim.diffusion:Banana", tmp_path)
    assert "did you mean" not in str(info.value) and "(it defines SI, " in str(info.value)


def test_the_docs_complete_study_runs(tmp_path, monkeypatch):
    root = docs_study(tmp_path / "sir_ba")
    monkeypatch.chdir(root)
    assert main(["run", ".", "--steps", "2", "-q"]) == 0
