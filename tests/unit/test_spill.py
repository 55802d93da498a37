"""`SpillArray`: an array in bounded memory behaves as the `array` it stands for, spilled or not."""

from __future__ import annotations

import pickle
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import spill
from pipeline.core.outputs import OutputError
from pipeline.core.spill import BLOCK_ITEMS, SpillArray, growing

HELD = BLOCK_ITEMS  # the smallest: every further block spills


def _filled(n: int, typecode: str = "q") -> tuple[SpillArray, array]:
    expected = array(typecode, ((i * 7919) % 251 - 100 for i in range(n)))
    column = SpillArray(typecode, held=HELD)
    for value in expected:
        column.append(value)
    return column, expected


def test_spilled_items_read_back_as_appended():
    column, expected = _filled(5 * BLOCK_ITEMS + 123)
    assert column.spilled() >= 3 * BLOCK_ITEMS  # most of it waits on disk
    assert len(column._tail) < HELD + BLOCK_ITEMS  # memory holds at most `held` and a block
    assert len(column) == len(expected)
    assert list(column) == list(expected)
    for i in (0, 1, BLOCK_ITEMS - 1, BLOCK_ITEMS, 3 * BLOCK_ITEMS + 5, len(expected) - 1, -1, -len(expected)):
        assert column[i] == expected[i]
    with pytest.raises(IndexError):
        column[len(expected)]
    with pytest.raises(IndexError):
        column[-len(expected) - 1]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 4 * BLOCK_ITEMS), start=st.integers(-5 * BLOCK_ITEMS, 5 * BLOCK_ITEMS),
       stop=st.integers(-5 * BLOCK_ITEMS, 5 * BLOCK_ITEMS) | st.none(), step=st.sampled_from([None, 1, 3, -1]))
def test_slices_equal_the_arrays(n, start, stop, step):
    column, expected = _filled(n)
    got = column[start:stop:step]
    assert list(got) == list(expected[start:stop:step])


def test_a_long_slice_stays_in_bounded_memory():
    column, expected = _filled(4 * BLOCK_ITEMS)
    got = column[1:]
    assert isinstance(got, SpillArray) and got.spilled() > 0
    assert list(got) == list(expected[1:])


def test_assigning_a_spilled_item_is_read_back():
    column, expected = _filled(4 * BLOCK_ITEMS)
    for i in (0, BLOCK_ITEMS + 1, len(expected) - 1):
        column[i] = -5
        expected[i] = -5
    column._cache.clear()  # read from the file, not the blocks read last
    column._last_at = -1
    assert list(column) == list(expected)


def test_bytes_extend_a_byte_column():
    column = SpillArray("B", held=HELD)
    blob = bytes(range(32))
    for _ in range(3 * BLOCK_ITEMS // 32 + 7):
        column += blob
    assert column.spilled() > 0
    k = 3 * BLOCK_ITEMS // 32 + 3
    assert bytes(column[32 * k:32 * k + 32]) == blob


def test_pickled_it_carries_every_item():
    column, expected = _filled(3 * BLOCK_ITEMS + 9)
    copy = pickle.loads(pickle.dumps(column))
    assert list(copy) == list(expected)


def test_growing_is_an_array_until_past_held():
    small = growing("i", iter(range(10)), held=HELD)
    assert isinstance(small, array) and list(small) == list(range(10))
    large = growing("i", iter(range(3 * HELD)), held=HELD)
    assert isinstance(large, SpillArray) and large.spilled() > 0 and list(large) == list(range(3 * HELD))


def test_a_full_scratch_disk_is_an_output_error(monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spill.os, "pwrite", full)
    column = SpillArray("q", held=HELD)
    with pytest.raises(OutputError):
        column.extend(range(3 * BLOCK_ITEMS))
