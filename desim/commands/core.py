"""The everyday commands: new, validate, run, runs, sql."""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

from desim.commands.progress import Progress, add_quiet_arg  # noqa: E402 - the commands' progress, one way
from desim.errors import resume_hint, shell_arg     # every command printed for the user to paste: its words quoted

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"    # packaged with desim (the wheel)
DEFAULT_TEMPLATE = "starter"


def parse_sets(items: list[str] | None, option: str = "--set", hint: str = "") -> dict[str, str]:
    """``--set name=value`` pairs into a dict (values stay text until coerced). A parameter given twice is
    refused: keeping the last would silently run ``--set epsilon=0.2 --set epsilon=0.3`` with 0.3 alone."""
    from desim.commands import UserError
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"{option} expects name=value, got '{item}'")
        if name.strip() in out:
            raise UserError(f"{option} gives {name.strip()} more than once; give each parameter once{hint}")
        out[name.strip()] = value.strip()
    return out


def templates() -> dict[str, str]:
    """The packaged templates: name -> title (from its study.json)."""
    from desim.study.files import is_study_folder, read_study_file
    folders = sorted(TEMPLATES.iterdir()) if TEMPLATES.is_dir() else []
    return {folder.name: read_study_file(folder).title for folder in folders if is_study_folder(folder)}


