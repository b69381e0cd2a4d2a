"""Why desim stops: one root, ``DesimError``, and a small tree under it.

* :class:`StudyError` -- a mistake in a study that its author can fix: a study file
  (``StudyConfigError``), a ``ref`` that names no code, study code that raised (``StudyCodeError``) or
  returned something the engine refuses (``RunError``), a value with no faithful stored form
  (``FieldError``), a branch, effect or sweep that cannot be exact;
* :class:`StoreError` -- the study's store cannot be used as asked (locked by another process,
  written by an older desim, missing, damaged);
* :class:`RunFailed` -- a run that was recorded ended ``failed``; its completed steps stay stored;
* :class:`StopRun` -- study code (or a spent LLM budget) ends a run cleanly at the step boundary: the
  run is ``interrupted`` and can be resumed.

Outside the tree, :class:`RunInterrupted` is the ``KeyboardInterrupt`` a run from Python raises once Ctrl-C
has stopped it cleanly (stored, resumable), so that a loop of runs stops with it.

The command line turns any ``DesimError`` into one ``desim: error:`` line and exit status 2. The
subclasses keep ``ValueError`` or ``RuntimeError`` as a second base where callers have caught those.
This module imports nothing from desim, so any layer may raise these.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any



def resume_hint(root: str | Path | None, run_id: str) -> str:
    """How to continue run ``run_id``: the command for a study folder, the call for a study made in Python
    with no folder of its own."""
    return f"desim run {root} --resume {run_id}" if root is not None else f"desim.resume(..., {run_id!r})"

class DesimError(Exception):
    """The root of every error desim raises on purpose."""


class DesimNotice(UserWarning):
    """Something desim did on its own that the user should know of (a warning, not an error): the command
    line prints it as one ``desim: note:`` line."""


class StudyError(DesimError):
    """A mistake in a study (its files, its code, what it returns, what is asked of it) that its
    author can fix; the message names the file, field, step or agent."""


class StudyConfigError(StudyError, ValueError):
    """A study file is missing, malformed or invalid; ``str()`` names the file and field (one line per
    problem: ``<file>: <field>: <what is wrong>``)."""

    def __init__(self, file: str | Path, problems: list[tuple[str, str]]):
        self.file = str(file)
        self.problems = problems
        lines = [f"{self.file}: {field}: {msg}" if field else f"{self.file}: {msg}" for field, msg in problems]
        super().__init__("\n".join(lines))

    def under(self, root: str | Path) -> "StudyConfigError":
        """The same error with its file named from where the command was typed: study code names a file
        as the study sees it (``simulation/simulation.json``); a reader outside the study needs its folder."""
        file, root = Path(self.file), Path(root)
        if file.is_absolute() or file.parts[:len(root.parts)] == root.parts or not (root / file).exists():
            return self
        rooted = StudyConfigError(root / file, self.problems)
        rooted.__cause__ = self.__cause__
        return rooted


class StudyArgumentError(StudyError, TypeError):
    """An argument of ``desim.Study`` that cannot make a study: the message names the argument, what was
    given and what is expected. A ``TypeError`` too, which is what Python raises for a wrong argument."""


class FieldError(StudyError, RuntimeError):
    """A value a study returned has no faithful stored form (or changed type); the message names the
    step, the agent and the field."""


class StoreError(DesimError, RuntimeError):
    """The study's store cannot be used as asked; the message says why and what to do."""


class RunFailed(DesimError, RuntimeError):
    """A run ended ``failed``; its completed steps stay in the store (``db_path``)."""

    def __init__(self, run_id: str, error: str, db_path: Path, traceback: str = ""):
        self.run_id, self.error, self.db_path, self.traceback = run_id, error, db_path, traceback
        super().__init__(f"run {run_id} failed: {error}")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (a notebook's "interrupt kernel") stopped a run from Python at a step boundary: the run is
    stored ``interrupted`` and resumable, and the caller's loop stops too, as after any Ctrl-C. A
    ``KeyboardInterrupt``, not a ``DesimError``: an ``except Exception`` around a run must not swallow it.
    A Ctrl-C too late to stop a step (during the last one, or the end-of-run merge) leaves the run
    ``completed`` and still stops the caller.
    ``result`` is the run's :class:`~desim.experiments.recording.RunResult`."""

    def __init__(self, result: Any, root: Path):
        self.result = result
        if result.status == "completed":        # the Ctrl-C came during the last step or the end-of-run merge
            super().__init__(f"Ctrl-C as run {result.run_id} ended: it completed its {result.steps_done} steps "
                             "and is stored")
        else:
            super().__init__(f"run {result.run_id} interrupted by Ctrl-C after step {result.steps_done}; its "
                             f"steps are kept: desim.resume({str(root)!r}, {result.run_id!r}) continues it "
                             f"(desim run {root} --resume {result.run_id})")


class RunStoppedMidStep(KeyboardInterrupt):
    """A second Ctrl-C (``cause``: or a ``KeyboardInterrupt`` study code raised) stopped a run inside a step, without waiting for the step boundary: the run is
    stored ``interrupted`` with its completed steps, and the step in flight is lost (an LLM study's replies of
    that round with it). Says which run, what is kept, what this invocation paid, and how to go on."""

    def __init__(self, run_id: str, root: Path | None, step: int, kept: int, llm: dict | None = None,
                 cause: str = "a second Ctrl-C"):
        self.run_id, self.step, self.kept = run_id, step, kept
        paid = (f"; this invocation paid {llm['calls']} LLM calls ({llm['tokens_in']} tokens in, "
                f"{llm['tokens_out']} out), the round in flight's replies neither cached nor counted"
                if llm and llm.get("calls") else "")
        go_on = resume_hint(root, run_id)
        super().__init__(f"{cause} stopped run {run_id} inside step {step}: steps 1..{kept} are kept, step "
                         f"{step} is lost{paid}; {go_on} continues it")


class StopRun(DesimError):
    """Raised by study code to end a run cleanly at the step boundary (for example an LLM budget
    is spent). The step in flight is not written; the run is marked ``interrupted`` and can be
    resumed with ``desim run --resume RUN``."""


__all__ = ["DesimError", "FieldError", "RunFailed", "RunInterrupted", "RunStoppedMidStep", "StopRun", "StoreError", "StudyConfigError", "StudyError"]


NO_RESUME = "no resume can pass this round"
"""What an LLM budget stop says when its round needs more than the whole budget (``desim.llm.errors``): the run
summary then gives no resume command, since a resume would stop at the same round. Here, at the bottom, so that
the summary of a run without LLM does not import the LLM layer (and its HTTP client) to read it."""
