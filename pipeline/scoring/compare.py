"""Why two scorecards of the same play differ: the difference of their totals broken down into causes.

    comparison = compare_scorecards(other_doc, this_doc, other_label="kaggle.json")

Both are scored summaries (the toolkit's ``EnvironmentScorecard`` shape: an official card, Kaggle's, or an
``arcstudy score`` scorecard, whose extra keys say more). The total difference is split exactly, in three steps:

1. **denominator**: environments only the other card holds (in competition mode every available environment is
   in the mean, an unplayed one scoring 0; outside it the mean is over played environments only), except those
   whose plays this arcstudy scorecard left out (**plays left out**); each moves the total by
   ``(T_common - s_e) / n_other``, so the shares add up exactly;
2. per environment in both, the game-score difference over the common environments, each level's change
   attributed to its cause: **baselines** (a different baseline for the level; a different game version),
   **counting** (different actions charged to the level: full resets, post-terminal echoes, a second make;
   a different number of runs), **policy** (the same actions and baselines scored under other rules: cap,
   weights, exponent, cutoff), **plays left out** (runs this arcstudy scorecard left out: divergent,
   unverifiable, a second make);
3. environments scored here only (the other card lacks them).

``other + denominator + sum(environment deltas) + here-only = this`` holds to rounding, so every point of the
difference has a named cause. All functions are pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.outputs import markdown_text
from pipeline.core.textfiles import document_too_large, unique_json
from pipeline.recordings.cards import game_id_problem

from .policies import DEFAULT_POLICY_ID, POLICIES, get_policy

__all__ = ["CompareError", "Comparison", "compare_scorecards", "read_comparison_card", "write_comparison"]

_POLICY_RULES = {"efficiency_exponent": "exponent", "level_cap": "level cap", "level_weights": "level weights",
                 "game_cap": "game cap", "action_cutoff_multiplier": "cutoff",
                 "baseline_rule": "baseline rule"}


class CompareError(ValueError):
    """The card to compare with cannot be used (the message is for a person)."""


def read_comparison_card(path: Path) -> dict[str, Any]:
    """A scored summary (``environments[].runs[]``) from ``path``."""
    try:
        too_large = document_too_large(path, "a scorecard")
    except OSError as err:
        raise CompareError(f"not a readable JSON scorecard ({err})") from None
    if too_large is not None:
        raise CompareError(too_large)
    try:
        doc = unique_json(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, RecursionError) as err:  # ValueError: not JSON, a key named twice
        raise CompareError(f"not a readable JSON scorecard ({err})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("environments"), list):
        raise CompareError("not a scored summary: needs `environments[].runs[]` (an official scorecard or an "
                           "arcstudy scorecard__*.json)")
    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)

    if not number(doc.get("score", 0)):
        raise CompareError("its total `score` is not a number")
    for e_i, e in enumerate(doc["environments"]):
        if not isinstance(e, dict) or not isinstance(e.get("id"), str):
            raise CompareError("an environments[] entry has no string `id`")
        if (why := game_id_problem(e["id"])) is not None:  # it is written into compare.md, .csv and the terminal
            raise CompareError(f"environments[{e_i}]: {why}")
        if not number(e.get("score", 0)):
            raise CompareError(f"environment {e['id']}: score is not a number")
        runs = e.get("runs") or []
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise CompareError(f"environment {e['id']}: runs is not a list of objects")
        for i, r in enumerate(runs):
            if not number(r.get("score", 0)) or not number(r.get("actions", 0)):
                raise CompareError(f"environment {e['id']} run {i}: score or actions is not a number")
            for key in ("level_scores", "level_actions", "level_baseline_actions"):
                values = r.get(key) or []
                if not isinstance(values, list) or not all(number(v) for v in values):
                    raise CompareError(f"environment {e['id']} run {i}: {key} is not a list of numbers")
    return doc


@dataclass
class Comparison:
    other_label: str
    other_total: float
    this_total: float
    other_policy: str
    this_policy: str
    other_competition: bool
    this_competition: bool
    n_other: int
    n_this: int
    n_common: int
    steps: list[dict[str, Any]] = field(default_factory=list)  # cause, environments, contribution (points)
    rows: list[dict[str, Any]] = field(default_factory=list)  # per environment and level
    this_on_other_set: float | None = None  # this card's scores averaged over the other card's environment set

    @property
    def by_cause(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for step in self.steps:
            out[step["cause"]] = out.get(step["cause"], 0.0) + step["contribution"]
        return out

    def verdict(self) -> str:
        """The answer to "which is right, and why?" in a few sentences."""
        o, t = self.other_total, self.this_total
        parts = [f"{self.other_label}: {o:.3f} over {self.n_other} environments"
                 + (" (competition mode: every available environment, unplayed ones score 0)"
                    if self.other_competition else " (played environments only)")
                 + f"; here: {t:.3f} over {self.n_this}"
                 + (" (competition mode)" if self.this_competition else " (played environments only)") + "."]
        causes = sorted(self.by_cause.items(), key=lambda kv: -abs(kv[1]))
        named = [f"{c} {v:+.3f}" for c, v in causes if abs(v) > 5e-7]
        if named:
            parts.append("The difference " + f"{t - o:+.3f} points = " + ", ".join(named) + ".")
        if self.this_on_other_set is not None and self.n_other != self.n_this:
            parts.append(f"Averaged over the {self.n_other} environments of {self.other_label}, this card's scores "
                         f"give {self.this_on_other_set:.3f}.")
        if self.other_competition != self.this_competition:
            comp = self.other_label if self.other_competition else "this scorecard"
            parts.append(f"Both follow their own rules; for a competition (Kaggle) result the competition-mode "
                         f"total ({comp}) is the one that counts: it divides by every environment of the set, "
                         "played or not.")
        elif abs(t - o) <= 5e-7:
            parts.append("They agree.")
        else:
            parts.append("The causes above are where the two cards disagree on the same environments.")
        return " ".join(parts)

    def summary_text(self) -> str:
        lines = [f"compared with {self.other_label}: {self.other_total:.3f} there, {self.this_total:.3f} here "
                 f"({self.this_total - self.other_total:+.3f})"]
        for step in self.steps:
            if abs(step["contribution"]) > 5e-7 or step["cause"] == "denominator":
                envs = step["environments"]
                shown = ", ".join(envs[:4]) + (f", ... ({len(envs)} in all)" if len(envs) > 4 else "")
                lines.append(f"  {step['cause']}: {step['contribution']:+.3f}  {step['detail']}"
                             + (f" [{shown}]" if envs else ""))
        lines.append("  " + self.verdict())
        return "\n".join(lines)

    def to_markdown(self) -> str:
        md = markdown_text  # labels, ids and details come from the files compared: one line of text each
        out = [f"# Score comparison with {md(self.other_label)}", "", md(self.verdict()), "",
               "| cause | contribution (points) | detail |", "|---|---:|---|"]
        out += [f"| {md(s['cause'])} | {s['contribution']:+.4f} | {md(s['detail'])} |" for s in self.steps]
        out += ["", "## Per environment and level", "",
                "| environment | level | there | here | cause |", "|---|---:|---:|---:|---|"]
        for r in self.rows:
            lv = "game" if r["level_index"] is None else str(r["level_index"])
            there = "" if r["there"] is None else f"{r['there']:.3f}"
            here = "" if r["here"] is None else f"{r['here']:.3f}"
            out.append(f"| {md(r['game_id'])} | {lv} | {there} | {here} | {md(r['cause'])} |")
        return "\n".join(out) + "\n"


def _policy_of(doc: Mapping[str, Any]) -> str:
    pid = doc.get("scoring_policy")
    return pid if isinstance(pid, str) and pid in POLICIES else DEFAULT_POLICY_ID


def _best(env: Mapping[str, Any]) -> dict[str, Any] | None:
    runs = [r for r in env.get("runs") or [] if isinstance(r, dict)]
    if not runs:
        return None
    best = 0
    for i, r in enumerate(runs):
        if float(r.get("score", 0)) > float(runs[best].get("score", 0)):
            best = i
    return runs[best]


def _is_unplayed(env: Mapping[str, Any]) -> bool:
    runs = env.get("runs") or []
    return all(int(r.get("actions", 0) or 0) == 0 for r in runs if isinstance(r, dict))


def _policy_rules_differ(a: str, b: str) -> str:
    pa, pb = get_policy(a), get_policy(b)
    differ = [name for key, name in _POLICY_RULES.items() if getattr(pa, key) != getattr(pb, key)]
    return f"policy: {a} there, {b} here ({', '.join(differ)})" if differ else "policy"


def _code(game_id: str) -> str:
    return game_id.split("-", 1)[0]


def compare_scorecards(other: Mapping[str, Any], this: Mapping[str, Any] | str, other_label: str = "the other card"
                       ) -> Comparison:
    """Break ``this.score - other.score`` down into causes (module docstring). ``this`` may be JSON text."""
    if isinstance(this, str):
        this = json.loads(this)
    o_envs = {e["id"]: e for e in other.get("environments") or []}
    t_envs = {e["id"]: e for e in this.get("environments") or []}
    # The same environment under another game version is matched by its code (and said: a baseline cause).
    t_by_code = {_code(g): g for g in t_envs}
    pairs: dict[str, str] = {}
    for g in o_envs:
        if g in t_envs:
            pairs[g] = g
        elif _code(g) in t_by_code and t_by_code[_code(g)] not in pairs.values():
            pairs[g] = t_by_code[_code(g)]
    o_total, t_total = float(other.get("score", 0.0)), float(this.get("score", 0.0))
    o_pol, t_pol = _policy_of(other), _policy_of(this)
    cmp = Comparison(other_label, o_total, t_total, o_pol, t_pol, bool(other.get("competition_mode")),
                     bool(this.get("competition_mode")), len(o_envs), len(t_envs), len(pairs))
    n_o, n_c = len(o_envs), len(pairs)
    o_only = [g for g in sorted(o_envs) if g not in pairs]
    t_only = [g for g in sorted(t_envs) if g not in pairs.values()]
    o_common_mean = sum(float(o_envs[g].get("score", 0)) for g in pairs) / n_c if n_c else 0.0
    t_common_mean = sum(float(t_envs[t].get("score", 0)) for t in pairs.values()) / n_c if n_c else 0.0
    # 1. environments only there: removing each from the other card's mean moves it by (T1 - s_e) / n_other,
    # where T1 is its mean over the common environments (these add up exactly to T1 - T_other).
    excluded = _excluded_here(this)
    unplayed = [g for g in o_only if _is_unplayed(o_envs[g])]
    left_out = [g for g in o_only if g not in unplayed and excluded.get(g)]
    elsewhere = [g for g in o_only if g not in unplayed and g not in left_out]

    def share(games: list[str]) -> float:
        if not n_c:
            return -sum(float(o_envs[g].get("score", 0)) for g in games) / n_o if n_o else 0.0
        return sum(o_common_mean - float(o_envs[g].get("score", 0)) for g in games) / n_o

    detail = (f"{len(unplayed) + len(elsewhere)} of the {n_o} environments there are not scored here"
              + (f" ({len(unplayed)} unplayed there, scoring 0 in its mean)" if unplayed else "")
              + (f"; {len(elsewhere)} played there but not given here" if elsewhere else ""))
    cmp.steps.append({"cause": "denominator", "environments": unplayed + elsewhere,
                      "contribution": share(unplayed + elsewhere),
                      "detail": detail if unplayed or elsewhere else "the same environments on both sides"})
    if left_out:
        cmp.steps.append({"cause": "plays left out", "environments": left_out, "contribution": share(left_out),
                          "detail": f"{len(left_out)} environment(s) played there whose plays were left out here: "
                                    + "; ".join(sorted({r for g in left_out for r in excluded[g]}))[:300]})
    for g in o_only:
        cause = ("denominator: unplayed there (scores 0 in its mean), absent here" if g in unplayed else
                 f"plays left out here: {excluded[g][0]}" if g in left_out else "denominator: played there, "
                 "not given here")
        cmp.rows.append({"game_id": g, "level_index": None, "there": float(o_envs[g].get("score", 0)),
                         "here": None, "cause": cause})
    # 2. environments in both
    second = {s["game_id"] for s in (this.get("competition") or {}).get("second_plays", [])}
    per_cause: dict[str, tuple[float, list[str]]] = {}
    for g_o, g_t in sorted(pairs.items()):
        eo, et = o_envs[g_o], t_envs[g_t]
        delta = float(et.get("score", 0)) - float(eo.get("score", 0))
        causes = _level_rows(cmp, g_o, g_t, eo, et, o_pol, t_pol, excluded.get(g_t, []), g_t in second)
        if abs(delta) <= 1e-9:
            continue
        main = causes[0] if causes else "unexplained: same levels, actions and baselines but another score"
        key = main.split(":")[0]
        total, envs = per_cause.get(key, (0.0, []))
        per_cause[key] = (total + delta / n_c, [*envs, g_t])
        cmp.rows.append({"game_id": g_t, "level_index": None, "there": float(eo.get("score", 0)),
                         "here": float(et.get("score", 0)), "cause": "; ".join(dict.fromkeys(causes)) or main})
    for key, (total, envs) in sorted(per_cause.items()):
        cmp.steps.append({"cause": key, "environments": envs, "contribution": total,
                          "detail": f"game scores of {len(envs)} environment(s) in both cards differ"})
    # 3. environments only here
    contribution = t_total - t_common_mean if n_c else t_total
    cmp.steps.append({"cause": "denominator (here only)", "environments": t_only, "contribution": contribution,
                      "detail": f"{len(t_only)} environment(s) scored here are not in {other_label}"})
    for g in t_only:
        cmp.rows.append({"game_id": g, "level_index": None, "there": None, "here": float(t_envs[g].get("score", 0)),
                         "cause": f"denominator: not in {other_label}"})
    if n_o:
        cmp.this_on_other_set = sum(float(t_envs[t].get("score", 0)) for t in pairs.values()) / n_o
    return cmp


def _excluded_here(doc: Mapping[str, Any]) -> dict[str, list[str]]:
    """An arcstudy scorecard's plays left out, per game: their reasons."""
    out: dict[str, list[str]] = {}
    for c in (doc.get("verification") or {}).get("replay_checks", []):
        if c.get("excluded"):
            out.setdefault(c.get("game_id"), []).append(str(c.get("exclusion_reason")))
    return out


