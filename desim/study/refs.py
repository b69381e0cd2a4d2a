"""Turning a ``ref`` ("model:ClassName" or "package.module:Name") into Python code.

``model:`` means the study's own ``model.py`` (any ``name:`` with a
``name.py`` in the study folder works the same way); anything else is
imported by its dotted module path, so built-in components (``desim.llm:...``) and a
user's installed packages work the same way.
"""
from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from desim.errors import StudyError
from desim.study.failures import describe, load_failure, place, shown
from desim.study.files import Ref, StudyConfigError


class RefError(StudyError, ValueError):
    """A ref names code that cannot be found or built; ``problem`` is the message without the ref."""

    def __init__(self, message: str, problem: str | None = None):
        super().__init__(message)
        self.problem = problem


def study_module(root: Path, name: str = "model"):
    """Import ``<root>/<name>.py`` once per process under a name unique to its path."""
    path = (Path(root) / f"{name}.py").resolve()
    key = "desim_study_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if key in sys.modules:
        return sys.modules[key]
    if not path.exists():
        problem = f"{shown(path)} not found (refs starting with '{name}:' need the study's {name}.py)"
        raise RefError(problem, problem)
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:   # a syntax error, a failing import, an exception at import: name the line
        del sys.modules[key]
        raise RefError(load_failure(e, path, Path(root))) from e
    return module


def resolve(ref: str, root: Path) -> Any:
    module_name, _, attr = ref.partition(":")
    if "." not in module_name and (Path(root) / f"{module_name}.py").exists():
        module = study_module(root, module_name)
    elif module_name == "model":
        module = study_module(root)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            problem = f"cannot import module '{module_name}': {e}"
            raise RefError(f"ref '{ref}': {problem}", problem) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        # a study's own file is named by its path; an imported module as the ref spells it
        own = module.__name__.startswith("desim_study_")
        source = shown(module.__file__) if own and getattr(module, "__file__", None) else module_name
        public = defined_names(module)
        near = close_match(attr, public)
        problem = (f"{source} has no '{attr}'" + (f"; did you mean '{near}'?" if near else "")
                   + (f" (it defines {', '.join(public)})" if public else ""))
        raise RefError(f"ref '{ref}': {problem}", problem) from None


def defined_names(module) -> list[str]:
    """What a ref into ``module`` can name: its ``__all__`` (in that order) when it declares one, else
    the public classes and functions defined in it (sorted); either way only callables."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return [n for n in names if callable(getattr(module, n, None))]
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
                  and getattr(v, "__module__", None) == module.__name__)


def close_match(name: str, names: list[str]) -> str | None:
    """The one of ``names`` that ``name`` most likely meant: the same but for case, else difflib's closest."""
    folded = {n.lower(): n for n in names}
    if name.lower() in folded:
        return folded[name.lower()]
    near = difflib.get_close_matches(name.lower(), list(folded), n=1)
    return folded[near[0]] if near else None


def _arguments(cls: Any, args: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Against ``cls``'s signature: the names of ``args`` it does not take, the required ones missing, and
    the names it takes (all empty when the signature cannot be read or takes any keyword)."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return [], [], []
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return [], [], []
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes = [p.name for p in named]
    missing = [p.name for p in named if p.default is p.empty and p.name not in args]
    return [a for a in args if a not in takes], missing, takes


def build(ref: Ref, root: Path, where: str) -> Any:
    """Instantiate ``ref`` with its ``args``; an error names the study file and field.

    ``where`` is ``"<file inside the study>: <field>"``, e.g. ``"simulation/simulation.json: decision"``.
    """
    file, _, name = where.partition(": ")
    at = f"{shown(Path(root) / file)}: {name}"
    try:
        cls = resolve(ref.ref, root)
    except RefError as e:
        if e.problem is None:           # model.py itself failed to load: its own file and line
            raise
        raise RefError(f"{at}.ref: cannot resolve '{ref.ref}': {e.problem}") from None
    try:
        return cls(**ref.args)
    except StudyConfigError:
        raise
    except TypeError as e:
        unknown, missing, takes = _arguments(cls, ref.args)
        if unknown:
            raise RefError(f"{at}.args.{unknown[0]}: unknown argument of {ref.ref} "
                           f"(it takes {', '.join(takes) or 'none'})") from None
        if missing:
            raise RefError(f"{at}.args: {ref.ref} needs {', '.join(missing)} (it takes {', '.join(takes)})") from None
        raise RefError(f"{at}.args: cannot build {ref.ref} with args {sorted(ref.args)}: {e}") from None
    except Exception as e:
        raise RefError(f"{at}: building {ref.ref} failed at {place(e, root)}: {describe(e)}") from e
