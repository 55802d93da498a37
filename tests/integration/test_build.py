"""`arcstudy build` end to end: idempotent, rebuilds only what changed inputs affect and says why, dry run,
figures and manifest, the baselines command, and the sample recordings against the toolkit's cards."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.config import load_config, resolve
from pipeline.core.outputs import OutputError
from pipeline.core.workspace import Workspace
from pipeline.transforms.build import OUT_TABLES, build
from pipeline.transforms.synthetic import SyntheticStudy
from schemas import TABLES
from tests.fixtures.transforms.studies import BASELINE_GAME, baseline_study, low_effort_study


def _load(db: Path, *studies) -> None:
    with Workspace(db) as ws:
        for st in studies:
            st.load(ws)


def _snapshot(ws: Workspace) -> dict[str, pl.DataFrame]:
    return {t: ws.read(f"SELECT * FROM {t}") for t in OUT_TABLES}


def _state(ws: Workspace) -> dict[str, str]:
    return dict(ws.read("SELECT build_target, run_id FROM build_state").iter_rows())


def test_build_is_idempotent_and_incremental(db_path: Path):
    _load(db_path, low_effort_study(), baseline_study())
    with Workspace(db_path) as ws:
        first = build(ws, load_config(), figures=False)
        assert first.rebuilt == ["plays_levels", "attempts", "baselines", "solvability", "durations",
                                 "reference_points", "arc2_calibration", "arctgi_families", "baseline_intervals"]
        assert all(p.reasons == ["never built"] for p in first.plans)
        before, state = _snapshot(ws), _state(ws)
        assert before["out_arc3__plays"].height == 5 * 4 + 4 + 4 + 3 + 2 + 7
        # every table the build wrote is declared in schemas/ (nothing created around the registry)
        assert set(ws.table_names()) == set(TABLES) and all(before[t].height for t in OUT_TABLES if t.startswith(("out_arc3", "out_study")))

        again = build(ws, load_config(), figures=False)
        assert again.rebuilt == [] and _state(ws) == state
        assert all(_snapshot(ws)[t].equals(before[t]) for t in OUT_TABLES)

        # a solvability key touches one step; the dry run says so and writes nothing
        cfg = resolve({"solvability": {"min_full_solvers": 7}})
        dry = build(ws, cfg, figures=False, dry_run=True)
        assert dry.rebuilt == ["solvability"]
        assert dry.plans[3].reasons == ["config changed: solvability (" + json.dumps(
            {"confidence_level": 0.95, "min_full_solvers": 2}) + " -> " + json.dumps(
            {"min_full_solvers": 7, "confidence_level": 0.95}) + ")"]
        assert _state(ws) == state
        build(ws, cfg, figures=False)
        after = _state(ws)
        changed = {t for t in after if after[t] != state[t]}
        assert changed == {"out_arc3__game_solvability", "out_arc3__level_completion"}
        # le01 and le02: 5 genuine + the slow participant + the expert all solved them (7 full solvers)
        assert ws.read("SELECT game_id FROM out_arc3__game_solvability WHERE is_included ORDER BY 1")["game_id"].to_list() == [
            "le01-000000a1", "le02-000000a2"]

        # the baseline rule feeds the baselines table's is_default_rule and the reference points
        rule = build(ws, resolve({"baselines": {"rule": "second-best"}, "solvability": {"min_full_solvers": 7}}),
                     figures=False)
        assert rule.rebuilt == ["baselines", "reference_points", "baseline_intervals"]
        assert rule.plans[5].reasons == ['config changed: baselines.rule ("upper-median" -> "second-best")',
                                         "upstream rebuilt: baselines"]

    # new input: one more recording changes the core tables, so everything downstream rebuilds
    st = SyntheticStudy(namespace="8009")
    st.add_recording(BASELINE_GAME, "R" + "a" * 5 + "L" + "a" * 30, n_levels=3)
    _load(db_path, st)
    with Workspace(db_path) as ws:
        cfg = resolve({"baselines": {"rule": "second-best"}, "solvability": {"min_full_solvers": 7}})
        grown = build(ws, cfg, figures=False)
        assert grown.rebuilt[0] == "plays_levels" and len(grown.rebuilt) == 7
        reasons = grown.plans[0].reasons
        assert any(r.startswith("input changed: core_arc3__steps (") for r in reasons)
        assert "input changed: core_arc3__card_plays" in " ".join(reasons)
        # an out table emptied behind the build's back is rebuilt, and only that step
        ws.con.execute("DELETE FROM out_arc3__durations_summary")
        healed = build(ws, cfg, figures=False)
        assert healed.rebuilt == ["durations"]
        assert "no longer holds" in healed.plans[4].reasons[0]
        assert build(ws, cfg, figures=False, force=True).rebuilt[-4:] == ["reference_points", "arc2_calibration",
                                                                   "arctgi_families", "baseline_intervals"]


def _invoke(*args: str):
    return CliRunner().invoke(app, ["--plain", *args])


def test_cli_build_figures_manifest_and_baselines(db_path: Path, tmp_path: Path, shared_dir: Path):
    _load(db_path, low_effort_study(), baseline_study())
    out_dir = tmp_path / "build"
    res = _invoke("build", "--db", str(db_path), "--out-dir", str(out_dir))
    assert res.exit_code == 0, res.output
    assert "rebuilt 10 of 10 steps" in res.output
    assert "card cross-check: 40 plays carry their own card, 1 disagree" in res.output
    assert "undo_not_counted_by_card" in res.output
    assert "low effort: 16 units judged, 1 excluded, removing 4 recordings" in res.output
    for name in ("durations_by_outcome", "completion_by_level", "actions_by_level"):
        for suffix in (".png", ".svg", ".vl.json"):
            assert (out_dir / "figures" / f"{name}{suffix}").stat().st_size > 0
    spec = json.loads((out_dir / "figures" / "actions_by_level.vl.json").read_text())
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["config"]["baselines"]["rule"] == "upper-median"
    assert str(out_dir / "figures" / "completion_by_level.png") in manifest["outputs"]
    assert any(k.endswith("#core_arc3__steps") for k in manifest["inputs"])
    assert manifest["notes"]["steps"]["plays_levels"]["reasons"] == ["never built"]
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT count(*) AS n FROM runs WHERE command LIKE 'arcstudy build%'")["n"][0] == 1

    again = _invoke("build", "--db", str(db_path), "--out-dir", str(out_dir))
    assert again.exit_code == 0 and "nothing to rebuild" in again.output
    (out_dir / "figures" / "durations_by_outcome.png").unlink()
    dry = _invoke("build", "--db", str(db_path), "--out-dir", str(out_dir), "--dry-run")
    assert dry.exit_code == 0 and "would rebuild" in dry.output and "figure files missing (1)" in dry.output

    bad = tmp_path / "bad.toml"
    bad.write_text("[baselines]\nrulez = 1\n")
    res = _invoke("build", "--db", str(db_path), "--config", str(bad))
    assert res.exit_code == 2 and "unknown key 'baselines.rulez'" in res.output

    meta_dir, diff_csv = tmp_path / "meta", tmp_path / "diff.csv"
    res = _invoke("baselines", "--db", str(db_path), "--rule", "second-best", "--write-metadata", str(meta_dir),
                  "--compare", str(shared_dir / "reference" / "arc-agi-3-public-games.csv"), "--out", str(diff_csv))
    assert res.exit_code == 0, res.output
    assert "skipped bl01-0000b001: no baseline for level(s) [3]" in res.output
    written = sorted(p.relative_to(meta_dir).as_posix() for p in meta_dir.rglob("metadata.json"))
    assert "le01/000000a1/metadata.json" in written and "bl01/0000b001/metadata.json" not in written
    assert json.loads((meta_dir / "le01" / "000000a1" / "metadata.json").read_text()) == {
        "game_id": "le01-000000a1", "baseline_actions": [50, 50]}
    diff = pl.read_csv(diff_csv)
    assert set(diff["status"].unique().to_list()) <= {"not_published", "no_baseline"}
    res = _invoke("baselines", "--db", str(db_path), "--rule", "best")
    assert res.exit_code == 0 and "human baselines (best)" in res.output
    assert _invoke("baselines", "--db", str(db_path), "--rule", "mode").exit_code == 2


def test_build_help_through_the_console_script():
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "build", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0
    assert "Reads:" in res.stdout and "out_arc3__level_baselines" in res.stdout


def test_samples_match_the_toolkit_cards(db_path: Path, shared_dir: Path):
    from pipeline.ingest import ingest_paths

    samples = shared_dir / "samples" / "arc-agi-3"
    with Workspace(db_path) as ws:
        ingest_paths(ws, [samples / "toolkit", samples / "human"], run_id="test", workers=1)
        build(ws, load_config(), figures=False)
        plays = ws.read("SELECT p.*, f.file_path FROM out_arc3__plays p JOIN raw_ingest__files f USING (file_id)")
        checks = ws.read("SELECT * FROM out_arc3__card_checks")
        attempts = ws.read("SELECT * FROM out_arc3__attempts")
    compared = 0
    for (path,), mine in plays.sort("play_index").group_by("file_path", maintain_order=True):
        card = json.loads(Path(path.replace(".jsonl", ".expected.json")).read_text())["card"]
        slots = range(len(card["actions"]))
        if "/human/" in path:  # the card may hold stub slots of other sessions: take this file's own slot
            slots = [card["guids"].index(mine["guid"][0])]
        assert mine["n_actions"].to_list() == [card["actions"][i] for i in slots], path
        assert mine["n_resets"].to_list() == [card["resets"][i] for i in slots], path
        assert mine["rebuilt_actions_by_level"].to_list() == [card["actions_by_level"][i] for i in slots], path
        assert mine["play_state"].to_list() == [card["states"][i] for i in slots], path
        compared += 1
    assert compared == 12 + 3
    # only the three human recordings carry their own card, and all three agree with their lines
    assert checks.height == 3 and checks["is_card_agreeing"].all()
    # toolkit recordings are agents, not participants
    assert sorted(attempts["game_id"].to_list()) == ["cd82-fb555c5d", "lp85-305b61c3", "vc33-5430563c"]
    assert not attempts["is_attempt"].any()  # 25, 21 and 17 actions: none has more than 30


def test_a_figures_folder_that_cannot_be_written_leaves_the_database_as_it_was(db_path: Path, tmp_path: Path,
                                                                                monkeypatch):
    """A build whose --out-dir filled up while its figures were written had already committed its tables and
    build state, with no row in `runs` for them. The figures are now staged before the tables are committed."""
    import pipeline.transforms.figures as figures

    _load(db_path, low_effort_study(), baseline_study())

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "figures" / "x.png"))

    monkeypatch.setattr(figures, "write_figures", disk_full)
    with Workspace(db_path) as ws:
        runs = ws.row_count("runs") if ws.has_table("runs") else 0
        with pytest.raises(OutputError, match="No space left on device"):
            build(ws, load_config(), out_dir=tmp_path / "out", figures=True)
        assert all(ws.row_count(t) == 0 for t in OUT_TABLES if ws.has_table(t))
        assert ws.row_count("build_state") == 0 and (ws.row_count("runs") if ws.has_table("runs") else 0) == runs
    assert not (tmp_path / "out").exists()
