"""ARC-TGI task families: family ids (clashing generator names told apart by their benchmark folder), diversity
per family, and human audits in both layouts (ARC-AGI-2 and H-ARC), each checked against a plain-Python
computation on the fixtures."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.transforms.build import build

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "static"
TGI = FIX / "tgi"
LOG = FIX / "arc2_attempts_mixed.csv"
AUDIT_ARC2 = FIX / "audit_arc2_layout.csv"
AUDIT_HARC = FIX / "audit_harc_layout" / "summary_data.csv"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tgi") / "tgi.duckdb"
    with Workspace(path) as ws:
        ingest_paths(ws, [TGI, LOG, AUDIT_ARC2, AUDIT_HARC.parent], run_id="test", workers=1)
        build(ws, load_config(), figures=False)
    return path


def _read(db: Path, sql: str) -> pl.DataFrame:
    with Workspace(db, read_only=True) as ws:
        return ws.read(sql)


def _export_tasks() -> dict[str, tuple[str, str, dict]]:
    """task_id -> (folder, generator_name, task data) from the fixture exports."""
    out = {}
    for path in sorted(TGI.rglob("*.csv")):
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                out[r["task_id"]] = (path.parent.name, r["generator_name"], json.loads(r["data"]))
    return out


def _objects(grid: list[list[int]]) -> int:
    """4-connected groups of one non-zero colour, by flood fill."""
    seen, n = set(), 0
    for i, row in enumerate(grid):
        for j, c in enumerate(row):
            if c == 0 or (i, j) in seen:
                continue
            n += 1
            stack = [(i, j)]
            seen.add((i, j))
            while stack:
                a, b = stack.pop()
                for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                    if 0 <= x < len(grid) and 0 <= y < len(grid[0]) and (x, y) not in seen and grid[x][y] == c:
                        seen.add((x, y))
                        stack.append((x, y))
    return n


def test_family_ids_tell_clashing_generator_names_apart(db: Path):
    div = _read(db, "SELECT family_id, generator_name, family_prefix, benchmark, benchmark_split, source_task_id, "
                    "n_tasks FROM out_arctgi__family_diversity ORDER BY family_id")
    assert div.rows() == [
        ("ARC-AGI-1-Train/task00576224", "task00576224", "ARC-AGI-1-Train", "ARC-AGI-1", "train", "00576224", 3),
        ("ARC-AGI-2-Eval/task00576224", "task00576224", "ARC-AGI-2-Eval", "ARC-AGI-2", "eval", "00576224", 2),
        ("task13e47133", "task13e47133", "ARC-AGI-1-Train", "ARC-AGI-1", "train", "13e47133", 2),
    ]


def test_family_prefix_option_overrides_the_path(tmp_path: Path):
    plain = tmp_path / "exports" / "all.csv"
    plain.parent.mkdir()
    shutil.copy(TGI / "ARC-AGI-2-Eval" / "ARC-AGI-2-Eval.csv", plain)
    db = tmp_path / "p.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(plain), "--db", str(db), "--family-prefix", "ARC-AGI-2-Train"])
    assert res.exit_code == 0, res.output
    with Workspace(db, read_only=True) as ws:
        assert set(ws.read("SELECT family_prefix FROM core_arctgi__tasks")["family_prefix"]) == {"ARC-AGI-2-Train"}
    # without the option, a path that names no benchmark folder leaves the prefix empty
    db2 = tmp_path / "q.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(plain), "--db", str(db2)]).exit_code == 0
    with Workspace(db2, read_only=True) as ws:
        assert ws.read("SELECT family_prefix FROM core_arctgi__tasks")["family_prefix"].to_list() == [None, None]


def test_diversity_matches_an_independent_computation(db: Path):
    tasks = _export_tasks()
    fams: dict[str, list[dict]] = defaultdict(list)
    clash = {g for g in {v[1] for v in tasks.values()} if len({v[0] for v in tasks.values() if v[1] == g}) > 1}
    for folder, gen, data in tasks.values():
        fams[f"{folder}/{gen}" if gen in clash else gen].append(data)
    div = {r["family_id"]: r for r in _read(db, "SELECT * FROM out_arctgi__family_diversity").iter_rows(named=True)}
    assert set(div) == set(fams)
    for fid, datas in fams.items():
        pairs = [p for d in datas for split in ("train", "test") for p in d[split]]
        ins = [p["input"] for p in pairs]
        outs = [p["output"] for p in pairs]
        r = div[fid]
        assert r["n_pairs"] == len(pairs)
        assert (r["input_height_min"], r["input_height_max"]) == (min(map(len, ins)), max(map(len, ins)))
        assert (r["output_width_min"], r["output_width_max"]) == (min(len(g[0]) for g in outs),
                                                                  max(len(g[0]) for g in outs))
        assert r["n_input_sizes"] == len({(len(g), len(g[0])) for g in ins})
        assert r["n_colours"] == len({c for g in ins + outs for row in g for c in row})
        objs = [_objects(g) for g in ins]
        assert (r["input_objects_min"], r["input_objects_max"]) == (min(objs), max(objs))
        assert r["input_objects_median"] == pytest.approx(statistics.median(objs))
        assert r["output_objects_median"] == pytest.approx(statistics.median(_objects(g) for g in outs))
        same = [len(p["input"]) == len(p["output"]) and len(p["input"][0]) == len(p["output"][0]) for p in pairs]
        assert r["share_shape_unchanged"] == pytest.approx(sum(same) / len(same))
        assert r["n_duplicate_grids"] == len(ins) - len({json.dumps(g) for g in ins})
        assert r["n_duplicate_tasks"] == len(datas) - len({json.dumps(d, sort_keys=True) for d in datas})
    # the fixture's ARC-AGI-1-Train family repeats a whole task: flagged for the maintainer
    assert div["ARC-AGI-1-Train/task00576224"]["n_duplicate_tasks"] == 1
    assert "duplicate_tasks" in div["ARC-AGI-1-Train/task00576224"]["diversity_flags"]
    assert div["task13e47133"]["diversity_flags"] == []


def _fleiss(table: list[list[int]]) -> float:
    """Fleiss' kappa written out (equal raters per subject)."""
    n = sum(table[0])
    total = len(table) * n
    p_j = [sum(row[j] for row in table) / total for j in range(len(table[0]))]
    p_i = [(sum(c * c for c in row) - n) / (n * (n - 1)) for row in table]
    p_bar, p_e = sum(p_i) / len(p_i), sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def test_audits_in_both_layouts_match_an_independent_computation(db: Path):
    tasks = _export_tasks()
    clash = {"task00576224"}
    family = {t: (f"{v[0]}/{v[1]}" if v[1] in clash else v[1]) for t, v in tasks.items()}
    units: dict[str, list[tuple]] = defaultdict(list)  # family -> (task, rater, solved, within2, duration, first)
    with open(AUDIT_ARC2, newline="") as fh:
        for r in csv.DictReader(fh):
            solved = int(r["correct_submissions"]) >= 1
            units[family[r["task_ID"]]].append((r["task_ID"], r["session_ID"], solved,
                                                solved and int(r["submissions"]) <= 2, float(r["duration_seconds"]),
                                                None))
    harc: dict[tuple, list[dict]] = defaultdict(list)
    with open(AUDIT_HARC, newline="") as fh:
        for r in csv.DictReader(fh):
            harc[(r["hashed_id"], r["task_name"].removesuffix(".json"))].append(r)
    for (who, task), rs in harc.items():
        rs.sort(key=lambda r: int(r["attempt_number"]))
        solved = any(r["solved"] == "True" for r in rs)
        within = any(r["solved"] == "True" and int(r["attempt_number"]) <= 2 for r in rs)
        units[family[task]].append((task, who, solved, within, None, rs[0]["test_output_grid"]))
    audits = {r["family_id"]: r for r in _read(db, "SELECT * FROM out_arctgi__family_audits").iter_rows(named=True)}
    assert set(audits) == set(units)
    for fid, us in units.items():
        a = audits[fid]
        assert a["n_tasks"] == len({u[0] for u in us}) and a["n_attempts"] == len(us)
        assert a["n_solved"] == sum(u[2] for u in us) and a["n_solved_within_2"] == sum(u[3] for u in us)
        solved_d = [u[4] for u in us if u[2] and u[4] is not None]
        assert a["median_solved_duration_s"] == (pytest.approx(statistics.median(solved_d)) if solved_d else None)
        firsts: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for u in us:
            if u[5] is not None:
                firsts[u[0]].append((u[1], u[5]))
        shares = [max(Counter(g for _, g in v).values()) / len(v) for v in firsts.values()]
        assert a["answer_agreement"] == pytest.approx(statistics.mean(shares))
        m = min(len(v) for v in firsts.values())
        assert a["min_raters_per_task"] == m
        cats = sorted({g for v in firsts.values() for _, g in sorted(v)[:m]})
        table = [[sum(1 for _, g in sorted(v)[:m] if g == c) for c in cats] for v in firsts.values()]
        expected = _fleiss(table) if len(cats) > 1 or any(len(set(r)) > 1 for r in table) else None
        if a["fleiss_kappa"] is None:
            assert expected is None or expected != expected  # undefined: a single category
        else:
            assert a["fleiss_kappa"] == pytest.approx(expected)
    # low agreement shows: TgiB2's three raters gave three different first answers
    assert audits["task13e47133"]["answer_agreement"] == pytest.approx(1 / 3)


