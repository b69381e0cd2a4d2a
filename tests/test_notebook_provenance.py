"""The code a notebook's study runs is the code its version records (``desim.study.refs.outside_code``).

Three ways it was not: a ``@dataclass`` typed into a notebook and defined again with other code kept its
version (its generated methods have no source, so it fell back to a token kept by its name, the same for
the new class); a module beside the notebook, edited but not reloaded, ran its old code under the new
file's hash; and the text of such a module was never kept, so ``desim diff`` could not show its edit.
"""
from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
import subprocess
import sys
import textwrap
import uuid

import pytest

import desim
from desim.cli import main
from desim.experiments.branches import BranchRefused
from desim.study.refs import OUTSIDE, RefError, outside_code
from storeq import sql

# --- a class typed into a notebook ---------------------------------------------------------------------

NOTEBOOK = '''
import json, linecache, sys, types
import desim
from desim.experiments.branches import BranchRefused
from desim.study.refs import outside_code

main = types.ModuleType("__main__")
sys.modules["__main__"] = main
count = 0

def cell(text):                         # what IPython does with a cell: its source kept in linecache
    global count
    count += 1
    name = f"<cell-{count}>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    exec(compile(text, name, "exec"), main.__dict__)

cell("""
from dataclasses import dataclass, field
import desim

class Env(desim.EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}
    def observe_batch(self, ids, t, r):
        return [desim.Observation(agent_id=a, step=t, round_idx=r, local_physical={"x": self.x[a]}) for a in ids]
    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]
    def agent_state(self, a):
        return {"x": self.x[a]}
""")
RULE = """
@dataclass
class Rule(desim.DecisionModel):
    inc: float = DEFAULT
    def decide_batch(self, obs, mem):
        return [desim.Action(agent_id=o.agent_id, step=o.step, kind="set",
                             payload={"x": o.local_physical["x"] + FACTOR * self.inc}) for o in obs]
"""
def rule(factor, default="1.0"):
    cell(RULE.replace("FACTOR", str(factor)).replace("DEFAULT", default))
    return outside_code(".", {"simulation": {"decision": {"ref": "__main__:Rule", "args": {}}}})[
        "<outside>/__main__:Rule"]
'''


