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

import re
import shlex
from pathlib import Path
from typing import Any

_PLAIN = re.compile(r"[^\"$`\\!]*")     # text that double quotes keep as written (no ", $, `, backslash or !)


def shell_arg(value: str | Path) -> str:
    """``value`` (a path, a run id, a query) as one word of a command desim prints for the user to paste: as
    it is when the shell would keep it so, ``./``-prefixed when it starts with a dash (a command would take
    ``-dash`` for an option), else quoted. Text with a single quote but nothing double quotes change (an SQL
    query: ``WHERE run_id = 'r1'``) goes in double quotes, which read better than shlex's ``'"'"'``.
    Every hint that prints a command quotes its words here, once."""
    text = str(value)
    if text.startswith("-"):
        text = "./" + text
    quoted = shlex.quote(text)
    if quoted != text and "'" in text and _PLAIN.fullmatch(text):
        return f'"{text}"'
    return quoted


def resume_hint(root: str | Path | None, run_id: str) -> str:
    """How to continue run ``run_id``: the command for a study folder, the call for a study made in Python
    with no folder of its own."""
    return (f"desim run {shell_arg(root)} --resume {shell_arg(run_id)}" if root is not None
            else f"desim.resume(..., {run_id!r})")


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

    def from_parameters(self, used: dict[str, str], settings_file: str | Path,
                        set_on_command_line: frozenset[str] | set[str] = frozenset()) -> "StudyConfigError":
        """The same error with each problem at a field that held ``"$name"`` named where the user sets the
        value: the study parameter in ``settings_file`` (simulation.json), not the argument a model checked
        once the name was replaced (``decision.args.gamma``; another file's ``provider.args.seed_fraction``
        for ``"seed_share"``). ``used`` maps the fields of this error's file to the parameter each held
        (``desim.study.params.parameter_fields`` of the file as written); a parameter in
        ``set_on_command_line`` was given by ``--set``, and the problem says so.

        When every problem came from a parameter the error names ``settings_file``:
        ``simulation.json: parameters.seed_share (used as provider.args.seed_fraction): must be in [0, 1]
        (got 1.3)``. When only some did, the file stays and those problems say where their value is set. A
        problem that is not about the value (an unknown argument) stays as raised."""
        # a problem with the value says what it got; one with the argument itself (an unknown name, ``betta``)
        # is the file's, whatever value the argument holds
        named = {field: used[field] for field, message in self.problems if field in used and "(got " in message}
        if not named:
            return self

        def origin(name: str, field: str) -> str:
            return f"{'--set, ' if name in set_on_command_line else ''}used as {field}"
        if len(named) == len(self.problems):
            moved = StudyConfigError(settings_file, [(f"parameters.{named[field]} ({origin(named[field], field)})",
                                                      message) for field, message in self.problems])
        else:
            moved = StudyConfigError(self.file, [
                (field, f"{message} (the value of parameters.{named[field]} in {settings_file}"
                        f"{', set by --set' if named[field] in set_on_command_line else ''})")
                if field in named else (field, message) for field, message in self.problems])
        moved.__cause__ = self.__cause__
        return moved


class StudyArgumentError(StudyError, TypeError):
    """An argument of ``desim.Study`` that cannot make a study: the message names the argument, what was
    given and what is expected. A ``TypeError`` too, which is what Python raises for a wrong argument."""


class FieldError(StudyError, RuntimeError):
    """A value a study returned has no faithful stored form (or changed type); the message names the
    step, the agent and the field."""


class StoreError(DesimError, RuntimeError):
    """The study's store cannot be used as asked; the message says why and what to do."""


class RunFailed(DesimError, RuntimeError):
    """A run ended ``failed``; its completed steps stay in the store (``db_path``): ``steps_done`` of them
    (None: not counted by the raiser)."""

    def __init__(self, run_id: str, error: str, db_path: Path, traceback: str = "", steps_done: int | None = None):
        self.run_id, self.error, self.db_path, self.traceback = run_id, error, db_path, traceback
        self.steps_done = steps_done
        super().__init__(f"run {run_id} failed: {error}")

    def kept_text(self) -> str:
        """What of the run stays, for the line after the error: its completed steps and where they are, or
        nothing when it completed none (a run that failed in its first step keeps only its row, ``failed``)."""
        done = self.steps_done
        if done is None:
            return f"completed steps are kept in {self.db_path}"
        if done < 1:
            return ""
        return f"its {done} completed step{'s are' if done > 1 else ' is'} kept in {self.db_path}"


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
                             f"({resume_hint(root, result.run_id)})")


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
