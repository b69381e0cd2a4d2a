"""Versions: every distinct configuration of a study that has run.

A study's files (as on disk, before run-time overrides such as ``--seed``,
``--steps`` or ``--set``, which are recorded on the run itself) and its code and data
(every other file in its folder: its Python, the data files its code reads, its roster and
network files; documentation, notebooks, figures, logs, ``desim export`` output and what
``.desimignore`` lists excepted: :func:`code_files`) are hashed. The first run of
a new hash creates a version whose parent is the study's previous version (branches
excepted), and the version keeps a diff of the two, so "what changed?" has an answer in
the store; an edited ``model.py`` shows as ``code.model.py`` (its hashes, not its text).
Runs of a configuration seen before join its version. Branches are versions too, with a
parent run and a fork step.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from desim.errors import StudyError

SKIP_DIRS = {"runs", "__pycache__", ".ipynb_checkpoints", ".git"}
STUDY_FILE, SIMULATION_FILE = "study.json", "simulation/simulation.json"
POPULATION_FILE, ENVIRONMENT_FILE = "population/population.json", "environment/environment.json"
"""Where a study's four files are in its folder: named here once, for every error that names one."""
POPULATION_DIR = POPULATION_FILE.split("/")[0]
"""The folder of population.json, which also holds the files it names (a roster, a network file)."""
CONFIG_FILES = {STUDY_FILE, SIMULATION_FILE, POPULATION_FILE, ENVIRONMENT_FILE}
"""The study's own files: compared field by field in its configuration, not hashed as code."""
NOT_INPUT = {".md", ".rst", ".ipynb", ".pyc", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".html"}
"""What a study folder holds that a run does not read: documentation, notebooks, figures."""


def population_files(population: Any) -> list[str]:
    """The data files a study's population reads beside ``population.json``: its roster and its
    network file (``interaction.kind`` ``file``). ``population`` is the loaded section or the dict a
    run recorded in its config; an edited network changes who meets whom as surely as edited code."""
    if population is None:
        return []

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    interaction = get(population, "interaction")
    files = [get(population, "roster")]
    if interaction is not None and get(interaction, "kind") == "file":
        files.append(get(interaction, "path"))
    return [str(f) for f in files if f]


LOG = re.compile(r".*\.log|nohup\.out|slurm-[0-9]+(_[0-9]+)?\.out|.*\.p?[oe][0-9]{3,}", re.IGNORECASE)
"""What a run's output leaves in a study folder, never read by a run: logs (``desim run . > run.log``,
``nohup.out``, SLURM's ``slurm-123.out``) and PBS/SGE job files (``job.o1234``, ``job.e1234``,
``job.po1234``: a job id of three digits or more). Narrow on purpose: ``flows.out`` or an ArcInfo
``terrain.e00`` may be a study's input; ``.desimignore`` leaves out any other output."""
IGNORE_FILE = ".desimignore"
"""A study's own list of files that are not its inputs: gitignore-like patterns (:func:`ignore_rules`)."""
EXPORT_MARKER = ".desim-export"
"""Written by ``desim export`` beside the files it wrote (their names, as JSON), so they are not inputs."""


def file_hash(data: bytes) -> str:
    """A file's hash in a version (its ``code``): the first 16 hex digits of the SHA-256 of its bytes. The one
    rule: whatever compares a file with a version's record of it hashes it here."""
    return hashlib.sha256(data).hexdigest()[:16]


