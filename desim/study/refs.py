"""Turning a ``ref`` ("model:ClassName" or "package.module:Name") into Python code.

``model:`` means the study's own ``model.py`` (any ``name:`` with a
``name.py`` in the study folder works the same way); anything else is
imported by its dotted module path, so built-in components (``desim.llm:...``) and a
user's installed packages work the same way.

A study's own module is imported again when its file's content has changed since it was imported (or the
content of a study module it imported, through :func:`study_module` or a plain ``import`` of a file in its
folder): in a notebook, ``desim.run_study(desim.load_study(S))`` after an edit of ``model.py`` runs the edited
code, which is the code its new version records (``desim.versions.code_files``).
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import itertools
import marshal
import os
import sys
import sysconfig
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from desim.errors import StudyError
from desim.study.contract import ROLES, kind_of, misnamed, missing_methods
from desim.study.failures import describe, import_place, load_failure, place, shown
from desim.study.files import Ref, StudyConfigError
from desim.versions import (OUTSIDE, SKIP_DIRS, check_name, code_files, file_hash, keep_outside_source,
                            population_files)


class RefError(StudyError, ValueError):
    """A ref names code that cannot be found or built; ``problem`` is the message without the ref."""

    def __init__(self, message: str, problem: str | None = None):
        super().__init__(message)
        self.problem = problem


@dataclass
class _Imported:
    """What a study module was made from: its file's hash (:func:`desim.versions.file_hash`, the rule its
    version records it by), the study modules its import asked :func:`study_module` for (their keys), and the
    modules of its own folder it imported the plain way (``import helpers``: ``{name: (file, hash)}``)."""

    module: ModuleType
    path: Path
    digest: str
    uses: set[str] = field(default_factory=set)
    plain: dict[str, tuple[str, str]] = field(default_factory=dict)


_imported: dict[str, _Imported] = {}
_importing: list[str] = []          # the keys being imported, innermost last (an import imports others)
_lock = threading.RLock()           # one import at a time (a dashboard's threads import versions' code)


def _hash_of(path: str | Path) -> str | None:
    try:
        return file_hash(Path(path).read_bytes())
    except OSError:
        return None


def _current(key: str, seen: set[str]) -> bool:
    """The module imported under ``key`` is still what its files hold now, and so is every study module it
    imported (a module being imported, or met again on a circle of imports, counts as current)."""
    if key in seen or key in _importing:
        return True
    seen.add(key)
    record = _imported.get(key)
    if record is None or sys.modules.get(key) is not record.module or _hash_of(record.path) != record.digest:
        return False
    if any(_hash_of(file) != digest for file, digest in record.plain.values()):
        return False
    return all(_current(used, seen) for used in record.uses)


def _plain_imports(folder: Path, given: Path) -> dict[str, tuple[str, str]]:
    """The modules in ``sys.modules`` (study modules aside) whose file is in the study's ``folder`` (``given``:
    as the caller spelled it), where a study's own Python counts (``desim.versions.code_files``: not under a
    hidden folder, ``runs/`` or an installed package's ``site-packages``): its modules imported the plain way,
    with the folder on ``sys.path`` (a notebook beside the study). Only these are imported again with it."""
    out = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.startswith("desim_study_") or not isinstance(file, str) or not file.endswith(".py"):
            continue
        file = os.path.abspath(file)
        for base in (str(folder), str(given)):
            if file.startswith(base + os.sep):
                parts = Path(file[len(base) + 1:]).parts[:-1]
                if not any(p.startswith(".") or p in SKIP_DIRS or p in ("site-packages", "dist-packages")
                           for p in parts):
                    out[name] = (file, _hash_of(file) or "")
                break
    return out


def study_module(root: Path, name: str = "model"):
    """Import ``<root>/<name>.py`` under a name unique to its path, again whenever its content has changed
    (or a study module it imported has): the code that runs is the code on disk, which the run's version
    hashes. The bytes hashed are the bytes executed (not a ``__pycache__`` file, which Python trusts by size
    and modification time). Another folder is another module, so each version's folder that the dashboard or
    a report writes (``desim.store.version_files``) is imported once, under its own name."""
    path = (Path(root) / f"{name}.py").resolve()
    key = _module_key(path)
    with _lock:
        if key in sys.modules and _current(key, set()):
            module = sys.modules[key]
        else:
            try:
                data = path.read_bytes()
            except OSError:
                problem = f"{shown(path)} not found (refs starting with '{name}:' need the study's {name}.py)"
                raise RefError(problem, problem) from None
            module = _import(path, key, data, Path(root))
        if _importing:                  # imported by a study module being imported: that one uses this one
            _imported[_importing[-1]].uses.add(key)
        return module


def _module_key(path: Path) -> str:
    """The name a study module is imported under: unique to its file's (resolved) path."""
    # os.fsencode: the path's own bytes, also for a folder name that is not UTF-8 (a Latin-1 'stud\xe9')
    return "desim_study_" + hashlib.sha1(os.fsencode(path)).hexdigest()[:12]


