"""Comparing arcstudy's numbers with an official sidecar (`*.expected.json`): exact, floats to 1e-9."""

from __future__ import annotations

import math
from typing import Any

TOL = 1e-9  # scores are percentages computed the same way: only the last bits may differ


def assert_close(actual: Any, expected: Any, path: str = "$") -> None:
    """`actual` equals `expected` key by key and item by item, floats within TOL; the path names the first
    difference."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        assert set(actual) == set(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_close(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), f"{path}: {actual} != {expected}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_close(a, e, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert math.isclose(actual, expected, rel_tol=0.0, abs_tol=TOL), f"{path}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
