"""``study.json`` is read through one validated reader: the reports, effects, sweeps and the dashboard
see the same typed values, and a malformed entry is an error naming the file and field (a view that
only shows a title or colours falls back to none and leaves the error to the part of the page that
reports it)."""
from __future__ import annotations

import json

import pytest

from desim.dashboard.data import study_summary
from desim.experiments.sweep.summary import default_metrics, metric_bounds
from desim.report.diffusion import study_colors
from desim.study.files import StudyConfigError, read_study_file, study_file_or_none
from desim.versions import STUDY_FILE


def rewrite(root, **changes):
    path = root / STUDY_FILE
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_the_reader_gives_the_files_values_typed(study_copy):
    root = study_copy("epidemic_testing")
    study = read_study_file(root)
    on_disk = json.loads((root / STUDY_FILE).read_text())
    assert study.id == on_disk["id"] and study.title == on_disk["title"]
    assert study.display_metrics == on_disk["display_metrics"]
    assert default_metrics(root) == on_disk["display_metrics"]
    assert metric_bounds(root)["share_I"] == (0.0, 1.0)
    assert study_colors(root, "state") == on_disk["state_colors"]["state"]
    assert study_colors(root, "no_such_field") == {}


@pytest.mark.parametrize("field, value, words", [
    ("display_metrics", "share_I", "display_metrics"),      # a string where a list is meant: not 7 letters
    ("display_states", ["state", 3], "display_states[1]"),
    ("state_colors", {"state": "red"}, "state_colors.state"),
    ("title", 7, "title"),
])
def test_a_malformed_entry_is_one_error_naming_the_file_and_field(study_copy, field, value, words):
    root = study_copy("epidemic_testing")
    rewrite(root, **{field: value})
    with pytest.raises(StudyConfigError) as caught:
        read_study_file(root)
    assert STUDY_FILE in str(caught.value) and words in str(caught.value)
    if field == "display_metrics":      # the sweep and effect summaries read it through the same reader
        with pytest.raises(StudyConfigError, match="display_metrics"):
            default_metrics(root)


def test_views_that_only_show_colours_or_a_title_fall_back_and_the_study_card_says_why(study_copy):
    root = study_copy("epidemic_testing")
    rewrite(root, state_colors={"state": "red"})
    assert study_file_or_none(root) is None
    assert study_colors(root, "state") == {}            # the palette colours every category instead
    entry = study_summary(root)
    assert entry["title"] == "" and "state_colors.state" in entry["error"] and STUDY_FILE in entry["error"]
    (root / STUDY_FILE).unlink()
    assert study_file_or_none(root) is None
    with pytest.raises(StudyConfigError, match="not found"):
        read_study_file(root)
