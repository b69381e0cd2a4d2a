"""Code a study's refs reach outside its folder is part of its version: a class in a module beside a script
(the README's ``my_classes.py``) or in the script itself (``__main__:Name``). An edit of it made runs look
like replicates of one version, branches across it were accepted and effects reused controls run with the
old code; now its file's hash is in the run's ``code``, as ``model.py``'s is."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import desim
from desim.experiments.branches import BranchRefused
from desim.study.refs import OUTSIDE, outside_code
from storeq import sql

MODULE = '''
import desim


class Env(desim.EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [desim.Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] += a.payload["dx"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Rule(desim.DecisionModel):
    def decide_batch(self, observations, memories):
        rng = self.ctx.rng("steps")
        return [desim.Action(agent_id=o.agent_id, step=o.step, kind="move", payload={"dx": STEP * float(rng.random())})
                for o in observations]


STEP = 1.0
'''

SCRIPT = '''
import sys
import desim
from mymod import Env, Rule

if __name__ == "__main__":
    study = desim.Study(environment=Env, decision=Rule, population=5, steps=4, seed=1, folder=sys.argv[1],
                        overwrite=True)
    print(desim.run_study(study).run_id)
'''


@pytest.fixture
def beside(tmp_path):
    (tmp_path / "mymod.py").write_text(MODULE)
    (tmp_path / "run.py").write_text(SCRIPT)
    return tmp_path


def run_script(where):
    proc = subprocess.run([sys.executable, "run.py", str(where / "study")], cwd=where, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()[-1]


def test_an_edit_of_a_module_beside_the_study_is_a_new_version_and_a_branch_across_it_is_refused(beside,
                                                                                                 monkeypatch):
    first = run_script(beside)
    again = run_script(beside)
    (beside / "mymod.py").write_text(MODULE.replace("STEP = 1.0", "STEP = 2.0"))
    edited = run_script(beside)
    study = beside / "study"
    rows = {r: (json.loads(code), version) for r, code, version in
            sql(study, "SELECT run_id, code, version_id FROM runs")}
    key = f"{OUTSIDE}mymod.py"
    assert key in rows[first][0] and rows[first] == rows[again]          # the same code: one version
    assert rows[edited][0][key] != rows[first][0][key] and rows[edited][1] != rows[first][1]
    # the final positions differ: the edit changed what ran
    final = {r: sql(study, "SELECT sum(state.x) FROM panel WHERE run_id = ? AND step = 4", [r])[0][0]
             for r in (first, edited)}
    assert final[edited] == pytest.approx(2 * final[first])
    monkeypatch.syspath_prepend(str(beside))
    with pytest.raises(BranchRefused, match=r"<outside>/mymod\.py \(edited\)"):
        desim.branch(study, first, 2)


def test_installed_and_in_folder_code_is_not_outside_code(tmp_path):
    (tmp_path / "model.py").write_text("X = 1\n")
    config = {"simulation": {"decision": {"ref": "desim.diffusion:SIR", "args": {}}},
              "environment": {"provider": {"ref": "model:Env", "args": {}}},
              "collector": {"ref": "json:JSONDecoder", "args": {}}}
    assert outside_code(tmp_path, config) == {}


def test_a_class_typed_into_a_notebook_is_versioned_by_its_source(tmp_path):
    """No file to hash (``__main__`` of a notebook): its methods' sources, which the cells keep."""
    script = textwrap.dedent('''
        import sys, types, linecache
        from desim.study.refs import outside_code
        def cell(text, name):                   # what IPython does with a cell: source kept in linecache
            linecache.cache[name] = (len(text), None, text.splitlines(True), name)
            exec(compile(text, name, "exec"), main.__dict__)
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        cell("class Env:\\n    def step(self):\\n        return 1\\n", "<cell-1>")
        a = outside_code(".", {"environment": {"provider": {"ref": "__main__:Env", "args": {}}}})
        cell("class Env:\\n    def step(self):\\n        return 2\\n", "<cell-2>")
        b = outside_code(".", {"environment": {"provider": {"ref": "__main__:Env", "args": {}}}})
        print(a, b)
        assert list(a) == ["<outside>/__main__:Env"] and a != b, (a, b)
    ''')
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