def study_modules_outside(root: str | Path, config: dict[str, Any]) -> dict[Path, str]:
    """``{file: hash}`` of the study modules (and the modules they import the plain way) that the study's own
    modules (those its refs name in its folder) import through :func:`study_module` from outside its folder,
    transitively: an LLM variant that builds on a sibling study's ``model.py``. Their code runs in every run,
    so an edit of them is an edit of the study: its version hashes them, and a Ray bundle carries them. The
    study's modules are imported here if they were not yet (a run imports them anyway)."""
    return _modules_outside(root, refs_in(config))


def _modules_outside(root: str | Path, refs: set[str]) -> dict[Path, str]:
    """:func:`study_modules_outside` of the refs ``refs`` (:func:`refs_in` of the study's configuration)."""
    root = Path(root).resolve()
    keys = []
    for name in sorted({ref.partition(":")[0] for ref in refs}):
        if "." not in name and (root / f"{name}.py").is_file():
            try:
                study_module(root, name)
            except RefError:
                continue                # the run's own resolve names the error
            keys.append(_module_key((root / f"{name}.py").resolve()))
    out: dict[Path, str] = {}
    seen: set[str] = set()
    with _lock:
        while keys:
            key = keys.pop()
            record = _imported.get(key)
            if key in seen or record is None:
                continue
            seen.add(key)
            keys.extend(record.uses)
            files = [(record.path, record.digest), *((Path(f), h) for f, h in record.plain.values())]
            for file, digest in files:
                if not Path(file).resolve().is_relative_to(root):
                    out[Path(file).resolve()] = digest
    return out


def _import(path: Path, key: str, data: bytes, root: Path) -> ModuleType:
    """A new module under ``key``, executed from ``data`` (the bytes of ``path`` read now). The modules an
    earlier import of it imported the plain way are imported again too, as they are now."""
    earlier = _imported.pop(key, None)
    for plain in (earlier.plain if earlier else {}):
        sys.modules.pop(plain, None)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(key, path))
    sys.modules[key] = module
    _imported[key] = _Imported(module, path, file_hash(data))
    _importing.append(key)
    try:
        exec(compile(data, str(path), "exec", dont_inherit=True), module.__dict__)
    except (Exception, SystemExit) as e:   # a syntax error, a failing import, an exception at import: name the line
        del sys.modules[key]
        del _imported[key]
        # sys.exit() at import would otherwise end the command itself, silently and with the study's status
        # (0 passes a CI job); as inside a step, study code does not choose how desim exits
        message = _exit_at_import(e, path, root) if isinstance(e, SystemExit) else load_failure(e, path, root)
        raise RefError(message) from e
    finally:
        _importing.pop()
    _imported[key].plain = _plain_imports(path.parent, root.absolute())
    return module


