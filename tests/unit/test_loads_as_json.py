"""`lines.loads_as_json`: orjson's speed, json's answers (the playback reader's JSON, and its quarantine reasons)."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.recordings.lines import loads_as_json


def outcome(fn, raw: bytes):
    try:
        value = fn(raw)
    except json.JSONDecodeError as err:
        return ("JSONDecodeError", err.msg, err.pos)
    except RecursionError:
        return ("RecursionError",)
    return ("value", json.dumps(value, sort_keys=True, allow_nan=True), repr(type(value)))


def json_loads(raw: bytes):
    return json.loads(raw.decode("utf-8"))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10 ** 30), max_value=10 ** 30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_json_value_reads_as_json_reads_it(value):
    raw = json.dumps(value, ensure_ascii=False).encode()
    assert outcome(loads_as_json, raw) == outcome(json_loads, raw)


@settings(max_examples=400, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=40), st.sampled_from(
    ["", "x", "}", "{", ",", '"', "\\", "\x00", "\ufeff", "NaN", "-Infinity", "\\ud800", "1" * 25, " ", "\t", "\f"]))
def test_a_damaged_line_gets_the_same_value_or_the_same_error(value, at, insert):
    text = json.dumps({"data": {"action_input": {"id": 1, "data": {}}, "v": value}})
    at = min(at, len(text))
    raw = (text[:at] + insert + text[at:]).encode("utf-8", "surrogatepass")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return  # the readers quarantine such a line before JSON
    assert outcome(loads_as_json, raw) == outcome(json_loads, raw)


def test_the_cases_orjson_reads_otherwise_are_read_by_json():
    for raw, want in ((b'{"n": 12345678901234567890123}', 12345678901234567890123),  # past 64 bits
                      (b'{"n": -9223372036854775809}', -9223372036854775809)):
        value = loads_as_json(raw)["n"]
        assert value == want and type(value) is int
    assert math.isnan(loads_as_json(b'{"n": NaN}')["n"])
    assert loads_as_json(b'["\\ud800"]') == ["\ud800"]
    assert outcome(loads_as_json, b"[" * 5000 + b"]" * 5000) == outcome(json_loads, b"[" * 5000 + b"]" * 5000)
    assert outcome(loads_as_json, b'{"a": 1,}') == ("JSONDecodeError", json_loads_error(b'{"a": 1,}'), 8)


def json_loads_error(raw: bytes) -> str:
    try:
        json.loads(raw)
    except json.JSONDecodeError as err:
        return err.msg
    raise AssertionError("json read it")
