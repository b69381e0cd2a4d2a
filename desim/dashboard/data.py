"""The dashboard's read side: what each page needs from a study's files and store, as plain data.

Each function opens the study's DuckDB store read-only for the duration of
one call (:func:`reading`) and closes it before returning: the dashboard
never holds a connection, because any open connection - even a read-only
one - stops a ``desim run`` process from opening the file for writing.

While a run holds the store for writing (a moment at its start and its end),
the store cannot be opened at all. :func:`reading` then raises
:class:`~desim.store.StoreBusyError` after a few short retries, and the
caller falls back to the runs' live progress files (``desim.store.live``).

Every read is a named query of ``desim.store``; values from a request reach
SQL only as bound parameters there.
"""
from __future__ import annotations

import json
import math
import os
import threading
from collections import OrderedDict
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from desim.jsontext import parsed
from desim.dashboard import grid
from desim.dashboard.safety import NotFound, name_problem
from desim.report.palette import category_colors, declared_colors
from desim.store import (
    Catalogue,
    StoreBroken,
    StoreBusyError,
    StoreMissing,
    StudyLayout,
    queries,
    states,
)
from desim.store.connection import reading_checked
from desim.store.files import RunFiles
from desim.store.health import health_of, last_step, run_health
from desim.store.ledger import unrecorded_calls
from desim.store.live import live_runs as _live_files
from desim.study.files import StudyConfigError, is_study_folder, load_study, study_file_or_none
from desim.study.params import described
from desim.versions import SKIP_DIRS, describe_overrides, describe_sweep_values

SAMPLE_ROWS = 20000        # initial states read for the attribute distributions
MESSAGES_PER_ROUND = 200   # messages listed per round (the count is always exact)


NoStore = StoreMissing          # the study has no database yet (never run): HTTP 404
BrokenStore = StoreBroken       # a file is there but cannot be read (not a DuckDB file, truncated): HTTP 422


# --- studies and the store ------------------------------------------------------

def study_dirs(studies_dir: Path) -> list[Path]:
    """Folders of ``studies_dir`` that contain a ``study.json``, by name, and those the server may not look
    into (:func:`_listed`)."""
    return sorted(p for p in studies_dir.iterdir() if _listed(p))


def _listed(folder: Path) -> bool:
    """Whether the study list shows ``folder``: it holds a ``study.json``, or it cannot be looked into (no
    permission: a colleague's private folder in a shared studies folder), when it may be a study and its card
    says why it cannot be read, rather than one such folder failing the whole list."""
    try:
        return folder.is_dir() and is_study_folder(folder)
    except OSError:
        return True


def find_study(studies_dir: Path, name: str) -> Path:
    """The study folder called ``name`` (a study id from a request): one of the folders ``studies_dir`` lists,
    matched by its name, so a request never makes a path of its own. :class:`NotFound` when there is none."""
    for folder in studies_dir.iterdir():
        if folder.name == name and _listed(folder):
            return folder
    raise NotFound(f"no study '{name}' in {studies_dir.name}/")


def unreadable(error: OSError, studies_dir: Path | None, done: str = "read") -> str:
    """An ``OSError`` (a folder or file the server may not read, or write when ``done`` is "written", a disk
    error) as the page says it: the file relative to the studies folder (its name alone when it is elsewhere:
    no absolute path leaves the server), why, and what to do."""
    path = Path(os.fsdecode(error.filename)) if error.filename else None
    if path is None:
        shown = "a file"
    elif studies_dir is not None and path.is_relative_to(studies_dir):
        shown = path.relative_to(studies_dir).as_posix()
    else:
        shown = path.name
    why = error.strerror or type(error).__name__
    if done == "written":
        return (f"{shown or '.'}: cannot be written ({why}); make it writable by the user running the dashboard "
                "(the study may be read-only: its pages still read, but nothing can be made in it)")
    return (f"{shown or '.'}: cannot be read ({why}); make it readable by the user running the dashboard, or move "
            "it out of the studies folder")


