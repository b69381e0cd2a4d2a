"""Turning a ``ref`` ("model:ClassName" or "package.module:Name") into Python code.

``model:`` means the study's own ``model.py`` (any ``name:`` with a
``name.py`` in the study folder works the same way); anything else is
imported by its dotted module path, so built-in components (``desim.llm:...``) and a
user's installed packages work the same way.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from .config import Ref, StudyConfigError


class RefError(ValueError):
    """A ref names code that cannot be found or built."""


def study_module(root: Path, name: str = "model"):
    """Import ``<root>/<name>.py`` once per process under a name unique to its path."""
    path = (Path(root) / f"{name}.py").resolve()
    key = "desim_study_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if key in sys.modules:
        return sys.modules[key]
    if not path.exists():
        raise RefError(f"{path}: not found (refs starting with '{name}:' need the study's {name}.py)")
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[key]
        raise
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
            raise RefError(f"ref '{ref}': cannot import module '{module_name}': {e}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise RefError(f"ref '{ref}': module '{module_name}' has no '{attr}'") from None


def build(ref: Ref, root: Path, where: str) -> Any:
    """Instantiate ``ref`` with its ``args``; a bad argument names the file and field."""
    cls = resolve(ref.ref, root)
    try:
        return cls(**ref.args)
    except StudyConfigError:
        raise
    except TypeError as e:
        raise RefError(f"{where}: cannot build {ref.ref} with args {sorted(ref.args)}: {e}") from None
    except Exception as e:
        raise RefError(f"{where}: building {ref.ref} failed: {type(e).__name__}: {e}") from e
