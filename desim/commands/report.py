"""``desim report``, ``desim viz diffusion`` and ``desim viz grid``: figures of what happened in a run or a sweep."""
from __future__ import annotations

from pathlib import Path

from desim.commands import UserError
from desim.commands.core import folder_out
from desim.commands.progress import add_quiet_arg


def cmd_report(args) -> int:
    from desim.report import ReportError, write_report, write_sweep_report
    if args.sweep and (args.run or args.compare):
        raise UserError("--sweep reports a whole sweep; it cannot be combined with --run or --compare")
    if args.effect and (args.run or args.compare or args.sweep):
        raise UserError("--effect reports a paired effect; it cannot be combined with --run, --compare or --sweep")
    if args.metrics and not (args.sweep or args.effect):
        raise UserError("--metrics chooses the metrics of a sweep or effect report; give --sweep or --effect too")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    if args.out:
        folder_out(args.out)
    try:
        if args.effect:
            from desim.report.effect import write_effect_report
            paths = write_effect_report(args.study, args.effect, metrics=metrics, out_dir=args.out)
        elif args.sweep:
            paths = write_sweep_report(args.study, args.sweep, metrics=metrics, out_dir=args.out)
        else:
            paths = write_report(args.study, run_id=args.run, compare=args.compare, out_dir=args.out)
    except ReportError as e:
        raise UserError(str(e)) from None
    print(f"report: {paths['html']}")
    print(f"markdown: {paths['markdown']} (figures beside it)")
    return 0


def cmd_viz_diffusion(args) -> int:
    from desim.commands.progress import chosen_mode
    import sys
    import time

    from desim.report import ReportError
    from desim.report.diffusion import layout_words
    from desim.report.network_picture import diffusion_player
    started = time.perf_counter()
    last = {"fraction": -1.0, "stage": ""}

    quiet = chosen_mode(args.quiet) == "off"

    def progress(fraction: float, message: str) -> None:
        """A line when a stage begins (its first word changes), and per tenth of a long one (the layout)."""
        if quiet:
            return
        stage = message.split(" ")[0]
        if stage != last["stage"] or fraction - last["fraction"] >= 0.1:
            last.update(stage=stage, fraction=fraction)
            print(f"  [{time.perf_counter() - started:5.1f} s] {fraction:4.0%} {message}", file=sys.stderr, flush=True)

    if args.out:
        folder_out(args.out)
    pngs = ["all"] if args.view == "all" else None
    try:
        paths = diffusion_player(args.study, args.state, run_id=args.run, out_dir=args.out,
                                 view=None if args.view in (None, "all") else args.view, pngs=pngs,
                                 messages=args.messages, max_nodes=args.max_nodes, progress=progress)
    except ReportError as e:
        raise UserError(str(e)) from None
    meta = paths["picture"]["meta"]
    from desim.report.diffusion import missing_view_why, run_note
    if run_note(meta):      # a run not ended is drawn up to its last stored step: said even with --quiet
        print(f"desim: warning: {run_note(meta)}", file=sys.stderr)
    if args.view == "all":  # the views the run does not allow are not drawn: say which, and why (once per reason)
        reasons: dict[str, list[str]] = {}
        for view in meta.get("left_out") or {}:
            reasons.setdefault(missing_view_why(meta, view, cli=True), []).append(view)
        for why, views in reasons.items():
            named = views[0] if len(views) == 1 else f"{', '.join(views[:-1])} and {views[-1]}"
            print(f"desim: note: not drawn: the {named} view{'s' if len(views) > 1 else ''}{why}", file=sys.stderr)
    lay = paths["picture"].get("network", {}).get("layout")
    if lay:
        # the page names the file within the study; here it is a path from where the command was typed
        print(f"layout: {Path(args.study) / lay['file']} ({layout_words(lay).replace(' from ' + lay['file'], '')})")
    print(f"player: {paths['html']} (views: {', '.join(v for v in meta['views'] if v in paths['picture'])})")
    for view, path in paths["pngs"].items():
        label = "small multiples" if path == paths["png"] else f"{view} view"
        print(f"{label}: {path}" + (f" ({view} view)" if path == paths["png"] else ""))
    return 0


def cmd_viz_grid(args) -> int:
    from desim.report import ReportError, grid_player
    if args.out:
        folder_out(args.out)
    try:
        paths = grid_player(args.study, args.state, run_id=args.run, out_dir=args.out)
    except ReportError as e:
        raise UserError(str(e)) from None
    print(f"player: {paths['html']}")
    print(f"small multiples: {paths['png']}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("report", help="write an HTML + Markdown report of a run, a comparison of two, "
                                      "a sweep or a paired effect")
    p.add_argument("study", help="the study folder, e.g. studies/opinion_diffusion")
    p.add_argument("--run", help="the run to report (default: the latest completed run not made by a sweep or an effect, else the latest completed)")
    p.add_argument("--compare", metavar="RUN_B", help="a control run: show this run minus RUN_B")
    p.add_argument("--sweep", metavar="SWEEP_ID",
                   help="report a sweep: each metric's final value against the swept parameter, with 95 %% "
                        "intervals (not with --run or --compare)")
    p.add_argument("--effect", metavar="EFFECT_ID",
                   help="report a paired effect (desim effect): the effect curve with its 95 %% band per metric")
    p.add_argument("--metrics", metavar="A,B", help="with --sweep or --effect: the metrics to show "
                                                    "(default: the study's display_metrics)")
    p.add_argument("--out", help="output folder (default: <study>/runs/reports/<run>, sweep-<id> or effect-<id>)")
    p.set_defaults(func=cmd_report)

    viz = sub.add_parser("viz", help="visualisations of a run")
    kinds = viz.add_subparsers(dest="viz_kind", metavar="KIND")
    p = kinds.add_parser("diffusion", help="the network coloured by a state field, one frame per step")
    p.add_argument("study", help="the study folder")
    p.add_argument("--run", help="the run to draw (default: the latest completed run not made by a sweep or an effect, else the latest completed)")
    p.add_argument("--state", required=True, help="the state field that colours the nodes")
    p.add_argument("--view", choices=["network", "communities", "adoption", "tree", "all"],
                   help="the view of the small multiples PNG (default: network below 20,000 agents, communities "
                        "from 20,000); 'all' writes a PNG of every view the run allows")
    p.add_argument("--messages", action="store_true",
                   help="draw who posted in each step on the PNGs (the player has a check box; off by default)")
    p.add_argument("--max-nodes", type=int, default=20000,
                   help="the player embeds every agent up to this many; above, the community view (default 20000)")
    p.add_argument("--out", help="output folder (default: <study>/runs/reports/<run>)")
    add_quiet_arg(p)
    p.set_defaults(func=cmd_viz_diffusion)

    p = kinds.add_parser("grid", help="a positioned study's grid (state fields x, y) coloured by a state field, "
                                      "one frame per step")
    p.add_argument("study", help="the study folder, e.g. studies/schelling")
    p.add_argument("--run", help="the run to draw (default: the latest completed run not made by a sweep or an effect, else the latest completed)")
    p.add_argument("--state", required=True, help="the state field that colours the agents, e.g. type")
    p.add_argument("--out", help="output folder (default: <study>/runs/reports/<run>)")
    p.set_defaults(func=cmd_viz_grid)
