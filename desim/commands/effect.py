"""``desim effect``: an intervention's paired effect over replicate control runs, with 95 % intervals."""
from __future__ import annotations

from desim.commands.core import add_study_arg, print_llm_spend, print_table
from desim.commands.progress import Progress, RunsProgress, add_quiet_arg
from desim.errors import shell_arg


class PairsProgress(RunsProgress):
    """The pairs' runs as they finish (controls, then branches): the commands' progress over runs, with a
    line of its own for a run that did not complete; the warnings once the effect is recorded."""

    def __init__(self, label: str, study: str, warnings: list[str] | None = None, quiet: bool = False):
        self.label, self.study, self.warnings, self.quiet = label, study, warnings or [], quiet
        self.bar: Progress | None = None
        self.effect_id: str | None = None       # once the effect is recorded: what --resume takes

    def start(self, effect_id: str, n_controls: int, n_branches: int) -> None:
        import sys
        self.effect_id = effect_id
        for warning in self.warnings:       # printed as desim run prints them, --quiet or not
            print(f"warning: {warning}", file=sys.stderr)
        self.bar = Progress(n_controls + n_branches, self.label, unit="run", quiet=self.quiet)
        self.bar.note(f"effect {effect_id}: {n_controls} control runs and then {n_branches} branches to run "
                      f"(if interrupted: desim effect {shell_arg(self.study)} --resume {shell_arg(effect_id)})")
        self.offset = {"control": 0, "treatment": n_controls}

    def __call__(self, phase: str, outcome, done: int, total: int) -> None:
        self.run_done(outcome, self.offset.get(phase, 0) + done, f"{phase} {outcome.run_id} {outcome.status}")


def outside_the_run_of_effect(study: str, steps: int | None, control: dict, treatment: dict) -> list[str]:
    """The interventions after the last step in the controls and in the branches, each line saying whose.

    ``desim effect`` warns (as ``desim run`` does) where ``desim sweep`` refuses: a treatment that moves an
    intervention past the end takes it away, and "what if there were no campaign?" is a fair question for
    a paired effect, while a sweep's combinations would only differ in something that never happens."""
    from desim.errors import DesimError
    from desim.lint import outside_the_run
    from desim.study.files import load_study
    try:
        c = outside_the_run(load_study(study, steps=steps, params=control))
        t = outside_the_run(load_study(study, steps=steps, params={**control, **treatment}))
    except DesimError:
        return []               # run_effect refuses these settings, with its own words
    return ([f"{'control and treatment' if w in t else 'control'}: {w}" for w in c]
            + [f"treatment: {w}" for w in t if w not in c])


