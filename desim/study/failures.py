"""Failures of study code, reported where they happened.

The engine calls into a study many times a step (``observe_batch``,
``decide_batch``, ``apply``, ``agent_state``, ``collect``, ...). A bare
``KeyError: 'topik'`` from any of them says nothing a person can act on, so
every call goes through :func:`call`, which turns an exception into a
:class:`StudyCodeError` whose one-line message says when (step, round),
who (the agent, where the engine knows it), what (component and method) and
where (the study file and line)::

    step 3 round 0: Env.apply failed at studies/x/model.py:42: KeyError: 'topik'

The full traceback travels with the error (``.traceback``): the engine
stores it with the run and ``desim run --traceback`` prints it.

Errors that already say where they come from pass through untouched: a
study file error (:class:`~desim.study.files.StudyConfigError`), a clean stop
(``StopRun``) and an error this module already made.
"""
from __future__ import annotations

import os
import re
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from desim.errors import DesimError, FieldError, StopRun, StudyConfigError, StudyError


class StudyCodeError(StudyError, RuntimeError):
    """Study code raised; ``str()`` is the one-line summary, ``.traceback`` the full text."""

    def __init__(self, summary: str, traceback_text: str = ""):
        super().__init__(summary)
        self.summary, self.traceback = summary, traceback_text


def shown(path: str | Path) -> str:
    """A path as a person reads it: relative to the working directory when inside it."""
    p = Path(path)
    try:
        return os.path.relpath(p) if p.resolve().is_relative_to(Path.cwd().resolve()) else str(p)
    except (OSError, ValueError):
        return str(p)


