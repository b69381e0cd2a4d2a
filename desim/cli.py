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
from pathlib import Path

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
        study = getattr(args, "study", None)
        if isinstance(e, StudyConfigError) and isinstance(study, str):
            e = e.under(study)          # every file named from where the command was typed
        hint = _study_hint(e, study) if isinstance(study, str) else None
        print(f"desim: error: {e}{'; ' + hint if hint else ''}", file=sys.stderr)
        trace = getattr(e, "traceback", "") or ("".join(traceback.format_exception(e.__cause__))
                                                 if e.__cause__ is not None else "")
        kept = e.kept_text() if isinstance(e, RunFailed) else ""
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
    """Print ``trace`` when asked for (``--traceback``, ``DESIM_TRACEBACK=1``), else say how to ask, after
    ``kept`` (what of a failed run stays in the store, or ``""``)."""
    if trace and (getattr(args, "traceback", False) or os.environ.get("DESIM_TRACEBACK") == "1"):
        print(trace, file=sys.stderr, end="")
    elif trace:
        ask = "--traceback (or DESIM_TRACEBACK=1)" if hasattr(args, "traceback") else "DESIM_TRACEBACK=1"
        print(f"desim: {kept + '; ' if kept else ''}{ask} shows the traceback", file=sys.stderr)


def _study_hint(error, study: str) -> str | None:
    """Where the study is, when the folder a command was given is none and a study is near: the folder the
    study's own files are in (a file of it, or one of its sub-folders, was given), or a study of that name
    under ``studies/`` (where ``desim new`` makes them) or of a name close to it beside it. Said for an error
    about that folder only: a path that does not exist, or an error naming the folder or a file in it."""
    import difflib

    from desim.errors import StudyConfigError, shell_arg
    from desim.study.files import is_study_folder
    path = Path(study)
    try:
        if is_study_folder(path):
            return None
        if path.exists():
            if not (isinstance(error, StudyConfigError) and path in (Path(error.file), Path(error.file).parent)):
                return None         # an error about another thing than the folder (or the study.json it lacks)
            start = path.resolve()
            folder = next((p for p in (start.parents if path.is_dir() else (start.parent, *start.parent.parents))
                           if is_study_folder(p)), None)
            if folder is None:
                return None
            who = "it" if Path(error.file) == path else study         # the error names it already: "it"
            what = "a folder" if path.is_dir() else "a file"
            return f"{who} is {what} inside the study folder {_shown(folder)}: give the folder, {shell_arg(_shown(folder))}"
        under = Path("studies") / path
        if not path.is_absolute() and is_study_folder(under):
            return f"did you mean {shell_arg(under)}? (desim new makes a study under studies/)"
        beside = path.parent
        names = sorted(c.name for c in beside.iterdir() if is_study_folder(c)) if beside.is_dir() else []
        close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.75)
        return f"did you mean {shell_arg(beside / close[0])}?" if close else None
    except OSError:         # a path the system will not look at: the error says so already
        return None


def _shown(folder: Path) -> str:
    """``folder`` as the user would type it: relative to the working folder when that is shorter (``..``)."""
    relative = os.path.relpath(folder)
    return relative if len(relative) <= len(str(folder)) else str(folder)


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
