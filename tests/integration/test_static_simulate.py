"""The simulated static-task study: deterministic per seed, every file ingests without a quarantined row, and the
families it made ambiguous or much harder than their source are the ones the build and report flag."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.report.reports.static_tasks import LOW_AGREEMENT, LOW_KAPPA
from pipeline.simulate.static_audit import simulate_static_study
from pipeline.transforms.build import build


def _bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_static_study_is_deterministic_and_its_design_is_found(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    design = simulate_static_study(a, seed=3)
    simulate_static_study(b, seed=3)
    assert _bytes(a) == _bytes(b)
    assert json.loads((a / "DESIGN.json").read_text()) == design
    db = tmp_path / "s.duckdb"
    with Workspace(db) as ws:
        report = ingest_paths(ws, [a / "arc_tgi", a / "audit", a / "arc2"], run_id="t", workers=1)
        assert report.n_quarantined == 0 and {f.source_format for f in report.files} == {
            "arc-tgi", "arc2-attempts", "harc-summary"}
        build(ws, load_config(), figures=False)
        audits = ws.read("SELECT * FROM out_arctgi__family_audits")
        pairs = ws.read("SELECT * FROM out_arc2__pair_calibration")
        flags = ws.read("SELECT flags FROM core_arc2__attempts")["flags"].explode().drop_nulls()
    assert set(audits["family_id"]) == set(design["families"].values())
    assert audits["n_tasks"].unique().to_list() == [design["design"]["tasks_per_family"]]
    low = audits.filter((pl.col("answer_agreement") < LOW_AGREEMENT) | (pl.col("fleiss_kappa") < LOW_KAPPA))
    assert sorted(low["family_id"]) == design["ambiguous_families"]
    harder = audits.filter(pl.col("is_much_harder_than_source"))["family_id"].to_list()
    assert harder == design["much_harder_than_source"]
    assert (audits["source_human_data"] == "arc-agi-2").all()
    assert pairs["task_id"].n_unique() == len(design["families"])
    assert {"zero_submissions", "multiple_correct"} <= set(flags)
