"""What a version covers: a study's inputs, not the files its runs and exports leave in its folder.

``desim run . > run.log`` (as the README suggests), ``nohup.out`` and a scheduler's ``slurm-7.out`` used to count
as study code: the log exists (empty) before the run hashes the folder and has grown by the time it is resumed,
so ``--resume`` was refused ("run.log (edited)"). ``desim export . --out analysis`` made every later run a new
version. Logs never count now, an export's files are named in the ``.desim-export`` it writes beside them, and a
study's ``.desimignore`` (gitignore-like) lists anything else. The reference studies' versions are unchanged.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import desim
from desim.cli import main
from desim.versions import code_changes, code_files, population_files
from storeq import sql
from tiny_study import write_tiny_study
from waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent
MODEL = '''
import os

from desim import Action, DecisionModel, EnvironmentProvider, Observation, StopRun


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.moves = {a: 0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.moves[a.agent_id] += 1

    def agent_state(self, agent_id):
        return {"moves": self.moves[agent_id]}


class Decide(DecisionModel):
    """Stops the run in step VI_STOP_AT when the environment says so (a budget spent, say)."""

    def decide_batch(self, observations, memories):
        if str(observations[0].step) == os.environ.get("VI_STOP_AT"):
            raise StopRun("stopped for the test")
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]
'''
STEPS = 5


def study(tmp_path: Path) -> Path:
    return write_tiny_study(tmp_path / "movers", MODEL, {"n_steps": STEPS, "decision": {"ref": "model:Decide"}},
                            agents=3)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def runs(root: Path) -> list[tuple]:
    return sql(root, "SELECT run_id, version_id, status, last_step FROM runs ORDER BY started_at")


def write(root: Path, rel: str, text: str = "x\n") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_run_logged_into_the_study_folder_resumes(tmp_path):
    """The README's ``desim run ... > log`` inside the study, a nohup and a SLURM log beside it: the interrupted
    run resumes (before the fix: "the study's code changed since run ...: run.log (edited)", exit 2)."""
    root = study(tmp_path)
    write(root, "nohup.out", "nohup: ignoring input\n")
    write(root, "slurm-7.out", "job 7 started\n")
    log = root / "run.log"
    with log.open("w") as out:
        first = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root)], stdout=out,
                               stderr=subprocess.STDOUT, env={**_env(), "VI_STOP_AT": "3"}, timeout=HANG_S)
    assert first.returncode == 3, log.read_text()            # interrupted without a signal: exit 3
    [(run_id, version, status, last)] = runs(root)
    assert (status, last) == ("interrupted", 2) and log.stat().st_size > 0
    write(root, "slurm-7.out", "job 7 started\njob 7 ended\n")
    with log.open("a") as out:
        again = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--resume", run_id],
                               stdout=out, stderr=subprocess.STDOUT, env=_env(), timeout=HANG_S)
    assert again.returncode == 0, log.read_text()
    assert runs(root) == [(run_id, version, "completed", STEPS)]
    assert sql(root, "SELECT max(state.moves) FROM panel WHERE run_id = ?", [run_id]) == [(STEPS,)]
    assert json.loads(sql(root, "SELECT code FROM runs")[0][0]) == {"model.py": sha(root / "model.py")}


def _env() -> dict:
    import os
    return {k: v for k, v in os.environ.items() if k != "VI_STOP_AT"}


def test_exports_into_the_study_folder_make_no_new_version(tmp_path, capsys):
    """Before the fix each run after an export was a new version ('analysis/panel.parquet added', then
    'edited'); an export into the study folder itself hid nothing else either."""
    root = study(tmp_path)
    desim.run_study(desim.load_study(root))
    assert main(["export", str(root), "--out", str(root / "analysis")]) == 0
    parquet = [Path(p).name for p in capsys.readouterr().out.split()]
    desim.run_study(desim.load_study(root))
    assert main(["export", str(root), "--format", "csv", "--out", str(root / "analysis")]) == 0
    csv = [Path(p).name for p in capsys.readouterr().out.split()]
    assert main(["export", str(root), "--out", str(root)]) == 0
    in_root = [Path(p).name for p in capsys.readouterr().out.split()]
    desim.run_study(desim.load_study(root))
    assert "panel.parquet" in parquet and "panel.csv" in csv and "runs.json" in in_root
    assert len({version for _, version, _, _ in runs(root)}) == 1
    marker = json.loads((root / "analysis" / ".desim-export").read_text())
    assert sorted(marker["files"]) == sorted(csv)        # the folder holds one export: the CSV replaced the Parquet
    assert not list((root / "analysis").glob("*.parquet"))
    assert code_files(root) == {"model.py": sha(root / "model.py")}
    # a file of the user's own in the export's folder is not the export's: it counts
    write(root, "analysis/fit.R", "lm(y ~ x)\n")
    assert code_files(root) == {"model.py": sha(root / "model.py"), "analysis/fit.R": sha(root / "analysis/fit.R")}


def test_what_counts_logs_exports_and_desimignore(tmp_path):
    """Each file's fate worked out by hand from the rules the docs give."""
    root = tmp_path / "s"
    counted = ["model.py", "sugar.txt", "data/clean.csv", "sub/top.csv", "cd.dat", "special.log", "prompt.md",
               "analysis/fit.R", "population/roster.csv", "deep/er/keep.txt", "flows.out", "terrain.e00",
               "errors.err"]
    left_out = ["run.log", "nohup.out", "slurm-42.out", "slurm-42_3.out", "job.e123", "job.o123", "job.po912", "RUN.LOG",
                "notes.md", "figure.png", "analysis/panel.parquet", "scratch/tmp.csv", "data/raw/a.csv",
                "data/x/raw2/b.csv", "top.csv", "x.tmp", "sub/y.tmp", "ab.dat", "population/extra.csv",
                "deep/er/cache.bin", ".hidden/model2.py", "__pycache__/m.pyc"]
    for rel in counted + left_out:
        write(root, rel, f"{rel}\n")
    (root / "analysis" / ".desim-export").write_text(json.dumps({"files": ["panel.parquet"]}))
    (root / ".desimignore").write_text(
        "# scratch work\n\nscratch/\n*.tmp\n/top.csv\ndata/**/raw*\n[ab]?.dat\n!special.log\n!prompt.md\n"
        "population/\n**/er/*.bin\n")
    got = code_files(root, ["roster.csv"])
    assert got == {rel: sha(root / rel) for rel in counted}


def test_a_log_gone_is_no_change_but_a_data_file_gone_is():
    """A run recorded before logs were left out counted its own run.log: resuming it is no change."""
    assert code_changes({"model.py": "a", "run.log": "b", "logs/slurm-1.out": "c"}, {"model.py": "a"}) == []
    assert code_changes({"model.py": "a", "map.txt": "b"}, {"model.py": "a"}) == ["map.txt (removed)"]
    assert code_changes({"model.py": "a", "run.log": "b"}, {"model.py": "a", "run.log": "c"}) == ["run.log (edited)"]


def test_the_reference_studies_versions_are_unchanged():
    """Every reference study covers what it covered before: its model.py, and Sugarscape its sugar map, each
    hashed as the versions record them (the first 16 hex digits of the SHA-256 of the bytes)."""
    studies = ROOT / "studies"
    want_extra = {"sugarscape": ["sugar-map.txt"]}
    for folder in sorted(p for p in studies.iterdir() if (p / "study.json").exists()):
        spec = desim.load_study(folder)
        files = ["model.py", *want_extra.get(folder.name, [])]
        assert code_files(folder, population_files(spec.population)) == {f: sha(folder / f) for f in files}, folder
