"""`arcstudy score` end to end on every sample recording of ../shared, from the files and from the database.

Baselines come from the sidecars' `baseline_actions` (written as a metadata.json folder); the fixture recordings
replay on the conformance games; the benchmarking file's lost action ids are supplied with --recovered-actions
(the sidecar's reconstructed_actions). Every run the toolkit scored must come out with the sidecar's numbers,
both ways, and the two scorecards must be the same bytes.

Human-dataset files: a file records one session; its card may hold other sessions' slots (the cd82 stub). The
score covers the plays of the files given, so the file's own run is compared with the card slot of its
filename guid, and the game score with the sidecar's (the stub scores 0).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.manifest import sha256_file
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.scoring import scorecard_from_json
from tests.sidecars import TOL, assert_close

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
GAMES = SHARED / "conformance" / "environment_files"
SIDECARS = sorted(SAMPLES.rglob("*.expected.json"))
RECORDINGS = sorted(SAMPLES.rglob("*.jsonl"))
POLICY = "arc-agi-3/2026-04"
SLUG = "scorecard__arc-agi-3_2026-04.json"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", "score", *args], catch_exceptions=False)
    return result.exit_code, result.output




@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("score-inputs")
    recovered, baselines = {}, {}
    for sidecar in SIDECARS:
        doc = json.loads(sidecar.read_text())
        assert baselines.setdefault(doc["game_id"], doc["baseline_actions"]) == doc["baseline_actions"]
        if "reconstructed_actions" in doc:
            recovered[doc["recording"]] = doc["reconstructed_actions"]
    for game_id, values in baselines.items():
        code, version = game_id.split("-")
        (root / "meta" / code / version).mkdir(parents=True)
        (root / "meta" / code / version / "metadata.json").write_text(
            json.dumps({"game_id": game_id, "baseline_actions": values}))
    (root / "recovered.json").write_text(json.dumps(recovered))
    return {"meta": root / "meta", "recovered": root / "recovered.json", "root": root}


def common(inputs, db: Path, out: Path) -> list[str]:
    return ["--games", str(GAMES), "--baselines", str(inputs["meta"]), "--recovered-actions",
            str(inputs["recovered"]), "--db", str(db), "--out", str(out)]


@pytest.fixture(scope="module")
def from_files(inputs) -> dict:
    root = inputs["root"]
    code, output = run(str(SAMPLES), *common(inputs, root / "files.duckdb", root / "files-out"), "--policy", "all")
    assert code == 0, output
    return {"db": root / "files.duckdb", "out": root / "files-out", "output": output}


@pytest.fixture(scope="module")
def from_db(inputs) -> dict:
    root = inputs["root"]
    db = root / "study.duckdb"
    with Workspace(db) as ws:
        report = ingest_paths(ws, RECORDINGS, run_id="test-score")
        assert {f.status for f in report.files} == {"loaded"}
    code, output = run(*common(inputs, db, root / "db-out"), "--policy", "all", "--no-figures")
    assert code == 0, output
    return {"db": db, "out": root / "db-out", "output": output}


def tables(got: dict) -> dict[str, pl.DataFrame]:
    """The out tables of one run's scorecard (other tests add other scorecards to the same database)."""
    card_id = json.loads((got["out"] / SLUG).read_text())["card_id"]
    with Workspace(got["db"], read_only=True) as ws:
        out = {name: ws.read(f"SELECT * FROM {name} WHERE card_id = ?", [card_id]) for name in
               ("out_arc3__run_scores", "out_arc3__replay_checks", "out_arc3__game_scores")}
        out["runs"] = ws.read("SELECT * FROM runs")
    return out


def pairs(value) -> list:
    return [] if value in (None, [], [[]]) else value


