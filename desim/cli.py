"""The ``desim`` command line: one sub-command module per part of the workflow.

Each module in ``desim.commands`` has ``register(subparsers)``, which adds
its sub-commands and sets ``func`` on them; a module imports what its
commands need inside them, so ``desim --help`` and ``desim run`` load only
what they use (no matplotlib, no web server). ``main`` turns the errors a user
can fix (a bad study file, a failed run, a locked store) into a clear message
and exit status 2 instead of a traceback. ``--traceback`` (on ``run`` and
``validate``) or ``DESIM_TRACEBACK=1`` adds the traceback of the study code
that failed; anything else escaping ``main`` is a desim bug and keeps
Python's traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
import warnings

from desim.version import __version__

# numpy's OpenBLAS starts a thread per core when numpy loads, and it spins for about 0.1 s of CPU with
# nothing to do (docs/performance.md). A run does no matrix algebra, and a sweep already runs a
# process per core, so the command line asks for one BLAS thread; a user who sets either variable
# keeps their choice. Set before anything imports numpy.
# (A process that loaded numpy before importing this module keeps its threads: a run then asks for one
# itself, desim.run.execute.one_blas_thread, which the second variable tells this value is desim's.)
if "OPENBLAS_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if "numpy" in sys.modules:
        os.environ["DESIM_OPENBLAS_NUM_THREADS"] = "1"

COMMANDS = [
    "desim.commands.core",
    "desim.commands.report",
    "desim.commands.branch",
    "desim.commands.effect",
    "desim.commands.llm",
    "desim.commands.sweep",
    "desim.commands.dashboard",
    "desim.commands.data",
]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="desim", description="Longitudinal agent-based social simulation "
                                "on SimPy, stored as panel data in DuckDB.")
    p.add_argument("--version", action="version", version=f"desim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not getattr(args, "func", None):
        p.print_help()
        return 1
    from desim.errors import DesimError, DesimNotice, RunFailed, StudyConfigError
    show = warnings.showwarning

    def note(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DesimNotice):
            print(f"desim: note: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = note
    try:
        return int(args.func(args) or 0)
    except DesimError as e:     # a study mistake, a store problem, a failed run: one line, exit status 2
        if isinstance(e, StudyConfigError) and isinstance(getattr(args, "study", None), str):
            e = e.under(args.study)     # every file named from where the command was typed
        print(f"desim: error: {e}", file=sys.stderr)
        trace = getattr(e, "traceback", "") or ("".join(traceback.format_exception(e.__cause__))
                                                 if e.__cause__ is not None else "")
        kept = f"completed steps are kept in {e.db_path}; " if isinstance(e, RunFailed) else ""
        _offer_traceback(args, trace, kept)
        return 2
    except KeyboardInterrupt as e:     # a second Ctrl-C inside a run says which run and how to go on
        print(f"desim: interrupted{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped early (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:    # the system refused a file desim had no check for (a file where a folder should be)
        if e.filename is None:
            raise
        print(f"desim: error: {_os_error(e)}", file=sys.stderr)
        _offer_traceback(args, "".join(traceback.format_exception(e)))
        return 2
    except Exception as e:      # DuckDB finding the store's file damaged mid-query: said, not a traceback
        if not _damaged_store(e):
            raise
        print(f"desim: error: the study's store is damaged: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = show


def _offer_traceback(args: argparse.Namespace, trace: str, kept: str = "") -> None:
    """Print ``trace`` when asked for (``--traceback``, ``DESIM_TRACEBACK=1``), else say how to ask."""
    if trace and (getattr(args, "traceback", False) or os.environ.get("DESIM_TRACEBACK") == "1"):
        print(trace, file=sys.stderr, end="")
    elif trace:
        ask = "--traceback (or DESIM_TRACEBACK=1)" if hasattr(args, "traceback") else "DESIM_TRACEBACK=1"
        print(f"desim: {kept}{ask} shows the traceback", file=sys.stderr)


def _os_error(error: OSError) -> str:
    """An ``OSError`` about a file as one line: the file, then the system's reason (``Is a directory``)."""
    files = f"{error.filename} -> {error.filename2}" if error.filename2 is not None else f"{error.filename}"
    return f"{files}: {error.strerror or error}"


def _damaged_store(error: Exception) -> bool:
    """DuckDB's refusal of a damaged file (a block whose checksum fails); its other errors (a query's
    mistake, a Ctrl-C) keep their own way out."""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(error, duckdb.Error) and any(
        word in str(error) for word in ("Corrupt database file", "checksum"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