def _exit_at_import(e: SystemExit, path: Path, root: Path) -> str:
    """``studies/x/model.py:LINE: study code called sys.exit(0) while being imported``, at the line it came from."""
    return f"{import_place(e, path, root)}: study code called sys.exit({e.code!r}) while being imported"


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
            if getattr(e, "name", None) == module_name.split(".")[0] and "." not in module_name:
                problem += (f" (a module beside the notebook or script that made the study is found only from there,"
                            f" with its folder on sys.path; run from that folder, or move the code into the study's"
                            f" folder as {module_name}.py or model.py)")
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
        if module_name == "__main__":   # desim run of a study that a notebook or script made
            problem += (f"; '{attr}' was defined in the notebook or script that made the study, and lives only in "
                        f"that Python process: run it from there (desim.run_study), or move the class into the "
                        f"study's model.py and name it 'model:{attr}'")
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


def build(ref: Ref, root: Path, where: str, role: str | None = None) -> Any:
    """Instantiate ``ref`` with its ``args``; an error names the study file and field.

    ``where`` is ``"<file inside the study>: <field>"``, e.g. ``"simulation/simulation.json: decision"``.
    ``role`` (``"environment"``, ``"decision"``, ``"collector"``, ``"population"``) checks that what the ref
    names has the methods of that role (``desim.study.contract.ROLES``, the rule ``desim.Study`` applies), so
    a component in the wrong field is named here rather than failing inside the run with an AttributeError.
    A class is checked before it is built; what a factory function returns, once it has.
    """
    file, _, name = where.partition(": ")
    at = f"{shown(Path(root) / file)}: {name}"
    try:
        cls = resolve(ref.ref, root)
    except RefError as e:
        if e.problem is None:           # model.py itself failed to load: its own file and line
            raise
        raise RefError(f"{at}.ref: cannot resolve '{ref.ref}': {e.problem}") from None
    if role is not None and isinstance(cls, type):
        _check_role(cls, role, at, ref.ref)
    built = _construct(cls, ref, root, at)
    if role is not None and not isinstance(cls, type):
        _check_role(type(built), role, at, ref.ref, made=True)
    return built


def _check_role(cls: type, role: str, at: str, ref: str, made: bool = False) -> None:
    """A ``RefError`` naming the field when ``cls`` lacks what ``role`` needs (see :func:`build`)."""
    missing = missing_methods(cls, role)
    if missing:
        spec = ROLES[role]
        what = f"returns an instance of {cls.__qualname__}, {kind_of(cls)}" if made else f"is {kind_of(cls)}"
        hint = misnamed(cls, missing)       # a misspelt name is the usual cause: "it has decide: rename it?"
        raise RefError(f"{at}.ref: {ref} {what} without {', '.join(m + '()' for m in missing)}"
                       f"{f' ({hint})' if hint else ''}; {spec.noun} implements {spec.base.__name__} ({spec.implements})")


def _construct(cls: Any, ref: Ref, root: Path, at: str) -> Any:
    """``cls(**ref.args)``; a failure names the field of the argument at fault when it can."""
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


# --- the code a version records ------------------------------------------------------------------------

_unknown: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
"""Code with no source to hash (see :func:`outside_code`): one token an object (a class, a function) while it
lives. A class defined again (a notebook's cell run again) is another object, so it gets another token."""
_unknown_named: dict[str, str] = {}     # the same, by name, for what cannot be weakly referenced
_first_seen: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
"""What a ref reached in a module outside the study (a class of a module beside a notebook): the hash of
its module's file when desim first saw it in this process. The same class later with another hash is
stale: its module's file was edited but the module not imported again (:func:`_check_current`)."""

_MADE_BY_DATACLASS = frozenset({"__init__", "__repr__", "__eq__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__",
                                "__setattr__", "__delattr__", "__getstate__", "__setstate__"})
