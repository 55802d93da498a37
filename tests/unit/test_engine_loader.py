"""Game discovery, version selection and the scoped ``arcengine`` import redirection (engine.loader)."""

import dataclasses
import json
import sys
import types

import pytest

import engine
from engine.loader import (
    GameNotFoundError,
    default_environments_dir,
    find_games,
    load_game_class,
    load_game_module,
    metadata_files,
    resolve_game,
    skipped_metadata,
    unloadable_reason,
)

GAME_SOURCE = '''
from arcengine import ARCBaseGame, Camera, Level, Sprite
from arcengine.enums import ActionInput

VERSION = "{version}"


class Zz01(ARCBaseGame):
    def __init__(self):
        super().__init__("zz01", [Level([Sprite([[1]], name="p")], grid_size=(4, 4))], Camera())

    def engine_module_at_runtime(self):
        import arcengine  # resolved when called, long after loading

        return arcengine, ActionInput
'''


def write_game(root, version, date, class_name=None):
    folder = root / "zz01" / version
    folder.mkdir(parents=True)
    (folder / "zz01.py").write_text(GAME_SOURCE.format(version=version), encoding="utf-8")
    metadata = {"game_id": f"zz01-{version}", "date_downloaded": date, "baseline_actions": [3]}
    if class_name:
        metadata["class_name"] = class_name
    (folder / "metadata.json").write_text(json.dumps(metadata), encoding="utf-8")


@pytest.fixture
def environments(tmp_path):
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    write_game(tmp_path, "bbbb2222", "2026-03-01T00:00:00.000000+00:00")
    write_game(tmp_path / "nested" / "deeper", "cccc3333", "2025-12-31T00:00:00Z")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "metadata.json").write_text("{not json", encoding="utf-8")
    return tmp_path


def test_discovery_at_any_depth(environments):
    ids = [info.game_id for info in find_games(environments)]
    assert ids == ["zz01-aaaa1111", "zz01-bbbb2222", "zz01-cccc3333"]
    info = resolve_game("zz01-cccc3333", environments)
    assert info.short_id == "zz01" and info.version == "cccc3333" and info.class_name == "Zz01"
    assert info.baseline_actions == [3] and info.source.name == "zz01.py"


def test_a_linked_game_folder_is_found_and_a_link_back_up_ends_the_walk(tmp_path):
    # Path.rglob did not follow a symlinked folder: a games folder of links to games kept elsewhere had its
    # games "not found"
    elsewhere = tmp_path / "elsewhere"
    write_game(elsewhere, "dddd4444", "2026-02-01T00:00:00+00:00")
    games = tmp_path / "games"
    write_game(games, "aaaa1111", "2026-01-01T00:00:00+00:00")
    (games / "linked").symlink_to(elsewhere / "zz01", target_is_directory=True)
    (games / "again").symlink_to(elsewhere, target_is_directory=True)  # a second way to the same folder
    (elsewhere / "loop").symlink_to(games, target_is_directory=True)  # and one back up
    assert [p.relative_to(games).as_posix() for p in metadata_files(games)] == [
        "again/zz01/dddd4444/metadata.json", "zz01/aaaa1111/metadata.json"]
    assert [info.game_id for info in find_games(games)] == ["zz01-aaaa1111", "zz01-dddd4444"]
    info = resolve_game("zz01-dddd4444", games, loadable=True)
    assert load_game_class(info).__name__ == "Zz01"


def test_a_link_to_a_folder_holding_the_games_folder_is_not_walked(tmp_path):
    # a link to / made discovery walk the whole disk, and every metadata.json on it declared a game there
    games = tmp_path / "games"
    write_game(games, "aaaa1111", "2026-01-01T00:00:00+00:00")
    write_game(tmp_path / "elsewhere", "bbbb2222", "2026-01-01T00:00:00+00:00")
    (games / "everything").symlink_to("/", target_is_directory=True)
    (games / "up").symlink_to(tmp_path, target_is_directory=True)
    assert [info.game_id for info in find_games(games)] == ["zz01-aaaa1111"]
    assert unloadable_reason(resolve_game("zz01-aaaa1111", games)) is None


