"""Shared set-up for the dashboard tests: a folder of real studies with real
runs, a broken study and a never-run study, and a real uvicorn server on an
ephemeral port."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import uvicorn

from desim.experiments.branches import branch
from desim.study.files import load_study
from desim.dashboard.app import create_app
from desim.experiments.runs import run_study
from storeq import store_path
from waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ROOT / "studies"
ARTIFACTS = ROOT / "test-artifacts"


def copy_study(studies_dir: Path, name: str, dest_name: str) -> Path:
    """A fresh copy of a reference study, without runs (the ``study_copy`` fixture's pattern)."""
    dest = studies_dir / dest_name
    shutil.copytree(STUDIES / name, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    study = json.loads((dest / "study.json").read_text())
    study["id"] = dest_name
    (dest / "study.json").write_text(json.dumps(study, indent=2))
    return dest


def make_studies(studies_dir: Path) -> dict[str, Path]:
    """``opinion_diffusion`` run twice (two seeds) plus a branch of the first, ``broken`` with a corrupt
    simulation.json, ``norun`` valid but never run, with a broadcast scheduled
    after its last step (a lint warning the dashboard must show)."""
    studies_dir.mkdir(parents=True, exist_ok=True)
    good = copy_study(studies_dir, "opinion_diffusion", "opinion_diffusion")
    # a dozen agents (ids a00..a11) keep the pages and payloads the tests read small
    sim_path = good / "simulation" / "simulation.json"
    sim = json.loads(sim_path.read_text())
    sim["parameters"]["n_agents"] = 12
    sim_path.write_text(json.dumps(sim, indent=2))
    first = run_study(load_study(good))
    run_study(load_study(good, seed=7))
    # a branch of the first run with a counter-campaign from step 6; the study files are then put
    # back, so only the branch's stored events know about it
    env_path = good / "environment" / "environment.json"
    original = env_path.read_text()
    env = json.loads(original)
    env["scheduled_events"].append({"at_step": 6, "name": "counter_campaign", "target": "campaign_position",
                                    "op": "set", "value": 0.1})
    env["broadcasts"].append({"at_step": 6, "name": "counter_tv", "channel": "tv", "ttl": 2,
                              "content": "Reject the proposal."})
    env_path.write_text(json.dumps(env))
    branch(good, first.run_id, 6, note="counter-campaign at week 6")
    env_path.write_text(original)
    broken = copy_study(studies_dir, "opinion_diffusion", "broken")
    (broken / "simulation" / "simulation.json").write_text('{"n_steps": 12, "seed": ')
    norun = copy_study(studies_dir, "opinion_diffusion", "norun")
    env_path = norun / "environment" / "environment.json"
    env = json.loads(env_path.read_text())
    env["broadcasts"].append({"at_step": 99, "name": "too_late", "content": "never seen"})
    env_path.write_text(json.dumps(env))
    return {"good": good, "broken": broken, "norun": norun}


ODD_IDS = ["ana maria", "b.o.b", "zoë", "team/7", "x%2e", "ünï çødé"]


def odd_ids_study(studies_dir: Path) -> Path:
    """``opinion_diffusion`` with personas whose ids have spaces, dots, a slash, percent signs and
    non-ASCII letters (all valid agent ids in the engine), run once."""
    study = copy_study(studies_dir, "opinion_diffusion", "odd_ids")
    pop_path = study / "population" / "population.json"
    pop = json.loads(pop_path.read_text())
    del pop["provider"]
    pop["personas"] = [{"agent_id": a, "attributes": {"opinion": round(0.1 + 0.15 * i, 3), "media_trust": 0.5}}
                       for i, a in enumerate(ODD_IDS)]
    pop["interaction"] = {"kind": "ring", "k": 2}
    pop_path.write_text(json.dumps(pop, ensure_ascii=False))
    run_study(load_study(study, steps=3))
    return study


def ba_study(studies_dir: Path, n_agents: int, steps: int = 4, name: str = "rumor_ba") -> Path:
    """``rumor_network`` on a Barabasi-Albert graph (m=2) of ``n_agents``, with its declared colours, run once."""
    study = copy_study(studies_dir, "rumor_network", name)
    pop_path = study / "population" / "population.json"
    pop = json.loads(pop_path.read_text())
    pop["interaction"] = {"kind": "barabasi_albert", "m": 2}
    pop_path.write_text(json.dumps(pop))
    run_study(load_study(study, steps=steps, params={"n_agents": str(n_agents)}))
    return study


def sir_study(studies_dir: Path, n_agents: int, steps: int = 25, name: str = "sir_ba") -> Path:
    """An SIR study of ``desim.diffusion`` on a Barabasi-Albert graph (m=2) with declared colours, run once:
    a state-based model that posts no messages and records who infected whom."""
    from diffusion_studies import write_study
    study = write_study(studies_dir / name, "SIR", {"beta": 0.15, "gamma": 0.2}, env={"seeds": 4}, n_steps=steps,
                        population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n_agents}},
                                    "interaction": {"kind": "barabasi_albert", "m": 2}})
    meta = json.loads((study / "study.json").read_text())
    meta.update(display_states=["state"], state_colors={"state": {"S": "#4c78a8", "I": "#d62728", "R": "#9e9e9e"}})
    (study / "study.json").write_text(json.dumps(meta))
    run_study(load_study(study))
    return study