"""The methods ``@dataclass`` writes (from ``<string>``, so with no source): its fields and options define them."""


def _installed(file: str) -> bool:
    """A file of Python itself, of an installed distribution, or of desim: versioned by what is installed
    (a run records ``desim_version``), not by its study."""
    path = os.path.realpath(file)
    parts = Path(path).parts
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(str(Path(__file__).resolve().parent.parent))      # desim itself, installed editable or not
    return any(path.startswith(os.path.realpath(r) + os.sep) for r in roots)


def _text_of(value: Any) -> str:
    """``value`` as a line of the text a class's hash is made of: a function by its source when it has one,
    a class by its name, anything else by its ``repr``."""
    if inspect.isfunction(value):
        try:
            return inspect.getsource(value).strip()
        except (OSError, TypeError):
            pass
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    try:
        return repr(value)
    except Exception:
        return f"<a {type(value).__qualname__}>"


def _literal(value: Any) -> bool:
    """A plain value (number, text, None, or a list, tuple, set or dict of them), whose ``repr`` is its text."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_literal(v) for v in value)
    if isinstance(value, dict):
        return all(_literal(k) and _literal(v) for k, v in value.items())
    return False


def _dataclass_lines(cls: type) -> list[str]:
    """What ``@dataclass`` made ``cls``'s generated methods from: its options and each field (type, default,
    default factory, options), as text."""
    lines = [f"@dataclass {getattr(cls, '__dataclass_params__', None)!r}"]
    for f in getattr(cls, "__dataclass_fields__", {}).values():
        line = f"field {f.name}: {_text_of(f.type)}"
        if f.default is not dataclasses.MISSING:
            line += f" = {_text_of(f.default)}"
        if f.default_factory is not dataclasses.MISSING:
            line += f" = {_text_of(f.default_factory)}()"
        options = {k: getattr(f, k, None) for k in ("init", "repr", "hash", "compare", "kw_only")}
        lines.append(f"{line} {options!r} metadata={_text_of(dict(f.metadata))} {getattr(f, '_field_type', None)!r}")
    return lines


def _source_text(obj: Any) -> str | None:
    """The text ``obj``'s hash is made of when Python can find its source without a file (a class typed into
    a notebook), else None. A class's: its methods' sources, which the notebook's cells keep (one with no source
    makes it None, but the methods ``@dataclass`` writes, whose fields and options are hashed instead), then
    its properties' and its plain class attributes (``rate = 0.5``)."""
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        pass
    if not isinstance(obj, type):
        return None
    texts, more = [], []
    generated = dataclasses.is_dataclass(obj)     # its __init__, __repr__, __eq__... have no source
    for name, value in sorted(vars(obj).items()):
        value = getattr(value, "__func__", value)
        if inspect.isfunction(value):
            try:
                texts.append(f"{name}\n{inspect.getsource(value)}")
            except (OSError, TypeError):
                made = getattr(inspect.unwrap(value), "__code__", None)     # __repr__ is wrapped
                if not (generated and name in _MADE_BY_DATACLASS and getattr(made, "co_filename", "") == "<string>"):
                    return None
        elif isinstance(value, property):
            for part in (value.fget, value.fset, value.fdel):
                if part is not None:
                    try:
                        more.append(f"{name} (property)\n{inspect.getsource(part)}")
                    except (OSError, TypeError):
                        return None
        elif not name.startswith("__") and _literal(value):
            more.append(f"{name} = {value!r}")
    if generated:
        more += _dataclass_lines(obj)
    return "\n".join(texts + more) if texts or more else None


def _token(obj: Any, key: str) -> str:
    """The token of code with no source (:data:`_unknown`): ``obj``'s, else (not weakly referable) ``key``'s."""
    token = "process-" + os.urandom(6).hex()
    try:
        return _unknown.setdefault(obj, token)
    except TypeError:
        return _unknown_named.setdefault(key, token)