def cmd_new(args) -> int:
    from desim.commands import UserError
    from desim.study.files import read_json
    from desim.versions import STUDY_FILE
    known = templates()
    if args.list:
        for name, title in known.items():
            print(f"{name:14} {title}" + ("  (default)" if name == DEFAULT_TEMPLATE else ""))
        return 0
    if not args.id:
        raise UserError("desim new needs a study id (or --list to see the templates)")
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", args.id):
        raise UserError(f"study id '{args.id}' may use only letters, digits, '_' and '-'")
    if args.template not in known:
        import difflib
        near = difflib.get_close_matches(args.template, list(known), n=1, cutoff=0.6)
        meant = f"did you mean '{near[0]}'? " if near else ""
        raise UserError(f"unknown template '{args.template}' ({meant}templates: {', '.join(known)})")
    # typed inside studies/ itself, the study goes beside the others, not into a new studies/studies/
    folder = Path(args.dir) if args.dir is not None else \
        Path(".") if Path.cwd().name == "studies" and not Path("studies").exists() else Path("studies")
    # --dir is a folder, or one desim makes (with its parents); a file on the way, or a place where no folder
    # can be made, is named here rather than as a NotADirectoryError from the copy
    on_the_way = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if on_the_way is not None and not on_the_way.is_dir():
        raise UserError(f"--dir {folder} is a file, not a folder" if on_the_way == folder
                        else f"--dir {folder}: {on_the_way} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--dir {folder}: no such folder, and it cannot be made ({e.strerror or e})") from None
    dest = folder / args.id
    if dest.exists():
        raise UserError(f"{dest} already exists")
    try:
        shutil.copytree(TEMPLATES / args.template, dest, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    except OSError as e:    # a full disk, a folder not writable: a half-made study would be "already exists" next
        shutil.rmtree(dest, ignore_errors=True)
        raise UserError(f"cannot create {dest}: {e.strerror or e}") from None
    study = read_json(dest / STUDY_FILE)      # the template's own text, its id changed: nothing else rewritten
    study["id"] = args.id
    (dest / STUDY_FILE).write_text(json.dumps(study, indent=2) + "\n", encoding="utf-8")
    print(f"created {dest} from template '{args.template}'")
    print(f"next: desim validate {shell_arg(dest)} && desim run {shell_arg(dest)}")
    return 0


def cmd_validate(args) -> int:
    from desim.lint import validate
    report = validate(args.study, probe=not args.no_probe)
    spec = report.spec
    if args.strict and report.warnings:     # refused: the warnings as errors, exit status 2
        for w in report.warnings:
            print(f"desim: error: {spec.root / w}", file=sys.stderr)
        return 2
    print(f"{spec.root}: valid study '{spec.id}'")
    print(f"  steps {spec.simulation.n_steps} x {spec.simulation.time_unit}, interaction_rounds {spec.rounds}, "
          f"seed {spec.simulation.seed}")
    if not args.no_probe:
        print(f"  population {report.n_agents} agents, network '{spec.population.interaction.kind}' with "
              f"{report.n_edges} edges, propagation '{spec.population.propagation}'")
        print(f"  probe: step 1 ran in memory, {report.messages_in_probe} messages posted")
    for w in report.warnings:
        print(f"warning: {w}")
    return 0


def desim_is_the_program() -> bool:
    """Whether this process is the ``desim`` command (its console script, or ``python -m desim.cli``), which
    ends when the command does, rather than a program that calls ``desim.cli.main`` and goes on (a test, a
    notebook), whose signal handlers must be given back as they were."""
    from desim import cli
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(main, "main", None) is cli.main or (spec is not None and spec.name == "desim.cli")


def replayed_and_decided(at_step: int, steps_done: int) -> str:
    """What a branch (or a warm start, a branch made by ``desim run``) took from its parent and made itself."""
    replayed = (f"steps 1..{at_step - 1} replayed from the parent" if at_step > 1
                else "no step replayed (a branch at step 1 runs from step 0)")
    decided = f"{at_step}..{steps_done} decided" if steps_done >= at_step else "none decided"
    return f"{replayed}, {decided}"


def cmd_run(args) -> int:
    from desim.run.execute import hold_signals_to_exit, stop_request
    from desim.store.connection import stop_waits_on
    if desim_is_the_program():
        hold_signals_to_exit()      # a SIGTERM as the process exits after a completed run: 0, not 143
    # a signal while the run waits for a held store to record its start ends the wait at once (RunNotStarted),
    # nothing recorded; the run and the store do not import each other, so the command joins them
    previous = stop_waits_on(stop_request)
    try:
        return _run_command(args)
    finally:
        stop_waits_on(previous)


def _run_command(args) -> int:
    from desim.commands import UserError
    from desim.experiments.branches import resume
    from desim.experiments.runs import run_study
    from desim.run.execute import RunNotStarted
    from desim.study.files import load_study
    early: list[str] = []
    if args.resume:
        if args.steps or args.seed is not None or args.rounds or args.set:
            raise UserError("--resume continues a run with its stored configuration; drop the overrides")
        progress = Progress(0, f"resume {args.resume}", quiet=args.quiet)
        try:
            result = kept(resume, args.study, args.resume, on_step=progress)
        except RunNotStarted as e:      # a signal while it waited for a held store: nothing recorded
            return not_started(e)
        finally:
            progress.finish()
        # the summary says the run as stored, not as the study's files are now (they may have changed since,
        # even to something that does not load: the resume is done, and says so)
        from desim.store import StudyData
        row = StudyData(args.study).run_rows([result.run_id])[0]
        n_steps, root, warm = row["n_steps"], args.study, None
        name = (f"branch {result.run_id} of {row['parent_run_id']} at step {row['fork_step']}"
                if row["kind"] == "branch" else f"run {result.run_id}")
    else:
        params = parse_sets(args.set)
        spec = load_study(args.study, steps=args.steps, seed=args.seed, rounds=args.rounds, params=params)
        if spec.simulation.interaction_rounds < 1:
            print(f"warning: interaction_rounds {spec.simulation.interaction_rounds} is clamped to 1",
                  file=sys.stderr)
        from desim.experiments.runs import outside_the_run
        early = outside_the_run(spec)               # the values of this run, --set and --steps included
        if params:                                  # a value set for a parameter nothing reads changes nothing
            from desim.study.params import unread_parameters
            unread = unread_parameters(spec)
            early += [f"--set {name}: {unread[name]}, so this value changes nothing" for name in params
                      if name in unread]
        for warning in early:                       # said before a run that may be long; run_study returns them too
            print(f"warning: {warning}", file=sys.stderr)
        progress = Progress(spec.simulation.n_steps, spec.id, quiet=args.quiet)
        try:
            result = kept(run_study, spec, on_step=progress)      # a warm start: a branch
        except RunNotStarted as e:
            return not_started(e)
        finally:
            progress.finish()                                   # a run that ended early leaves no open bar
        n_steps, root, warm = spec.simulation.n_steps, spec.root, spec.simulation.warm_start
        name = f"run {result.run_id}"
    db = result.store_path
    for warning in result.warnings:         # a warm start is a branch: its replay check speaks here too
        if warning not in early:
            print(f"warning: {warning}", file=sys.stderr)
    print(f"{name}: {result.status}" + (f" ({result.error})" if result.error else ""))
    if warm is not None:
        print(f"  a branch of {warm.from_run} at step {warm.at_step} (warm_start): "
              f"{replayed_and_decided(warm.at_step, result.steps_done)}")
    if result.end_reason:
        print(f"  ended after step {result.steps_done} of {n_steps}: {result.end_reason}")
    print(f"  steps {result.steps_done}, panel rows written {result.rows_written}, "
          f"messages {result.counters['messages']}, wall time {result.wall_seconds:.2f} s")
    if result.status == "completed" and not args.resume and warm is None:
        twin = _twin_before(root, result.run_id)
        if twin is not None:
            print(f"  same settings, seed and code as {twin}: a rule-based study gives the same panel, so this "
                  f"is no replicate (replicates: --seed N, or desim sweep {shell_arg(root)} --replicates N)")
    print_llm(result, root, resumed=bool(args.resume))
    if resumable(result):
        print(f"  resume with: {resume_hint(root, result.run_id)}")
    print(f"  store: {db}")
    from desim.store.queries import example_for_run
    print(f"  try:   desim sql {shell_arg(root)} {shell_arg(example_for_run(result.run_id))}")
    return exit_status(result)


def _twin_before(root, run_id: str) -> str | None:
    """An earlier run of the same settings, seed and code (``Catalogue.twin_before``), or None; a store that
    cannot be read now says nothing here (the run is recorded)."""
    from desim.errors import StoreError
    from desim.store import Catalogue, StudyLayout, open_store
    try:
        with open_store(StudyLayout(root)) as con:
            return Catalogue(con).twin_before(run_id)
    except StoreError:
        return None


def print_llm(result, study=None, resumed: bool = False) -> None:
    """The ``llm:`` line of a run's or a branch's summary: what this invocation asked, paid and fell back on;
    with ``study``, also what the run has paid over all its invocations (after a resume) and how many of its
    paid calls are in a step it has not closed yet (kept in its ledger until a resume records them)."""
    llm = result.counters.get("llm")
    if llm:
        print("  llm: " + ", ".join(f"{k} {v}" for k, v in llm.items()))
    if llm and study is not None:
        from desim.errors import StoreError
        from desim.store import StudyLayout
        layout = StudyLayout(study)
        try:
            spend = llm_spend_of(layout, [result.run_id])
        except StoreError as e:      # another process holds the store: the run is done, its status stands
            print(f"  llm: the run's total over its invocations cannot be read now ({e})")
            return
        if spend and resumed and spend["calls"]:
            print(f"  llm: the run paid for {spend_text(spend)} over all its invocations")
        if spend and spend["unrecorded"]:
            print(f"  llm: {kept_text(spend, layout.llm_unrecorded(result.run_id), 'the run')}")


def llm_spend_of(layout, run_ids: list[str]) -> dict[str, int] | None:
    """``queries.llm_spend`` of ``run_ids``: their ``llm_calls`` rows and the paid calls their ledgers keep."""
    from desim.store import open_store, queries
    from desim.store.ledger import unrecorded_calls
    unrecorded = unrecorded_calls(layout, run_ids)
    with open_store(layout) as con:
        return queries.llm_spend(con, run_ids, unrecorded)


def spend_text(spend: dict[str, int]) -> str:
    return (f"{spend['calls']:,} calls, tokens_in {spend['tokens_in']:,}, tokens_out {spend['tokens_out']:,}")


def kept_text(spend: dict[str, int], where, whose: str) -> str:
    """How many of the paid calls are in steps not closed yet, where they are kept, and what records them."""
    runs = spend.get("unrecorded_runs", 1)
    of_runs = f" ({runs} run{'' if runs == 1 else 's'})" if spend["runs"] > 1 else ""
    return (f"{spend['unrecorded']:,} of these calls{of_runs} are in steps not closed yet: kept in {where} "
            f"until {whose} is resumed (--resume), which writes them to llm_calls as outcome 'abandoned'")


def print_llm_spend(study, run_ids: list[str], whose: str) -> None:
    """The ``llm:`` line of a sweep's or an effect's summary, whose runs went through worker processes: what
    an LLM server was paid for by ``run_ids``, over all their invocations, the paid calls of steps not closed
    yet (kept in the runs' ledgers) included, and how many those are (nothing for a study without LLM)."""
    from desim.store import StudyLayout
    layout = StudyLayout(study)
    spend = llm_spend_of(layout, run_ids)
    if spend:
        print(f"  llm: {whose} {spend['runs']} run{'' if spend['runs'] == 1 else 's'} paid for {spend_text(spend)} "
              "(every invocation of each; cache hits and scripted replies are free)")
        if spend["unrecorded"]:
            who = whose.removesuffix("'s")          # "the sweep's" runs: until the sweep is resumed
            print(f"  llm: {kept_text(spend, f'{layout.llm_unrecorded_dir}/', who)}")


def resumable(result) -> bool:
    """Whether the summary gives a resume command: an interrupted run, unless it stopped at a round that
    needs more than its whole LLM budget (a resume would stop there again; the error says so)."""
    from desim.errors import NO_RESUME
    return result.status == "interrupted" and NO_RESUME not in (result.error or "")


def kept(run, *args, **kwargs):
    """``run(*args, **kwargs)`` (``run_study``, ``branch``, ``resume``), its result also when Ctrl-C stopped it:
    from Python that is a ``RunInterrupted`` to stop the caller's loop; here the summary says how to resume
    and the exit status is 130."""
    from desim.errors import RunInterrupted
    try:
        return run(*args, **kwargs)
    except RunInterrupted as e:
        return e.result


def not_started(e) -> int:
    """A run a signal stopped while it waited for the store to record its start (``RunNotStarted``): one line,
    and the signal's exit status (143 SIGTERM, 130 Ctrl-C), as for a run the signal interrupted."""
    print(f"desim: {e}", file=sys.stderr)
    return 128 + int(e.signum)


INTERRUPTED = 3
"""The exit status of a run that ended ``interrupted`` other than by a signal (a spent LLM budget,
``StopRun`` from study code); a signal gives 128 + its number, as shells do."""


def exit_status(result) -> int:
    """``desim run``'s exit status (README, "Exit status"): 0 completed (ended early by the study too),
    128 + the signal's number for a run a signal interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP),
    3 for a run interrupted otherwise; a failed run raised before this and exits 2.

    A signal that lands when the run has nothing left to do (during its last step, its end-of-run merge,
    or the summary printed after it) leaves it completed, ``stopped_by`` None: 0, not 143."""
    if result.status != "interrupted":
        return 0
    return 128 + int(result.stopped_by) if result.stopped_by else INTERRUPTED


def _diff_summary(diff: list[dict], limit: int = 4) -> str:
    """``model.py edited, environment.layers.level: 1.0 -> 2.0`` for a version's diff."""
    from desim.versions import change_lines
    parts = []
    for d in diff:
        if d["path"].startswith("code."):
            what = "added" if d["old"] is None else "removed" if d["new"] is None else "edited"
            parts.append(f"{d['path'][5:]} {what}")
        else:       # a line a change, short: an added event is named, not both lists printed
            parts += [line if len(line) <= 72 else line[:71] + "…" for line in change_lines(d)]
    more = f", +{len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def cmd_runs(args) -> int:
    from desim.commands import UserError
    from desim.store import Catalogue, StudyLayout, open_store
    from desim.store.health import folder_owner, health_of, last_step
    from desim.versions import describe_overrides, describe_sweep_values
    layout = StudyLayout(args.study)
    layout.check_paths()                # a store that is a symlink to nothing is not "no runs yet"
    if not layout.db.exists():
        if not layout.root.is_dir():    # a mistyped folder is an error (as for desim sql), not a study never run
            raise UserError(layout.missing_store())
        print(f"no runs yet ({layout.db} does not exist)")
        return 0
    with open_store(layout) as con:
        catalogue = Catalogue(con)
        runs = catalogue.runs(with_config=False)
        versions = catalogue.versions()
        swept = catalogue.sweep_grids({r["sweep_id"] for r in runs if r.get("sweep_id")})
        unfinished = catalogue.unfinished()
    by_id = {v["version_id"]: v for v in versions}
    for r in runs:
        r["last_step"] = last_step(layout, r["run_id"], r["last_step"], r["status"])
    ids = {r["run_id"] for r in runs}
    children: dict[str, list[dict]] = {}
    by_version: dict[str | None, list[dict]] = {}
    for r in runs:
        if r["kind"] == "branch" and r["parent_run_id"] in ids:
            children.setdefault(r["parent_run_id"], []).append(r)
        else:
            by_version.setdefault(r.get("version_id"), []).append(r)

    def show(r: dict, depth: int) -> None:
        fork = f" from step {r['fork_step']}" if r["fork_step"] else ""
        note = f"  \"{r['note']}\"" if r["note"] else ""
        status = health_of(layout, r)
        if status == "stale":
            status = f"stale (was running as pid {r.get('pid')} on {r.get('host')}; resume with: " \
                     f"{resume_hint(args.study, r['run_id'])})"
        over = describe_overrides(json.loads(r["overrides"]) if r.get("overrides") else None)
        values = describe_sweep_values(r, swept.get(r.get("sweep_id"), []))   # the study's own value too
        if values:
            over = (over + "  " if over else "") + values
        version = by_id.get(r.get("version_id"))
        if r["kind"] == "branch" and version and version["kind"] == "branch" and version.get("diff"):
            changed = _diff_summary(json.loads(version["diff"]), limit=3)   # what the branch's files changed
            over = (over + "  " if over else "") + (f"changes: {changed}" if changed else "")
        ended = f" (ended: {r['end_reason']})" if r.get("end_reason") and status == "completed" else ""
        print(f"{'  ' * depth}{'└ ' if depth > 1 else ''}{r['run_id']}  {r['kind']}{fork}  {status}  "
              f"steps {max(r['last_step'], 0)}/{r['n_steps']}{ended}  seed {r['seed']}  "
              f"{r['started_at']:%Y-%m-%d %H:%M:%S}  {round(r['wall_seconds'] or 0, 2)}s"
              f"{'  ' + over if over else ''}{note}")
        for c in children.get(r["run_id"], []):
            show(c, depth + 1)

    known = {v["version_id"] for v in versions}
    for v in versions:
        if v["kind"] == "branch" or v["version_id"] not in by_version:
            continue
        diff = json.loads(v["diff"]) if v["diff"] else []
        since = f"  from {v['parent_version_id']}: {_diff_summary(diff) or 'no change'}" \
            if v["parent_version_id"] else ""
        print(f"version {v['version_id']}  {v['kind']}  {v['created_at']:%Y-%m-%d %H:%M:%S}{since}")
        for r in by_version[v["version_id"]]:
            show(r, 1)
    orphans = [r for key, rs in by_version.items() if key not in known or
               next((v for v in versions if v["version_id"] == key), {}).get("kind") == "branch" for r in rs]
    if orphans:
        print("runs without a version of their own")
        for r in orphans:
            show(r, 1)
    for u in unfinished:        # stopped, failed or still going: a killed one has no run above to show it
        what = "runs" if u["kind"] == "sweep" else "pairs"
        folder = layout.sweep_dir(u["id"]) if u["kind"] == "sweep" else layout.effect_dir(u["id"])
        owner = folder_owner(folder)
        then = (f"running (pid {owner.get('pid')} on {owner.get('host')})" if owner else
                f"finish it: desim {u['kind']} {shell_arg(args.study)} --resume {shell_arg(u['id'])}")
        print(f"{u['kind']} {u['id']}  {u['created_at']:%Y-%m-%d %H:%M:%S}  {u['done']} of {u['planned']} {what} "
              f"completed; {then}")
    return 0


def print_table(columns: list[str], rows: list[tuple], limit: int = 200) -> None:
    def fmt(v) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows[:limit]]
    widths = [min(60, max([len(c)] + [len(r[i]) for r in cells])) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:                 # a cell cut to its column's width ends in '…', so it is not read as whole
        print("  ".join((v if len(v) <= w else v[:w - 1] + "…").ljust(w) for v, w in zip(r, widths)))
    if len(rows) > limit:
        print(f"... {len(rows) - limit} more rows")


def distinct_names(names: list[str]) -> tuple[list[str], list[str]]:
    """Column names made unique (``a``, ``a_2``, ...) and a note per renamed column: SQL allows two
    columns of one name (a self-join's ``c.value, t.value``), but JSON keys and a table's header do not,
    and a name kept twice silently loses a column."""
    taken = set(names)
    seen: dict[str, int] = {}
    out, notes = [], []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        if seen[name] == 1:
            out.append(name)
            continue
        n = seen[name]
        while f"{name}_{n}" in taken:
            n += 1
        taken.add(f"{name}_{n}")
        out.append(f"{name}_{n}")
        notes.append(f"column {len(out)} '{name}' repeats a name: shown as '{name}_{n}'")
    return out, notes


def folder_out(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a folder to write into, checked before any work: not an existing file, and under a
    folder (not a file) that can be written, so a mistyped ``--out`` is one line, not a traceback."""
    from desim.commands import UserError
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; {flag} expects a folder to write into")
    _writable_parent(path, flag, "a folder")
    return path


def file_out(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a file to write, checked before any work: not an existing folder, under a folder."""
    from desim.commands import UserError
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; {flag} expects a file name to write, e.g. {path / 'out.json'}")
    _writable_parent(path.parent, flag, "a file")
    return path


def _writable_parent(path: Path, flag: str, what: str) -> None:
    """The nearest existing folder of ``path`` must be a folder we may write in (the rest is created)."""
    from desim.commands import UserError
    import os
    base = path
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise UserError(f"{flag} {path}: {base} is a file, so nothing can be written under it; "
                        f"{flag} expects {what} path under a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: the folder {base} is not writable")


def cmd_sql(args) -> int:
    from desim.commands import UserError
    from desim.store import QueryError, StoreMissing, StudyLayout
    from desim.store.reader import user_query
    try:
        table = user_query(StudyLayout(args.study), args.query)    # None for a statement that returns no rows
    except StoreMissing as e:
        raise UserError(str(e)) from None
    except QueryError as e:
        raise UserError(f"query failed: {e}") from None
    if table is None:
        return 0
    names, notes = distinct_names(table.column_names)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    table = table.rename_columns(names)
    if args.csv:
        from desim.commands.csv_text import write_csv
        sys.stdout.flush()
        write_csv(table, sys.stdout.buffer)
    elif args.json:
        from desim.commands.json_text import write_json
        note = write_json(table, sys.stdout).note()
        if note:
            print(f"note: {note}", file=sys.stderr)
    else:
        print_table(table.column_names, [tuple(r.values()) for r in table.to_pylist()], args.limit)
    return 0


def port_number(text: str) -> int:
    """``--port``'s value: a TCP port, 0 to 65535. Checked when the arguments are read, with argparse's own
    message, since the socket refuses any other number with an ``OverflowError`` rather than an ``OSError``."""
    import argparse
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535; 0 picks a free one)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535; 0 picks a free one)")
    return port


