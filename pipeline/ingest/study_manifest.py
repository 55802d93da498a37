"""The study-session manifest (`arcstudy-study-manifest/1`), our own format, documented in the README.

It links recordings (by guid) to sessions and participants. Entries that contradict each other are
quarantined one by one (a session of an unknown participant, a play in an unknown session, a play whose
participant differs from its session's, a session ending before it starts); the rest loads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pipeline.ingest.arc3_json import _load_json_document, _whole_json
from pipeline.ingest.base import FileContext, FileRejected, ReaderOutput, Reject, clip
from pipeline.ingest.formats import Head, InputFormat, register
from schemas.validate import conform, type_problem

FORMAT_ID = "arcstudy-study-manifest/1"
MAX_STUDY_ID_BYTES = 1024  # the study_id goes into every participant, session and play row: 10 MB once made 5 GB


def sniff(head: Head) -> str | None:
    if f'"{FORMAT_ID}"' in head.text[:2000]:
        return f"JSON document declaring format {FORMAT_ID}"
    obj = _whole_json(head)
    if isinstance(obj, dict) and {"participants", "sessions", "plays"} <= obj.keys():
        return "JSON object with participants, sessions and plays"
    return None


def _time(value: Any) -> datetime | None | str:
    """A timezone-aware timestamp, None when absent, or an error message."""
    if value is None:
        return None
    if not isinstance(value, str):
        return f"expected an ISO-8601 string, got {value!r}"
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return f"{value!r} is not ISO-8601"
    return ts if ts.tzinfo else f"{value!r} has no UTC offset"


def read_manifest(ctx: FileContext) -> ReaderOutput:
    doc, text_flags, bad = _load_json_document(ctx, "a study manifest")
    if not isinstance(doc, dict):
        raise FileRejected("a study manifest must be a JSON object", "bad_manifest")
    bad_rejects: list[Reject] = []
    left_out: set[tuple[str, int]] = set()  # entries quarantined for bad text (a lone surrogate escape)
    if bad:
        for kind, table, noun in (("participants", "core_study__participants", "participant"),
                                  ("sessions", "core_study__sessions", "session"),
                                  ("plays", "core_study__session_plays", "play")):
            for i in range(len(doc[kind]) if isinstance(doc.get(kind), list) else 0):
                reject = bad.reject((kind, i), f"{kind}[{i}]", noun, table)
                if reject is not None:
                    left_out.add((kind, i))
                    bad_rejects.append(reject)
        bad.found = [b for b in bad.found if tuple(b.path[:2]) not in left_out]
        bad.refuse_whole("manifest")
    if doc.get("format") not in (None, FORMAT_ID):
        raise FileRejected(f"unsupported manifest format {doc.get('format')!r} (this version reads {FORMAT_ID})",
                           "unsupported_version")
    for key in ("participants", "sessions", "plays"):
        if not isinstance(doc.get(key), list):
            raise FileRejected(f"`{key}` must be a list", "bad_manifest")
    study_id = doc.get("study_id") or ctx.path.stem
    if not isinstance(study_id, str):
        raise FileRejected(f"study_id must be a string, got {clip(json.dumps(study_id))}", "bad_type")
    n_bytes = len(study_id.encode("utf-8", "surrogatepass"))
    if n_bytes > MAX_STUDY_ID_BYTES:  # copied into every row below
        raise FileRejected(f"study_id is {n_bytes:,} bytes, over the "
                           f"{MAX_STUDY_ID_BYTES:,} an identifier may have", "value_too_large")
    out = ReaderOutput(flags=text_flags, rejects=bad_rejects)

    def reject(kind: str, i: int, check: str, reason: str, entry: Any, table: str, column: str | None = None):
        out.rejects.append(Reject(f"{kind}[{i}]", check, reason, clip(json.dumps(entry, default=str)), table, column))

    def wrong_type(kind: str, i: int, row: dict, entry: Any, table: str) -> bool:
        """An entry with a value its column cannot hold as it is (1.7 for an integer, a list for a string) is
        rejected rather than stored altered."""
        problem = type_problem(table, row)
        if problem is not None:
            reject(kind, i, "bad_type", problem[1], entry, table, problem[0])
        return problem is not None

    def identified(kind: str, noun: str, id_key: str, table: str) -> Iterator[tuple[int, dict]]:
        """The entries of `kind` that are objects with a string `id_key`; the others are rejected as missing_id."""
        for i, entry in enumerate(doc[kind]):
            if (kind, i) in left_out:
                continue
            if isinstance(entry, dict) and isinstance(entry.get(id_key), str):
                yield i, entry
            else:
                reject(kind, i, "missing_id", f"{noun} without a {id_key}", entry, table, id_key)

    participants: dict[str, dict] = {}
    for i, p in enumerate(doc["participants"]):
        if ("participants", i) in left_out:
            continue
        pid = p.get("participant_id") if isinstance(p, dict) else None
        if not isinstance(pid, str) or not pid:
            reject("participants", i, "missing_id", "participant without a participant_id", p,
                   "core_study__participants", "participant_id")
            continue
        if pid in participants:
            reject("participants", i, "duplicate_id", f"participant {pid} is listed twice", p,
                   "core_study__participants", "participant_id")
            continue
        attrs = {k: v for k, v in p.items() if k not in ("participant_id", "cohort", "site")}
        row = {"participant_id": pid, "file_id": ctx.file_id, "study_id": study_id,
               "cohort": p.get("cohort"), "site": p.get("site"),
               "attributes_json": json.dumps(attrs, sort_keys=True) if attrs else None}
        if wrong_type("participants", i, row, p, "core_study__participants"):
            continue
        participants[pid] = row

    sessions: dict[str, dict] = {}
    for i, s in identified("sessions", "session", "session_id", "core_study__sessions"):
        sid, pid = s["session_id"], s.get("participant_id")
        started, ended = _time(s.get("started_at")), _time(s.get("ended_at"))
        problem = None
        if pid not in participants:
            problem = ("unknown_participant", f"session {sid} names participant {pid!r}, who is not in participants",
                       "participant_id")
        elif sid in sessions:
            problem = ("duplicate_id", f"session {sid} is listed twice", "session_id")
        elif isinstance(started, str) or isinstance(ended, str):
            problem = ("bad_timestamp", f"session {sid}: {started if isinstance(started, str) else ended}",
                       "started_at" if isinstance(started, str) else "ended_at")
        elif started and ended and ended < started:
            problem = ("ends_before_start", f"session {sid} ends ({ended}) before it starts ({started})", "ended_at")
        if problem:
            reject("sessions", i, problem[0], problem[1], s, "core_study__sessions", problem[2])
            continue
        row = {"session_id": sid, "file_id": ctx.file_id, "study_id": study_id, "participant_id": pid,
               "started_at": started, "ended_at": ended, "site": s.get("site"),
               "cohort": s.get("cohort"), "protocol": s.get("protocol")}
        if wrong_type("sessions", i, row, s, "core_study__sessions"):
            continue
        sessions[sid] = row

    plays: dict[str, dict] = {}
    for i, p in identified("plays", "play", "guid", "core_study__session_plays"):
        guid, sid = p["guid"], p.get("session_id")
        session = sessions.get(sid)
        problem = None
        if session is None:
            problem = ("unknown_session", f"play {guid} names session {sid!r}, which is not in sessions (or was "
                       "rejected)", "session_id")
        elif p.get("participant_id") not in (None, session["participant_id"]):
            problem = ("contradicts_session", f"play {guid} says participant {p.get('participant_id')!r} but its "
                       f"session {sid} belongs to {session['participant_id']!r}", "participant_id")
        elif guid in plays:
            problem = ("duplicate_id", f"play {guid} is listed twice", "guid")
        elif not isinstance(p.get("is_first_run", True), bool):
            problem = ("bad_value", f"play {guid}: is_first_run must be true or false", "is_first_run")
        if problem:
            reject("plays", i, problem[0], problem[1], p, "core_study__session_plays", problem[2])
            continue
        row = {"guid": guid, "file_id": ctx.file_id, "study_id": study_id, "session_id": sid,
               "participant_id": session["participant_id"], "game_id": p.get("game_id"),
               "order_in_session": p.get("order_in_session"), "is_first_run": p.get("is_first_run", True)}
        if wrong_type("plays", i, row, p, "core_study__session_plays"):
            continue
        plays[guid] = row

    out.tables["core_study__participants"] = conform("core_study__participants", list(participants.values()))
    out.tables["core_study__sessions"] = conform("core_study__sessions", list(sessions.values()))
    out.tables["core_study__session_plays"] = conform("core_study__session_plays", list(plays.values()))
    return out


register(InputFormat(
    name="study-manifest",
    description=f"arcstudy study-session manifest ({FORMAT_ID}): participants, sessions, plays",
    reader=read_manifest, sniff=sniff,
    tables=("core_study__participants", "core_study__sessions", "core_study__session_plays"),
))
