"""The shims: modules at the top of the package kept for studies written for an earlier desim, each the
module that replaced it under its old name. A shim that lost a name (or gained one) would break such a
study, or say the new module is something it is not."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "desim"

# old name -> the module it re-exports whole
SHIMS = {
    "desim.config": "desim.study.files",
    "desim.interfaces": "desim.study.contract",
    "desim.network": "desim.study.network",
    "desim.refs": "desim.study.refs",
    "desim.schemas": "desim.records",
    "desim.feed": "desim.messaging.feed",
    "desim.columnar_feed": "desim.messaging.columnar",
}


def public(module) -> set[str]:
    return {name for name in vars(module) if not name.startswith("_")}


@pytest.mark.parametrize("old, new", sorted(SHIMS.items()))
def test_a_shim_has_the_public_names_of_its_module(old, new):
    shim, moved = importlib.import_module(old), importlib.import_module(new)
    assert public(shim) == public(moved)
    assert all(getattr(shim, name) is getattr(moved, name) for name in public(moved))


def test_every_shim_is_checked():
    """A module that copies another's names (``_moved``) is a shim: listed above, so it is checked."""
    found = {f"desim.{p.stem}" for p in PACKAGE.glob("*.py") if "import desim." in p.read_text(encoding="utf-8")
             and "as _moved" in p.read_text(encoding="utf-8")}
    assert found == set(SHIMS)


def test_desim_sweep_has_the_names_of_the_sweeps():
    """``desim.sweep`` names what ``desim.experiments.sweep`` exports (a package: its attributes grow as its
    submodules are imported, so its ``__all__`` is what it exports)."""
    shim, moved = importlib.import_module("desim.sweep"), importlib.import_module("desim.experiments.sweep")
    assert list(shim.__all__) == list(moved.__all__)
    assert all(getattr(shim, name) is getattr(moved, name) for name in moved.__all__)


def test_the_network_pictures_old_spellings_still_work():
    """``desim.network_views.diffusion_player`` and ``.picture``, as the README and an error message said
    before they moved to ``desim.report.network_picture``."""
    import desim.network_views as nv
    from desim.report import network_picture
    assert nv.diffusion_player is network_picture.diffusion_player and nv.picture is network_picture.picture
    with pytest.raises(AttributeError):
        nv.read_network       # noqa: B018 - only the names users were told about
