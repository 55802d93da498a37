"""`arcstudy export-transitions` collects less often while it exports, and leaves the interpreter's collector as
it found it (tests and notebooks run the command in their own process)."""

from __future__ import annotations

import gc

import pytest

from pipeline.commands.export_transitions import GC_YOUNG_THRESHOLD, _fewer_collections


def test_collections_are_fewer_while_exporting_and_restored_after():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with _fewer_collections():
        assert gc.get_threshold()[0] == max(before[0], GC_YOUNG_THRESHOLD)
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() >= frozen
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_restored_when_the_export_fails():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(OSError), _fewer_collections():
        raise OSError("disk full")
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_objects_frozen_by_the_caller_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _fewer_collections():
            pass
        # still frozen (an unfreeze would leave none), nothing more frozen; a frozen object freed meanwhile (a
        # temporary of the test runner) leaves the count, so it may be a little lower
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