@pytest.mark.parametrize("origin", ["from_files", "from_db"])
@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda p: p.name.replace(".expected.json", "")[:50])
def test_every_sample_reproduces_its_sidecar(request, origin, sidecar):
    got = request.getfixturevalue(origin)
    doc = json.loads(sidecar.read_text())
    if "runs" not in got:  # read once per origin
        got["runs"] = tables(got)["out_arc3__run_scores"].filter(pl.col("policy_id") == POLICY)
    runs = got["runs"]
    mine = (runs.filter(pl.col("play_id").str.starts_with(doc["guid"] + "/"))
            .with_columns(pl.col("play_id").str.split("/").list.last().cast(pl.Int64).alias("k")).sort("k"))
    scorecard = json.loads((got["out"] / SLUG).read_text())
    env = next(e for e in scorecard["environments"] if e["id"] == doc["game_id"])
    expected_runs = doc["scored"]["environment"]["runs"]
    card = doc["card"]
    if doc["format"] == "human-dataset-jsonl":
        slot = card["guids"].index(doc["guid"])
        expected_runs, slots = [expected_runs[slot]], [slot]
    else:
        slots = list(range(card["total_plays"]))
    assert mine.height == len(expected_runs)
    for row, expected, slot in zip(mine.iter_rows(named=True), expected_runs, slots, strict=True):
        assert_close(env["runs"][row["run_index"]], expected)  # the whole toolkit run entry
        assert row["actions"] == card["actions"][slot]
        assert row["resets"] == card["resets"][slot]
        assert row["state"] == card["states"][slot]
        abl = card["actions_by_level"]
        assert row["card_actions_by_level"] == pairs(abl[slot] if slot < len(abl) else None)
        assert math.isclose(row["score"], expected["score"], abs_tol=TOL)
    assert math.isclose(max(mine["score"]), doc["scored"]["game_score"], abs_tol=TOL)


def test_files_and_database_give_the_same_scorecards(from_files, from_db):
    names = sorted(p.name for p in from_files["out"].glob("scorecard__*.json"))
    assert names == ["scorecard__arc-agi-3_2025-preview.json", "scorecard__arc-agi-3_2026-03.json", SLUG]
    for name in names:
        assert (from_files["out"] / name).read_bytes() == (from_db["out"] / name).read_bytes(), name
    sc = json.loads((from_files["out"] / SLUG).read_text())
    assert sc["scoring_policy"] == POLICY and sc["card_id"].startswith("arcstudy-")
    assert set(sc) >= {"environments", "score", "total_actions", "total_environments", "verification"}
    assert "timestamp" not in (from_files["out"] / SLUG).read_text()
    # tu93 (spec/scoring.md D.3) and vc33 (D.2) under the three policies.
    games = tables(from_files)["out_arc3__game_scores"]
    tu93 = dict(games.filter(pl.col("game_id") == "tu93-0768757b").select("policy_id", "score").iter_rows())
    assert tu93 == pytest.approx({"arc-agi-3/2025-preview": 476 / 9, "arc-agi-3/2026-03": 1457.76 / 45,
                                  "arc-agi-3/2026-04": 100 / 3}, abs=1e-6)
    vc33 = dict(games.filter(pl.col("game_id") == "vc33-5430563c").select("policy_id", "score").iter_rows())
    assert vc33 == pytest.approx({"arc-agi-3/2025-preview": 200 / 7, "arc-agi-3/2026-03": 300 / 28,
                                  "arc-agi-3/2026-04": 300 / 28}, abs=1e-9)


def test_replay_statuses(from_files, from_db):
    for got, replay_input in ((from_files, "recording"), (from_db, "steps")):
        checks = tables(got)["out_arc3__replay_checks"]
        assert checks.height == 64 and set(checks["replay_input"]) == {replay_input}
        fixtures = {g.split("-")[0] for g in checks["game_id"]} & {p.name for p in GAMES.iterdir()}
        assert len(fixtures) == 8
        fixture_rows = checks.filter(pl.col("game_id").str.slice(0, 4).is_in(list(fixtures)))
        assert fixture_rows.height == 45
        assert set(fixture_rows["verification_status"]) == {"verified"}
        assert (fixture_rows["n_steps_replayed"] > 0).all() and fixture_rows["game_source_sha256"].is_not_null().all()
        others = checks.filter(~pl.col("game_id").str.slice(0, 4).is_in(list(fixtures)))
        assert set(others["verification_status"]) == {"unverified"}
        assert others["replay_detail"].str.contains("game not loadable").all()
        assert not checks["is_score_excluded"].any()
        human = checks.filter(pl.col("game_id").str.slice(0, 4).is_in(["vc33", "lp85", "cd82"])
                              & pl.col("is_only_reset_levels"))
        assert human.height == 3
    csv_rows = list(csv.DictReader((from_files["out"] / "replay_checks.csv").open()))
    assert len(csv_rows) == 64 and csv_rows == sorted(csv_rows, key=lambda r: r["play_id"])


