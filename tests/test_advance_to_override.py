"""An environment that overrides ``advance_to``: environment.json's events and broadcasts fire only through
``super().advance_to(t)``, so an override without it would have made every intervention silently do nothing,
and one that called it without returning its rows hid them from the events table (and so from reports and
the dashboard's timeline). Both passed ``desim validate --strict`` and ran to completion."""
from __future__ import annotations

import pytest

import desim
from desim.cli import main

OVERRIDES = {
    "no super": "    def advance_to(self, t):\n        self.today = t\n",
    "no return": "    def advance_to(self, t):\n        super().advance_to(t)\n        self.today = t\n",
    "own rows only": ("    def advance_to(self, t):\n        super().advance_to(t)\n"
                      "        return [{'kind': 'weather', 'name': 'rain', 'detail': t}]\n"),
    "both": ("    def advance_to(self, t):\n        fired = super().advance_to(t)\n"
             "        return fired + [{'kind': 'weather', 'name': 'rain', 'detail': t}]\n"),
    "copies": ("    def advance_to(self, t):\n        fired = super().advance_to(t)\n"
               "        return [{**r, 'detail': {'seen': True}} for r in fired] + "
               "[{'kind': 'weather', 'name': 'rain', 'detail': t}]\n"),
}


def starter(tmp_path, monkeypatch, override: str | None):
    """The starter template (an event at step 3, another at 4, a broadcast at 3), its environment overridden."""
    tmp_path.mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    assert main(["new", "mine", "--template", "starter"]) == 0
    model = tmp_path / "studies" / "mine" / "model.py"
    if override:
        text = model.read_text()
        anchor = "    def observe_batch(self, ids, t, round_idx):\n"
        assert anchor in text
        model.write_text(text.replace(anchor, OVERRIDES[override] + "\n" + anchor, 1))
    return tmp_path / "studies" / "mine"


def intervention_rows(result):
    return sorted((r["step"], r["kind"], r["name"]) for r in result.events().to_pylist()
                  if r["kind"] in ("event", "broadcast"))


def test_an_override_without_super_is_refused_naming_the_call_and_the_interventions(tmp_path, monkeypatch, capsys):
    root = starter(tmp_path, monkeypatch, "no super")
    assert main(["validate", str(root)]) == 2
    err = capsys.readouterr().err
    assert "Neighbourhood.advance_to did not call super().advance_to(0)" in err
    assert main(["run", str(root), "-q"]) == 2
    err = capsys.readouterr().err
    assert "did not call super().advance_to(0)" in err and "environment.json" in err


@pytest.mark.parametrize("override", ["no return", "own rows only", "both", "copies"])
def test_what_fired_is_recorded_whatever_the_override_returns(tmp_path, monkeypatch, override):
    plain = desim.run_study(desim.load_study(starter(tmp_path / "a", monkeypatch, None)))
    changed = desim.run_study(desim.load_study(starter(tmp_path / "b", monkeypatch, override)))
    assert changed.status == "completed"
    assert intervention_rows(changed) == intervention_rows(plain) == [
        (3, "broadcast", "local_paper"), (3, "event", "news_item"), (4, "event", "news_fades")]
    own = [r for r in changed.events().to_pylist() if r["kind"] == "weather"]
    assert len(own) == (0 if override == "no return" else 11)       # steps 0 to 10, each once
    # the interventions acted as they do without the override: the same panel
    assert changed.panel().select(["step", "agent_id", "support"]).equals(
        plain.panel().select(["step", "agent_id", "support"]))


def test_a_study_without_interventions_may_override_advance_to_as_it_likes(tmp_path, monkeypatch):
    root = starter(tmp_path, monkeypatch, "no super")
    env = root / "environment" / "environment.json"
    env.write_text('{"provider": {"ref": "model:Neighbourhood", "args": {"fatigue": "$fatigue"}}, '
                   '"layers": {"news_pull": 0.0}}')
    assert desim.run_study(desim.load_study(root)).status == "completed"
