"""Per-game qualification reports: ``qualification.json`` and ``qualification.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.core.outputs import write_text

from .checks import REGIMES, THRESHOLD, CheckResult

__all__ = ["verdict", "report_dict", "write_report"]


def verdict(results: list[CheckResult]) -> str:
    return "fail" if any(r.status == "fail" for r in results) else "pass"


def report_dict(game_id: str, source_sha256: str, regime: str, seed: int, results: list[CheckResult]) -> dict[str, Any]:
    r = REGIMES[regime]
    return {
        "game_id": game_id,
        "source_sha256": source_sha256,
        "regime": regime,
        "regime_sizes": {"random_steps": r.random_steps, "fuzz_steps": r.fuzz_steps,
                         "determinism_steps": r.determinism_steps, "explore_nodes_per_level": r.explore_nodes,
                         "explore_seconds_per_level": r.explore_seconds},
        "threshold": THRESHOLD,
        "seed": seed,
        "verdict": verdict(results),
        "checks": [c.as_dict() for c in results],
    }


def _fmt_p(v: float) -> str:
    return "0" if v == 0 else f"{v:.3g}"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Qualification of {report['game_id']} ({report['regime']} regime): **{report['verdict'].upper()}**",
        "",
        f"Source sha256 `{report['source_sha256']}`; seed {report['seed']}; acceptance threshold "
        f"{report['threshold']:g} (random-policy wins per attempt on non-tutorial levels).",
        "",
        "| check | status | summary | seconds |",
        "|---|---|---|---|",
    ]
    for c in report["checks"]:
        lines.append(f"| {c['name']} | {c['status']} | {c['summary']} | {c['elapsed_s']:.1f} |")
    checks = {c["name"]: c for c in report["checks"]}
    thr = checks.get("random_win_threshold")
    win = checks.get("winnable")
    if thr and win:
        lines += ["", "## Levels (explorer)", "",
                  "| level | states | complete | optimal | P(random wins) lower | upper |", "|---|---|---|---|---|---|"]
        opt = win["evidence"].get("optimal_actions", {})
        for row in thr["evidence"]["levels"]:
            o = opt.get(row["level"], opt.get(str(row["level"])))
            lines.append(f"| {row['level']} | {row['nodes']:,} | {'yes' if row['complete'] else 'no'} | "
                         f"{'-' if o is None else o} | {_fmt_p(row['random_win_lower'])} | "
                         f"{_fmt_p(row['random_win_upper'])} |")
    rp = checks.get("random_play")
    if rp:
        lines += ["", "## Random play", "", "| level | steps | wins | game overs | tutorial |", "|---|---|---|---|---|"]
        for row in rp["evidence"]["levels"]:
            lines.append(f"| {row['level']} | {row['steps']:,} | {row['wins']} | {row['game_overs']} | "
                         f"{'yes' if row['tutorial'] else 'no'} |")
    fz = checks.get("fuzz")
    if fz and fz["evidence"].get("problems"):
        lines += ["", "## Fuzz problems (first 10)", ""]
        for p in fz["evidence"]["problems"][:10]:
            lines.append(f"- {json.dumps(p, default=str)}")
    pb = checks.get("playback")
    if pb and pb["evidence"].get("recordings"):
        lines += ["", "## Recordings", "", "| recording | lines | final state | levels completed |",
                  "|---|---|---|---|"]
        for row in pb["evidence"]["recordings"]:
            lines.append(f"| {row['recording']} | {row['lines']} | {row['final_state']} | {row['levels_completed']} |")
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    j = out_dir / "qualification.json"
    m = out_dir / "qualification.md"
    write_text(j, json.dumps(report, indent=1, default=str) + "\n")
    write_text(m, markdown(report))
    return [j, m]