def _compiled(module: ModuleType, file: str, data: bytes) -> str | None:
    """Whether ``module`` holds other code than ``data`` (its source file ``file`` now), as far as its compiled
    file tells (the ``__pycache__`` .pyc Python wrote, or found current, as it imported it): None when it holds
    the same code, or when that cannot be told (no .pyc, ``sys.dont_write_bytecode``, no source file); else
    what to do besides reloading it, as a clause of an error ("" when nothing else)."""
    spec = getattr(module, "__spec__", None)
    cached, origin = getattr(spec, "cached", None), getattr(spec, "origin", None)
    if sys.dont_write_bytecode or type(getattr(spec, "loader", None)) is not importlib.machinery.SourceFileLoader \
            or not isinstance(cached, str) or not isinstance(origin, str) or os.path.realpath(origin) != file:
        return None                     # another loader (pytest's, a zip's) caches its own way, or not at all
    try:
        pyc = Path(cached).read_bytes()
        stat = os.stat(file)
    except OSError:
        return None
    if len(pyc) < 16 or pyc[:4] != importlib.util.MAGIC_NUMBER:
        return None
    try:
        imported = marshal.loads(pyc[16:])
    except Exception:
        return None
    flags = int.from_bytes(pyc[4:8], "little")
    if flags & 1 or int.from_bytes(pyc[8:12], "little") != int(stat.st_mtime) & 0xFFFFFFFF \
            or int.from_bytes(pyc[12:16], "little") != stat.st_size & 0xFFFFFFFF:
        # a .pyc of another size or time is not what an import of the file now loads, and it may be one Python
        # could not replace (a read-only __pycache__) while the module runs the file's code: nothing is told
        return None
    try:
        if imported == compile(data, origin, "exec", dont_inherit=True):
            return None
    except (SyntaxError, ValueError):
        pass                            # the file does not compile now: it is not what was imported
    # Python trusts a .pyc by the file's size and modification time (to the second): an edit that kept both
    # within a second runs the old code even after a reload
    return (f"Python's compiled copy {cached} holds other code, with the file's size and modification time "
            f"(an edit within the second it was compiled); delete it, then reload the module")


def _check_current(module: ModuleType, module_name: str, ref: str, obj: Any, file: str, data: bytes,
                   digest: str) -> None:
    """Refuse (:class:`RefError`) when what ``ref`` reaches (``obj``, in ``module``) is not the code of ``file``
    now (``data``, hashed ``digest``): the file was edited but the module not imported again, so a run would
    run the old code and record the new file's hash (one version, two models; a branch would mix them).
    Known when desim saw ``obj`` before with another hash of its file (:data:`_first_seen`), or, the first
    time, when the compiled file Python trusts for the file as it is now holds other code (:func:`_compiled`)."""
    with _lock:
        try:
            seen = _first_seen.get(obj)
        except TypeError:               # cannot be weakly referenced: its module's compiled file alone says
            seen, obj = None, None
        why = None
        if seen is None:
            why = _compiled(module, file, data)
            if why is None and obj is not None:
                _first_seen[obj] = digest
        elif seen != digest:
            why = ""
    if why is None:
        return
    if module_name == "__main__":
        how = "run the script again"
    else:
        how = why or (f"reload the module (importlib.reload({module_name}), then make the study again) or restart "
                      f"the kernel")
    problem = (f"{file} changed since it was imported as '{module_name}': the code that would run is the one "
               f"imported then, not the file's, while the run's version would record the file as it is now; {how}")
    raise RefError(f"ref '{ref}': {problem}", problem)


