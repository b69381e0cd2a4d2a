"""Branches and comparisons: ``desim branch`` and ``desim compare``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from desim.commands.core import (Progress, add_quiet_arg, add_study_arg, exit_status, kept, parse_sets, print_llm, resumable,
                                 print_table, replayed_and_decided)
from desim.errors import resume_hint, shell_arg


def cmd_branch(args) -> int:
    from desim.commands import UserError
    from desim.commands.core import desim_is_the_program
    from desim.experiments.branches import branch
    from desim.run.execute import hold_signals_to_exit
    if desim_is_the_program():
        hold_signals_to_exit()      # as desim run: a SIGTERM as the process exits after a completed branch is 0
    progress = Progress(0, f"branch of {args.from_run}", quiet=args.quiet)
    try:
        result = kept(branch, args.study, args.from_run, args.at_step, params=parse_sets(args.set), steps=args.steps,
                      note=args.note, on_step=progress)
    except ValueError as e:
        raise UserError(str(e)) from None
    finally:
        progress.finish()
    print(f"branch {result.run_id} of {args.from_run} at step {args.at_step}: {result.status}"
          + (f" ({result.error})" if result.error else ""))
    print(f"  {replayed_and_decided(args.at_step, result.steps_done)}; wall time {result.wall_seconds:.2f} s")
    if result.end_reason:
        print(f"  ended after step {result.steps_done}: {result.end_reason}")
    print_llm(result, args.study)
    if resumable(result):
        print(f"  resume with: {resume_hint(args.study, result.run_id)}")
    print(f"  compare: desim compare {shell_arg(args.study)} {shell_arg(args.from_run)} {shell_arg(result.run_id)}")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return exit_status(result)


def cmd_compare(args) -> int:
    from desim.commands import UserError
    from desim.commands.core import file_out
    from desim.experiments.comparisons import compare, held_notes
    if args.out:
        file_out(args.out)
    try:
        data = compare(args.study, args.control, args.treatment,
                       states=args.state.split(",") if args.state else None)
    except ValueError as e:
        raise UserError(str(e)) from None
    fork = f" (branch forked at step {data['fork_step']})" if data["fork_step"] else ""
    print(f"treatment {args.treatment} minus control {args.control}{fork}\n")
    for note in data["notes"] + held_notes(data["held"]):
        print(f"note: {note}")
    if data["held"] or data["notes"]:
        print()
    print_table(["metric", "step", "control", "treatment", "diff"],
                [(m["name"], m["step"], m["control"], m["treatment"], m["diff"]) for m in data["metrics"]],
                limit=10_000)
    if data["paired"]:
        living = any("dead_both" in p for p in data["paired"])      # runs whose agents die: desim.store.states
        extra = ["treatment_mean", "control_mean", "dead_treatment_only", "dead_control_only", "dead_both"] \
            if living else []
        print("\nper-agent paired differences (treatment - control)"
              + (" over the agents alive in both runs; each run's mean over its own living agents" if living else "")
              + "\n")
        print_table(["field", "step", "n", "mean_diff", "sd_diff", "min_diff", "max_diff"] + extra,
                    [(p["field"], p["step"], p["n"], p["mean_diff"], p["sd_diff"], p["min_diff"], p["max_diff"])
                     + tuple(p.get(k) for k in extra) for p in data["paired"]], limit=10_000)
    for name in dict.fromkeys(c["field"] for c in data["categorical"]):
        rows = [c for c in data["categorical"] if c["field"] == name]
        categories = sorted({k for c in rows for k in c["shares"]})
        print(f"\nper-agent paired '{name}' (categorical): share of agents whose value differs, and each "
              f"category's share of agents, treatment - control\n")
        print_table(["field", "step", "n", "differ"] + [f"{k} diff" for k in categories],
                    [(c["field"], c["step"], c["n"], c["differ"])
                     + tuple(c["shares"].get(k, {}).get("diff") for k in categories) for c in rows], limit=10_000)
    for s in data["skipped"]:
        print(f"\nstate field '{s['field']}' not compared: {s['reason']}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        from desim.commands.json_text import Nonfinite, json_ready
        nonfinite = Nonfinite()
        Path(args.out).write_text(json.dumps(json_ready(data, nonfinite), indent=1, allow_nan=False))
        if nonfinite.note():
            print(f"note: {args.out}: {nonfinite.note()}", file=sys.stderr)
        print(f"\ndata written to {args.out}")
    return 0


def cmd_diff(args) -> int:
    from desim.commands import UserError
    from desim.experiments.comparisons import version_changes
    from desim.versions import change_lines
    try:
        data = version_changes(args.study, args.newer, args.older)
    except ValueError as e:
        raise UserError(str(e)) from None
    print(f"version {data['newer']} since {data['older']} (each change as {data['older']}'s -> {data['newer']}'s)")
    config = [c for c in data["config"] if not c["path"].startswith("code.")]
    if not config and not data["files"]:
        print("  no change" + (" to the study's files" if data["parameters"] else ""))
    if data["parameters"]:
        print("the runs' parameter values (--set, a branch's --set):")
        for c in data["parameters"]:
            for line in change_lines(c):
                print(f"  {line}")
    for c in config:
        for line in change_lines(c):
            print(f"  {line}")
    for f in data["files"]:
        print(f"\n{f['path']} ({f['change']})" + ("" if f["diff"] is not None else f": {f['why']}"))
        if f["diff"]:
            sys.stdout.write(f["diff"])
    return 0


def register(sub) -> None:
    p = sub.add_parser("branch", help="run the study as a counterfactual branch of an earlier run")
    add_study_arg(p)
    p.add_argument("--from-run", required=True, metavar="RUN", help="the parent run (desim runs lists them)")
    p.add_argument("--at-step", required=True, type=int, metavar="T",
                   help="first step that is decided anew; steps before it are replayed")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="change a parameter that only interventions at steps >= T use (e.g. their at_step)")
    p.add_argument("--steps", type=int, help="run the branch to this step (default: the parent's n_steps)")
    p.add_argument("--note", default=None, help="a note stored with the branch (desim runs shows it)")
    add_quiet_arg(p)
    p.set_defaults(func=cmd_branch)

    p = sub.add_parser("compare", help="treatment minus control, per step and per agent")
    add_study_arg(p)
    p.add_argument("control", metavar="RUN_A", help="control run (e.g. the parent)")
    p.add_argument("treatment", metavar="RUN_B", help="treatment run (e.g. the branch)")
    p.add_argument("--state", help="comma-separated state fields to pair (default: display_states): numbers "
                                   "by their difference, categories by the share of agents that differ")
    p.add_argument("--out", help="write the comparison as JSON for plotting")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("diff", help="what changed in a version of the study since another (OTHER -> "
                                    "VERSION_OR_RUN): its files' settings and a diff of its code and data files")
    add_study_arg(p)
    p.add_argument("newer", metavar="VERSION_OR_RUN", help="a version id, or a run id for its run's version")
    p.add_argument("older", metavar="OTHER", nargs="?", default=None,
                   help="the version (or run) it is compared with, the old side of every change (default: its "
                        "parent version)")
    p.set_defaults(func=cmd_diff)
