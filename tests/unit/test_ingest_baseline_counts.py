"""The per-player counts CSV of `arcstudy baselines --from-counts`: per-level and cumulative counts give the
same costs, incomplete levels count players but no cost, bad rows are rejected with file and line while the
good rows are kept, and a header without the needed columns refuses the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.ingest.baseline_counts import CountsFileError, read_counts
from schemas.arc3 import MAX_BASELINE_ACTIONS

# player -> per-level costs of the levels completed, in order; then levels not completed up to 3
PLAYERS = {"ann": [12, 30, 7], "bob": [9, 41], "cy": [20], "dee": []}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _rows(cumulative: bool) -> str:
    lines = ["game_id,level_index,player_id," + ("cumulative_actions" if cumulative else "actions") + ",completed"]
    for player, costs in PLAYERS.items():
        total = 0
        for level in range(1, 4):
            if level <= len(costs):
                total += costs[level - 1]
                lines.append(f"g1,{level},{player},{total if cumulative else costs[level - 1]},true")
            else:
                lines.append(f"g1,{level},{player},,false")
    return "\n".join(lines) + "\n"


def _costs(counts) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _g, player, _lvl, cost in counts.costs.sort("baseline_player_id", "level_index").select(
            "game_id", "baseline_player_id", "level_index", "level_cost").iter_rows():
        out.setdefault(player, []).append(cost)
    return out


@pytest.mark.parametrize("cumulative", [False, True])
def test_per_level_and_cumulative_counts_give_the_same_costs(tmp_path: Path, cumulative: bool):
    counts = read_counts(_write(tmp_path / "c.csv", _rows(cumulative)))
    assert counts.is_cumulative is cumulative and counts.rejects == [] and counts.n_rows == 12
    assert _costs(counts) == {p: c for p, c in PLAYERS.items() if c}
    # dee completed nothing but played: a player without costs
    assert sorted(counts.players["baseline_player_id"].to_list()) == sorted(PLAYERS)
    assert counts.n_levels == {"g1": 3}
    assert counts.costs["evidence"].unique().to_list() == ["counts-file"]
    assert not counts.costs["is_summary_sourced"].any()


def test_an_incomplete_level_ignores_its_count_and_blocks_later_levels(tmp_path: Path):
    text = ("game_id,level_index,player_id,cumulative_actions,completed\n"
            "g1,1,a,10,TRUE\n"
            "g1,2,a,99,False\n"      # count of an incomplete level: ignored
            "g1,3,a,120,true\n"      # completed after an incomplete level: impossible
            "g1,2,b,15,yes\n")       # level 1 of b is absent
    counts = read_counts(_write(tmp_path / "c.csv", text))
    assert _costs(counts) == {"a": [10]}
    assert [(r.location, r.check) for r in counts.rejects] == [("line 4", "level_order"), ("line 5", "level_order")]
    assert "level 2 is not completed (line 3)" in counts.rejects[0].reason
    assert "level 1 is not in the file" in counts.rejects[1].reason


def test_bad_rows_are_rejected_with_file_and_line_and_good_rows_kept(tmp_path: Path):
    path = _write(tmp_path / "bad.csv", (
        "game_id,level_index,player_id,cumulative_actions,completed\n"
        "g1,1,a,10,true\n"
        "g1,2,a,25,true\n"
        "g1,1,b,7,true\n"
        "g1,2,b,5,true\n"          # 5: cumulative below level 1's 7
        "g1,3,b,9,true\n"          # after a rejected level
        "g1,1,c,x,true\n"
        "g1,1,d,12,maybe\n"
        ",1,e,3,true\n"
        "g1,0,f,3,true\n"
        "g1,1,a,11,true\n"         # a's level 1 again
        "g1,1,g,3\n"
        "\n"
        "g2,1,h,-4,true\n"))
    counts = read_counts(path)
    got = [(r.location, r.check) for r in counts.rejects]
    assert got == [("line 5", "cumulative_decreasing"), ("line 6", "level_order"), ("line 7", "bad_count"),
                   ("line 8", "bad_completed"), ("line 9", "missing_value"), ("line 10", "bad_level_index"),
                   ("line 11", "duplicate_level"), ("line 12", "wrong_field_count"), ("line 14", "bad_count")]
    assert all(r.reason.startswith(f"{path}:{r.location.split()[1]}: ") for r in counts.rejects)
    assert "already given on line 2" in counts.rejects[6].reason
    assert _costs(counts) == {"a": [10, 15], "b": [7]}
    assert counts.n_rows == 12  # the blank line is no row


@pytest.mark.parametrize(("header", "message"), [
    ("game_id,level_index,player_id,completed", "needs a count column"),
    ("game_id,level_index,player_id,actions,cumulative_actions,completed", "has both"),
    ("game_id,player_id,actions,completed", "column level_index is missing"),
    ("", "column game_id is missing"),
])
def test_a_header_without_the_needed_columns_refuses_the_file(tmp_path: Path, header: str, message: str):
    with pytest.raises(CountsFileError, match=message):
        read_counts(_write(tmp_path / "h.csv", header + "\n"))


@pytest.mark.parametrize("value", ["1e999", "nan", "inf", "9223372036854775808", "-1e999"])
def test_a_count_no_integer_column_holds_is_a_bad_row_not_a_crash(tmp_path: Path, value: str):
    """1e999 and nan once raised OverflowError/ValueError out of read_counts (a traceback from the CLI); 2**63
    failed the whole file when the costs were built."""
    path = _write(tmp_path / "c.csv", f"game_id,level_index,player_id,actions,completed\ng1,1,a,{value},true\n"
                                      "g1,1,b,4,true\n")
    counts = read_counts(path)
    assert [(r.location, r.check) for r in counts.rejects] == [("line 2", "bad_count")]
    assert _costs(counts) == {"b": [4]}


def test_the_largest_count_is_read_exactly_and_a_larger_one_is_rejected_naming_it(tmp_path: Path):
    """A count becomes a baseline, which a metadata.json may not make larger than MAX_BASELINE_ACTIONS (2**62
    once made the scorer's set-based and per-play scores disagree): the counts file had no such bound."""
    top = MAX_BASELINE_ACTIONS
    path = _write(tmp_path / "c.csv", "game_id,level_index,player_id,actions,completed\n"
                                      f"g1,1,a,{top},true\ng1,1,b,{top + 1},true\ng1,1,c,{2**62}.0,true\n")
    counts = read_counts(path)
    assert _costs(counts) == {"a": [top]}
    assert [(r.location, r.check, r.column, r.value) for r in counts.rejects] == [
        ("line 3", "bad_count", "actions", str(top + 1)), ("line 4", "bad_count", "actions", f"{2**62}.0")]
    assert counts.rejects[0].reason == (f"{path}:3: actions {top + 1} of a completed level is above 1,000,000,000 "
                                        "actions, the largest baseline accepted (as for a metadata.json at ingest): "
                                        "a typo?")


def test_a_file_that_is_not_utf8_is_refused_saying_so(tmp_path: Path):
    path = tmp_path / "c.csv"
    path.write_bytes(b"game_id,level_index,player_id,actions,completed\ng1,1,\xa3b,4,true\n")
    with pytest.raises(CountsFileError, match=r"c.csv:2: not UTF-8 text .*re-save"):
        read_counts(path)


def test_a_file_that_fails_to_read_is_a_counts_error():
    """/proc/self/mem opens and then fails to read (EIO): once an OSError traceback from `baselines`."""
    with pytest.raises(CountsFileError, match="cannot read"):
        read_counts(Path("/proc/self/mem"))


def test_a_level_index_no_game_could_have_is_rejected_and_does_not_size_the_levels(tmp_path: Path):
    """level_index 2,000,000,000 on an incomplete row once set the game's level count, and the baselines table
    was built for every level up to it (memory without bound)."""
    path = _write(tmp_path / "c.csv", "game_id,level_index,player_id,actions,completed\ng1,1,p1,7,true\n"
                                      "g1,2000000000,p9,,false\ng1,255,p2,,false\ng1,254,p3,,false\n")
    counts = read_counts(path)
    assert [(r.check, r.location) for r in counts.rejects] == [("bad_level_index", "line 3"),
                                                              ("bad_level_index", "line 4")]
    assert counts.n_levels == {"g1": 254}  # a game has at most 254 levels (its levels counter)
    assert _costs(counts) == {"p1": [7]}


def test_a_record_the_csv_module_cannot_read_is_that_rows_reject(tmp_path: Path):
    """A field over the csv module's size limit raised out of the reader (a traceback, nothing read)."""
    import csv

    path = _write(tmp_path / "c.csv", "game_id,level_index,player_id,actions,completed\ng1,1,p1,7,true\n"
                                      + "x" * 5_000 + "\ng1,1,p2,9,true\n")
    limit = csv.field_size_limit(1_000)  # the process-wide limit (131,072 by default; another test raises it)
    try:
        counts = read_counts(path)
    finally:
        csv.field_size_limit(limit)
    assert [(r.check, r.location) for r in counts.rejects] == [("unreadable_record", "line 3")]
    assert "field larger than field limit" in counts.rejects[0].reason
    assert _costs(counts) == {"p1": [7], "p2": [9]}


def test_an_unclosed_quote_is_reported_with_every_line_it_swallowed(tmp_path: Path):
    """A stray opening quote made the csv module read the next lines into one field: they vanished unreported."""
    path = _write(tmp_path / "c.csv", 'game_id,level_index,player_id,actions,completed\ng1,1,p1,7,true\n'
                                      '"g1,1,p2,7,true\ng1,1,p3,9,true\ng1,1,p4,9,true\n')
    counts = read_counts(path)
    assert [(r.check, r.location) for r in counts.rejects] == [("unclosed_quote", "line 3")]
    assert "lines 3-5" in counts.rejects[0].reason
    assert _costs(counts) == {"p1": [7]}