@contextmanager
def reading(root: Path):
    """A read-only connection held only for one batch of reads.

    Few, short retries: a dashboard request should answer "run in progress"
    within a fraction of a second rather than wait for a run to finish. A
    store that opens but cannot be read (truncated, damaged) raises
    :class:`BrokenStore`, naming the file relative to the studies folder.
    The files' footers are read once per request (every reader keeps them, see
    ``desim.store.connection``): a request makes several reads of the same run, and a
    long run's footer is large.

    A store file that is not a DuckDB database is :class:`BrokenStore` too, not :class:`NoStore`: the
    store is there and cannot be read (422), as a truncated one; "not found" (404) is for a study that has
    no store file.
    """
    layout = StudyLayout(root)
    with ExitStack() as stack:
        try:
            con = stack.enter_context(reading_checked(layout, relative_to=root.parent))
        except NoStore as e:
            if layout.db.is_dir():      # there, but a folder
                rel = layout.db.relative_to(root.parent).as_posix()
                raise BrokenStore(f"{rel}: is a folder, not a DuckDB database; move it aside") from None
            if layout.db.is_file():     # there, but not a DuckDB database
                raise BrokenStore(str(e)) from None
            raise
        except OSError as e:            # there, but the server may not read it (permissions, a disk error)
            raise BrokenStore(unreadable(e, root.parent)) from None
        yield con


def live_runs(root: Path) -> list[dict[str, Any]]:
    """The study's live progress files, oldest update first; one that says ``running`` but whose process is
    gone (killed: it could not say otherwise) says ``stale`` (``desim.store.health``), so no page shows a
    killed run as live."""
    runs = _live_files(StudyLayout(root).live)
    for r in runs:
        if r.get("status") == "running" and run_health(r, r) == "stale":
            r["status"] = "stale"
    return runs


def live_summary(run: dict[str, Any]) -> dict[str, Any]:
    """A live file without its metric series."""
    return {k: run.get(k) for k in ("run_id", "study_id", "kind", "status", "step", "n_steps", "error",
                                    "updated_at", "seed", "overrides_text", "phase")}


def running_summaries(root: Path) -> list[dict[str, Any]]:
    """The study's running runs (:func:`live_summary`), for the study list's polling; none for a study whose
    folder cannot be read (its card says why), so that one folder does not stop the others' progress."""
    try:
        runs = live_runs(root)
    except OSError:
        return []
    return [live_summary(r) for r in runs if r.get("status") == "running"]


def study_summary(root: Path) -> dict[str, Any]:
    """One entry of the study list: id, title, last run status, or the error that stops it. A folder or file
    the server may not read is the entry's ``error`` with ``status`` ``unreadable``, and a folder name a page
    cannot send back is an error too: either way the other studies are listed as usual."""
    problem = name_problem(root.name)
    if problem is not None:
        shown = os.fsencode(root.name).decode("utf-8", "replace")     # as JSON and a page can carry it
        return {"id": shown, "title": "", "status": None, "last_run": None,
                "error": f"{shown}: the folder name {problem}, which the dashboard cannot serve; rename the folder"}
    try:
        return _study_summary(root)
    except OSError as e:
        return {"id": root.name, "title": "", "status": "unreadable", "error": unreadable(e, root.parent),
                "last_run": None}


