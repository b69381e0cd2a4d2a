"""docs/reference.md is the models' own description of the study files, and stays so."""
from __future__ import annotations

import typing
from pathlib import Path

from desim.reference import PAGES, render, type_text
from desim.study.files import NETWORK_KINDS, NETWORKS, Interaction

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_committed_page_is_what_the_models_say():
    assert (DOCS / "reference.md").read_text(encoding="utf-8") == render(), (
        "docs/reference.md is out of date: python -m desim.reference > docs/reference.md")


def test_every_field_of_every_file_says_what_it_means():
    missing = [f"{model.__name__}.{name}" for _, top, objects in PAGES
               for model in [top] + [m for _, m in objects]
               for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert missing == []


def models_in(annotation) -> set:
    from pydantic import BaseModel
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for a in typing.get_args(annotation) for m in models_in(a)}


def test_every_object_a_file_holds_has_its_own_section():
    shown = {top for _, top, _ in PAGES} | {m for _, _, objects in PAGES for _, m in objects}
    held = {m for model in shown for f in model.model_fields.values() for m in models_in(f.annotation)}
    assert held - shown == set()
    assert all("object (" + name in render() for name in ("code reference", "interaction", "stop_when[]"))


def test_every_network_kind_and_setting_is_on_the_page():
    page = render()
    assert set(NETWORKS) == set(NETWORK_KINDS)
    for kind in NETWORK_KINDS:
        assert f"| `{kind}` |" in page
    for _, needs, reads in NETWORKS.values():
        for setting in needs + reads:
            assert setting in Interaction.model_fields, setting
            assert f"| `{setting}` |" in page


def test_types_read_as_json():
    from typing import Literal
    assert type_text(list[str] | None) == "list of string or null"
    assert type_text(Literal["a", "b"]) == '"a" \\| "b"'
    assert type_text(dict[str, int]) == "object of integer"