def test_outputs_manifest_and_runs(from_files, inputs):
    out = from_files["out"]
    for stem in ("level_scores_heatmap__arc-agi-3_2026-04", "level_scores_heatmap__arc-agi-3_2026-03",
                 "policy_sensitivity"):
        for ext in (".png", ".svg", ".vl.json"):
            assert (out / "figures" / (stem + ext)).stat().st_size > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["policy_ids"] == ["arc-agi-3/2025-preview", "arc-agi-3/2026-03", "arc-agi-3/2026-04"]
    for rec in RECORDINGS:
        assert manifest["inputs"][str(rec)] == sha256_file(rec)
    for name in ("replay_checks.csv", "policy_sensitivity.csv", SLUG):
        assert manifest["outputs"][str(out / name)] == sha256_file(out / name)
    assert str(inputs["meta"]) in manifest["inputs"]
    sources = manifest["notes"]["baseline_sources"][POLICY]
    assert {s["source"] for s in sources.values()} == {"baselines-dir"}
    assert sources["bt33-a7c3f9d18b4e"]["flags"] == ["baseline_length_differs_from_levels"]
    assert manifest["notes"]["verification"] == {"unverified": 19, "verified": 45}
    assert manifest["exit_code"] == 0
    runs = tables(from_files)["runs"]
    assert runs.filter(pl.col("run_id") == manifest["run_id"]).height == 1
    sens = pl.read_csv(out / "policy_sensitivity.csv")
    assert sens.height == 3 * 64
    tu93 = sens.filter(pl.col("game_id") == "tu93-0768757b").sort("from_policy_id", "to_policy_id")
    assert tu93["score_delta"].to_list() == pytest.approx([1457.76 / 45 - 476 / 9, 100 / 3 - 476 / 9,
                                                           100 / 3 - 1457.76 / 45], abs=1e-6)


def test_rescoring_is_byte_identical_and_replaces_rows(inputs, from_db):
    before = tables(from_db)
    again = inputs["root"] / "db-again"
    code, output = run(*common(inputs, from_db["db"], again), "--policy", POLICY, "--no-figures")
    assert code == 0, output
    assert (again / SLUG).read_bytes() == (from_db["out"] / SLUG).read_bytes()
    after = tables(from_db)
    for name in ("out_arc3__run_scores", "out_arc3__replay_checks", "out_arc3__game_scores"):
        assert after[name].height == before[name].height, name
    assert after["runs"].height == before["runs"].height + 1


def test_scorecard_loads_back(from_files):
    text = (from_files["out"] / SLUG).read_text()
    sc = scorecard_from_json(text)  # strict: aggregates agree with the runs
    assert sc.policy_id == POLICY and len(sc.environments) == 17
    ours = (tables(from_files)["out_arc3__run_scores"].filter(pl.col("policy_id") == POLICY)
            .select("game_id", "run_index", "score", "actions", "message").sort("game_id", "run_index"))
    with Workspace(from_files["db"]) as ws:  # the database holds no recordings: only the scorecard loads
        report = ingest_paths(ws, [from_files["out"] / SLUG], run_id="test-loadback")
        assert [f.status for f in report.files] == ["loaded"] and report.n_quarantined == 0
        loaded = ws.read("SELECT game_id, run_index, score, actions, message, level_baseline_actions "
                         "FROM core_arc3__scorecard_runs ORDER BY game_id, run_index")
        doc = ws.read("SELECT card_id, policy_id, score FROM core_arc3__scorecards")
    assert loaded.drop("level_baseline_actions").equals(ours)
    assert doc.row(0) == (sc.card_id, POLICY, sc.score)