HELD_MODEL = '''

class HeldEnvironment(OpinionEnvironment):
    """At the end of each step in HOLDS, when the file 'hold' is beside this module, writes 'held-<t>' and
    waits until 'release-<t>' appears: a test sees the run at a known step, however fast the machine."""

    def end_step(self, t):
        import time
        from pathlib import Path
        here = Path(__file__).parent
        if t in HOLDS and (here / "hold").exists():
            (here / f"held-{t}").touch()
            while not (here / f"release-{t}").exists():
                time.sleep(0.02)
'''


def held_study(studies_dir: Path, holds: tuple[int, ...], name: str = "live") -> Path:
    """``opinion_diffusion`` whose runs wait at the end of the steps ``holds`` once the file 'hold' is in the
    study folder (see ``HELD_MODEL``); run once before that, so the study has a store."""
    study = copy_study(studies_dir, "opinion_diffusion", name)
    with open(study / "model.py", "a") as model:
        model.write(f"\n\nHOLDS = {tuple(holds)!r}\n" + HELD_MODEL)
    env_path = study / "environment" / "environment.json"
    env = json.loads(env_path.read_text())
    env["provider"]["ref"] = "model:HeldEnvironment"
    env_path.write_text(json.dumps(env, indent=2))
    run_study(load_study(study, steps=2, params={"n_agents": 12}))
    (study / "hold").touch()
    return study


def wait_for_file(path: Path, proc: subprocess.Popen) -> None:
    """Wait until ``path`` exists; fail at once if ``proc`` ends first (its stderr says why)."""
    deadline = time.monotonic() + HANG_S
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the process ended ({proc.returncode}) before writing {path.name}: "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.02)


def sql(study: Path, query: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(store_path(study)), read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


@contextmanager
def server_thread(studies_dir: Path):
    """The dashboard app on a real uvicorn server in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(studies_dir), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + HANG_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(HANG_S)
        sock.close()


@contextmanager
def server_process(studies_dir: Path):
    """``desim dashboard <dir> --port 0`` as a subprocess; yields the URL it prints."""
    log = studies_dir.parent / "dashboard-stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "dashboard", str(studies_dir), "--port", "0"],
                                stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        if "http://" not in line:
            raise RuntimeError(f"desim dashboard did not start: {line}{log.read_text()}")
        yield line.split()[3].rstrip("/")
    finally:
        proc.terminate()
        proc.wait(HANG_S)


@contextmanager
def write_lock(study: Path):
    """Another process holding the study's store open for writing, as ``desim run`` does."""
    code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('locked', flush=True); "
            "sys.stdin.read(); con.close()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(store_path(study))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(HANG_S)


def write_live_file(study: Path, run_id: str, step: int, n_steps: int, metrics: dict[str, list[float]],
                    status: str = "running", phase: str | None = None) -> Path:
    """A progress file in the engine's format, written atomically like the engine does (``phase``: the
    run's ``"finishing"`` while it stores its data)."""
    folder = study / "runs" / "live"
    folder.mkdir(parents=True, exist_ok=True)
    data = {"run_id": run_id, "study_id": study.name, "kind": "run", "status": status, "step": step,
            "n_steps": n_steps, "metrics": metrics, "error": None,
            "updated_at": datetime.now(timezone.utc).isoformat()}
    if phase:
        data["phase"] = phase
    tmp = folder / f"{run_id}.json.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, folder / f"{run_id}.json")
    return folder / f"{run_id}.json"


def positioned_studies(studies_dir: Path, schelling_steps: int = 3, sugarscape_steps: int = 40) -> dict[str, Path]:
    """``schelling`` and ``sugarscape`` (agents with x and y; Sugarscape's die and keep their rows with
    ``alive: false``), each run once."""
    out = {}
    for name, steps in (("schelling", schelling_steps), ("sugarscape", sugarscape_steps)):
        out[name] = copy_study(studies_dir, name, name)
        run_study(load_study(out[name], steps=steps))
    return out


def many_events_study(studies_dir: Path, steps: int, every: int, name: str = "many_events") -> Path:
    """A long SIS run on a small ring with a campaign switched on and off every ``every`` steps (two named
    events, many firings) and a few broadcasts, as a study with hundreds of scheduled events has."""
    from diffusion_studies import write_study
    study = write_study(studies_dir / name, "SIS", {"beta": 0.1, "gamma": 0.1}, env={"seeds": 2}, n_steps=steps,
                        population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 6}},
                                    "interaction": {"kind": "ring", "k": 2}, "propagation": "network"})
    env_path = study / "environment" / "environment.json"
    env = json.loads(env_path.read_text())
    env["layers"] = {"campaign": 0.0}
    env["scheduled_events"] = [{"at_step": t, "name": "campaign_on" if i % 2 == 0 else "campaign_off",
                                "target": "campaign", "value": 1.0 if i % 2 == 0 else 0.0}
                               for i, t in enumerate(range(every, steps, every))]
    env["broadcasts"] = [{"at_step": t, "name": f"tv_{t}", "ttl": every, "content": "stay home"}
                         for t in range(steps // 10, steps, steps // 4)]
    env_path.write_text(json.dumps(env))
    run_study(load_study(study))
    return study


def watched_page(browser):
    """A fresh 1280x900 page of ``browser`` (a pytest fixture body: ``yield from watched_page(b)``); on
    teardown the test fails if the page raised a JavaScript error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(HANG_S * 1000)
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"