def hash_file(path: str | Path) -> str:
    """:func:`file_hash` of the file at ``path``, read in chunks (a network file may be hundreds of MB)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


def ignore_rules(root: str | Path) -> list[tuple[bool, bool, re.Pattern]]:
    """The patterns of ``<root>/.desimignore``, as ``(negated, directories only, regex)``, in file order.

    A subset of gitignore's rules: one pattern a line; blank lines and lines starting with ``#`` are
    skipped; ``*`` and ``?`` match within a name, ``[abc]`` a character of the set, ``**`` any number of
    folders; a pattern without a ``/`` (but a trailing one) matches a file or folder of that name at any
    depth, one with a ``/`` is a path from the study folder; a trailing ``/`` matches folders only; a
    leading ``!`` counts again what an earlier pattern (or the built-in rules: logs, documentation,
    figures) left out, except inside a folder left out. The last pattern that matches decides."""
    try:
        # utf-8-sig: an editor's byte-order mark would otherwise be part of the first pattern, which then
        # matches nothing
        text = (Path(root) / IGNORE_FILE).read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return []
    rules = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:] if negated else line
        folders = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        if not pattern:
            continue
        anchored = "/" in pattern
        body = _pattern_regex(pattern.lstrip("/"))
        rules.append((negated, folders, re.compile(body if anchored else "(?:.*/)?" + body)))
    return rules


def _pattern_regex(pattern: str) -> str:
    """One ``.desimignore`` pattern as a regular expression over a path relative to the study folder."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):            # any number of folders, none included
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:   # a set; ']' first in it is one of its characters
            end = pattern.index("]", i + 2)
            chars = pattern[i + 1:end]
            negated = chars[:1] in ("!", "^")
            chars = (chars[1:] if negated else chars).replace("\\", "\\\\").replace("[", "\\[")
            out.append("[" + ("^" if negated else "") + chars + "]")
            i = end + 1
        elif pattern[i] == "\\" and i + 1 < len(pattern):    # an escaped character stands for itself
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _left_out(rel: str, folder: bool, rules: list[tuple[bool, bool, re.Pattern]], default: bool) -> bool:
    """Whether ``rel`` is not an input: ``default`` (the built-in rules' answer), then each matching rule."""
    for negated, folders_only, regex in rules:
        if (folder or not folders_only) and regex.fullmatch(rel):
            default = not negated
    return default