def test_lost_action_ids_are_excluded_without_recovery(inputs, from_files):
    bench = next((SAMPLES / "benchmarking").glob("*.jsonl"))
    root = inputs["root"]
    db = str(from_files["db"])  # rows of other scorecard ids live side by side
    code, output = run(str(bench), "--db", db, "--out", str(root / "bench"), "--no-figures")
    assert code == 3, output
    checks = pl.read_csv(root / "bench" / "replay_checks.csv")
    assert checks["verification_status"].to_list() == ["not_replayable"]
    assert checks["is_score_excluded"].to_list() == [True]
    sc = json.loads((root / "bench" / SLUG).read_text())
    assert sc["environments"] == [] and sc["verification"]["replay_checks"][0]["excluded"] is True
    # ls20 is public: its published baseline is the shipped reference fallback once the actions are known.
    code, output = run(str(bench), "--recovered-actions", str(inputs["recovered"]), "--db", db,
                       "--out", str(root / "bench2"), "--no-figures")
    # Scored, but nothing could be replay-verified (ls20 is not under the checkout's games): exit 3, said.
    assert code == 3, output
    assert "nothing could be verified" in output and "1 play scored unverified" in output
    sc = json.loads((root / "bench2" / SLUG).read_text())
    assert sc["verification"]["baseline_sources"]["ls20-9607627b"]["source"] == "reference-csv"
    assert sc["environments"][0]["runs"][0]["actions"] == 3
    assert sc["environments"][0]["runs"][0]["level_baseline_actions"] == [22, 123, 73, 84, 96, 192, 186]


def test_recovered_actions_that_do_not_fit_are_rejected_input(tmp_path):
    """Recovered actions of the wrong count once stopped the run: a ValueError traceback from the database,
    'unreadable: reading failed on a worker' from a file. They are now rejected input naming the file, the
    recording's plays stay uncountable (left out), exit 3."""
    bench = next((SAMPLES / "benchmarking").glob("*.jsonl"))
    recovered = tmp_path / "recovered.json"
    recovered.write_text(json.dumps({bench.name: ["ACTION1"]}))
    db = tmp_path / "s.duckdb"
    with Workspace(db) as ws:
        assert {f.status for f in ingest_paths(ws, [bench], run_id="t").files} == {"loaded"}
    for origin in ((str(bench),), ()):
        code, output = run(*origin, "--recovered-actions", str(recovered), "--db", str(db), "--out",
                           str(tmp_path / "out"), "--no-figures")
        text = " ".join(output.split())
        assert code == 3, output
        assert (f"rejected input: {bench.name}: --recovered-actions: the actions given for it do not fit (1 "
                "recovered ids for 3 frame steps): not used") in text
        assert "unreadable" not in text and "left out of the score: 1 play" in text


def test_tampered_recording_is_excluded_unless_trusted(from_files, tmp_path):
    src = SAMPLES / "fixtures" / "an53_scripted-win.frames.jsonl"
    lines = src.read_text().splitlines(keepends=True)
    tampered = tmp_path / src.name
    tampered.write_text("".join(lines[:9] + lines[10:]))  # line 10 (an ACTION4) removed
    args = ["--games", str(GAMES), "--db", str(from_files["db"]), "--no-figures"]
    code, output = run(str(tampered), *args, "--out", str(tmp_path / "strict"))
    assert code == 3, output
    assert "left out of the score: 4 plays" in output
    checks = pl.read_csv(tmp_path / "strict" / "replay_checks.csv").sort("play_id")
    assert set(checks["verification_status"]) == {"divergent"} and checks["is_score_excluded"].all()
    first = checks.row(0, named=True)
    assert (first["divergence_line_number"], first["divergence_step_index"], first["divergence_field"]) == \
        (10, 9, "frame")
    assert json.loads((tmp_path / "strict" / SLUG).read_text())["environments"] == []
    code, output = run(str(tampered), *args, "--out", str(tmp_path / "trusted"), "--trust-recordings")
    assert code == 0, output
    sc = json.loads((tmp_path / "trusted" / SLUG).read_text())
    assert len(sc["environments"][0]["runs"]) == 4  # scored (baseline from the conformance metadata)
    assert {c["status"] for c in sc["verification"]["replay_checks"]} == {"divergent"}