def test_version_selection(environments):
    assert resolve_game("zz01", environments).version == "bbbb2222"  # most recent download
    assert resolve_game("zz01-aaaa1111", environments).version == "aaaa1111"
    with pytest.raises(GameNotFoundError):
        resolve_game("zz01-ffffffff", environments)
    with pytest.raises(GameNotFoundError):
        resolve_game("qq99", environments)
    assert resolve_game("zz01", [environments / "nested", environments]).version == "bbbb2222"


def test_arcengine_resolves_to_engine_without_touching_sys_modules(environments, monkeypatch):
    official = types.ModuleType("arcengine")  # stands in for an installed official package
    monkeypatch.setitem(sys.modules, "arcengine", official)
    before = {name: module for name, module in sys.modules.items() if name.startswith("arcengine")}
    cls = load_game_class(resolve_game("zz01-aaaa1111", environments), fresh=True)
    assert issubclass(cls, engine.ARCBaseGame)
    runtime_module, action_input = cls().engine_module_at_runtime()
    assert runtime_module is engine and action_input is engine.ActionInput
    after = {name: module for name, module in sys.modules.items() if name.startswith("arcengine")}
    assert after == before and sys.modules["arcengine"] is official


def test_modules_are_cached_per_content(environments):
    info = resolve_game("zz01-aaaa1111", environments)
    assert load_game_class(info) is load_game_class(info)
    assert load_game_class(info, fresh=True) is not load_game_class(info)


def test_make_uses_named_directories_only(environments):
    env = engine.make("zz01", environments)
    assert env.game_id == "zz01-bbbb2222"
    assert default_environments_dir().name == "games"
    with pytest.raises(GameNotFoundError):
        engine.make("zz01", environments / "nested" / "missing")


def test_missing_source_and_class(tmp_path):
    folder = tmp_path / "ab12" / "v1"
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"game_id": "ab12-v1"}), encoding="utf-8")
    info = resolve_game("ab12", tmp_path)
    with pytest.raises(GameNotFoundError):
        load_game_class(info)
    (folder / "ab12.py").write_text("X = 1\n", encoding="utf-8")
    with pytest.raises(GameNotFoundError):
        load_game_class(resolve_game("ab12", tmp_path))


PAYLOAD = '''
from pathlib import Path

Path({marker!r}).write_text("payload ran")


class Evil:
    pass
'''


def write_malicious_game(root, marker, class_name):
    """A game whose metadata points the loader at code outside its own version folder; payloads
    sit where "../../payload/Evil" and "../../../payload/Evil" lead from that folder."""
    for payload in (root / "games" / "payload", root / "payload"):
        payload.mkdir(parents=True, exist_ok=True)
        for name in ("evil.py", "Evil.py"):
            (payload / name).write_text(PAYLOAD.format(marker=str(marker)), encoding="utf-8")
    folder = root / "games" / "ev66" / "v1"
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"game_id": "ev66-v1", "class_name": class_name}),
                                          encoding="utf-8")
    return root / "games"


@pytest.mark.parametrize("class_name", ["../../payload/Evil", "../../../payload/Evil"])
def test_class_name_cannot_point_outside_the_game_folder(tmp_path, class_name):
    from pipeline.explore import discover, resolve

    marker = tmp_path / "marker.txt"
    games = write_malicious_game(tmp_path, marker, class_name)
    assert (games / "ev66" / "v1" / f"{class_name}.py").is_file()  # the path would reach a payload
    info = resolve_game("ev66", games)
    assert info.source is None
    with pytest.raises(GameNotFoundError, match="not a plain class name"):
        load_game_class(info)
    with pytest.raises(GameNotFoundError, match="not a plain class name"):
        resolve_game("ev66", games, loadable=True)
    with pytest.raises(GameNotFoundError, match="not a plain class name"):
        engine.make("ev66", games)
    with pytest.raises(GameNotFoundError, match="not a plain class name"):
        resolve("ev66", games)
    assert find_games(games, loadable=True) == [] and discover(games) == []
    assert not marker.exists(), "the payload must never run"


