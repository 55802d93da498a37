"""Names people read in the reports: column headers, figure file names after agents, index groups."""

from __future__ import annotations

import pytest

from pipeline.report.html import column_label
from pipeline.report.reports.index import OTHER, audience_of
from pipeline.report.reports.scores import card_file_names, recording_stem


@pytest.mark.parametrize(("name", "label"), [
    ("game_id", ("game ID", "")),
    ("n_full_solvers", ("full solvers", "")),
    ("is_included", ("included", "")),
    ("median_duration_min", ("median duration", "min")),
    ("duration_s", ("duration", "s")),
    ("p25_s", ("25th percentile", "s")),
    ("completion_rate", ("completion rate", "0–1")),
    ("share_participants_all_solved", ("share participants all solved", "0–1")),
    ("n_1", ("n 1", "")),
    ("n", ("n", "")),
    ("s", ("s", "")),
])
def test_column_labels(name, label):
    assert column_label(name) == label


def test_card_file_names_are_slugs_of_the_labels_and_unique():
    labels = {"arcstudy-b": "random (arcstudy-b)", "arcstudy-a": "random", "arcstudy-c": "My Agent/v2",
              "arcstudy-d": "arcstudy-d", "arcstudy-e": "database plays (ab12-x)"}
    assert card_file_names(labels) == {"arcstudy-a": "random", "arcstudy-b": "random-2",
                                       "arcstudy-c": "my-agent-v2", "arcstudy-d": "arcstudy-d",
                                       "arcstudy-e": "database-plays-ab12-x"}


def test_recording_stem():
    assert recording_stem("/data/agents/near-optimal") == "near-optimal"
    assert recording_stem("/runs/ft09-abc.noframes.jsonl") == "ft09-abc"
    assert recording_stem("/data/agents/agent.v2") == "agent.v2"  # a folder keeps its whole name


def test_audiences_of_files():
    assert audience_of("calibration__games.csv") == audience_of("figures/calibration/x.png") \
        == audience_of("demo.build/manifest.json") == "Analysts: human calibration"
    assert audience_of("scores/random/scorecard__p.json") == audience_of("baselines.csv") \
        == audience_of("figures/scores/policy_sensitivity__random.png") == "Organizers: scores and baselines"
    assert audience_of("harc/manifest.json") == audience_of("harc__errors.csv") == "Researchers: H-ARC and traces"
    assert audience_of("demo.runs/20260101T000000Z-x/manifest.json") == OTHER
