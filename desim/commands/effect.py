"""``desim effect``: an intervention's paired effect over replicate control runs, with 95 % intervals."""
from __future__ import annotations

from desim.commands.core import add_study_arg, parse_sets, print_table
from desim.commands.progress import Progress, add_quiet_arg


class PairsProgress:
    """The pairs' runs as they finish (controls, then branches): the commands' progress over runs, with a
    line of its own for a run that did not complete."""

    def __init__(self, label: str, quiet: bool = False):
        self.label, self.quiet = label, quiet
        self.bar: Progress | None = None

    def start(self, effect_id: str, n_controls: int, replicates: int) -> None:
        self.bar = Progress(n_controls + replicates, self.label, unit="run", quiet=self.quiet)
        self.bar.note(f"effect {effect_id}: {replicates} pairs, {replicates - n_controls} control runs reused, "
                      f"{n_controls} to run, then {replicates} branches")
        self.offset = {"control": 0, "treatment": n_controls}

    def __call__(self, phase: str, outcome, done: int, total: int) -> None:
        if self.bar is None:
            return
        if outcome.status != "completed":
            self.bar.note(f"{phase} {outcome.run_id} {outcome.status}: {outcome.error}")
        self.bar(self.offset.get(phase, 0) + done)

    def waiting(self, message: str) -> None:
        if self.bar is not None:
            self.bar.note(message)


def cmd_effect(args) -> int:
    from desim.commands import UserError
    from desim.experiments.effects import EffectError, effect_table, run_effect
    from desim.experiments.sweep import SweepError
    progress = PairsProgress(args.study.rstrip("/").split("/")[-1], quiet=args.quiet)
    try:
        result = run_effect(args.study, args.at_step, parse_sets(args.set), replicates=args.replicates,
                            control=parse_sets(args.control_set), steps=args.steps, seed=args.seed,
                            workers=args.workers, backend=args.backend, address=args.address, note=args.note,
                            on_start=progress.start, on_run=progress, on_wait=progress.waiting)
        states = [s.strip() for s in args.states.split(",") if s.strip()] if args.states else None
        table = effect_table(args.study, result.effect_id, states)
    except (EffectError, SweepError) as e:
        raise UserError(str(e)) from None
    chosen = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    rows = [m for m in table["metrics"] if m["step"] >= args.at_step and (chosen is None or m["name"] in chosen)]
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
    if table["states"]:
        print("\nper-agent paired differences (mean over agents of treatment - control, then over pairs)\n")
        states = [s for s in table["states"] if s["step"] >= args.at_step]
        print_table(["field", "step", "mean diff", "95 % low", "95 % high", "sd", "mean |diff|", "share changed",
                     "n"],
                    [(s["field"], s["step"], *cells(s), show(s["mean_abs"], decimals(s["sd"])),
                      show(s["share_changed"], 3), s["n"]) for s in states],
                    limit=10_000)
        note(states)
    print("  (printed to the digits the 95 % interval supports; effect_table and the store keep every digit)")
    ok = len(result.pairs) - len([p for p in result.pairs if p["treatment_run_id"] in result.errors
                                  or p["control_run_id"] in result.errors])
    print(f"\neffect {result.effect_id}: {ok} of {len(result.pairs)} pairs completed ({result.reused} control "
          f"runs reused), fork at step {args.at_step}, wall time {result.wall_seconds:.1f} s")
    print("  (treatment - control per pair; mean and 95 % interval of the mean over pairs, Student t)")
    print(f"  figure: desim report {args.study} --effect {result.effect_id}")
    if result.errors:
        for run_id, error in sorted(result.errors.items()):
            print(f"  {run_id} failed: {error}")
        return 1
    return 0


def register(sub) -> None:
    p = sub.add_parser("effect", help="an intervention's paired effect: R controls, each branched at T "
                                      "with the treatment, mean difference and 95 %% interval per step")
    add_study_arg(p)
    p.add_argument("--at-step", required=True, type=int, metavar="T", help="the fork step of every branch")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="the treatment: a parameter that only interventions at steps >= T use")
    p.add_argument("--control-set", action="append", metavar="NAME=VALUE",
                   help="a parameter of the control runs (default: the study's value)")
    p.add_argument("--replicates", type=int, default=10, help="control/treatment pairs (default 10)")
    p.add_argument("--workers", type=int, help="parallel runs (default: the CPUs of the machine or cluster)")
    p.add_argument("--backend", choices=("local", "ray"), default="local")
    p.add_argument("--address", help="a Ray cluster to join (ray backend)")
    p.add_argument("--steps", type=int, help="override n_steps")
    p.add_argument("--seed", type=int, help="override the study seed the controls' seeds derive from")
    p.add_argument("--metrics", help="comma-separated metrics to print (default: all)")
    p.add_argument("--states", help="comma-separated state fields to pair per agent (default: display_states)")
    p.add_argument("--note", default=None)
    add_quiet_arg(p)
    p.set_defaults(func=cmd_effect)
