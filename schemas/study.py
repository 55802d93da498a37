"""The study-session manifest we define (README, "Study-session manifest"): who played which recording,
in which session, and whether it was their first run. The official human dataset has none of this."""

from __future__ import annotations

import polars as pl

from schemas.model import Field

UTC = pl.Datetime("us", "UTC")

FIELDS: list[Field] = [
    Field("study_id", pl.String, "the study the manifest describes"),
    Field("participant_id", pl.String, "pseudonymous participant id"),
    Field("session_id", pl.String, "one sitting of one participant"),
    Field("cohort", pl.String, "recruitment cohort or batch", nullable=True),
    Field("site", pl.String, "where the session ran (lab, online platform)", nullable=True),
    Field("protocol", pl.String, "protocol id, e.g. `arc-agi-3-2026` (see spec/study-protocol.md)", nullable=True),
    Field("attributes_json", pl.String, "free-form participant attributes as JSON", nullable=True),
    Field("order_in_session", pl.Int64, "1-based position of the play in the session", nullable=True, ge=1),
    Field("is_first_run", pl.Boolean, "the participant had never played this game before this play"),
]
