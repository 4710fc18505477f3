"""File fingerprints tell a changed corpus file from one that was only touched."""

import os

from tests.corpus import lengthen_line, write_corpus_slice
from tf_outheads.data import file_fingerprint, fingerprint_changes


def test_a_longer_line_is_a_change_of_size(tmp_path):
    path = write_corpus_slice(tmp_path / "train.tsv", 200, 0, 0)
    recorded = file_fingerprint(path)
    assert set(recorded) == {"size", "mtime", "sha256"}  # a small file: hashed whole
    lengthen_line(path, 50)
    changes, now = fingerprint_changes(recorded, path)
    assert changes == [f"size {recorded['size']:,} -> {recorded['size'] + 5:,} bytes"]
    assert now["size"] == recorded["size"] + 5


def test_same_bytes_with_a_new_modification_time_is_no_change(tmp_path):
    path = write_corpus_slice(tmp_path / "train.tsv", 200, 0, 0)
    recorded = file_fingerprint(path)
    os.utime(path, (recorded["mtime"] + 60, recorded["mtime"] + 60))
    changes, now = fingerprint_changes(recorded, path)
    assert changes == [] and now["mtime"] == recorded["mtime"] + 60


def test_a_large_file_is_hashed_by_its_head_and_tail(tmp_path):
    path = write_corpus_slice(tmp_path / "train.tsv", 200, 0, 0)
    # As a file of 64 MiB or more is: its first and last `edge` bytes.
    recorded = file_fingerprint(path, whole_below=0, edge=1000)
    assert "sha256" not in recorded and recorded["edge"] == 1000
    with open(path, "rb") as f:
        data = bytearray(f.read())
    for position, expected in ((len(data) // 2, []),  # the middle is not hashed
                               (10, ["its first 1,000 bytes (SHA-256)"]),
                               (len(data) - 10, ["its last 1,000 bytes (SHA-256)"])):
        changed = bytearray(data)
        changed[position] ^= 1  # same size
        with open(path, "wb") as f:
            f.write(changed)
        assert fingerprint_changes(recorded, path)[0] == expected