def _level_rows(cmp: Comparison, g_o: str, g_t: str, eo: Mapping, et: Mapping, o_pol: str, t_pol: str,
                left_out: list[str], second_make: bool) -> list[str]:
    """Per-level rows of one environment's best runs, and the causes found (most telling first)."""
    ro, rt = _best(eo), _best(et)
    causes: list[str] = []
    if left_out:
        kinds = sorted({r.split(":")[0].split(";")[0].split("(")[0].strip() for r in left_out})
        causes.append(f"plays left out: {len(left_out)} here ({', '.join(kinds)})")
    if second_make:
        causes.append("counting: a second make of the environment left out here (competition mode)")
    if ro is None or rt is None:
        return causes or ["plays left out: no run on one side"]
    if len(eo.get("runs") or []) != len(et.get("runs") or []) and not left_out:
        causes.append(f"counting: {len(eo.get('runs') or [])} run(s) there, {len(et.get('runs') or [])} here "
                      "(full resets open a new run outside competition mode)")
    if g_o != g_t:
        causes.append(f"baselines: game version {g_o} there, {g_t} here")
    lo, lt = ro.get("level_scores") or [], rt.get("level_scores") or []
    ao, at = ro.get("level_actions") or [], rt.get("level_actions") or []
    bo, bt = ro.get("level_baseline_actions") or [], rt.get("level_baseline_actions") or []
    for i in range(max(len(lo), len(lt))):
        so = float(lo[i]) if i < len(lo) else None
        st = float(lt[i]) if i < len(lt) else None
        if so is not None and st is not None and abs(so - st) <= 1e-9:
            continue
        a_o, a_t = (ao[i] if i < len(ao) else None), (at[i] if i < len(at) else None)
        b_o, b_t = (bo[i] if i < len(bo) else None), (bt[i] if i < len(bt) else None)
        if b_o != b_t:
            cause = f"baselines: {b_o} there, {b_t} here" + (" (-1: unscorable)" if -1 in (b_o, b_t) else "")
        elif a_o != a_t:
            cause = (f"counting: {a_o} actions there, {a_t} here (full resets, post-terminal echoes, a second make"
                     + (", or a run left out here" if left_out else "") + ")")
        elif o_pol != t_pol:
            cause = _policy_rules_differ(o_pol, t_pol)
        else:
            cause = "unexplained: same actions and baseline, another level score"
        causes.append(cause)
        cmp.rows.append({"game_id": g_t, "level_index": i + 1, "there": so, "here": st, "cause": cause})
    if not lo and not lt and o_pol != t_pol:
        causes.append(_policy_rules_differ(o_pol, t_pol))
    if not any(c.startswith(("baselines", "counting", "plays left out")) for c in causes) and o_pol != t_pol:
        causes.append(_policy_rules_differ(o_pol, t_pol))
    return causes