def test_usage_and_errors(tmp_path):
    code, output = run(str(SAMPLES / "fixtures"), "--policy", "arc-agi-3/1999", "--db", str(tmp_path / "x.duckdb"))
    assert code == 2 and "unknown scoring policy" in output
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    code, output = run(str(SAMPLES / "fixtures"), "--baselines", str(bad), "--db", str(tmp_path / "x.duckdb"))
    assert code == 2 and "needs columns" in output
    huge = tmp_path / "huge.csv"  # beyond the bound a metadata.json has at ingest: it once scored as given
    huge.write_text('game_id,baseline_actions\nan53-6f5f2264,"[2, 19, 7, 4611686018427387904]"\n')
    code, output = run(str(SAMPLES / "fixtures" / "an53_scripted-lose.noframes.jsonl"), "--games", str(GAMES),
                       "--baselines", str(huge), "--db", str(tmp_path / "x.duckdb"), "--out", str(tmp_path / "h"))
    assert code == 2 and "row 2 (an53-6f5f2264): baseline value 4611686018427387904 is above 1,000,000,000" in \
        " ".join(output.split()), output
    assert not (tmp_path / "h").exists()
    code, output = run(str(SAMPLES / "fixtures"), "--game", "an53-6f5f2264", "--db", str(tmp_path / "x.duckdb"))
    assert code == 2 and "--game selects database plays" in output
    code, output = run("--db", str(tmp_path / "missing.duckdb"))
    assert code == 1 and "does not exist" in output
    help_text = CliRunner().invoke(app, ["score", "--help"]).output
    assert "Reads:" in help_text and "Writes:" in help_text and "--trust-recordings" in help_text


def test_the_same_recording_under_two_names_is_read_once(tmp_path):
    """Its plays were once counted from both copies: the replay failed with 'ValueError: zip() argument 2 is
    longer than argument 1', every play was left out and the scorecard said 0."""
    sample = SAMPLES / "fixtures" / "an53_scripted-lose.noframes.jsonl"
    copy = tmp_path / "copy of an53.jsonl"
    copy.write_bytes(sample.read_bytes())
    outs = {}
    for name, files in (("one", [sample]), ("both", [sample, copy])):
        code, output = run(*map(str, files), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                           "--out", str(tmp_path / name), "--no-figures", "--workers", "1")
        assert "Error" not in output, output
        doc = json.loads((tmp_path / name / SLUG).read_text())
        outs[name] = (doc["score"], [len(env["runs"]) for env in doc["environments"]])
        if name == "both":
            assert code == 3 and f"same content as {sample.name}" in output, output
    assert outs["both"] == outs["one"]


def _score_summary(out: Path) -> tuple:
    doc = json.loads((out / SLUG).read_text())
    return doc["score"], [(env["id"], [run["actions"] for run in env["runs"]]) for env in doc["environments"]]


