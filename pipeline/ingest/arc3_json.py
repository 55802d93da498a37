"""ARC-AGI-3 JSON documents: environment `metadata.json` (spec/formats.md §B) and scorecards (§C).

Scorecards come in three shapes: the scored summary (`environments[].runs[]`, from the toolkit or from
`arcstudy score`), the REST card wrapper (`{won, played, cards}`) and a bare per-game `Card`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from pipeline.core.textfiles import (
    DOCUMENT_TOO_LARGE,
    ascii_json,
    document_too_large,
    json_document,
    json_message,
    not_utf8_reason,
    read_text_document,
)
from pipeline.ingest.base import (
    NESTED_TOO_DEEPLY,
    BadEntries,
    FileContext,
    FileRejected,
    ReaderOutput,
    Reject,
    clip,
)
from pipeline.ingest.baseline_rule import baseline_actions_problem
from pipeline.ingest.formats import Head, InputFormat, register
from pipeline.recordings.cards import MAX_LEVELS, card_rows, game_id_problem, run_problem
from schemas.arc3 import MAX_BASELINE_ACTIONS
from schemas.validate import conform, type_problem, value_problem

METADATA_KEYS = {"baseline_actions", "title", "default_fps", "tags", "class_name", "date_downloaded",
                 "level_tags", "private_tags", "local_dir", "date_created"}
CARD_KEYS = {"game_id", "total_plays", "actions", "states"}


def _load_json_document(ctx: FileContext, what: str) -> tuple[Any, list[str], BadEntries]:
    """(the parsed document, text flags, its strings holding a lone surrogate escape and its objects naming a key
    twice): a leading BOM is removed and CRLF accepted, both flagged. `what`: what it is read as, for the reason
    that refuses a document too large to parse."""
    if (too_large := document_too_large(ctx.path, what)) is not None:
        raise FileRejected(too_large, DOCUMENT_TOO_LARGE)
    try:
        text, facts = read_text_document(ctx.path)
    except UnicodeDecodeError as err:
        raise FileRejected(not_utf8_reason(err), "not_utf8") from None
    try:
        doc, twice = json_document(text)
        return doc, facts.flags(), BadEntries(doc, text, twice)
    except json.JSONDecodeError as err:
        raise FileRejected(f"not valid JSON ({json_message(err)} at line {err.lineno} column {err.colno})", "invalid_json",
                           f"line {err.lineno}", clip(text.splitlines()[err.lineno - 1] if text else "")) from None
    except RecursionError:
        raise FileRejected(NESTED_TOO_DEEPLY, "invalid_json", "file", clip(text)) from None


def _whole_json(head: Head) -> Any:
    if not head.text.lstrip().startswith("{"):
        return None
    if not head.is_complete:
        return "partial"
    return head.json_value


# ------------------------------------------------------------------------------------------------ metadata
def sniff_metadata(head: Head) -> str | None:
    obj = _whole_json(head)
    if isinstance(obj, dict) and isinstance(obj.get("game_id"), str) and METADATA_KEYS & obj.keys() \
            and not CARD_KEYS <= obj.keys():
        return f"JSON object with game_id and metadata keys {sorted(METADATA_KEYS & obj.keys())}"
    if obj is None and head.path.name == "metadata.json":
        return "file named metadata.json (content will be checked)"
    return None


def read_metadata(ctx: FileContext) -> ReaderOutput:
    doc, text_flags, bad = _load_json_document(ctx, "a metadata.json")
    if not isinstance(doc, dict):
        raise FileRejected("metadata.json must hold a JSON object", "bad_metadata")
    bad.refuse_whole("metadata")  # a metadata file is one entry: the game's
    game_id = doc.get("game_id")
    if not isinstance(game_id, str) or not re.fullmatch(r"[a-z0-9]{4}-[0-9a-f]{8,12}", game_id):
        raise FileRejected(f"game_id {game_id!r} is missing or not `<code>-<version>`", "bad_game_id")
    code, version = game_id.split("-", 1)
    folder_version, folder_code = ctx.path.parent.name, ctx.path.parent.parent.name
    if ctx.path.name == "metadata.json" and folder_code == code and folder_version != version:
        raise FileRejected(f"game_id {game_id} does not match its folder {folder_code}/{folder_version}",
                           "game_id_folder_mismatch")
    baseline = doc.get("baseline_actions")
    flags = list(text_flags)
    if baseline is not None and (why := baseline_actions_problem(baseline)) is not None:  # the one rule
        raise FileRejected(f"baseline_actions must be a list of at most {MAX_LEVELS} positive integers (one per "
                           f"level) up to {MAX_BASELINE_ACTIONS:,}, got {clip(repr(baseline))}: {why}",
                           "bad_baseline_actions")
    if not baseline:
        flags.append("baseline_missing")
    downloaded = None
    if isinstance(doc.get("date_downloaded"), str):
        try:
            downloaded = datetime.fromisoformat(doc["date_downloaded"].replace("Z", "+00:00"))
            downloaded = downloaded if downloaded.tzinfo else downloaded.replace(tzinfo=UTC)
        except ValueError:
            flags.append("bad_date_downloaded")
    out = ReaderOutput(flags=flags)
    row = {
        "game_id": game_id, "file_id": ctx.file_id, "game_code": code, "version": version,
        "title": doc.get("title"), "default_fps": doc.get("default_fps"), "tags": doc.get("tags"),
        "baseline_actions": baseline, "date_downloaded": downloaded,
        "class_name": doc.get("class_name") or code.capitalize(),
        "metadata_json": json.dumps(doc, sort_keys=True), "flags": flags,
    }
    problem = type_problem("core_arc3__environments", row)
    if problem is not None:  # e.g. default_fps 1.5 would be stored as 1, tags [1] as ["1"]
        raise FileRejected(f"metadata {problem[1]}", "bad_type")
    out.tables["core_arc3__environments"] = conform("core_arc3__environments", [row])
    return out


# ------------------------------------------------------------------------------------------------ scorecards
def sniff_scorecard(head: Head) -> str | None:
    obj = _whole_json(head)
    if obj == "partial":
        start = head.text[:4000]
        if '"environments"' in start or '"cards"' in start:
            return "large JSON object with environments/cards keys (scorecard)"
        if '"game_id"' in start and '"total_plays"' in start:  # a bare card's first keys (before its lists)
            return "large JSON object with game_id and total_plays keys (a bare per-game Card)"
        return None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("environments"), list):
        return "scored summary: `environments[].runs[]`"
    if isinstance(obj.get("cards"), dict):
        return "card wrapper: `{won, played, cards}`"
    if CARD_KEYS <= obj.keys():
        return "a bare per-game Card"
    return None


def read_scorecard(ctx: FileContext) -> ReaderOutput:
    doc, text_flags, bad = _load_json_document(ctx, "a scorecard")
    out = ReaderOutput(flags=text_flags)
    if not isinstance(doc, dict):
        raise FileRejected("a scorecard must be a JSON object", "bad_scorecard")
    if isinstance(doc.get("environments"), list):
        left_out: set[int] = set()
        if bad:  # an environment holding bad text is quarantined; elsewhere the file is refused
            keep = []
            for e_i, env in enumerate(doc["environments"]):
                reject = bad.reject(("environments", e_i), f"environments[{e_i}]", "environment",
                                    "core_arc3__scorecard_runs")
                if reject is None:
                    keep.append(env)
                else:
                    out.rejects.append(reject)
                    keep.append(None)  # its place kept (later entries keep their index), stored as null
                    left_out.add(e_i)
            bad.found = [b for b in bad.found if b.path[:1] != ("environments",)]
            bad.refuse_whole("scorecard")
            doc = {**doc, "environments": keep}
        _scored_summary(ctx, doc, out, left_out)
    else:
        cards = doc["cards"] if isinstance(doc.get("cards"), dict) else {doc.get("game_id"): doc}
        if bad and cards is doc.get("cards"):  # a card holding bad text is quarantined, the others load
            kept = {}
            for game_id, card in cards.items():
                reject = bad.reject(("cards", game_id), f"cards.{ascii_json(game_id)}", "card",
                                    "core_arc3__card_plays")
                if reject is None:
                    kept[game_id] = card
                else:
                    out.rejects.append(reject)
            bad.found = [b for b in bad.found if b.path[:1] != ("cards",) or len(b.path) == 1]  # inside a card: said
            cards = kept
        bad.refuse_whole("scorecard")  # a bare card is one entry; bad text outside the cards is the file's
        rows, issues, flags = card_rows(ctx.file_id, cards, None, None, [])
        out.tables["core_arc3__card_plays"] = conform("core_arc3__card_plays", rows)
        out.rejects.extend(Reject(i.location, i.check, i.reason, i.raw_text, i.target_table, i.column, i.value)
                           for i in issues)
        out.flags.extend(flags)
    return out


def _scored_summary(ctx: FileContext, doc: dict, out: ReaderOutput, left_out: set[int]) -> None:
    policy = doc.get("scoring_policy") or doc.get("policy_id")
    policy_id = policy.get("policy_id") if isinstance(policy, dict) else policy
    runs = []
    for e_i, env in enumerate(doc["environments"]):
        if e_i in left_out:  # quarantined for bad text (read_scorecard)
            continue
        if not isinstance(env, dict) or not isinstance(env.get("id"), str):
            out.rejects.append(Reject(f"environments[{e_i}]", "bad_environment",
                                      "environment entry without a string `id`", clip(json.dumps(env)),
                                      "core_arc3__scorecard_runs"))
            continue
        if (why := game_id_problem(env["id"])) is not None:  # no run of it can be stored or scored
            out.rejects.append(Reject(f"environments[{e_i}]", "bad_game_id", f"environment: {why}",
                                      clip(json.dumps(env)), "core_arc3__scorecard_runs", "game_id"))
            continue
        if not isinstance(env.get("runs"), list):  # null, an object, a number: not "no runs", a broken entry
            what = f"`runs` is {ascii_json(env['runs'])}" if "runs" in env else "there is no `runs`"
            out.rejects.append(Reject(f"environments[{e_i}].runs", "bad_type", f"environment {env['id']}: {what}, "
                                      "not a list of runs", clip(json.dumps(env)), "core_arc3__scorecard_runs",
                                      "runs"))
            continue
        for r_i, run in enumerate(env["runs"]):
            if not isinstance(run, dict):
                out.rejects.append(Reject(f"environments[{e_i}].runs[{r_i}]", "bad_run", "run is not an object",
                                          clip(json.dumps(run)), "core_arc3__scorecard_runs"))
                continue
            # The one rule for a run's values (pipeline.recordings.cards), which `score FILE` meets through here.
            if (problem := run_problem(run)) is not None:
                check, column, why = problem
                out.rejects.append(Reject(f"environments[{e_i}].runs[{r_i}]", check, f"run of {env['id']}: {why}",
                                          clip(json.dumps(run)), "core_arc3__scorecard_runs", column))
                continue
            row = {
                "file_id": ctx.file_id, "card_id": doc.get("card_id"), "policy_id": policy_id,
                "game_id": env["id"], "run_index": r_i, "guid": run.get("guid"), "score": run.get("score"),
                "levels_completed": run.get("levels_completed"), "actions": run.get("actions"),
                "resets": run.get("resets"), "state": run.get("state"), "is_completed": run.get("completed"),
                "level_scores": run.get("level_scores"), "level_actions": run.get("level_actions"),
                "level_baseline_actions": run.get("level_baseline_actions"), "message": run.get("message"),
            }
            # A value its column cannot hold as it is ("5" stored as 5, or failing the whole file), then one its
            # column's checks refuse (a negative score): refused here, so for score FILE too, not by validation alone.
            problem, check = type_problem("core_arc3__scorecard_runs", row), "bad_type"
            if problem is None:
                problem, check = value_problem("core_arc3__scorecard_runs", row), "bad_value"
            if problem is not None:
                out.rejects.append(Reject(f"environments[{e_i}].runs[{r_i}]", check,
                                          f"run of {env['id']}: {problem[1]}", clip(json.dumps(run)),
                                          "core_arc3__scorecard_runs", problem[0]))
                continue
            runs.append(row)
    card = {"file_id": ctx.file_id, "card_id": doc.get("card_id"), "policy_id": policy_id,
            "score": doc.get("score"), "scorecard_json": json.dumps(doc, sort_keys=True)}
    problem = type_problem("core_arc3__scorecards", card) or value_problem("core_arc3__scorecards", card)
    if problem is not None:
        raise FileRejected(f"the scorecard's {problem[1]}", "bad_type")
    out.tables["core_arc3__scorecard_runs"] = conform("core_arc3__scorecard_runs", runs)
    out.tables["core_arc3__scorecards"] = conform("core_arc3__scorecards", [card])
    if any(-1 in (r["level_baseline_actions"] or []) for r in runs):
        out.flags.append("unscored_runs")


register(InputFormat(
    name="arc3-metadata",
    description="ARC-AGI-3 environment metadata.json (game id, baseline actions, tags)",
    reader=read_metadata, sniff=sniff_metadata, tables=("core_arc3__environments",),
))
register(InputFormat(
    name="arc3-scorecard",
    description="ARC-AGI-3 scorecard JSON: scored summary, card wrapper or bare card (toolkit or arcstudy)",
    reader=read_scorecard, sniff=sniff_scorecard,
    tables=("core_arc3__scorecard_runs", "core_arc3__scorecards", "core_arc3__card_plays"),
))