def add_study_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help="the study folder, e.g. studies/opinion_diffusion")


def register(sub) -> None:
    p = sub.add_parser("new", help="create a study from a template (--list shows them)")
    p.add_argument("id", nargs="?", help="the new study's id, also its folder's name under --dir")
    p.add_argument("--template", default=DEFAULT_TEMPLATE,
                   help=f"the template to start from (default: {DEFAULT_TEMPLATE}; --list shows them)")
    p.add_argument("--list", action="store_true", help="list the templates and exit")
    p.add_argument("--dir", default=None, help="where studies live (default: studies, or here when here is a "
                                               "folder named studies)")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("validate", help="validate a study's files and run its first step in memory")
    add_study_arg(p)
    p.add_argument("--no-probe", action="store_true", help="only validate the files")
    p.add_argument("--strict", action="store_true", help="refuse warnings as errors (exit status 2)")
    p.add_argument("--traceback", action="store_true", help="print the traceback of study code that fails")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run a study and store its panel")
    add_study_arg(p)
    p.add_argument("--steps", type=int, help="override n_steps")
    p.add_argument("--seed", type=int, help="override the seed")
    p.add_argument("--rounds", type=int, help="override interaction_rounds")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="override a study parameter")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted or failed run from its last step")
    p.add_argument("--traceback", action="store_true",
                   help="print the traceback of study code that fails (also DESIM_TRACEBACK=1)")
    add_quiet_arg(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list a study's runs as a tree of versions and branches")
    add_study_arg(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("sql", help="run a read-only SQL query on the study's store")
    add_study_arg(p)
    p.add_argument("query", help="one SQL statement (DuckDB's dialect); latest_run() is the newest run made by hand")
    p.add_argument("--limit", type=int, default=200, help="rows to print at most (table output)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print every row as CSV")
    out.add_argument("--json", action="store_true", help="print every row as a JSON list of objects")
    p.set_defaults(func=cmd_sql)