def notebook(tmp_path, body: str) -> str:
    """Run ``body`` after :data:`NOTEBOOK` in a new Python (its ``__main__`` is the notebook's); its output."""
    proc = subprocess.run([sys.executable, "-c", NOTEBOOK + textwrap.dedent(body)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_dataclass_defined_again_in_a_notebook_with_other_code_is_a_new_version(tmp_path, capsys):
    out = notebook(tmp_path, '''
        first = rule(1)
        print("hashes", json.dumps({
            "first": first,
            "again": rule(1),                       # the same cell run again: the same code, the same version
            "method": rule(10),                     # an edited method
            "default": rule(1, default="2.0"),      # an edited field default: only @dataclass's __init__ has it
        }))

        F = "study"
        def run():
            study = desim.Study(environment=main.Env, decision=main.Rule(), population=3, steps=3, folder=F,
                                overwrite=True)
            return desim.run_study(study)
        rule(1)
        r1 = run()
        rule(10)
        r2 = run()
        print("runs", r1.run_id, r2.run_id)
        try:
            desim.branch(F, r1.run_id, 2)
            print("branch ran")
        except BranchRefused as e:
            print("refused:", str(e).replace("\\n", " "))
    ''')
    hashes = json.loads(out.split("hashes ", 1)[1].splitlines()[0])
    assert not hashes["first"].startswith("process-"), hashes          # hashed by its source, not a token
    assert hashes["again"] == hashes["first"]
    assert hashes["method"] != hashes["first"] and hashes["default"] != hashes["first"]
    r1, r2 = out.split("runs ", 1)[1].split()[:2]
    study = tmp_path / "study"
    rows = {r: (version, json.loads(code))
            for r, version, code in sql(study, "SELECT run_id, version_id, code FROM runs")}
    assert rows[r1][0] != rows[r2][0]
    assert rows[r1][1]["<outside>/__main__:Rule"] != rows[r2][1]["<outside>/__main__:Rule"]
    assert "refused:" in out and "__main__:Rule (edited)" in out
    # the source it was hashed by is kept, so `desim diff` shows the edit
    assert main(["diff", str(study), r2, r1]) == 0
    diff = capsys.readouterr().out
    assert "<outside>/__main__:Rule (edited)" in diff and "its text was not kept" not in diff
    assert any(line.startswith("+") and "+ 10 * self.inc" in line for line in diff.splitlines()), diff


def test_code_with_no_source_gets_a_token_of_its_class_not_of_its_name(tmp_path):
    """A class made by ``type()`` (no source to hash): one token while the class lives, another for the class
    made again under the same name, which may hold other code."""
    out = notebook(tmp_path, '''
        config = {"simulation": {"decision": {"ref": "__main__:Made", "args": {}}}}
        main.Made = type("Made", (), {"decide": lambda self: 1})
        a = outside_code(".", config)
        b = outside_code(".", config)
        main.Made = type("Made", (), {"decide": lambda self: 2})
        c = outside_code(".", config)
        print("tokens", json.dumps([a, b, c]))
    ''')
    a, b, c = (t["<outside>/__main__:Made"] for t in json.loads(out.split("tokens ", 1)[1]))
    assert a.startswith("process-") and a == b and c != a


# --- a module beside the notebook ------------------------------------------------------------------------

MODULE = '''
import desim


class Env(desim.EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, r):
        return [desim.Observation(agent_id=a, step=t, round_idx=r, local_physical={"x": self.x[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, a):
        return {"x": self.x[a]}


class Rule(desim.DecisionModel):
    def decide_batch(self, obs, mem):
        return [desim.Action(agent_id=o.agent_id, step=o.step, kind="set", payload={"x": o.local_physical["x"] + INC})
                for o in obs]
'''


@pytest.fixture
def beside(tmp_path, monkeypatch):
    """A module beside the notebook (``tmp_path``, on ``sys.path``): ``write(inc)`` writes it, ``load()``
    imports it; removed from ``sys.modules`` after the test."""
    name = f"prov_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    monkeypatch.syspath_prepend(str(tmp_path))

    class Beside:
        file = path
        module_name = name

        @staticmethod
        def write(inc: str) -> None:
            """Write the module, seconds later than before (as an edit by hand: Python trusts a compiled
            file by the source's size and modification time to the second)."""
            before = path.stat().st_mtime_ns if path.exists() else None
            path.write_text(MODULE.replace("INC", inc))
            if before is not None:
                os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))

        @staticmethod
        def load():
            importlib.invalidate_caches()
            return importlib.import_module(name)

        @staticmethod
        def study(module):
            return desim.Study(environment=module.Env, decision=module.Rule, population=3, steps=2,
                               folder=tmp_path / "study", overwrite=True)

        @staticmethod
        def config():
            return {"simulation": {"decision": {"ref": f"{name}:Rule", "args": {}}},
                    "environment": {"provider": {"ref": f"{name}:Env", "args": {}}}}

    yield Beside
    sys.modules.pop(name, None)


def final_x(result) -> float:
    return float(result.panel().to_pandas().groupby("step").x.first().iloc[-1])