def refs_in(data: Any) -> set[str]:
    """Every ``ref`` string in a study's resolved configuration (``{"ref": ..., "args": ...}`` anywhere, in dicts
    and lists). Walked without recursion, and a list's plain values are never visited one by one: a population's
    explicit ``edges`` are thousands of ``[u, v]`` pairs, and every run (every replicate) asks."""
    refs: set[str] = set()
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            ref = item.get("ref")
            if isinstance(ref, str):
                refs.add(ref)
            todo += [v for v in item.values() if isinstance(v, (dict, list))]
        elif isinstance(item, list) and not _plain(item):
            todo += [v for v in item if isinstance(v, (dict, list))]
    return refs


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(items: list) -> bool:
    """Whether no ref can be in the list ``items``: it holds no dict or list, or only lists of text and numbers
    (edges: ``[u, v]`` pairs). Told from the set of its values' types, made in C (``map``), rather than by a
    loop of Python over thousands of pairs."""
    kinds = set(map(type, items))
    if not any(issubclass(kind, (dict, list)) for kind in kinds):
        return True
    return kinds == {list} and set(map(type, itertools.chain.from_iterable(items))) <= _SCALARS


def outside_code(root: str | Path, config: dict[str, Any]) -> dict[str, str]:
    """``{"<outside>/<module>.py": hash}`` for each module a ref of ``config`` names that is neither in the study's
    folder (:func:`desim.versions.code_files` hashes those) nor installed: a module beside a notebook or a
    script, or the script itself (``__main__:Name``, a ``desim.Study`` built in Python). Its file's hash joins
    the version's code, so an edit of it is a new version, a branch across it is refused as across an edit
    of ``model.py``, and an effect never reuses a control run with other code. Only the module the ref names
    is hashed, not what it imports (but for the study modules the study's own modules import from outside
    its folder: :func:`study_modules_outside`); each file once a call. A module whose file was edited since it was imported
    (not reloaded) is refused (:func:`_check_current`): its hash is not the code that would run. A class typed
    into a notebook (no file) is hashed by its source (:func:`_source_text`). Code with no source to read (a
    class made by ``type()`` in a notebook) gets a token of this process and of the class: its runs are one
    version while the class lasts, never reused after, nor by the class defined again.
    The text of each (its file, or the source hashed) is kept with a new version
    (:func:`desim.versions.keep_outside_source`)."""
    root = Path(root)
    out: dict[str, str] = {}
    read: dict[str, bytes | None] = {}
    refs = refs_in(config)
    for ref in sorted(refs):
        module_name, _, attr = ref.partition(":")
        if module_name == "model" or ("." not in module_name and (root / f"{module_name}.py").exists()):
            continue
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue                # the run's own resolve names the ref and the error
        obj = getattr(module, attr, None)
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            if _installed(file) or os.path.realpath(file).startswith(str(root.resolve()) + os.sep):
                continue
            key = f"{OUTSIDE}{module_name}.py"
            file = os.path.realpath(file)
            if file not in read:
                try:
                    read[file] = Path(file).read_bytes()
                except OSError:
                    read[file] = None
            data = read[file]
            digest = None if data is None else file_hash(data)
            if data is not None:
                _check_current(module, module_name, ref, obj, file, data, digest)
                keep_outside_source(key, digest, Path(file))
        else:
            key = f"{OUTSIDE}{module_name}:{attr}"
            text = _source_text(obj)
            digest = None if text is None else file_hash(text.encode())
            if text is not None:
                keep_outside_source(key, digest, text)
        if digest is None:
            digest = _token(obj, key)
        out[key] = digest
    for file, digest in _modules_outside(root, refs).items():   # named from the study's parent folder:
        key = f"{OUTSIDE}{os.path.relpath(file, root.resolve().parent)}"  # a sibling study's model.py
        check_name(key, file)
        keep_outside_source(key, digest, file)
        out[key] = digest
    return out


def study_code(spec) -> dict[str, str]:
    """A study's code as its version records it: the files of its folder (:func:`desim.versions.code_files`,
    its data files included) and the code its refs reach outside it (:func:`outside_code`)."""
    return {**code_files(spec.root, population_files(spec.population)),
            **outside_code(spec.root, spec.resolved())}
