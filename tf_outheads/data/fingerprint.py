"""Fingerprints of data files: has a corpus file changed since a run read it?

A resumed run restores byte positions in its text files (`make_text_dataset`)
and an iterator over the pairs of a corpus held in memory; if a file changed in
between, the restored positions point at other lines and sources drift against
targets without an error. A fingerprint records what a file was (its size,
modification time, and the SHA-256 of its bytes, or of its head and tail when
it is large), cheaply enough to take at every start.
"""

import hashlib
import os

# Files smaller than this are hashed whole; larger ones by their first and last `EDGE` bytes.
WHOLE_BELOW = 64 << 20
EDGE = 1 << 20


def _sha256_of_range(stream, start, length):
    digest = hashlib.sha256()
    stream.seek(start)
    while length > 0:
        block = stream.read(min(length, 1 << 20))
        if not block:
            break
        digest.update(block)
        length -= len(block)
    return digest.hexdigest()


def file_fingerprint(path, whole_below=WHOLE_BELOW, edge=EDGE):
    """`{"size", "mtime", "sha256"}` of the file at `path`; for a file of `whole_below`
    bytes or more `{"size", "mtime", "head_sha256", "tail_sha256", "edge"}` instead, the
    SHA-256 of its first and last `edge` bytes (a gzip file is hashed as stored).

    Args:
        path: str or path-like.
        whole_below: int. Files smaller than this are hashed whole. Defaults to 64 MiB.
        edge: int. Bytes hashed at each end of a larger file. Defaults to 1 MiB.

    Raises:
        OSError: the file cannot be read.
    """
    path = os.fspath(path)
    with open(path, "rb") as stream:
        status = os.fstat(stream.fileno())
        fingerprint = {"size": status.st_size, "mtime": status.st_mtime}
        if status.st_size < whole_below:
            fingerprint["sha256"] = _sha256_of_range(stream, 0, status.st_size)
        else:
            fingerprint["edge"] = edge
            fingerprint["head_sha256"] = _sha256_of_range(stream, 0, edge)
            fingerprint["tail_sha256"] = _sha256_of_range(
                stream, max(0, status.st_size - edge), edge)
    return fingerprint


def fingerprint_changes(recorded, path):
    """What differs between the file at `path` and its `recorded` fingerprint.

    Returns `(changes, fingerprint)`: `changes` a list of phrases ("size 1,200 ->
    1,210 bytes", "its content (SHA-256)", "its first 1,048,576 bytes", "its last
    ..."), empty when the bytes hashed are the same; an mtime alone is not a change
    (the caller may say it moved). `fingerprint` is the file's fingerprint now, taken
    the way `recorded` was (whole, or head and tail of the same `edge`).
    """
    whole = "sha256" in recorded
    edge = int(recorded.get("edge", EDGE))
    size = os.path.getsize(path)
    # Hashed as `recorded` was; a file that grew past `WHOLE_BELOW` is not read whole
    # (its size says enough).
    if whole and size != recorded.get("size"):
        current = file_fingerprint(path)
    else:
        current = file_fingerprint(path, whole_below=float("inf") if whole else 0, edge=edge)
    changes = []
    if current["size"] != recorded.get("size"):
        changes.append(f"size {recorded.get('size'):,} -> {current['size']:,} bytes")
    if whole:
        if current.get("sha256") != recorded["sha256"] and not changes:
            changes.append("its content (SHA-256)")
    else:
        for key, where in (("head_sha256", "first"), ("tail_sha256", "last")):
            if current[key] != recorded.get(key):
                changes.append(f"its {where} {edge:,} bytes (SHA-256)")
    return changes, current


__all__ = ["EDGE", "WHOLE_BELOW", "file_fingerprint", "fingerprint_changes"]