def test_families_link_to_their_source_task_and_flag_much_harder(db: Path):
    audits = {r["family_id"]: r for r in _read(db, "SELECT * FROM out_arctgi__family_audits").iter_rows(named=True)}
    # source 13e47133 in the ARC-AGI-2 log: rows 7-9 and 16-23 land, 10 of 11 solved within 2
    hard = audits["task13e47133"]
    assert (hard["source_task_id"], hard["source_human_data"], hard["source_n_attempts"]) == ("13e47133", "arc-agi-2",
                                                                                                11)
    assert hard["source_solve_rate_within_2"] == pytest.approx(10 / 11)
    assert hard["solve_rate_within_2"] == pytest.approx(1 / 6) and hard["is_much_harder_than_source"]
    easy = audits["ARC-AGI-1-Train/task00576224"]
    assert easy["source_solve_rate_within_2"] == pytest.approx(4 / 6) and not easy["is_much_harder_than_source"]


def test_harc_source_numbers_when_no_arc2_rows(tmp_path: Path):
    # an H-ARC summary of the source task 13e47133 (two participants, one solving on attempt 1)
    summary = tmp_path / "harc" / "summary_data.csv"
    summary.parent.mkdir()
    lines = AUDIT_HARC.read_text().splitlines()
    head = lines[0]
    extra = ["expv0,training,q1,q1_13e47133.json,13e47133.json,1,1,4,True,|1|,d,d,True",
             "expv0,training,q2,q2_13e47133.json,13e47133.json,1,1,4,False,|2|,d,d,True",
             "expv0,training,q2,q2_13e47133.json,13e47133.json,1,2,6,False,|3|,d,d,True",
             "expv0,training,q2,q2_13e47133.json,13e47133.json,1,3,8,True,|1|,d,d,True"]
    summary.write_text("\n".join([head, *extra]) + "\n")
    db = tmp_path / "h.duckdb"
    with Workspace(db) as ws:
        ingest_paths(ws, [TGI, AUDIT_HARC.parent, summary], run_id="t", workers=1)
        build(ws, load_config(), figures=False)
        row = ws.read("SELECT * FROM out_arctgi__family_audits WHERE family_id = 'task13e47133'").row(0, named=True)
    assert (row["source_human_data"], row["source_n_attempts"]) == ("h-arc", 2)
    assert row["source_solve_rate_within_2"] == pytest.approx(0.5)
    # the H-ARC-layout audit alone: 1 of 3 within 2 against 1 of 2 is a gap under 0.25: not flagged
    assert row["solve_rate_within_2"] == pytest.approx(1 / 3) and not row["is_much_harder_than_source"]


def test_a_database_from_before_family_prefix_keeps_ingesting(tmp_path: Path):
    db = tmp_path / "old.duckdb"
    with Workspace(db) as ws:
        ws.con.execute("ALTER TABLE core_arctgi__tasks DROP COLUMN family_prefix")  # as an older arcstudy made it
    with Workspace(db) as ws:
        ingest_paths(ws, [TGI / "ARC-AGI-2-Eval"], run_id="t", workers=1)
        got = ws.read("SELECT task_id, family_prefix FROM core_arctgi__tasks ORDER BY task_id").rows()
    assert got == [("TgiC1", "ARC-AGI-2-Eval"), ("TgiC2", "ARC-AGI-2-Eval")]
