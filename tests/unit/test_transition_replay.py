"""The sandbox side of `arcstudy export-transitions` (pipeline/recordings/transition_replay.py): the game class
is loaded once per game file while the file is unchanged, and a chunk's frames come back packed in one buffer
(their digests are made by the receiver)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from engine.base_game import FRAMES_ALL
from engine.env import GameEnv
from engine.loader import find_games
from pipeline.recordings import transition_replay

GAMES = Path(__file__).resolve().parents[2] / "games"


def test_the_game_class_is_reloaded_only_when_its_file_changes(tmp_path, monkeypatch):
    loads: list[str] = []
    load = transition_replay.load_game_class

    def counted(info):
        loads.append(info.game_id)
        return load(info)

    monkeypatch.setattr(transition_replay, "load_game_class", counted)
    shutil.copytree(GAMES / "bg41", tmp_path / "bg41")
    (info,) = find_games([tmp_path])
    first = transition_replay._game_class(info)
    assert transition_replay._game_class(info) is first and len(loads) == 1  # the same file: loaded once
    source = Path(info.source)
    source.write_text(source.read_text() + "\n# changed\n")
    changed = transition_replay._game_class(info)
    assert len(loads) == 2 and changed is not first and changed.__name__ == first.__name__
    assert transition_replay._game_class(info) is changed and len(loads) == 2


def test_a_chunk_packs_every_frame_and_no_digest():
    info = next(i for i in find_games([GAMES]) if i.short_id == "bg41")
    env = GameEnv(info)
    responses = [env.reset(frames=FRAMES_ALL)]
    for action in (1, 2, 3, 4):
        responses.append(env.step(action, frames=FRAMES_ALL))
    chunk = transition_replay._Chunk()
    for i, response in enumerate(responses):
        chunk.add(response, keep_frames=i != 2, answer=True)  # the third response's frames not kept
    packed = chunk.packed()
    counts = np.frombuffer(packed["counts"], dtype=np.int32).tolist()
    frames = [np.asarray(g, dtype=np.uint8).tobytes() for i, r in enumerate(responses) if i != 2 for g in r.frame]
    assert counts == [0 if i == 2 else len(r.frame) for i, r in enumerate(responses)]
    assert bytes(packed["frames"]) == b"".join(frames)
    assert "digests" not in packed  # hashed by the receiver, from the bytes it got (transitions._with_digests)
    assert [a[1] for a in packed["answers"]] == [int(r.levels_completed) for r in responses]


def _script_request(info, token: str, actions: list[int], max_frame_bytes: int = 16 << 20) -> tuple:
    items = [(a, {}, None, i + 1, f"ACTION{a}") for i, a in enumerate(actions)]
    return (token, ("script", info, token), items, True, max_frame_bytes)


def test_several_replays_in_one_call_answer_as_each_would_alone():
    info = next(i for i in find_games([GAMES]) if i.short_id == "bg41")
    plays = {"a": [1, 2, 3], "b": [4, 4], "c": [2]}
    alone = {t: transition_replay.replay_chunk(_script_request(info, f"alone-{t}", a)) for t, a in plays.items()}
    together = transition_replay.replay_chunks(([_script_request(info, f"together-{t}", a) for t, a in plays.items()],
                                                16 << 20))
    assert len(together) == 3
    for (token, actions), answer in zip(plays.items(), together, strict=True):
        assert answer["ended"] and answer["n"] == len(actions) + 1  # make()'s RESET, then each action
        assert answer["answers"] == alone[token]["answers"]
        for field in ("counts", "frames"):
            assert bytes(answer[field]) == bytes(alone[token][field]), field
    assert not any(t.startswith("together-") for t in transition_replay._SESSIONS)


def test_one_call_stops_at_its_frame_budget_and_leaves_no_replay_open():
    info = next(i for i in find_games([GAMES]) if i.short_id == "bg41")
    # a budget of one frame: the first replay is answered, the others are left for their own calls
    answers = transition_replay.replay_chunks(([_script_request(info, f"budget-{i}", [1, 2]) for i in range(3)], 1))
    assert answers[0] is not None and answers[0]["ended"] and answers[1:] == [None, None]
    # a replay that does not end in its one chunk (more frames than the chunk holds) is dropped, not left open
    answers = transition_replay.replay_chunks(([_script_request(info, "long", [1, 2, 3, 4], max_frame_bytes=1),
                                                _script_request(info, "short", [1])], 16 << 20))
    assert answers[0] is None and answers[1]["ended"]
    assert "long" not in transition_replay._SESSIONS and "short" not in transition_replay._SESSIONS
