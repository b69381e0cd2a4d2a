"""Getting data out: ``desim export``."""
from __future__ import annotations


def cmd_export(args) -> int:
    from desim.commands import UserError
    from desim.commands.core import folder_out
    from desim.store import NoSuchRun
    from desim.store.export import export
    folder_out(args.out)
    try:
        paths = export(args.study, args.out, run=args.run, fmt=args.format)
    except (NoSuchRun, LookupError, ValueError) as e:
        raise UserError(str(e).strip("'\"")) from None
    except FileExistsError as e:    # a file of the user's own where the export would write (export.check_out)
        raise UserError(str(e)) from None
    for p in paths:
        print(p)
    return 0


def register(sub) -> None:
    p = sub.add_parser("export", help="write runs as Parquet or CSV files (panel, metrics, events, messages)")
    p.add_argument("study", help="the study folder, e.g. studies/opinion_diffusion")
    p.add_argument("--run", help="one run (default: every run of the study)")
    p.add_argument("--format", choices=["parquet", "csv"], default="parquet", help="the files' format (default: parquet)")
    p.add_argument("--out", required=True, help="the folder to write into")
    p.set_defaults(func=cmd_export)