def test_a_module_edited_but_not_reloaded_is_refused_not_recorded_as_the_new_file(beside, tmp_path):
    beside.write("1.0")
    module = beside.load()
    first = desim.run_study(beside.study(module))
    assert final_x(first) == 2.0
    beside.write("20.0")                # edited in an editor; the notebook does not reload it
    with pytest.raises(RefError, match=rf"{beside.file.name} changed since it was imported.*importlib\.reload"):
        desim.run_study(beside.study(module))
    # a branch would run the old code as well: refused the same way, not recorded as the new file
    with pytest.raises(RefError, match="changed since it was imported"):
        desim.branch(tmp_path / "study", first.run_id, 1)
    assert [r for r, in sql(tmp_path / "study", "SELECT run_id FROM runs")] == [first.run_id]
    # reloaded, it runs the new code, recorded as a new version, and the branch across the edit is refused
    module = importlib.reload(module)
    second = desim.run_study(beside.study(module))
    assert final_x(second) == 40.0
    rows = {r: (v, json.loads(c)) for r, v, c in sql(tmp_path / "study", "SELECT run_id, version_id, code FROM runs")}
    key = f"{OUTSIDE}{beside.module_name}.py"
    assert rows[first.run_id][0] != rows[second.run_id][0]
    assert rows[first.run_id][1][key] != rows[second.run_id][1][key]
    with pytest.raises(BranchRefused, match=rf"{key} \(edited\)"):
        desim.branch(tmp_path / "study", first.run_id, 1)
    # and the same file put back is the first version's code again
    beside.write("1.0")
    importlib.reload(module)
    assert outside_code(tmp_path / "study", beside.config())[key] == rows[first.run_id][1][key]


def test_a_stale_compiled_file_python_could_not_replace_refuses_nothing(beside, tmp_path, monkeypatch):
    """A .pyc of another size or time than the file is not what an import of the file loads: Python compiled
    the source, and may have failed to replace the .pyc (a read-only __pycache__). The module runs the file's
    code, so the run goes on (an edit after desim first saw the module is refused by the check above)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    beside.write("1.0")
    module = beside.load()
    stale = Path(module.__spec__.cached).read_bytes()
    stat = beside.file.stat()
    beside.write("3.0 + 0.0")
    os.utime(beside.file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    module = importlib.reload(module)                       # the file's code now runs
    Path(module.__spec__.cached).write_bytes(stale)         # as if the new .pyc could not be written
    assert set(outside_code(tmp_path / "study", beside.config())) == {f"{OUTSIDE}{beside.module_name}.py"}


def test_an_edit_within_the_second_the_module_was_compiled_names_the_stale_compiled_file(beside, tmp_path,
                                                                                        monkeypatch):
    """Python trusts a .pyc by the file's size and modification time: an edit of the same size in the same
    second is not seen even by a reload. Said so, with what to delete."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    beside.write("1.0")
    stat = beside.file.stat()
    module = beside.load()
    beside.write("4.0")
    os.utime(beside.file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    importlib.reload(module)            # loads the stale compiled file again
    with pytest.raises(RefError, match=r"compiled copy .*\.pyc holds other code.*delete it"):
        outside_code(tmp_path / "study", beside.config())


def test_the_text_of_a_module_beside_the_notebook_is_kept_and_diffed(beside, tmp_path, capsys):
    beside.write("1.0")
    module = beside.load()
    first = desim.run_study(beside.study(module))
    beside.write("7.25")
    module = importlib.reload(module)
    second = desim.run_study(beside.study(module))
    key = f"{OUTSIDE}{beside.module_name}.py"
    texts = dict(sql(tmp_path / "study", "SELECT c.hash, c.text FROM code_texts c"))
    hashes = {r: json.loads(c)[key] for r, c in sql(tmp_path / "study", "SELECT run_id, code FROM runs")}
    assert texts[hashes[first.run_id]] == MODULE.replace("INC", "1.0")
    assert texts[hashes[second.run_id]] == MODULE.replace("INC", "7.25")
    assert main(["diff", str(tmp_path / "study"), second.run_id, first.run_id]) == 0
    out = capsys.readouterr().out
    assert f"{key} (edited)" in out and "its text was not kept" not in out
    assert any(line.startswith("+") and "+ 7.25" in line for line in out.splitlines()), out
