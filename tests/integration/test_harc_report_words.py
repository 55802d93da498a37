"""The H-ARC report says what it computed (issue 29): the t-tests are the pooled-variance tests the rows are
labelled with (the caption said "Welch"), the paper's 7,924 training attempts and the release's 7,916 are both
explained, and a sample such as the demo's says why its published counts cannot match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.harc import stats
from pipeline.harc.published import FACTS, PAPER, RELEASE_ATTEMPTS
from pipeline.report.reports.harc_report import reproduction_view


def test_the_t_test_is_the_pooled_one_its_label_and_the_caption_say():
    from scipy.stats import ttest_ind

    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 30), rng.normal(0.5, 3, 50)  # unequal variances: Welch and pooled differ
    row = stats.t_test("x", "toy", "a", "b", a, b)
    pooled, welch = ttest_ind(a, b, equal_var=True), ttest_ind(a, b, equal_var=False)
    assert row["test_kind"] == "t_test_pooled"
    assert row["statistic"] == pytest.approx(pooled.statistic) and row["statistic"] != pytest.approx(welch.statistic)
    assert row["degrees_of_freedom"] == a.size + b.size - 2


def test_the_report_s_caption_names_the_test_computed(report_db, tmp_path: Path):
    from pipeline.report.reports import write_reports

    page = " ".join(write_reports(report_db.db, tmp_path, which=("harc",))["harc"].read_text().split())
    assert "Welch" not in page
    assert "t-tests with pooled variance (t_test_pooled" in page
    assert "7,924" in page and "7,916" in page  # Table 2's caption explains the two counts


def test_both_attempt_counts_are_explained_where_the_release_s_is_compared():
    assert (PAPER["training"]["n_task_attempts"], RELEASE_ATTEMPTS["training"]) == (7924, 7916)
    (fact,) = [f for f in FACTS if (f.metric, f.task_split) == ("n_attempts", "training")]
    assert fact.published == 7916 and "7,924" in fact.description and "§D.8" in fact.description
    (evaluation,) = [f for f in FACTS if (f.metric, f.task_split) == ("n_attempts", "evaluation")]
    assert "7,924" not in evaluation.description  # the evaluation counts agree


def _reproduction(observed_participants: float, observed_attempts: float) -> pl.DataFrame:
    rows = [("n_participants", "training", "participants", 783.0, observed_participants, False),
            ("n_attempts", "training", next(f.description for f in FACTS if (f.metric, f.task_split) ==
                                            ("n_attempts", "training")), 7916.0, observed_attempts, False),
            ("mean_task_accuracy_3", "training", "accuracy", 0.762, 0.747, False),
            ("max_attempt_number", "training", "highest attempt", 3.0, 3.0, True)]
    return pl.DataFrame(rows, orient="row", schema={
        "metric": pl.String, "task_split": pl.String, "metric_description": pl.String,
        "published_value": pl.Float64, "observed_value": pl.Float64, "is_match": pl.Boolean})


def test_a_small_sample_says_why_its_counts_cannot_match():
    view, notes = reproduction_view(_reproduction(16.0, 157.0))  # the demo's training split
    why = dict(zip(view["metric"], view["why_not_matching"], strict=True))
    assert why["n_participants"].startswith("a sample: 16 of 783 participants") and "counts scale" in why["n_attempts"]
    assert "a share varies" in why["mean_task_accuracy_3"]
    assert why["max_attempt_number"] == ""  # it matches
    assert len(notes) == 1 and "16 of the study's 783 participants (2%)" in notes[0]


def test_the_full_release_gets_no_sample_excuse():
    view, notes = reproduction_view(_reproduction(783.0, 7924.0))
    why = dict(zip(view["metric"], view["why_not_matching"], strict=True))
    assert notes == [] and not why["n_participants"]
    assert "paper's text differs" in why["n_attempts"]
