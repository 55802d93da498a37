"""Build configuration: the defaults are the paper's protocol, unknown keys and bad values are errors that
name the key, every key has a rationale, overrides come from TOML files."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from pipeline.core.config import DEFAULTS_PATH, BuildConfig, ConfigError, load_config, rationales, resolve


def test_defaults_are_the_papers_protocol():
    c = load_config()
    assert (c.attempts.actions_more_than, c.attempts.duration_less_than_s, c.attempts.soft_limit_s) == (30, 1800, 1200)
    assert c.baselines.rule == "upper-median" and c.baselines.first_run_only
    assert c.solvability.min_full_solvers == 2
    assert c.source == "defaults"


def test_every_key_is_declared_documented_and_defaulted():
    defaults = tomllib.loads(DEFAULTS_PATH.read_text())
    declared = {s.name: {f.name for f in dataclasses.fields(getattr(load_config(), s.name))}
                for s in dataclasses.fields(BuildConfig) if s.name != "source"}
    assert {k: set(v) for k, v in defaults.items()} == declared
    texts = rationales()
    assert set(texts) == {f"{s}.{k}" for s, keys in declared.items() for k in keys}
    assert all(len(t) > 40 for t in texts.values())


@pytest.mark.parametrize("overrides, message", [
    ({"attempts": {"max_actions": 3}}, "unknown key 'attempts.max_actions'; valid keys in [attempts]: "
                                       "actions_more_than, duration_less_than_s"),
    ({"attempt": {}}, "unknown section [attempt]; valid sections: attempts, low_effort"),
    ({"baselines": {"rule": "mean"}}, "baselines.rule: 'mean' is not one of"),
    ({"attempts": {"actions_more_than": "30"}}, "attempts.actions_more_than must be an integer"),
    ({"low_effort": {"abandonment_rate_min": 1.5}}, "low_effort.abandonment_rate_min must be <= 1"),
    ({"low_effort": {"enabled": 1}}, "low_effort.enabled must be true or false"),
    ({"attempts": {"participant_variants": ["humans"]}}, "unknown value(s) ['humans']"),
    # TOML's inf and nan passed, then failed the build after its tables were written (the figures' JSON)
    ({"attempts": {"duration_less_than_s": float("inf")}}, "attempts.duration_less_than_s must be a finite number"),
    ({"low_effort": {"relative_max": float("nan")}}, "low_effort.relative_max must be a finite number"),
])
def test_bad_configuration_names_the_key(overrides, message):
    with pytest.raises(ConfigError) as err:
        resolve(overrides)
    assert message in str(err.value)


def test_file_overrides_and_hash(tmp_path: Path):
    f = tmp_path / "study.toml"
    f.write_text('[baselines]\nrule = "second-best"\n[reference_points]\noptimal_table = "opt.csv"\n'
                 '[attempts]\nsoft_limit_s = 900\n')
    c = load_config(f)
    assert c.baselines.rule == "second-best" and c.attempts.soft_limit_s == 900.0
    assert c.attempts.actions_more_than == 30  # untouched keys keep their defaults
    assert c.reference_points.optimal_table == str(tmp_path / "opt.csv")
    assert c.config_hash() != load_config().config_hash()
    assert c.section_hash("baselines.rule", "solvability") == {"baselines.rule": "second-best",
                                                               "solvability": {"min_full_solvers": 2,
                                                                               "confidence_level": 0.95}}
    bad = tmp_path / "bad.toml"
    bad.write_text("[baselines\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path):
    """tomllib decodes the bytes first: a binary or Latin-1 file once escaped as a UnicodeDecodeError traceback."""
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('[baselines]\nrule = "second-best" # r\xe9gle\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(bad)


def test_a_config_file_nested_too_deeply_is_a_config_error(tmp_path: Path):
    """tomllib recurses per bracket: 100,000 of them escaped as a RecursionError traceback."""
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(deep)


def test_any_other_input_nested_too_deeply_stops_the_command_with_a_message(tmp_path: Path):
    """The fallback for readers that do not say it themselves (a --compare CSV cell of 100,000 brackets)."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    compare = tmp_path / "cmp.csv"
    compare.write_text('game_id,baseline_actions\npv63-003f92f7,"' + "[" * 100_000 + "]" * 100_000 + '"\n')
    counts = tmp_path / "counts.csv"
    counts.write_text("game_id,level_index,player_id,actions,completed\npv63-003f92f7,1,p1,7,true\n")
    result = CliRunner().invoke(app, ["--plain", "baselines", "--from-counts", str(counts), "--compare",
                                      str(compare)])
    assert result.exit_code == 1, result.output
    assert "nested too deeply to read" in result.output and not isinstance(result.exception, RecursionError)


def test_a_config_path_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path):
    import os

    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(fifo)