def test_two_files_of_one_play_score_the_first_and_report_the_others(tmp_path):
    """Two different files holding the same play (same guid) once stopped the whole run with exit 2. The first
    given is scored, each later one is rejected input (exit 3) naming the first and saying whether the two
    agree; the other recordings are scored as usual."""
    sample = SAMPLES / "fixtures" / "an53_scripted-lose.noframes.jsonl"
    other = SAMPLES / "fixtures" / "ck17_scripted-lose.frames.jsonl"
    retimed = tmp_path / "retimed.jsonl"  # the same steps, other timestamps: not byte-identical
    retimed.write_text(sample.read_text().replace("T04:16:39.", "T05:16:39."))
    cut = tmp_path / "runs" / sample.name  # same name in another folder, first 20 lines: disagrees
    cut.parent.mkdir()
    cut.write_text("".join(sample.read_text().splitlines(keepends=True)[:20]))
    outs = {}
    for name, files in (("alone", [sample, other]), ("dups", [sample, cut, other, retimed]),
                        ("cut-alone", [cut, other]), ("cut-first", [cut, sample, other])):
        code, output = run(*map(str, files), "--games", str(GAMES), "--db", str(tmp_path / "s.duckdb"),
                           "--out", str(tmp_path / name), "--no-figures", "--workers", "1")
        assert code in (0, 3) and "Error" not in output, output
        outs[name] = (code, output, _score_summary(tmp_path / name))
    assert outs["alone"][0] == 0 and outs["cut-alone"][0] == 0
    assert outs["dups"][2] == outs["alone"][2] and outs["cut-first"][2] == outs["cut-alone"][2]
    assert outs["dups"][2] != outs["cut-alone"][2]  # the cut file really scores otherwise
    code, output, _ = outs["dups"]
    text = "".join(output.split())  # the console wraps long lines, inside a long path too

    def said(message: str) -> bool:
        return "".join(message.split()) in text

    assert code == 3, output
    assert said(f"rejected input: {sample.name}: line 1: duplicate_play: the plays of guid "
                f"4ca6b8c4-460f-478e-93e6-57c4cfe86e56 are also in {sample.resolve()} (line 1), given first and scored; this "
                "file is left out: the two files DISAGREE: 20 steps here, 38 there"), output
    assert said(f"rejected input: retimed.jsonl: line 1: duplicate_play: the plays of guid "
                f"4ca6b8c4-460f-478e-93e6-57c4cfe86e56 are also in {sample.resolve()} (line 1), given first and scored; this "
                "file is left out: the two files hold the same steps"), output
    rejected = json.loads((tmp_path / "dups" / "manifest.json").read_text())["notes"]["rejected_input"]
    assert [r.split(": ")[0] for r in rejected] == [str(cut), str(retimed)]
    code, output, _ = outs["cut-first"]
    assert code == 3 and "".join(f"also in {cut} (line 1)".split()) in "".join(output.split()), output


@pytest.mark.parametrize(("content", "words"), [(b"\xa3\x00binary", "cannot read recovered actions"),
                                                (b"[" * 100_000 + b"]" * 100_000, "nested too deeply")])
def test_an_unreadable_recovered_actions_file_is_a_usage_error(tmp_path, content: bytes, words: str):
    """A binary file or one nested too deeply once gave a UnicodeDecodeError / RecursionError traceback."""
    recovered = tmp_path / "recovered.json"
    recovered.write_bytes(content)
    result = CliRunner().invoke(app, ["--plain", "score", str(SAMPLES / "fixtures"), "--recovered-actions",
                                      str(recovered), "--db", str(tmp_path / "x.duckdb")])
    assert result.exit_code == 2 and words in result.output, result.output


def test_a_second_run_into_one_out_folder_leaves_no_file_of_the_first(tmp_path):
    """`score --policy all --out X`, then `score --out X` on other recordings: the first run's scorecards of the
    other policies, its policy_sensitivity.csv and figures stayed beside the second run's files, and read as its
    own. Each run now clears the files a score run writes; a file of the user's is kept."""
    out = tmp_path / "out"
    fixtures = SAMPLES / "fixtures"
    first = sorted(fixtures.glob("*.jsonl"))[:2]
    second = sorted(fixtures.glob("*.jsonl"))[2:3]
    code, output = run(*map(str, first), "--policy", "all", "--out", str(out), "--no-figures")
    assert code in (0, 3), output
    assert len(list(out.glob("scorecard__*.json"))) > 1 and (out / "policy_sensitivity.csv").exists()
    (out / "notes.md").write_text("mine\n")
    code, output = run(*map(str, second), "--out", str(out), "--no-figures")
    assert code in (0, 3), output
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {Path(p).name for p in manifest["outputs"]} | {"manifest.json", "notes.md"}
    assert {p.name for p in out.iterdir() if p.is_file()} == listed
    assert len(list(out.glob("scorecard__*.json"))) == 1 and not (out / "policy_sensitivity.csv").exists()
    assert (out / "notes.md").read_text() == "mine\n"


