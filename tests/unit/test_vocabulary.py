"""schemas/vocabulary.py is the one definition of each shared list: it matches the engine, and nobody else
spells a list out again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import GameAction, GameState
from pipeline.core.config import BaselinesConfig
from pipeline.scoring.baselines import DEFAULT_MIN_COMPLETERS, apply_rule
from pipeline.scoring.policies import POLICIES
from schemas import FIELDS
from schemas.vocabulary import (
    ACTION_NAMES,
    BASELINE_RULES,
    GAME_STATES,
    HARC_RELEASES,
    HARC_SPLITS,
    HARC_TERMINAL_ACTIONS,
    PLAY_STATES,
    RECORDING_VARIANTS,
)

ROOT = Path(__file__).resolve().parents[2]


def test_action_names_are_the_engine_actions_in_id_order():
    # engine must not import schemas (it is a bottom layer of its own), so the two are compared here.
    assert ACTION_NAMES == tuple(a.name for a in sorted(GameAction, key=lambda a: a.value))
    assert all(ACTION_NAMES.index(a.name) == a.value for a in GameAction)


def test_game_states_are_the_engine_states():
    assert GAME_STATES == tuple(s.value for s in GameState)
    assert set(PLAY_STATES) == set(GAME_STATES) - {"NOT_PLAYED"}


def test_every_rule_is_implemented_and_every_policy_uses_a_known_rule():
    assert set(DEFAULT_MIN_COMPLETERS) == set(BASELINE_RULES)
    for rule in BASELINE_RULES:
        assert apply_rule([3, 5, 8, 9], rule) in (3, 5, 6.5, 8)
    assert {p.baseline_rule for p in POLICIES.values()} <= set(BASELINE_RULES)


@pytest.mark.parametrize(("field", "values"), [
    ("baseline_rule", BASELINE_RULES), ("play_state", PLAY_STATES), ("release_generation", HARC_RELEASES),
    ("task_split", HARC_SPLITS),
])
def test_schema_checks_use_the_vocabulary(field, values):
    assert FIELDS[field].isin == values


def test_config_choices_use_the_vocabulary():
    rule_choices = BaselinesConfig.__dataclass_fields__["rule"].metadata["choices"]
    assert rule_choices == BASELINE_RULES
    from pipeline.core.config import AttemptsConfig

    assert AttemptsConfig.__dataclass_fields__["participant_variants"].metadata["choices"] == RECORDING_VARIANTS


# A list re-typed elsewhere: its members in order, quoted and comma-separated as a Python literal spells
# them (line breaks allowed). A single name used in a comparison is not a copy.
LISTS = {"ACTION_NAMES": ACTION_NAMES, "BASELINE_RULES": BASELINE_RULES, "RECORDING_VARIANTS": RECORDING_VARIANTS,
         "PLAY_STATES": PLAY_STATES, "HARC_RELEASES": HARC_RELEASES, "HARC_SPLITS": HARC_SPLITS,
         "HARC_TERMINAL_ACTIONS": HARC_TERMINAL_ACTIONS}


@pytest.mark.parametrize("name", sorted(LISTS))
def test_no_list_is_spelled_out_outside_the_vocabulary(name):
    pattern = re.compile(r",\s*".join(f"[\"']{re.escape(v)}[\"']" for v in LISTS[name]))
    copies = [str(p.relative_to(ROOT)) for folder in ("pipeline", "schemas")
              for p in sorted((ROOT / folder).rglob("*.py"))
              if p.name != "vocabulary.py" and pattern.search(p.read_text())]
    assert copies == [], f"{name} is re-typed in {copies}: import it from schemas.vocabulary"