def write_comparison(cmp: Comparison, out_dir: Path) -> list[Path]:
    """compare.md (the verdict and the causes with their contributions) and compare.csv (per environment and
    level: the score there and here, and the cause) under ``out_dir``, each written whole; the CSV's text cells
    are made safe for a spreadsheet unless --raw-csv (pipeline.core.outputs)."""
    import polars as pl

    from pipeline.core.outputs import write_csv, write_text

    md = write_text(out_dir / "compare.md", cmp.to_markdown())
    rows = pl.DataFrame([{"game_id": r["game_id"], "level_index": r["level_index"], "score_there": r["there"],
                          "score_here": r["here"], "cause": r["cause"]} for r in cmp.rows],
                        schema={"game_id": pl.String, "level_index": pl.Int64, "score_there": pl.Float64,
                                "score_here": pl.Float64, "cause": pl.String})
    return [md, write_csv(rows, out_dir / "compare.csv")]


def competition_view(game_scores: Mapping[str, float], environment_set: list[str]) -> dict[str, Any]:
    """A scorecard's game scores seen by the competition rule (spec/scoring.md A.3): every environment of the set
    is in the mean, an unplayed one scoring 0; a played game outside the set is not in it (reported). The
    counting rules (game resets as level resets, one make per environment) need the plays: `arcstudy score
    --competition` applies them."""
    env_set = sorted(set(environment_set))
    by_code = {_code(g): g for g in env_set}
    in_set = {}
    outside = []
    for g, s in sorted(game_scores.items()):
        member = g if g in env_set else by_code.get(_code(g))
        if member is None:
            outside.append(g)
        else:
            in_set[member] = max(in_set.get(member, 0.0), float(s))
    n = len(env_set)
    played_total = sum(float(s) for s in game_scores.values()) / len(game_scores) if game_scores else 0.0
    return {"n_environments": n, "n_played": len(in_set), "unplayed": [g for g in env_set if g not in in_set],
            "outside_set": outside, "local_total": played_total,
            "competition_total": sum(in_set.values()) / n if n else 0.0}