def test_a_game_id_with_a_final_newline_is_one_bad_line_not_a_stopped_run(tmp_path):
    """`^...$` in Python also matches before a final newline: "an53-6f5f2264\\n" passed the line check, and the
    score tables' schema then refused the whole run's rows (exit 1, nothing written, the good file's play too)."""
    good = SAMPLES / "fixtures" / "an53_scripted-win.frames.jsonl"
    lines = good.read_text().splitlines()
    first = json.loads(lines[1])
    first["data"]["game_id"] += "\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(first), *lines[2:]]) + "\n")
    code, output = run(str(good), str(bad), "--games", str(GAMES), "--out", str(tmp_path / "out"), "--no-figures")
    assert code == 3, output
    assert "bad_game_id" in output
    assert (tmp_path / "out" / SLUG).exists()


def test_the_score_tables_go_in_under_a_tight_bound_and_again_under_the_wide_one_if_refused(inputs, from_files,
                                                                                          tmp_path, monkeypatch):
    """`score` inserts its out tables under SCORE_TABLES_MEMORY (a flood of 100,000 plays peaked at 1.04 GB under
    the workspace's 256 MB, 0.92 GB so). A write DuckDB refuses for memory is rolled back, rows already inserted
    included, and made again under the wider bound: the same rows land, once."""
    import duckdb

    from pipeline.core import workspace as workspace_mod
    from pipeline.scoring import storage

    limits: list[tuple[str, str | None, str]] = []
    insert_frame, insert_arrow = workspace_mod.Workspace.insert_frame, workspace_mod.insert_arrow

    def refusing(self, table_name, df, *, con=None, validate=True, memory=None):
        limits.append((table_name, memory, ""))
        if memory == storage.SCORE_TABLES_MEMORY and table_name == storage.SCORE_TABLES[1]:
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block (as the test says)")
        return insert_frame(self, table_name, df, con=con, validate=validate, memory=memory)

    def noting_limit(con, table_name, rows):
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        limits[-1] = (*limits[-1][:2], limit)
        return insert_arrow(con, table_name, rows)

    monkeypatch.setattr(workspace_mod.Workspace, "insert_frame", refusing)
    monkeypatch.setattr(workspace_mod, "insert_arrow", noting_limit)
    db, out = tmp_path / "again.duckdb", tmp_path / "out"
    code, output = run(str(SAMPLES), *common(inputs, db, out), "--policy", "all", "--no-figures")
    assert code == 0, output
    first, second = storage.SCORE_TABLES[:2]
    limits = [entry for entry in limits if entry[0] in storage.SCORE_TABLES]  # (not the runs table's row)
    assert [(t, m) for t, m, _ in limits] == [(first, storage.SCORE_TABLES_MEMORY),
                                              (second, storage.SCORE_TABLES_MEMORY),
                                              *((t, None) for t in storage.SCORE_TABLES)]
    assert limits[0][2].replace(" ", "") in ("61.0MiB", "64.0MB", "64MB")  # the tight bound was in force
    ours, theirs = tables({"db": db, "out": out}), tables(from_files)
    for name in ("out_arc3__run_scores", "out_arc3__replay_checks", "out_arc3__game_scores"):
        assert ours[name].height == theirs[name].height > 0  # every row, once (the first try's rows rolled back)
        assert ours[name].drop("card_id").sort(ours[name].columns[1:3]).equals(
            theirs[name].drop("card_id").sort(theirs[name].columns[1:3])), name