def _study_summary(root: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": root.name, "title": "", "status": None, "error": None, "last_run": None}
    is_study_folder(root)               # a folder the server may not look into raises here, as on its page
    study = study_file_or_none(root)
    entry["title"] = study.title if study is not None else ""
    try:
        load_study(root)
    except StudyConfigError as e:
        entry["error"] = str(e).replace(str(root.parent) + "/", "")
        return entry
    live = live_runs(root)
    if not live and not StudyLayout(root).db.exists():
        return entry                    # never run: a neutral card, not an error
    running = [r for r in live if r.get("status") == "running"]
    if running:
        entry["last_run"], entry["status"] = live_summary(running[-1]), "running"
        return entry
    try:
        with reading(root) as con:
            latest = Catalogue(con).latest_run(prefer_plain=True)    # the rule of latest_run() in SQL
        rows = [{k: latest[k] for k in ("run_id", "kind", "status", "last_step", "n_steps", "started_at")}] \
            if latest else []
    except StoreBusyError:
        entry["status"] = "running"
        entry["last_run"] = live_summary(live[-1]) if live else None
        return entry
    except (NoStore, BrokenStore) as e:
        entry["error"] = str(e)
        return entry
    if rows:
        rows[0]["status"] = health_of(StudyLayout(root), latest)      # a killed run is stale, not running
        entry["last_run"], entry["status"] = rows[0], rows[0]["status"]
    else:
        entry["status"] = "no runs"
    return entry


# --- the study page ---------------------------------------------------------------

_configs: dict[str, tuple[tuple, dict[str, Any]]] = {}
_configs_lock = threading.Lock()


def study_config(root: Path) -> dict[str, Any]:
    """What the study files say: title, population, interventions, and the lint warnings
    ``desim validate --no-probe`` prints (``desim.lint``). Kept per study until one of its files changes
    (their sizes and times), since a page polls the study while a run goes and the lint is not cheap."""
    stamp = _files_stamp(root)
    with _configs_lock:
        kept = _configs.get(str(root))
    if kept is not None and kept[0] == stamp:
        return dict(kept[1])
    config = _study_config(root)
    with _configs_lock:
        _configs[str(root)] = (stamp, config)
    return dict(config)


def _files_stamp(root: Path) -> tuple:
    """The study's own files (not its outputs under ``runs/``, caches or hidden folders such as a venv, which no
    run reads and whose thousands of files every request would stat), each with its size and change time (None
    for one that cannot be looked at, such as a link to a missing file: the study's checks say what it means)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
                out.append((os.path.relpath(path, root), st.st_size, st.st_mtime_ns))
            except OSError:
                out.append((os.path.relpath(path, root), None, None))
    return tuple(out)


def _study_config(root: Path) -> dict[str, Any]:
    from desim.lint import validate
    report = validate(root, probe=False)
    spec = report.spec
    pop, env, sim = spec.population, spec.environment, spec.simulation
    personas = None
    if pop.personas is not None:
        personas = [p.attributes for p in pop.personas]
    return {
        "study": {**spec.study.model_dump(mode="json"),      # its $parameters as the study's own values
                  "description": described(spec.study.description, sim.parameters)},
        "simulation": {"n_steps": sim.n_steps, "time_unit": sim.time_unit, "interaction_rounds": sim.interaction_rounds,
                       "seed": sim.seed, "parameters": sim.parameters, "decision": sim.decision.ref},
        "population": {"interaction": pop.interaction.kind, "propagation": pop.propagation,
                       "source": "personas" if pop.personas is not None else "roster" if pop.roster else "provider",
                       "size": len(personas) if personas is not None else None},
        "interventions": {
            "scheduled_events": [e.model_dump(mode="json") for e in env.scheduled_events],
            "broadcasts": [b.model_dump(mode="json") for b in env.broadcasts]},
        "warnings": list(report.warnings),
        "_personas": personas,
    }


def distributions(states: list[dict[str, Any]], bins: int = 12) -> list[dict[str, Any]]:
    """Per attribute: a histogram (numbers) or the most frequent values (anything else), and ``missing``:
    how many of ``states`` have no value for it (null, as a roster's empty cell is stored, or no such key),
    which the histogram leaves out and the card says beside it."""
    keys: list[str] = []
    for s in states:
        for k in s:
            if k not in keys:
                keys.append(k)
    out = []
    for key in keys[:12]:
        values = [s.get(key) for s in states if s.get(key) is not None]
        missing = len(states) - len(values)
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v)]
        whole = len(numbers) == len(values) and all(v == int(v) for v in numbers)
        if not values:
            out.append({"name": key, "kind": "empty", "n": 0, "missing": missing})
        elif whole and len(set(numbers)) <= bins:
            # a few whole numbers (a type 0/1, a group 1..5): one bar per value, in value order, not a
            # histogram of mostly empty bins
            freq = {}
            for v in sorted(numbers):
                freq[int(v)] = freq.get(int(v), 0) + 1
            out.append({"name": key, "kind": "categorical", "n": len(values), "missing": missing,
                        "values": [{"value": str(k), "count": c} for k, c in freq.items()], "distinct": len(freq)})
        elif len(numbers) == len(values):
            lo, hi = min(numbers), max(numbers)
            if whole:       # bins of whole numbers, as many in each: equal bins of 0..49 held 4 or 5 values
                width = float(math.ceil((hi - lo + 1) / bins))
                n_bins = int(math.ceil((hi - lo + 1) / width))
            else:
                width, n_bins = (hi - lo) / bins or 1.0, bins
            counts = [0] * n_bins
            for v in numbers:
                counts[min(n_bins - 1, int((v - lo) / width))] += 1
            out.append({"name": key, "kind": "numeric", "n": len(numbers), "missing": missing, "min": lo, "max": hi,
                        "mean": sum(numbers) / len(numbers), "counts": counts})
        else:
            freq: dict[str, int] = {}
            for v in values:
                label = json.dumps(v) if not isinstance(v, str) else v
                freq[label] = freq.get(label, 0) + 1
            top = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
            out.append({"name": key, "kind": "categorical", "n": len(values), "missing": missing,
                        "values": [{"value": k, "count": c} for k, c in top], "distinct": len(freq)})
    return out


def _json(value: Any) -> Any:
    return parsed(value)


def study_store(root: Path) -> dict[str, Any]:
    """What the store says: runs (with the versions tree), population figures, fired events."""
    layout = StudyLayout(root)
    with reading(root) as con:
        catalogue = Catalogue(con)
        runs = catalogue.runs(with_config=False)
        resolved = catalogue.run_interventions([r["run_id"] for r in runs])
        versions = catalogue.versions()
        metric_names = queries.metric_names(con)
        effects = catalogue.effects()
        swept = catalogue.sweep_grids({r["sweep_id"] for r in runs if r.get("sweep_id")})
        llm = queries.llm_by_run(con, unrecorded_calls(layout))    # the paid calls of steps not closed too
        # the run the population card and the fired events are of: the newest completed run made by hand, as
        # `desim report` takes it (latest_run()'s rule, of completed runs), else latest_run()'s run itself
        latest = (catalogue.latest_run(status="completed", prefer_plain=True)
                  or catalogue.latest_run(prefer_plain=True))
        population: dict[str, Any] = {}
        events: list[dict[str, Any]] = []
        if latest:
            rid = latest["run_id"]
            population["size"] = queries.population_size(con, rid)
            sample = [_json(s) for s in queries.initial_state_sample(con, rid, SAMPLE_ROWS)]
            population["distributions"] = distributions([s for s in sample if isinstance(s, dict)])
            population["sampled"] = len(sample)
            population["run_id"] = rid
            population["n_edges"] = queries.edge_count(con, rid)
            population["positioned"] = grid.positioned(con, rid)   # drawn on its grid (x, y), not as a network
            events = queries.events(con, rid, limit=1000)
    for r in runs:
        r["parameters"] = _json(r.get("parameters"))
        r["overrides"] = _json(r.get("overrides")) or {}
        r["overrides_text"] = describe_overrides(r["overrides"], seed=False)   # the seed is shown on its own
        r["sweep_values"] = describe_sweep_values(r, swept.get(r.get("sweep_id"), []), named=False)  # its own too
        # a derived seed has 19 digits, past what a JavaScript number holds exactly: sent as text
        r["seed"] = None if r.get("seed") is None else str(r["seed"])
        r["interventions"] = resolved.get(r["run_id"])     # as the run resolved them: the charts' markers
        r["llm"] = llm.get(r["run_id"])     # what it paid an LLM server, and how many decisions fell back
        r["health"] = health_of(layout, r)      # "stale": its process is gone (desim.store.health)
        # a run holds the database only at its start and end, so a readable store says nothing about
        # who is writing: a "running" run is stalled when its process is gone
        r["stalled"] = r["status"] == "running" and r["health"] == "stale"
        r["last_step"] = last_step(layout, r["run_id"], r["last_step"], r["status"])  # a running one
    for v in versions:
        v["diff"] = _json(v.get("diff"))
    for e in events:
        e["detail"] = _json(e.get("detail"))
    return {"runs": runs, "versions": versions, "metric_names": metric_names, "effects": effects,
            "population": population, "events": events, "events_run": latest["run_id"] if latest else None}


def run_events(root: Path, run_id: str) -> list[dict[str, Any]]:
    with reading(root) as con:
        _require_run(con, run_id)           # an unknown run is a 404, not a run with no events
        rows = queries.events(con, run_id, limit=1000)
    for e in rows:
        e["detail"] = _json(e.get("detail"))
    return rows


def _require_run(con, run_id: str) -> dict[str, Any]:
    row = Catalogue(con).run(run_id)
    if row is None:
        raise NotFound(f"no run '{run_id}' in this study")
    return {k: row.get(k) for k in ("run_id", "status", "n_steps", "last_step", "time_unit")}


# --- metrics, panel, agents, messages --------------------------------------------------

def metrics(root: Path, run_ids: list[str]) -> dict[str, dict[str, list[list[float]]]]:
    """``{run_id: {metric: [[step, value], ...]}}`` for the given runs, steps in order."""
    return metrics_and_events(root, run_ids, events=False)[0]


def metrics_and_events(root: Path, run_ids: list[str], *, events: bool = True) \
        -> tuple[dict[str, dict[str, list[list[float]]]], dict[str, list[dict[str, Any]]]]:
    """:func:`metrics` and each run's fired events (:func:`run_events`) in one opening of the store: opening
    one costs most of a request when it holds long runs (every file's footer is read to bind the views)."""
    fired: dict[str, list[dict[str, Any]]] = {}
    with reading(root) as con:
        known = {r["run_id"] for r in Catalogue(con).runs(with_config=False, run_ids=run_ids)}
        unknown = [r for r in run_ids if r not in known]
        if unknown:                         # a 404 naming them, not runs with no metrics
            raise NotFound(f"no run {', '.join(repr(r) for r in unknown)} in this study")
        rows = queries.metric_rows(con, run_ids)
        if events:
            fired = {rid: queries.events(con, rid, limit=1000) for rid in run_ids}
    out: dict[str, dict[str, list[list[float]]]] = {r: {} for r in run_ids}
    for run_id, name, step, value in rows:
        out[run_id].setdefault(name, []).append([step, value])
    for rows_ in fired.values():
        for e in rows_:
            e["detail"] = _json(e.get("detail"))
    return out, fired


def live_metrics(run: dict[str, Any]) -> dict[str, list[list[float]]]:
    """A live file's series in the same shape as :func:`metrics` (steps with no value skipped)."""
    out = {}
    for name, series in (run.get("metrics") or {}).items():
        if isinstance(series, list):
            out[name] = [[i, v] for i, v in enumerate(series) if isinstance(v, (int, float))]
    return out


def panel_page(root: Path, run_id: str, *, step: int | None, agent_id: str | None, action_kind: str | None,
               page: int, page_size: int) -> dict[str, Any]:
    """One page of a run's panel, filtered by step, agent and action kind."""
    with reading(root) as con:
        run = _require_run(con, run_id)
        total, rows, kinds = queries.panel_page(con, run_id, step=step, agent_id=agent_id, action_kind=action_kind,
                                                page=page, page_size=page_size)
        by_kind = payload_fields(con, root, run)
    for r in rows:
        r["state"], r["action_payload"] = _json(r["state"]), _json(r["action_payload"])
    return {"run": run, "total": total, "page": page, "page_size": page_size, "rows": rows,
            "action_kinds": kinds, "payload_fields": by_kind}


_PAYLOAD_FIELDS: OrderedDict = OrderedDict()     # (store file, run) -> fields per kind, of finished runs


def payload_fields(con, root: Path, run: dict[str, Any]) -> dict[str, list[str]]:
    """Which payload fields each action kind fills in the run (the panel's payload is their union):
    one scan of the run's panel, kept for a finished run, whose panel does not change."""
    layout = StudyLayout(root)
    key = (str(layout.db), run["run_id"])
    if key in _PAYLOAD_FIELDS:
        return _PAYLOAD_FIELDS[key]
    names = list(((RunFiles(layout.data, run["run_id"]).load_types() or {}).get("payload") or {}))
    out = queries.payload_fields_by_kind(con, run["run_id"], names)
    if run["status"] != "running":
        _PAYLOAD_FIELDS[key] = out
        while len(_PAYLOAD_FIELDS) > 256:
            _PAYLOAD_FIELDS.popitem(last=False)
    return out


def agent_trajectory(root: Path, run_id: str, agent_id: str) -> dict[str, Any]:
    """One agent in one run: its initial state, its state and action per step, its messages."""
    with reading(root) as con:
        run = _require_run(con, run_id)
        initial, steps, messages = queries.agent_history(con, run_id, agent_id)
    if initial is None and not steps:
        raise NotFound(f"no agent '{agent_id}' in run '{run_id}'")
    for r in steps:
        r["state"], r["action_payload"] = _json(r["state"]), _json(r["action_payload"])
    for m in messages:
        m["content"] = _json(m["content"])
    return {"run": run, "agent_id": agent_id, "initial": _json(initial[0]) if initial else None,
            "steps": steps, "messages": messages}


def step_messages(root: Path, run_id: str, step: int) -> dict[str, Any]:
    """The messages posted in one step, grouped by round, with exact counts per round."""
    with reading(root) as con:
        run = _require_run(con, run_id)
        counts, rows = queries.step_messages(con, run_id, step, MESSAGES_PER_ROUND)
    rounds: dict[int, dict[str, Any]] = {r: {"round": r, "count": c, "messages": []} for r, c in counts.items()}
    for m in rows:
        m["content"] = _json(m["content"])
        rounds[m.pop("round")]["messages"].append(m)
    return {"run": run, "step": step, "rounds": [rounds[r] for r in sorted(rounds)]}


# --- state fields ---------------------------------------------------------------------

def field_summary(con, run_id: str, state_key: str) -> dict[str, Any]:
    """Per step: counts per category (booleans, text, integers of few values) or quantiles, mean and the
    number of values (other numbers), read by the store's rules (``desim.store.states``: how a field is
    drawn, and dead agents left out of every field but ``alive``, ``left_out`` per step)."""
    kind = states.display_kind(con, run_id, state_key)
    if kind is None:
        return {"kind": "numeric", "steps": [], "quantiles": [], "mean": [], "n": [], "left_out": []}
    if kind == "numeric":
        return {"kind": kind, **states.quantile_bands(con, run_id, state_key)}
    return {"kind": kind, **states.category_counts(con, run_id, state_key)}


def state_series(root: Path, run_id: str, state_key: str) -> dict[str, Any]:
    """A display state over time for the study page's charts, with the study's colours, and whose rows it
    leaves out (``excluded``: the field that marks them and how many at most, or None)."""
    with reading(root) as con:
        run = _require_run(con, run_id)
        out = field_summary(con, run_id, state_key)
    if not out["steps"]:
        raise NotFound(f"run '{run_id}' has no state field '{state_key}'")
    if out["kind"] != "numeric":
        from desim.report.figures import ordered_categories
        declared = declared_colors(study_file_or_none(root), state_key)
        out["categories"] = ordered_categories(out["categories"], declared)   # the study's order, as in every legend
        out["colors"] = category_colors(out["categories"], declared)
    most = max(out["left_out"], default=0)
    out["excluded"] = {"field": states.ALIVE, "most": most, "last": out["left_out"][-1]} if most else None
    return {"run": run, "state": state_key, **out}


# --- the network views ------------------------------------------------------------------------

NETWORK_VIEWS = ("network", "communities", "adoption", "tree")
_pictures: "OrderedDict[tuple, dict[str, Any]]" = OrderedDict()
_pictures_lock = threading.Lock()
_drawing: dict[tuple, threading.Lock] = {}     # a picture being drawn -> the lock its other requests wait on
PICTURES_KEPT = 6          # answers kept in memory (a 100,000-agent picture is a few MB)


def network(root: Path, run_id: str, state_key: str, view: str | None = None) -> dict[str, Any]:
    """One view of a run's network pictures (``desim.report.network_picture.picture``), as the page draws it.

    ``view``: ``network``, ``communities``, ``adoption`` or ``tree``; default the one that reads at
    the run's size (every agent below 20,000 agents, the community view from 20,000). The layout and the
    communities are the network's stored ones (``runs/layouts/``), computed and stored on first need.
    The answer carries ``meta`` (counts over **all** agents, the categories in the study's declared
    order with its colours, the views available), the view's data, and when it draws agents the
    ``node`` block (ids, sizes, frames, who posted); ``captions`` and ``size_keys`` are the report's.
    """
    with reading(root) as con:
        run = _require_run(con, run_id)
    key = (str(root.resolve()), run_id, state_key, view)
    if run["status"] != "completed":
        return _network_answer(root, run, run_id, state_key, view)
    with _pictures_lock:
        once = _drawing.setdefault(key, threading.Lock())
    # one drawing per picture: requests for it that arrive while it is drawn wait for it, not draw it again
    with once:
        with _pictures_lock:
            if key in _pictures:
                _pictures.move_to_end(key)
                return _pictures[key]
        out = _network_answer(root, run, run_id, state_key, view)
        with _pictures_lock:
            _pictures[key] = out
            while len(_pictures) > PICTURES_KEPT:
                _pictures.popitem(last=False)
            _drawing.pop(key, None)
        return out


def _network_answer(root: Path, run: dict, run_id: str, state_key: str, view: str | None) -> dict[str, Any]:
    from desim.report.data import ReportError
    from desim.report.diffusion import VIEW_NAMES, captions, size_key
    from desim.report.network_picture import picture
    try:
        pic = picture(root, state_key, run_id, views=[view or "suggested"], max_nodes=DASHBOARD_MAX_NODES)
        view = view or pic["meta"]["suggested"]
    except ReportError as e:
        raise NotFound(str(e)) from None
    if view not in pic:
        raise NotFound(f"no '{view}' view for run '{run_id}' (views: {', '.join(pic['meta']['available'])})")
    return {**pic, "run": run, "state": state_key, "view": view, "captions": captions(pic),
            "size_keys": {v: size_key(pic["meta"], v) for v in VIEW_NAMES}}


DASHBOARD_MAX_NODES = 200_000   # every agent can be drawn (a 2-D canvas draws 100,000 in about 2 s)
