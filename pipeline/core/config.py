"""Configuration of `arcstudy build`: TOML, defaults that reproduce the paper's protocol, strict keys.

The defaults live in `pipeline/core/defaults.toml` (package data); a user file given with `--config` overrides
any subset of keys. Every key is declared below as a dataclass field with its type and a written
rationale; a key that is not declared is an error naming the key and the valid keys, a value of the
wrong type or outside its range is an error naming the key. The resolved configuration (defaults plus
overrides) goes into the run manifest, and its hash into each out table's fingerprint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pipeline.core.special_files import not_regular_file
from pipeline.core.textfiles import not_utf8_reason
from schemas.vocabulary import BASELINE_RULES, RECORDING_VARIANTS

DEFAULTS_PATH = Path(str(resources.files("pipeline.core") / "defaults.toml"))  # package data, also when installed


class ConfigError(ValueError):
    """A configuration file that cannot be used, with a message naming the offending key."""


def _f(rationale: str, *, choices: tuple[Any, ...] | None = None, ge: float | None = None,
       le: float | None = None) -> Any:
    return field(metadata={"rationale": rationale, "choices": choices, "ge": ge, "le": le})


@dataclass(frozen=True)
class AttemptsConfig:
    actions_more_than: int = _f(
        "The paper defines an attempt as 'a gameplay session of more than 30 actions' (study-protocol §3): "
        "fewer actions are an opened-and-left environment, not an attempt. Counted actions follow "
        "spec/scoring.md §B (opening RESET, full resets and post-terminal actions are free).", ge=0)
    duration_less_than_s: float = _f(
        "'...and less than 30 minutes of interaction': the hard cutoff. Strict: 29:59 is an attempt, 30:00 "
        "is not. Interaction = first to last line of the recording.", ge=0)
    soft_limit_s: float = _f(
        "Participants were prompted to conclude at 20 minutes; attempts reaching it are flagged "
        "(`is_over_soft_limit`), and 'unsuccessful attempts under 20 minutes' is one of the paper's "
        "duration statistics.", ge=0)
    participant_variants: tuple[str, ...] = _f(
        "Recordings listed in a session manifest are always study participants. Without a manifest, the "
        "official human-dataset shape (REST recordings with a trailing card) is human play; toolkit and "
        "benchmarking recordings are agents and never enter human statistics.", choices=RECORDING_VARIANTS)
    unknown_duration: str = _f(
        "A recording without timestamps cannot be checked against the time rule. 'include' keeps it "
        "(flagged duration_unknown) so datasets without clocks still get baselines; 'exclude' applies the "
        "rule to the letter.", choices=("include", "exclude"))


@dataclass(frozen=True)
class LowEffortConfig:
    enabled: bool = _f("The paper excluded low-effort sessions from analysis; disable to see their effect.")
    min_environments: int = _f(
        "Cycling through environments can only be seen across several of them; with fewer than 3 in a "
        "session there is no pattern to judge (a genuine participant averaged about 9 per session).", ge=1)
    abandonment_rate_min: float = _f(
        "Abandoned = left unsolved before the 20-minute soft limit. Games were designed to be solvable in "
        "about 20 minutes and many were solved by most testers, so a genuine participant abandons a minority "
        "of them; abandoning at least half is the 'abandoning harder ones for easy ones' pattern.",
        ge=0, le=1)
    relative_max: float = _f(
        "Engagement relative to the cohort: the session's median over its games of (time or actions on the "
        "game / the cohort's median on the same game). Comparing per game removes game difficulty. A third "
        "of what the median participant spends is 'minimal engagement'; slow participants score above 1 "
        "and are never caught by this criterion.", ge=0)
    short_play_share_min: float = _f(
        "Share of the session's games with no more than attempts.actions_more_than actions (not even an "
        "attempt). Half or more is rapid cycling even when the cohort is too small for relative measures.",
        ge=0, le=1)
    min_cohort_recordings: int = _f(
        "A cohort median from fewer than 5 recordings of a game is too noisy to judge others by; relative "
        "features are null for such games.", ge=1)
    play_level_fallback: bool = _f(
        "Without a session manifest there are no sessions: judge each recording alone (abandoned with both "
        "time and actions far below the game's cohort). Weaker evidence, hence the stricter threshold below.")
    play_relative_max: float = _f(
        "Recording-level threshold: both time and actions at most 15 % of the game's cohort median and the "
        "game abandoned. Stricter than relative_max because one recording shows no cycling pattern.", ge=0)


@dataclass(frozen=True)
class BaselinesConfig:
    rule: str = _f(
        "The baseline statistic used for reference points and the default of `arcstudy baselines`: "
        "upper-median is the current published rule (spec/scoring.md §C.3); second-best is the paper's. "
        "The level baselines table holds every rule regardless.", choices=BASELINE_RULES)
    min_completers: int = _f(
        "Levels with fewer completers get no baseline (null, flagged). Never below what the rule needs "
        "(2 for second-best); the docs give no minimum for the upper median, so 1.", ge=1)
    count_source: str = _f(
        "Human recordings' own card counts are authoritative for human baselines (spec/scoring.md §B.5/§C: "
        "the published baselines were computed from cards that mostly did not count undo). 'lines' uses "
        "the official toolkit count from the lines instead.", choices=("card-when-present", "lines"))
    first_run_only: bool = _f("Baselines come from first-run players only (study-protocol §3, scoring §C).")
    require_valid_attempt: bool = _f(
        "The attempt rule defines what the paper counted as an attempt in its statistics; the published "
        "baselines reproduce from every first-run recording (scoring §C.6), so a level completed in a short "
        "or long recording still counts by default.")
    exclude_low_effort: bool = _f("Sessions excluded as low effort do not contribute to baselines (the paper).")


@dataclass(frozen=True)
class SolvabilityConfig:
    min_full_solvers: int = _f(
        "Inclusion bar: an environment is kept only if at least two participants fully solved it, "
        "independently, on first contact (study-protocol §3).", ge=1)
    confidence_level: float = _f("Confidence level of the Wilson intervals on per-level completion rates.",
                                 ge=0.5, le=0.999)


@dataclass(frozen=True)
class ReferencePointsConfig:
    optimal_provider: str = _f(
        "'module:function' called as f(game_id, level_index) -> int | None for the optimal (explorer) "
        "action count; empty = none. Lets the state-graph explorer be wired in without code changes.")
    optimal_table: str = _f(
        "CSV or Parquet with game_id, level_index, optimal_actions (optional optimal_source): precomputed "
        "optimal counts. Relative paths are relative to the config file (or the working directory).")


@dataclass(frozen=True)
class FiguresConfig:
    enabled: bool = _f("Write the figures (PNG, SVG and Vega-Lite JSON) next to the build manifest.")
    max_games: int = _f("Per-game panels are drawn for at most this many games (the most played first), so "
                        "a 400-game study still renders.", ge=1)


@dataclass(frozen=True)
class BuildConfig:
    attempts: AttemptsConfig
    low_effort: LowEffortConfig
    baselines: BaselinesConfig
    solvability: SolvabilityConfig
    reference_points: ReferencePointsConfig
    figures: FiguresConfig
    source: str = "defaults"  # where the overrides came from (not part of the hash)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {s.name: _section_dict(getattr(self, s.name)) for s in _sections()}

    def section_hash(self, *keys: str) -> dict[str, Any]:
        """The resolved values of the given `section` or `section.key` names (for fingerprints)."""
        data = self.to_dict()
        out: dict[str, Any] = {}
        for k in keys:
            if "." in k:
                sec, name = k.split(".", 1)
                out[k] = data[sec][name]
            else:
                out[k] = data[k]
        return out

    def config_hash(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _sections() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(BuildConfig) if f.name != "source"]


def _section_dict(obj: Any) -> dict[str, Any]:
    return {f.name: (list(v) if isinstance(v := getattr(obj, f.name), tuple) else v)
            for f in dataclasses.fields(obj)}


def rationales() -> dict[str, str]:
    """`section.key` -> rationale, for the README and for tests that every key has one."""
    return {f"{sec.name}.{f.name}": f.metadata["rationale"]
            for sec in _sections() for f in dataclasses.fields(_section_type(sec.name))}


def _section_type(name: str) -> type:
    hints = typing.get_type_hints(BuildConfig)
    return hints[name]


def _coerce(where: str, f: dataclasses.Field, value: Any, hint: Any) -> Any:
    meta = f.metadata
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings, got {value!r}")
        if meta["choices"] is not None:
            bad = [v for v in value if v not in meta["choices"]]
            if bad:
                raise ConfigError(f"{where}: unknown value(s) {bad}; valid: {list(meta['choices'])}")
        return tuple(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):  # TOML's inf and nan: no setting means either (the figures' JSON refused them)
            raise ConfigError(f"{where} must be a finite number, got {value!r}")
    elif hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}")
    else:  # pragma: no cover - a declaration error, not a user error
        raise TypeError(f"unsupported config type {hint!r} for {where}")
    if meta["choices"] is not None and value not in meta["choices"]:
        raise ConfigError(f"{where}: {value!r} is not one of {list(meta['choices'])}")
    if meta["ge"] is not None and value < meta["ge"]:
        raise ConfigError(f"{where} must be >= {meta['ge']}, got {value!r}")
    if meta["le"] is not None and value > meta["le"]:
        raise ConfigError(f"{where} must be <= {meta['le']}, got {value!r}")
    return value


def _check_keys(data: dict[str, Any], origin: str) -> None:
    sections = {s.name: _section_type(s.name) for s in _sections()}
    for sec, values in data.items():
        if sec not in sections and not isinstance(values, dict):
            owners = [name for name, cls in sections.items() if sec in {f.name for f in dataclasses.fields(cls)}]
            hint = f" (it belongs under [{owners[0]}])" if len(owners) == 1 else ""
            raise ConfigError(f"{origin}: top-level key '{sec}' is outside any section{hint}; keys go under a "
                              f"section: {', '.join(f'[{name}]' for name in sections)}")
        if sec not in sections:
            raise ConfigError(f"{origin}: unknown section [{sec}]; valid sections: {', '.join(sections)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{origin}: [{sec}] must be a table of keys")
        valid = [f.name for f in dataclasses.fields(sections[sec])]
        for key in values:
            if key not in valid:
                raise ConfigError(f"{origin}: unknown key '{sec}.{key}'; valid keys in [{sec}]: {', '.join(valid)}")


def _read_toml(path: Path) -> dict[str, Any]:
    if not_regular_file(path) is not None:
        raise ConfigError(f"cannot read config {path}: not a regular file")
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None
    except RecursionError:  # thousands of arrays or tables inside one another
        raise ConfigError(f"{path} is not a configuration: it is nested too deeply to read") from None
    except UnicodeDecodeError as err:  # TOML is UTF-8
        raise ConfigError(not_utf8_reason(err, subject=str(path))) from None


def resolve(overrides: dict[str, Any] | None = None, *, origin: str = "overrides") -> BuildConfig:
    """Defaults overlaid with `overrides` (a TOML-shaped dict), checked key by key."""
    defaults = _read_toml(DEFAULTS_PATH)
    _check_keys(defaults, str(DEFAULTS_PATH))
    overrides = overrides or {}
    _check_keys(overrides, origin)
    sections = {}
    for sec in _sections():
        cls = _section_type(sec.name)
        hints = typing.get_type_hints(cls)
        merged = {**defaults.get(sec.name, {}), **overrides.get(sec.name, {})}
        values = {}
        for f in dataclasses.fields(cls):
            if f.name not in merged:
                raise ConfigError(f"{DEFAULTS_PATH}: key '{sec.name}.{f.name}' has no default")
            src = origin if f.name in overrides.get(sec.name, {}) else str(DEFAULTS_PATH)
            values[f.name] = _coerce(f"{src}: {sec.name}.{f.name}", f, merged[f.name], hints[f.name])
        sections[sec.name] = cls(**values)
    return BuildConfig(**sections, source=origin)


def load_config(path: Path | str | None = None) -> BuildConfig:
    """The defaults, or the defaults overridden by the TOML file at `path`. Relative file paths in
    [reference_points] are resolved against the config file's folder."""
    if path is None:
        return resolve(origin="defaults")
    path = Path(path)
    data = _read_toml(path)
    rp = data.get("reference_points")
    if isinstance(rp, dict) and isinstance(rp.get("optimal_table"), str) and rp["optimal_table"]:
        table = Path(rp["optimal_table"])
        if not table.is_absolute():
            rp["optimal_table"] = str((path.parent / table).resolve())
    return resolve(data, origin=str(path))


__all__ = [
    "AttemptsConfig", "BaselinesConfig", "BuildConfig", "ConfigError", "DEFAULTS_PATH",
    "FiguresConfig", "LowEffortConfig", "ReferencePointsConfig", "SolvabilityConfig", "load_config",
    "rationales", "resolve",
]