def exported_files(folder: str | Path) -> set[str]:
    """The names of the files ``desim export`` wrote in ``folder`` (its :data:`EXPORT_MARKER`), else none."""
    try:
        names = json.loads((Path(folder) / EXPORT_MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def mark_exported(folder: str | Path, names: list[str], replace: bool = False) -> Path:
    """Name ``names`` (files in ``folder``) as ``desim export``'s output in ``folder``'s :data:`EXPORT_MARKER`,
    beside those an earlier export named there (alone, with ``replace``: once the earlier ones are gone): a
    study's version then leaves them out (an export inside the study folder is not an input of its next run).
    Returns the marker's path."""
    path = Path(folder) / EXPORT_MARKER
    files = sorted(set(names) if replace else exported_files(folder) | set(names))
    path.write_text(json.dumps({"written_by": "desim export", "files": files}, indent=1) + "\n", encoding="utf-8")
    return path


def code_files(root: str | Path, data: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """``{relative path: hash}`` (:func:`file_hash`) of the study's code and data: every file under its folder
    but its four configuration files (compared field by field instead) and what a run does not read. So modules
    ``model.py`` imports count, and so do the files its code reads (Sugarscape's ``sugar-map.txt``, a price
    series, a prompt template) besides the data files beside ``population.json`` that ``data`` names
    (:func:`population_files`: roster, network file, which always count, even outside the folder: named by
    :func:`data_key`): an edited map changes a run as surely as edited code. A file counted whose name is not
    UTF-8 is refused (:func:`check_name`).

    Left out: ``runs/``, caches and hidden files and folders; documentation, notebooks and figures
    (:data:`NOT_INPUT`); logs (:data:`LOG`: ``desim run . > run.log`` makes the log before the run hashes the
    folder, and a resumed run would find it edited); the files ``desim export`` wrote (:data:`EXPORT_MARKER`);
    and what the study's ``.desimignore`` lists (:func:`ignore_rules`, which may also count a left-out file
    again). Hashing every other file is a superset of what a run reads: a helper script edited in the folder
    also makes a new version, which errs on the safe side.
    """
    root = Path(root)
    out: dict[str, str] = {}
    if not root.is_dir():
        return out
    rules = ignore_rules(root)
    paths = []
    # os.walk, pruned: never descend into runs/ (thousands of step folders, which runs and sweeps
    # running beside this one create and remove while we look)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        at = "" if here == root else here.relative_to(root).as_posix() + "/"
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")
                   and not _left_out(at + d, True, rules, False)]
        exported = exported_files(here) if EXPORT_MARKER in files else set()
        paths += [here / f for f in files if not f.startswith(".") and not _left_out(
            at + f, False, rules, Path(f).suffix.lower() in NOT_INPUT or LOG.fullmatch(f) is not None or f in exported)]
    found = {path: path.relative_to(root).as_posix() for path in paths}
    found.update({root / POPULATION_DIR / name: data_key(root, name) for name in data})
    for path in sorted(found):
        rel = found[path]
        if rel not in CONFIG_FILES and rel not in out and path.is_file():
            check_name(rel, path)
            out[rel] = hash_file(path)
    return out


def data_key(root: str | Path, name: str) -> str:
    """How a version names the data file ``name`` that ``population.json`` names (a roster, a network file:
    :func:`population_files`), relative to its folder or absolute. Relative: as written under that folder
    (``population/contacts.csv``, ``population/../../edges.csv``). Absolute: by its path from the study folder
    when it is inside it, as if written relative (the key stays when the folder moves with its data), else the
    way a ``..`` path names it (``/data/edges.csv`` and ``../../edges.csv`` are one file, under one key)."""
    root = Path(root)
    if not Path(name).is_absolute():
        return (root / POPULATION_DIR / name).relative_to(root).as_posix()
    path = Path(os.path.normpath(name))
    here = Path(os.path.abspath(root))
    # the same folder may be reached through a symbolic link (macOS's /tmp is /private/tmp)
    for file, folder in ((path, here), (Path(os.path.realpath(path.parent)) / path.name, root.resolve())):
        if file.is_relative_to(folder):
            return file.relative_to(folder).as_posix()
    return f"{POPULATION_DIR}/{Path(os.path.relpath(path, here / POPULATION_DIR)).as_posix()}"


def printable(path: str | Path) -> str:
    """``path`` as text that can be printed and stored: a byte of a name that is not UTF-8 (a Latin-1
    ``café``, which Python keeps as a lone surrogate) shown escaped, ``caf\\xe9.txt``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def check_name(key: str, path: str | Path) -> None:
    """Refuse (:class:`~desim.errors.StudyError`) ``key``, a file's name in a version's code, when it is not
    UTF-8 text (a Latin-1 file name): the store keeps a version's code as JSON text, which cannot hold it."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        name = Path(key).name
        what = "file" if name != printable(name) else "folder"
        raise StudyError(f"{printable(path)}: {what} name is not UTF-8 (a study's version names each of its "
                         f"files); rename it, or list it in the study's {IGNORE_FILE} if a run does not read it") \
            from None


TEXT_LIMIT = 1 << 20
"""A file's text is kept with its version (``code_texts``) up to this size: code and small data files, not a
large data set, whose hash alone says it changed."""

OUTSIDE = "<outside>/"
"""How a version's ``code`` names code its refs reach outside the study folder (``desim.study.refs.outside_code``):
``<outside>/op_classes.py`` (a module beside a notebook), ``<outside>/__main__.py`` (a script's classes),
``<outside>/__main__:Rule`` (a class typed into a notebook, by its source)."""
_outside_sources: dict[str, tuple[str, Path | str]] = {}


def keep_outside_source(key: str, digest: str, source: Path | str) -> None:
    """Where the text of ``key`` (an :data:`OUTSIDE` entry of a version's code, hashed ``digest``) is, for
    :func:`code_texts`: its real file (a module beside a notebook or a script: ``key`` is not a path in the
    study's folder) or, for code with no file (a class typed into a notebook), the text its hash was made of.
    The latest of this process, as ``desim.study.refs.outside_code`` hashed it for the run being recorded."""
    _outside_sources[key] = (digest, source)


def _outside_bytes(rel: str, h: str) -> bytes | None:
    """The bytes of the :data:`OUTSIDE` entry ``rel`` hashed ``h`` (:func:`keep_outside_source`), else None."""
    digest, source = _outside_sources.get(rel, (None, None))
    if digest != h:
        return None
    if isinstance(source, str):
        return source.encode()
    try:
        return None if source.stat().st_size > TEXT_LIMIT else source.read_bytes()
    except OSError:
        return None


def code_texts(root: str | Path, code: dict[str, str]) -> dict[str, str]:
    """``{hash: text}`` of the files of ``code`` (:func:`code_files`) that are UTF-8 text of at most
    :data:`TEXT_LIMIT` bytes and still have the hash ``code`` gives them (a file edited since it was hashed
    is left out, not kept under a hash that is not its own). An :data:`OUTSIDE` entry is read from where
    :func:`keep_outside_source` says it is (a module beside the notebook: its own file)."""
    root, out = Path(root), {}
    for rel, h in code.items():
        if rel.startswith(OUTSIDE):
            data = _outside_bytes(rel, h)
            if data is None or len(data) > TEXT_LIMIT:
                continue
        else:
            path = root / rel
            try:
                if path.stat().st_size > TEXT_LIMIT:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
        if file_hash(data) != h:
            continue
        try:
            out[h] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return out


def file_changes(old: dict[str, str], new: dict[str, str], texts: dict[str, str], old_name: str = "old",
                 new_name: str = "new") -> list[dict[str, Any]]:
    """Each file added, removed or edited between two versions' code (``{path: hash}``), with a unified diff of
    its texts (``texts``: ``{hash: text}``) when both were kept, else ``diff`` None and ``why``."""
    out = []
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a == b:
            continue
        change = "added" if a is None else "removed" if b is None else "edited"
        before = "" if a is None else texts.get(a)
        after = "" if b is None else texts.get(b)
        if before is None or after is None:
            why = ("its text was not kept (a version recorded before desim kept texts, a binary file, "
                   f"or one over {TEXT_LIMIT >> 20} MiB)")
            if any(str(h).startswith("process-") for h in (a, b) if h is not None):
                why = ("code with no source to read (a class made by type() or another tool in a notebook), known "
                       "only by a token of the Python process and class it ran with")
            out.append({"path": rel, "change": change, "diff": None, "why": f"{why}: hashes {a} -> {b}"})
            continue
        lines = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                          f"{old_name}/{rel}", f"{new_name}/{rel}"))
        out.append({"path": rel, "change": change, "diff": "".join(
            line if line.endswith("\n") else line + "\n" for line in lines)})
    return out


