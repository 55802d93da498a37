"""Released policies never change: their parameters are pinned by fingerprint.

If one of these tests fails, a released policy was edited. Do not update the pin: revert the edit and add a
new policy id instead (CONVENTIONS.md: "a policy never changes once released").
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pipeline.scoring import DEFAULT_POLICY_ID, POLICIES, ScoringPolicy, get_policy

SHARED = Path(__file__).resolve().parents[2].parent / "shared"

PINNED_FINGERPRINTS = {
    "arc-agi-3/2025-preview": "b26efd0cf1adafd4030ee4f0ba2c5e3534c0943a415cdbe729dfa48cd726a359",
    "arc-agi-3/2026-03": "e7a34275ff7559d1775cf3765740f394930df23b25e0ef3eef9444edb76b7540",
    "arc-agi-3/2026-04": "eb8c03d990f21e2e7edb7c9fec5d7413c8ef045734074b2bf3249ec93744d3b2",
}


def test_registry_is_exactly_the_released_policies():
    assert set(POLICIES) == set(PINNED_FINGERPRINTS)
    vectors = json.loads((SHARED / "spec" / "scoring-vectors.json").read_text())
    assert set(vectors["policies"]) == set(POLICIES)


@pytest.mark.parametrize("policy_id", sorted(PINNED_FINGERPRINTS))
def test_policy_fingerprint_pinned(policy_id):
    assert POLICIES[policy_id].fingerprint() == PINNED_FINGERPRINTS[policy_id]


@pytest.mark.parametrize("policy_id", sorted(PINNED_FINGERPRINTS))
def test_policy_fingerprint_covers_every_field(policy_id):
    policy = POLICIES[policy_id]
    for f in dataclasses.fields(policy):
        value = getattr(policy, f.name)
        if isinstance(value, bool):
            changed = not value
        elif isinstance(value, (int, float)):
            changed = value + 1
        elif value is None:
            changed = 1.0
        elif isinstance(value, tuple):
            changed = value[:-1]
        else:
            changed = str(value) + "x"
        assert dataclasses.replace(policy, **{f.name: changed}).fingerprint() != policy.fingerprint(), f.name


@pytest.mark.parametrize("policy_id", sorted(PINNED_FINGERPRINTS))
def test_policy_is_immutable(policy_id):
    policy = POLICIES[policy_id]
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.level_cap = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        POLICIES[policy_id] = policy  # type: ignore[index]
    assert all(isinstance(getattr(policy, f.name), (str, int, float, bool, tuple, type(None)))
               for f in dataclasses.fields(policy))
    assert policy.provenance and all(c.source and c.says for c in policy.provenance)


def test_get_policy():
    assert DEFAULT_POLICY_ID == "arc-agi-3/2026-04"
    assert get_policy() is POLICIES[DEFAULT_POLICY_ID]
    assert get_policy(POLICIES["arc-agi-3/2026-03"]) is POLICIES["arc-agi-3/2026-03"]
    with pytest.raises(KeyError):
        get_policy("arc-agi-3/unknown")


def test_cutoff_budget_only_where_defined():
    assert isinstance(POLICIES["arc-agi-3/2026-03"], ScoringPolicy)
    assert POLICIES["arc-agi-3/2026-03"].level_budget(22) == 110
    assert POLICIES["arc-agi-3/2026-03"].level_budget(20.1) == 101  # ceil
    assert POLICIES["arc-agi-3/2026-04"].level_budget(22) is None
    assert POLICIES["arc-agi-3/2025-preview"].level_budget(22) is None
