"""Soak: runs and branches of one study back to back, SIGKILLed at random steps and resumed, against the
same runs undisturbed. Every table of every run must come out equal (issue 32, item 6).

    python benchmarks/soak_kill_resume.py                        # 20 jobs, 3,000 agents (a few minutes)
    python benchmarks/soak_kill_resume.py --jobs 2 --agents 500 --kill 1.0 --json PATH   # smoke (a test runs it)

The study is ``opinion_diffusion`` (12 weeks, a campaign at ``$campaign_week``), copied twice into a
temporary folder: the *soak* copy and the *reference* copy. Jobs are runs (each its own seed, the campaign
at week 12) and branches in turns, a branch of an earlier run at a random step with its campaign moved to
that step or up to two weeks later; each is run through the real
command line in both copies. In the soak copy the process is SIGKILLed, with probability ``--kill``,
once it says it has committed a random step (its progress line on stderr, not a delay), then
``desim run --resume`` continues it, and that resume may be killed again the same way, until the run is
completed. Then every table of the run (panel, initial states, metrics, events, messages, edges), rows
sorted and run ids left out, is hashed in both copies and compared.

Prints one line per job and a summary; exits 1 if any run differs or fails to complete.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonout

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("panel", "initial_states", "metrics", "events", "messages", "edges")
# a progress line per committed step on stderr: the signal the soak kills on
LINES = {**os.environ, "DESIM_PROGRESS": "lines", "DESIM_PROGRESS_EVERY": "0"}
STEP_LINE = re.compile(r": step (\d+)")


def desim(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "desim.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=LINES)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate()
    return proc.returncode, out, err


def run_id_of(out: str) -> str:
    """The run id a command printed (``run r...:`` or ``branch r... of``)."""
    for word in out.split():
        word = word.rstrip(":")
        if word.startswith("r") and len(word) == 11 and all(c in "0123456789abcdef" for c in word[1:]):
            return word
    raise RuntimeError(f"no run id in: {out[:300]}")


def new_run(study: Path, known: set[str]) -> tuple[str, str]:
    """The run a killed process left: the one run of the store not yet known, and its status (``running``;
    ``completed`` when the kill landed after the run had ended, a fast run's last live write being late)."""
    import desim
    new = [(r["run_id"], r["status"]) for r in desim.open(study).runs().to_pylist() if r["run_id"] not in known]
    if len(new) != 1:
        raise RuntimeError(f"expected one new run, found {new}")
    return new[0]


def status_of(study: Path, run_id: str) -> str:
    import desim
    return next(r["status"] for r in desim.open(study).runs().to_pylist() if r["run_id"] == run_id)


def killed_at(proc: subprocess.Popen, step: int) -> bool:
    """SIGKILL ``proc`` as soon as it says it has committed ``step`` (its progress line on stderr, written
    once the step is stored); False if it ended first."""
    for line in proc.stderr:
        m = STEP_LINE.search(line)
        if m and int(m.group(1)) >= step:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
    proc.wait()
    return False


def table_hash(study: Path, run_id: str) -> dict[str, str]:
    """Each table of the run: a hash of its rows (sorted, run_id left out)."""
    import desim
    data = desim.open(study)
    out = {}
    for name in TABLES:
        table = getattr(data, name)(run_id)
        cols = [c for c in table.column_names if c != "run_id"]
        rows = sorted(json.dumps([r[c] for c in cols], default=str) for r in table.select(cols).to_pylist())
        out[name] = hashlib.sha256(("\n".join(cols) + "\n" + "\n".join(rows)).encode()).hexdigest()[:16]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--agents", type=int, default=3000)
    ap.add_argument("--kill", type=float, default=0.7, help="probability that a process is killed")
    ap.add_argument("--seed", type=int, default=1, help="the soak's own draws (kill steps, branch points)")
    jsonout.add_option(ap)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="desim_soak_") as tmp:
        soak, ref = Path(tmp) / "soak" / "opinion_diffusion", Path(tmp) / "ref" / "opinion_diffusion"
        for dest in (soak, ref):
            shutil.copytree(ROOT / "studies" / "opinion_diffusion", dest, ignore=shutil.ignore_patterns("runs"))
        jobs, rows = [], []
        for j in range(args.jobs):
            if j % 2 == 0:                  # runs and branches in turns
                # the campaign late, so that a branch may move it (a branch changes only what is after its fork)
                job = {"kind": "run", "args": ["--seed", str(100 + j), "--set", f"n_agents={args.agents}",
                                               "--set", "campaign_week=12"]}
            else:
                parent = rnd.choice([x for x in jobs if x["kind"] == "run"])
                at = rnd.randint(2, 10)
                job = {"kind": "branch", "parent": parent, "at": at,
                       "args": ["--at-step", str(at), "--set", f"campaign_week={at + rnd.randint(0, 2)}"]}
            kills, resumes = 0, 0
            # the reference: undisturbed
            cmd = ["run", str(ref), *job["args"]] if job["kind"] == "run" else \
                ["branch", str(ref), "--from-run", job["parent"]["ref_id"], *job["args"]]
            code, out, err = finish(desim(*cmd))
            if code != 0:
                raise SystemExit(f"job {j}: the reference failed: {err[-500:]}")
            job["ref_id"] = run_id_of(out)
            # the soak: killed and resumed
            cmd = ["run", str(soak), *job["args"]] if job["kind"] == "run" else \
                ["branch", str(soak), "--from-run", job["parent"]["soak_id"], *job["args"]]
            known = {x["soak_id"] for x in jobs}
            proc = desim(*cmd)
            if rnd.random() < args.kill and killed_at(proc, rnd.randint(1, 11)):
                run_id, status = new_run(soak, known)
                kills += status != "completed"
                while status != "completed":
                    resumes += 1
                    proc = desim("run", str(soak), "--resume", run_id)
                    if rnd.random() < args.kill / 2 and killed_at(proc, rnd.randint(1, 11)):
                        status = status_of(soak, run_id)
                        kills += status != "completed"
                        continue
                    code, out, err = finish(proc)
                    if code != 0:
                        raise SystemExit(f"job {j}: the resume of {run_id} failed ({code}): {err[-500:]}")
                    status = "completed"
            else:
                code, out, err = finish(proc)
                if code != 0:
                    raise SystemExit(f"job {j}: failed ({code}): {err[-500:]}")
                run_id = run_id_of(out)
            job["soak_id"] = run_id
            jobs.append(job)
            a, b = table_hash(soak, run_id), table_hash(ref, job["ref_id"])
            differ = [t for t in TABLES if a[t] != b[t]]
            rows.append({"job": j, "kind": job["kind"], "kills": kills, "resumes": resumes, "equal": not differ,
                         "differ": differ})
            print(f"job {j:2d} {job['kind']:6s} killed {kills}x, resumed {resumes}x: "
                  f"{'every table equal' if not differ else 'DIFFERS in ' + ', '.join(differ)}", flush=True)
    bad = [r for r in rows if not r["equal"]]
    print(f"{len(rows)} jobs ({sum(r['kind'] == 'branch' for r in rows)} branches), "
          f"{sum(r['kills'] for r in rows)} kills, {sum(r['resumes'] for r in rows)} resumes, "
          f"{len(rows) - len(bad)} with every table equal to the undisturbed run, "
          f"{time.perf_counter() - started:.0f} s")
    jsonout.write(args.json, {"jobs": rows, "agents": args.agents, "kill": args.kill})
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
