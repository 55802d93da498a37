"""`sha256_file`: the file's sha256 for every size, across its buffer's boundaries (it reads into one reused
buffer, so a short last read must hash only the bytes read)."""

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.manifest import sha256_file


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=300), chunk_size=st.integers(1, 64))
def test_the_hash_is_the_contents_sha256_for_any_size_and_buffer(tmp_path_factory, data, chunk_size):
    path = tmp_path_factory.mktemp("f") / "file.bin"
    path.write_bytes(data)
    assert sha256_file(path, chunk_size) == hashlib.sha256(data).hexdigest()


def test_a_file_longer_than_the_buffer_several_times_over(tmp_path):
    data = bytes(range(256)) * 40_000 + b"tail"  # 10 MB and 4 bytes: ten full 1 MiB reads and a short one
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert sha256_file(path, 4099) == hashlib.sha256(data).hexdigest()