def names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def cmd_effect(args) -> int:
    from warnings import catch_warnings, simplefilter     # by name: `warnings` below is the study's list

    from desim.commands import UserError
    from desim.commands.sweep import interrupted, sets_once
    from desim.experiments.effects import EffectError, RunsFailedWarning, effect_table, held_pairs, run_effect
    from desim.experiments.sweep import SweepError
    treatment, control = sets_once(args.set), sets_once(args.control_set, "--control-set")
    if args.resume:
        given = [o for o, v in (("--at-step", args.at_step), ("--set", args.set), ("--control-set", args.control_set),
                                ("--replicates", args.replicates), ("--steps", args.steps), ("--seed", args.seed),
                                ("--note", args.note)) if v is not None]
        if given:
            raise UserError(f"--resume runs a recorded effect with its own settings; drop {', '.join(given)}")
    elif args.at_step is None:
        raise UserError("give the fork step with --at-step T (or --resume EFFECT_ID)")
    states, metrics = names(args.states), names(args.metrics)
    warnings = [] if args.resume else outside_the_run_of_effect(args.study, args.steps, control, treatment)
    progress = PairsProgress(args.study.rstrip("/").split("/")[-1], args.study, warnings, quiet=args.quiet)
    try:
        with catch_warnings():     # the failed runs are listed below, and the exit status is 2
            simplefilter("ignore", RunsFailedWarning)
            result = run_effect(args.study, args.at_step, treatment or None, resume=args.resume,
                                replicates=10 if args.replicates is None else args.replicates,
                                control=control or None, steps=args.steps, seed=args.seed, workers=args.workers,
                                backend=args.backend, address=args.address, note=args.note, metrics=metrics,
                                states=states, on_start=progress.start, on_run=progress, on_wait=progress.waiting)
        table = effect_table(args.study, result.effect_id, states)
    except (EffectError, SweepError) as e:
        raise UserError(str(e)) from None
    except KeyboardInterrupt:
        progress.finish()           # the message below starts on a line of its own
        return interrupted("effect", args.study, progress.effect_id)
    finally:
        progress.finish()
    at_step = result.at_step
    shown = metrics
    if shown is None:       # the study's display_metrics, as a sweep's table and an effect's report show them
        from desim.experiments.sweep.summary import default_metrics
        recorded = {m["name"] for m in table["metrics"]}
        shown = [m for m in default_metrics(args.study) if m in recorded] or None
    rows = [m for m in table["metrics"] if m["step"] >= at_step and (shown is None or m["name"] in shown)]
    from desim.report.numbers import clipped_note, decimals, row_cells, show

    def cells(r: dict) -> list[str]:
        """mean, low, high, sd to the digits the interval supports (effect_table keeps every digit), a clipped
        end marked."""
        mean, sd, low, high = row_cells(r)
        return [mean, low, high, sd]

    def note(shown: list[dict]) -> None:
        if clipped_note(shown):
            print(f"  {clipped_note(shown)}")

    print_table(["metric", "step", "mean diff", "95 % low", "95 % high", "sd", "n"],
                [(m["name"], m["step"], *cells(m), m["n"]) for m in rows], limit=10_000)
    note(rows)
    states_shown = [s for s in table["states"] if s["step"] >= at_step]
    if states_shown:
        print("\nper-agent paired differences (mean over agents of treatment - control, then over pairs)\n")
        print_table(["field", "step", "mean diff", "95 % low", "95 % high", "sd", "mean |diff|", "share changed",
                     "n"],
                    [(s["field"], s["step"], *cells(s), show(s["mean_abs"], decimals(s["sd"])),
                      show(s["share_changed"], 3), s["n"]) for s in states_shown],
                    limit=10_000)
        note(states_shown)
    living = [r for r in table.get("living", []) if r["step"] >= at_step]
    if living:
        print("\nmean over each arm's own living agents (alive = false left out): treatment mean - control mean, "
              "then over pairs\n")
        print_table(["field", "step", "mean diff", "95 % low", "95 % high", "sd", "treatment", "control", "n"],
                    [(r["field"], r["step"], *cells(r), show(r["treatment_mean"], decimals(r["sd"])),
                      show(r["control_mean"], decimals(r["sd"])), r["n"]) for r in living], limit=10_000)
        note(living)
    shares = sorted((c for c in table["categories"] if c["step"] >= at_step),
                    key=lambda c: (c["field"], c["category"], c["step"]))
    if shares:
        print("\nshare of agents in each category of a text or true/false state (treatment share - control "
              "share, then mean over pairs)\n")
        print_table(["field", "category", "step", "mean diff", "95 % low", "95 % high", "sd", "n"],
                    [(c["field"], c["category"], c["step"], *cells(c), c["n"]) for c in shares], limit=10_000)
        note(shares)
    for text in table.get("notes", []):
        print(f"  note: {text}")
    print("  (printed to the digits the 95 % interval supports; effect_table and the store keep every digit)")
    print(f"\neffect {result.effect_id}: {result.completed} of {len(result.pairs)} pairs completed ({result.reused} "
          f"control runs reused), fork at step {at_step}, wall time {result.wall_seconds:.1f} s")
    held = held_pairs(result.pairs)
    if held:
        print(f"  {len(held)} pair(s) held ({', '.join(p['control_run_id'] for p in held)}): the control's process "
              f"ended before step {at_step} (stop_when or end_run), so nothing is decided after it and the "
              "treatment is the control, a difference of 0")
    print("  (treatment - control per pair; mean and 95 % interval of the mean over pairs, Student t)")
    print_llm_spend(args.study, sorted({p[f"{arm}_run_id"] for p in result.pairs for arm in ("control", "treatment")}),
                    "the effect's")
    print(f"  figure: desim report {shell_arg(args.study)} --effect {shell_arg(result.effect_id)}")
    if result.completed < len(result.pairs):
        for run_id, error in sorted(result.errors.items()):
            print(f"  {run_id} failed: {error}")
        print(f"  rerun what did not complete: desim effect {shell_arg(args.study)} --resume {shell_arg(result.effect_id)}")
        return 2        # a failed run is an error (README, exit status)
    return 0


def register(sub) -> None:
    p = sub.add_parser("effect", help="an intervention's paired effect: R controls, each branched at T "
                                      "with the treatment, mean difference and 95 %% interval per step")
    add_study_arg(p)
    p.add_argument("--at-step", type=int, metavar="T", help="the fork step of every branch")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="the treatment: a parameter that only interventions at steps >= T use")
    p.add_argument("--control-set", action="append", metavar="NAME=VALUE",
                   help="a parameter of the control runs (default: the study's value)")
    p.add_argument("--replicates", type=int, help="control/treatment pairs (default 10)")
    p.add_argument("--workers", type=int, help="parallel runs (default: the CPUs of the machine or cluster)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="where the runs go: local worker processes (default) or Ray")
    p.add_argument("--address", help="a Ray cluster to join (ray backend)")
    p.add_argument("--steps", type=int, help="override n_steps")
    p.add_argument("--seed", type=int, help="override the study seed the controls' seeds derive from")
    p.add_argument("--metrics", help="comma-separated metrics to print (default: study.json display_metrics, "
                                     "else all)")
    p.add_argument("--states", help="comma-separated state fields to pair per agent (default: display_states)")
    p.add_argument("--note", default=None, help="a note stored with the effect")
    p.add_argument("--resume", metavar="EFFECT_ID",
                   help="run the controls and branches of a recorded effect that did not complete")
    add_quiet_arg(p)
    p.set_defaults(func=cmd_effect)