def _frames(tb: TracebackType | None):
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def _inside(filename: str, folder: Path | None) -> bool:
    if folder is None:
        return False
    try:
        return Path(filename).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def _library_folders() -> tuple[Path, ...]:
    """Where installed code lives: desim's package, the standard library, and every site-packages or
    dist-packages folder (the environment's, the user's ``pip install --user``, Debian's, one on
    ``PYTHONPATH``)."""
    import site
    import sysconfig
    paths = sysconfig.get_paths()
    folders = [paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    folders += list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]
    folders += [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    found = {Path(__file__).resolve().parent.parent}
    for folder in folders:
        if folder:
            try:
                found.add(Path(folder).resolve())
            except (OSError, ValueError):
                continue
    return tuple(found)


_LIBRARY: tuple[Path, ...] | None = None


def _library(filename: str) -> bool:
    """``filename`` is installed code (desim, SimPy, the standard library), or no file (``<frozen ...>``)."""
    global _LIBRARY
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        return True
    if _LIBRARY is None:
        _LIBRARY = _library_folders()
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return True
    return any(path.is_relative_to(folder) for folder in _LIBRARY)


def study_frames(exc: BaseException, root: Path | None) -> list[tuple[Any, int]]:
    """The traceback's frames of study code, outermost first: those in the study folder, or, when none is,
    those of no installed library: a study whose classes live in a module beside a notebook (or in the
    notebook), whose failing process was otherwise taken for the engine's own and said without when,
    who or where."""
    folder = Path(root).resolve() if root is not None else None
    frames = list(_frames(exc.__traceback__))
    inside = [(f, line) for f, line in frames if _inside(f.f_code.co_filename, folder)]
    return inside or [(f, line) for f, line in frames if not _library(f.f_code.co_filename)]


def place(exc: BaseException, root: Path | None, also: str | None = None) -> str:
    """``file:line`` of the innermost frame in the study folder (or in the file ``also``,
    the component's own module when it is not study code), else of the innermost frame of no installed
    library (study code kept elsewhere), else of the innermost frame."""
    frames = list(_frames(exc.__traceback__))
    if not frames:
        return "?"
    folder = Path(root).resolve() if root is not None else None
    extra = Path(also).resolve() if also else None
    chosen = None
    for f, line in frames:
        name = f.f_code.co_filename
        if _inside(name, folder) or (extra is not None and Path(name).resolve() == extra):
            chosen = (name, line)
    if chosen is None:      # study code outside the folder: its innermost frame of no installed library
        ours = [(f.f_code.co_filename, line) for f, line in frames if not _library(f.f_code.co_filename)]
        chosen = ours[-1] if ours else (frames[-1][0].f_code.co_filename, frames[-1][1])
    return f"{shown(chosen[0])}:{chosen[1]}"


@contextmanager
def tag_agent(agent_id: str):
    """Mark an exception raised inside the block with the agent it concerns (an errand's agent), so that
    the report names it: the engine knows the agent here, and passes it on explicitly."""
    try:
        yield
    except Exception as e:
        if getattr(e, "desim_agent", None) is None:
            try:
                e.desim_agent = agent_id
            except AttributeError:      # an exception type that refuses attributes: it goes unnamed
                pass
        raise


def agent_of(exc: BaseException) -> str | None:
    """The agent an exception was tagged with (:func:`tag_agent`), if any."""
    return getattr(exc, "desim_agent", None)


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def when(step: int | str | None, round_idx: int | None, agent: str | None) -> str:
    """``step 3 round 0, agent 'a01'``; a phase name (``reset``, ``population``) instead of a step."""
    if step is None or isinstance(step, str):
        out = step or "reset"
    else:
        out = f"step {step}" + ("" if round_idx is None else f" round {round_idx}")
    return out + (f", agent '{agent}'" if agent else "")


def failure(exc: BaseException, what: str, root: Path | None, step: int | str | None = None,
            round_idx: int | None = None, also: str | None = None, agent: str | None = None) -> StudyCodeError:
    """The :class:`StudyCodeError` for ``exc`` raised by ``what`` (``Component.method``) while working
    on ``agent`` (when the caller knows which)."""
    at = when(step, round_idx, agent or agent_of(exc))
    if isinstance(exc, DesimError):     # desim's own error (an LLM endpoint down, say) says what went wrong
        summary = f"{at}: {what}: {describe(exc)}"          # itself: the line of desim it was raised on is no help
    else:
        summary = f"{at}: {what} failed at {place(exc, root, also)}: {describe(exc)}"
    return StudyCodeError(summary, "".join(traceback.format_exception(exc)))


def _passes(exc: BaseException) -> bool:
    return isinstance(exc, (StudyCodeError, StopRun, StudyConfigError, FieldError))


def _module_file(obj: Any) -> str | None:
    module = sys.modules.get(type(obj).__module__)
    return getattr(module, "__file__", None)


def call(fn: Callable, *args, root: Path | None = None, step: int | str | None = None,
         round_idx: int | None = None, blame: Callable | None = None, agent: str | None = None) -> Any:
    """``fn(*args)``, with any failure reported as a :class:`StudyCodeError`.

    ``fn`` (or ``blame``, when ``fn`` is the engine's own loop around a study
    method) is a bound method of a study component: its class and name make
    the ``Component.method`` of the message. ``step`` None means the run's
    set-up (``reset``); a string names another phase; ``agent`` the agent it was called for.
    """
    try:
        return fn(*args)
    except Exception as e:
        if _passes(e):
            raise
        method = blame or fn
        owner = getattr(method, "__self__", None)
        what = (f"{type(owner).__name__}.{method.__name__}" if owner is not None
                else getattr(method, "__qualname__", "?"))
        raise failure(e, what, root, step, round_idx, _module_file(owner), agent) from e


def original(exc: BaseException) -> BaseException:
    """The exception a SimPy process raised: SimPy re-raises a copy whose ``__cause__`` it is."""
    while (exc.__cause__ is not None and type(exc.__cause__) is type(exc)
           and exc.__cause__.args == exc.args):
        exc = exc.__cause__
    return exc


def process_failure(exc: BaseException, root: Path | None, now: float, step: int) -> StudyCodeError | None:
    """A study process (or an errand) that raised while the clock ran; ``None`` when no study
    frame is on the traceback (the failure is the engine's own, not the study's)."""
    if _passes(exc):
        return None
    frames = study_frames(exc, root)
    if not frames:
        return _bad_yield(exc, root, now, step)
    code = frames[0][0].f_code
    name = getattr(code, "co_qualname", code.co_name)
    agent = agent_of(exc)
    who = f", agent '{agent}'" if agent else ""
    summary = (f"t={now:g} (step {step}){who}: study process {name} failed at {place(exc, root)}: "
               f"{describe(exc)}")
    return StudyCodeError(summary, "".join(traceback.format_exception(exc)))


# SimPy raises this from its own frame when a process yields what is no event, naming the process's line
# only in the message
_YIELD = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)\n.*\nInvalid yield value "(?P<value>.*)"',
                    re.DOTALL)


def _bad_yield(exc: BaseException, root: Path | None, now: float, step: int) -> StudyCodeError | None:
    """A study process that yielded something other than a SimPy event (``yield 5`` for ``yield
    env.timeout(5)``), said as its other failures are; None for any other error."""
    found = _YIELD.search(str(exc)) if isinstance(exc, RuntimeError) else None
    folder = Path(root).resolve() if root is not None else None
    if found is None or not _inside(found["file"], folder):
        return None
    summary = (f"t={now:g} (step {step}): study process {found['name']} failed at {shown(found['file'])}:"
               f"{found['line']}: it yielded {found['value'][:60]}, not a SimPy event (yield "
               "env.timeout(delay) to wait)")
    return StudyCodeError(summary, "".join(traceback.format_exception(exc)))


def import_place(exc: BaseException, path: Path, root: Path) -> str:
    """``studies/x/model.py:LINE``: the innermost line of the study's folder that ``exc`` (raised while the
    module ``path`` was imported) came from, or ``path`` itself when no frame of the folder is on it."""
    frames = study_frames(exc, root)
    if frames:
        f, line = frames[-1]
        return f"{shown(f.f_code.co_filename)}:{line}"
    return shown(path)


def load_failure(exc: BaseException, path: Path, root: Path) -> str:
    """``studies/x/model.py:LINE: Type: message`` for a study module that fails to import."""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{shown(exc.filename)}:{exc.lineno}"
        return f"{where}: {type(exc).__name__}: {exc.msg}"
    return f"{import_place(exc, path, root)}: {describe(exc)}"