def test_a_game_file_linked_from_outside_the_folder_is_refused(tmp_path):
    marker = tmp_path / "marker.txt"
    games = write_malicious_game(tmp_path, marker, "Ev66")
    (games / "ev66" / "v1" / "ev66.py").symlink_to(tmp_path / "payload" / "evil.py")
    info = resolve_game("ev66", games)
    assert info.source is None
    with pytest.raises(GameNotFoundError, match="no ev66.py"):
        engine.make("ev66", games)
    forged = dataclasses.replace(info, source=games / "ev66" / "v1" / "ev66.py")  # a hand-made GameInfo
    with pytest.raises(GameNotFoundError, match="outside the game's own folder"):
        load_game_class(forged)
    assert not marker.exists(), "the payload must never run"


@pytest.mark.parametrize("game_id", ["../../../escaped-aaaa1111", "zz01/../../x", "/tmp/zz01-aaaa1111",
                                     "zz01-aaaa1111\x00x", "..", "zz01\\..\\x"])
def test_a_game_id_that_is_a_path_is_refused(tmp_path, game_id):
    # game ids name output folders (explore/qualify --out DIR/<game_id>/): a path there writes outside DIR
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    metadata = tmp_path / "zz01" / "aaaa1111" / "metadata.json"
    metadata.write_text(json.dumps({"game_id": game_id, "class_name": "Zz01"}), encoding="utf-8")
    assert find_games(tmp_path) == []
    with pytest.raises(GameNotFoundError, match="game_id .* is not a plain game id") as err:
        resolve_game(game_id, tmp_path)
    assert str(metadata) in str(err.value)


def test_metadata_with_a_byte_order_mark_loads(tmp_path):
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    metadata = tmp_path / "zz01" / "aaaa1111" / "metadata.json"
    metadata.write_bytes(b"\xef\xbb\xbf" + metadata.read_bytes())
    assert resolve_game("zz01", tmp_path).game_id == "zz01-aaaa1111"


def test_unreadable_metadata_is_skipped_and_named_when_the_game_is_not_found(tmp_path):
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    metadata = tmp_path / "zz01" / "aaaa1111" / "metadata.json"
    metadata.write_text('{"game_id": "zz01-aaaa1111", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
                        encoding="utf-8")
    assert find_games(tmp_path) == []
    with pytest.raises(GameNotFoundError, match="nested too deeply") as err:
        resolve_game("zz01", tmp_path)
    assert str(metadata) in str(err.value)


@pytest.mark.parametrize(("body", "words"), [
    (None, "not a regular file"),
    ('{"game_id": "zz01-aaaa1111", "baseline_actions": [3], "game_id": "zz01-bbbb2222"}', "'game_id' is given twice"),
    ('{"game_id": "zz01-aaaa1111", "pad": "' + "x" * (5 << 20) + '"}', "is at most"),
])
def test_metadata_that_must_not_be_read_is_skipped_with_its_reason(tmp_path, body, words, fifo_unblocked):
    # a FIFO blocked discovery for good; a repeated key was read as its last value; a huge file was read whole
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    metadata = tmp_path / "zz01" / "aaaa1111" / "metadata.json"
    metadata.unlink()
    if body is None:
        fifo_unblocked(metadata)
    else:
        metadata.write_text(body, encoding="utf-8")
    assert find_games(tmp_path) == []
    [skipped] = skipped_metadata(tmp_path)
    assert skipped.startswith(f"{metadata}: ") and words in skipped


@pytest.mark.parametrize(("kind", "words"), [("fifo", "not a regular file"), ("huge", "a game file is at most")])
def test_a_game_file_that_must_not_be_read_makes_the_game_unloadable(tmp_path, kind, words, fifo_unblocked):
    # its sha256 was taken in arcstudy's own process with read_bytes: a FIFO blocked, a sparse 3 GB file took 3 GB
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    source = tmp_path / "zz01" / "aaaa1111" / "zz01.py"
    source.unlink()
    if kind == "fifo":
        fifo_unblocked(source)
    else:
        with open(source, "wb") as fh:
            fh.truncate(17 << 20)  # sparse: nothing on disk
    [info] = find_games(tmp_path)
    assert words in unloadable_reason(info)
    with pytest.raises(GameNotFoundError, match=words):
        info.source_sha256()
    with pytest.raises(GameNotFoundError, match=words):
        resolve_game("zz01-aaaa1111", tmp_path, loadable=True)


