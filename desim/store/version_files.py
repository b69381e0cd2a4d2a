"""A version's files as they were: a study folder written out of the store, for code that must run as a run ran.

A run records its study's code and data files as ``{path: hash}`` (``desim.versions.code_files``, in ``runs.code``
and its version's ``code``), and the store keeps the texts of a new version's files by hash (``code_texts``). A
picture drawn by study code from a stored run (the grid layer of ``desim viz grid``, ``desim report`` and the
dashboard: ``grid_layer``) must run the code that run's version had, not the study's files as they are now (an
edited ``model.py``, a newer ``sugar-map.txt``). :func:`version_folder` writes those files into a private folder
per version, from which ``desim.study.refs`` imports the code (a folder per version: each is imported once,
under its own name). A file whose text the store did not keep (binary, over ``desim.versions.TEXT_LIMIT``) is
taken from the study folder only while it still has its hash (:func:`file_bytes`), the hash computed by
``desim.versions.file_hash``, the one rule a version's files are recorded by.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path, PurePosixPath
from typing import Any

from desim.jsontext import parsed
from desim.store.catalogue import Catalogue
from desim.versions import SKIP_DIRS, code_hash, file_hash

_folders: dict[str, tuple[Path, list[str]]] = {}    # a study's version (its code's hash): its folder, files not had
_lock = threading.Lock()
_base: list[Path] = []                              # this process's private folder of versions' files


def code_of(con, run: dict[str, Any]) -> dict[str, str]:
    """The run's code and data files, ``{path: hash}``: as the run recorded them, else as its version did
    (empty for a run recorded before desim kept either)."""
    code = _json(run.get("code"))
    if not code and run.get("version_id"):
        version = Catalogue(con).version(run["version_id"])
        code = _json(version.get("code")) if version else {}
    return {str(k): str(v) for k, v in code.items()}


def version_folder(con, root: Path, code: dict[str, str]) -> tuple[Path, list[str]]:
    """A folder holding the study's files as a version had them, ``code`` (``{path: hash}``), and the paths it
    could not hold. Each file is its text the store kept (``code_texts``) or, when the store kept none (a binary
    or large file), the study's own file while it still has that hash. Written once per version and process, in
    a private temporary folder removed when the process exits; the folder is named as the study's (a message
    or a path in the code reads the same). The study's files that no version records (an image, its JSON files) are
    linked in as they are now."""
    root = Path(root)
    key = f"{root.resolve()}:{code_hash(code)}"
    with _lock:
        if key in _folders and _folders[key][0].is_dir():
            return _folders[key]
        if not _base:
            base = Path(tempfile.mkdtemp(prefix="desim-version-code-"))
            atexit.register(shutil.rmtree, base, True)
            _base.append(base)
        texts = Catalogue(con).code_texts(sorted(set(code.values())))
        folder = Path(tempfile.mkdtemp(dir=_base[0], prefix=f"{code_hash(code)}-")) / root.name
        missing = []
        for rel, digest in sorted(code.items()):
            data = file_bytes(root, rel, digest, texts.get(digest))
            if data is None:
                missing.append(rel)
                continue
            dest = folder.joinpath(*PurePosixPath(rel).parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        folder.mkdir(parents=True, exist_ok=True)
        _link_the_rest(root, folder, code)
        _folders[key] = (folder, missing)
        return folder, missing


def _link_the_rest(root: Path, folder: Path, code: dict[str, str]) -> None:
    """Link into ``folder`` the study's files that are not part of a version (an image the layer reads, the
    study's JSON files, a log): no version records them, so today's copy is the one there is."""
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS]
        at = Path(here).relative_to(root)
        for name in files:
            rel = (at / name).as_posix()
            dest = folder / at / name
            if rel in code or dest.exists() or dest.is_symlink():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(Path(here, name).resolve(), dest)


def file_bytes(root: Path, rel: str, digest: str, text: str | None) -> bytes | None:
    """The bytes of ``rel`` with hash ``digest``: its kept text, else the study's file if it still has that
    hash; None when neither (or ``rel`` is not a plain relative path: the store's paths never leave the folder)."""
    path = PurePosixPath(rel)
    if path.is_absolute() or not path.parts or ".." in path.parts or "\\" in rel:
        return None
    if text is not None:
        data = text.encode("utf-8")
        if file_hash(data) == digest:
            return data
    try:
        data = Path(root).joinpath(*path.parts).read_bytes()
    except OSError:
        return None
    return data if file_hash(data) == digest else None


def _json(value: Any) -> Any:
    return parsed(value, {})