def code_hash(code: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(code, sort_keys=True).encode()).hexdigest()[:16]


def code_changes(old: dict[str, str] | None, new: dict[str, str]) -> list[str]:
    """Files added, removed or edited between two :func:`code_files` results, as text.

    A file other than Python added since ``old`` is not a change: a run made before it existed did not
    read it (a study that leaves a file in its folder as it runs, a marker or a cache, has added it
    itself), while an added module may be imported by code that was there. Nor is a log gone from ``new``
    (:data:`LOG`): a run recorded before logs were left out counted its own ``run.log``, which no run reads."""
    old = old or {}
    out = []
    for rel in sorted(set(old) | set(new)):
        if rel not in old:
            if rel.endswith(".py"):
                out.append(f"{rel} (added)")
        elif rel not in new:
            if not LOG.fullmatch(rel.rpartition("/")[2]):
                out.append(f"{rel} (removed)")
        elif old[rel] != new[rel]:
            out.append(f"{rel} (edited)")
    return out


def config_hash(config: dict[str, Any], code: dict[str, str] | None = None) -> str:
    """Hash of a study's files and code, study.json (title, description) excepted."""
    body = {k: v for k, v in config.items() if k != "study"}
    body["code"] = code or {}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def diff_configs(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Leaf-level differences between two JSON values: ``[{path, old, new}]``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                out.append({"path": sub, "old": None, "new": new[key]})
            elif key not in new:
                out.append({"path": sub, "old": old[key], "new": None})
            else:
                out.extend(diff_configs(old[key], new[key], sub))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out.extend(diff_configs(a, b, f"{path}[{i}]"))
        return out
    return [] if old == new else [{"path": path, "old": old, "new": new}]


def _named(items: Any) -> dict[str, Any] | None:
    """A list of objects each with its own ``name`` (scheduled events, broadcasts) by name, else None."""
    if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    by = {i["name"]: i for i in items}
    return by if len(by) == len(items) else None


def change_lines(d: dict[str, Any]) -> list[str]:
    """One of :func:`diff_configs`' differences in words, a line a change: a list of named items (events,
    broadcasts) that grew or shrank by the items added, removed or changed, not both lists whole."""
    def text(v: Any) -> str:
        return json.dumps(v, default=str, sort_keys=True)
    old, new = _named(d["old"]), _named(d["new"])
    if old is None or new is None:
        return [f"{d['path']}: {text(d['old'])} -> {text(d['new'])}"]
    lines = [f"{d['path']}: added '{n}' {text({k: v for k, v in new[n].items() if k != 'name'})}"
             for n in new if n not in old]
    lines += [f"{d['path']}: removed '{n}'" for n in old if n not in new]
    for n in (n for n in new if n in old and new[n] != old[n]):
        lines += [f"{d['path']}[{n}].{c['path']}: {text(c['old'])} -> {text(c['new'])}"
                  for c in diff_configs(old[n], new[n])]
    return lines


def overrides_of(spec) -> dict[str, Any]:
    """What a run changes from the study's files at run time (``--seed``, ``--steps``,
    ``--rounds``, ``--set``), for ``desim runs`` and for branches that inherit them."""
    files = (spec.files or {}).get("simulation") or {}
    if not files:
        return {}
    sim = spec.simulation
    out: dict[str, Any] = {}
    for key, name in (("seed", "seed"), ("n_steps", "steps"), ("interaction_rounds", "rounds")):
        default = files.get(key, 0 if key == "seed" else 1 if key == "interaction_rounds" else None)
        if getattr(sim, key) != default:
            out[name] = getattr(sim, key)
    declared = files.get("parameters") or {}
    changed = {k: v for k, v in sim.parameters.items() if k not in declared or declared[k] != v}
    if changed:
        out["set"] = changed
    return out


def describe_sweep_values(run: dict[str, Any], grid: list[str], *, named: bool = True) -> str:
    """``sweep sw1a2b3c4d: epsilon=0.3`` for a sweep's run (``epsilon=0.3`` without ``named``): its value of
    each parameter the sweep varies, the study's own value included (``--set`` names only values that differ
    from the files)."""
    if not run.get("sweep_id") or not grid:
        return ""
    params = run.get("parameters") or {}
    params = json.loads(params) if isinstance(params, str) else params
    values = " ".join(f"{k}={params.get(k)}" for k in grid)
    return f"sweep {run['sweep_id']}: {values}" if named else values


def describe_overrides(overrides: dict[str, Any] | None, *, seed: bool = True) -> str:
    """``--seed 11 --set n_agents=50`` for an overrides record (without the seed when ``seed`` is false:
    where the seed is shown on its own)."""
    o = overrides or {}
    parts = [f"--{k} {o[k]}" for k in ("seed", "steps", "rounds") if k in o and (seed or k != "seed")]
    parts += [f"--set {k}={v}" for k, v in sorted((o.get("set") or {}).items())]
    return " ".join(parts)