def test_the_metadata_find_games_skips_is_listed_with_its_reason(environments):
    """`simulate --environments` once left out a game whose metadata.json could not be read without a word:
    the skipped files and their reasons are public, for a caller that was given the folder to say so."""
    assert [info.game_id for info in find_games(environments)] == ["zz01-aaaa1111", "zz01-bbbb2222",
                                                                   "zz01-cccc3333"]
    (skipped,) = skipped_metadata(environments)
    assert skipped.startswith(f"{environments / 'notes' / 'metadata.json'}: not valid JSON (")
    assert skipped_metadata(environments / "zz01") == []


POLLUTER = '''
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # to import its own helper module, as a game might
import po01helper  # noqa: E402

sys.modules["engine.enums"] = types.ModuleType("engine.enums")  # and it clobbers the engine's module table
from arcengine import ARCBaseGame, Camera, Level, Sprite  # noqa: E402


class Po01(ARCBaseGame):
    def __init__(self):
        super().__init__("po01", [Level([Sprite([[po01helper.COLOUR]], name="p")], grid_size=(4, 4))], Camera())
'''

NEIGHBOUR = '''
from arcengine import ARCBaseGame, Camera, Level, Sprite
from arcengine.enums import GameAction

try:
    import po01helper  # another game's helper must not be importable from here
    LEAKED = True
except ImportError:
    LEAKED = False


class Nb01(ARCBaseGame):
    def __init__(self):
        super().__init__("nb01", [Level([Sprite([[1]], name="p")], grid_size=(4, 4))], Camera())
'''


def test_a_games_own_sys_modules_and_sys_path_changes_do_not_reach_the_next_game(tmp_path):
    import engine.enums

    for code, source in (("po01", POLLUTER), ("nb01", NEIGHBOUR)):
        folder = tmp_path / code / "v1"
        folder.mkdir(parents=True)
        (folder / f"{code}.py").write_text(source, encoding="utf-8")
        (folder / "metadata.json").write_text(json.dumps({"game_id": f"{code}-v1"}), encoding="utf-8")
    (tmp_path / "po01" / "v1" / "po01helper.py").write_text("COLOUR = 3\n", encoding="utf-8")
    path_before = list(sys.path)
    first = load_game_class(resolve_game("po01", tmp_path), fresh=True)
    assert first().current_level.get_sprites()[0].pixels[0, 0] == 3  # the game itself got its helper
    assert sys.modules["engine.enums"] is engine.enums and "po01helper" not in sys.modules
    assert sys.path == path_before
    second = load_game_module(resolve_game("nb01", tmp_path), fresh=True)
    assert second.GameAction is engine.enums.GameAction and second.LEAKED is False


def test_two_folders_declaring_the_same_game_id_under_one_root_are_refused_as_ambiguous(tmp_path):
    write_game(tmp_path, "aaaa1111", "2026-01-01T00:00:00+00:00")
    write_game(tmp_path / "copy", "aaaa1111", "2026-01-01T00:00:00+00:00")
    ((tmp_path / "copy" / "zz01" / "aaaa1111" / "zz01.py")
     .write_text(GAME_SOURCE.format(version="other code, same id"), encoding="utf-8"))
    with pytest.raises(GameNotFoundError, match="declared by 2 folders") as err:
        resolve_game("zz01", tmp_path, loadable=True)
    assert str(tmp_path / "copy" / "zz01" / "aaaa1111") in str(err.value)
    assert find_games(tmp_path, loadable=True) == []
    # listed in several --games folders, the first folder still wins (a user's copy over the shipped one)
    assert resolve_game("zz01", [tmp_path / "copy", tmp_path / "nothing"], loadable=True).directory == \
        tmp_path / "copy" / "zz01" / "aaaa1111"
