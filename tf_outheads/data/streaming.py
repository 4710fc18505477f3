"""Corpora as plain-text file pairs, streamed: one checking scan, then tf.data from the files.

A WMT-size corpus (`train.de.gz` / `train.en.gz`, millions of lines) never
lives in Python memory:

1. :func:`scan_parallel_files` reads every pair once, streaming: it checks the
   files as :func:`tf_outheads.data.read_parallel_files` does (UTF-8, gzip
   integrity, equal line counts; errors name the file and the line), counts
   what the cleaning rules drop, with the same graph function the pipeline
   applies (:class:`CleaningRules`), and keeps a seeded sample of the kept
   pairs for SentencePiece (and for word alignment or word vectors). Its
   memory is the sample's, whatever the corpus size.
2. :func:`make_text_dataset` builds the training batches straight from the
   files with `tf.data`: text lines → strip and clean in the graph → the
   batching of :func:`tf_outheads.data.batch_pairs` (tokenize, drop over-long
   examples, a bounded shuffle buffer, length buckets). An iterator checkpoint
   holds file offsets and the shuffle buffer: its size is bounded by
   `shuffle_buffer`, not by the corpus.

The same pairs give the same batches whichever way they come in: the Bible
TSV's training split written to two text files gives, for the same tokenizers
and seed, the batches of :func:`tf_outheads.data.make_training_dataset` on the
cleaned split (tests/data/test_streaming.py).

Several workers (`MultiWorkerMirroredStrategy`): each passes its index as
`shard_index` and the number of workers as `num_shards`, and keeps the lines
whose 0-based position in the concatenated files is `shard_index` modulo
`num_shards` (line-level sharding, before cleaning, so each line belongs to
exactly one worker whatever cleaning drops). Every worker still
reads and decompresses every file; only the tokenization, the shuffle buffer
and the batches are its own.
"""

import dataclasses
import os
import random
import time

import numpy as np
import tensorflow as tf

from tf_outheads.data.corpus import CleaningReport
from tf_outheads.data.corpus import CorpusError
from tf_outheads.data.corpus import ParallelCorpus
from tf_outheads.data.corpus import _read_lines
from tf_outheads.data.pipeline import batch_pairs

__all__ = [
    "CleaningRules",
    "Reservoir",
    "FileScan",
    "scan_parallel_files",
    "text_pairs",
    "make_text_dataset",
    "file_pairs",
]

# Pairs sent to the cleaning graph function per call: by the scan, and by the
# pipeline, whose in-flight batches an iterator checkpoint holds (kept small).
_CLEAN_BATCH = 4096
_STREAM_CLEAN_BATCH = 256
_ASCII_SPACE = "[\\t\\n\\v\\f\\r ]"


def _regex_literal(text):
    """`text` as an RE2 pattern matching it literally (ASCII punctuation hex-escaped)."""
    return "".join(
        char if char.isalnum() or ord(char) > 127 else f"\\x{{{ord(char):02x}}}"
        for char in text
    )


@dataclasses.dataclass(frozen=True)
class CleaningRules:
    """The cleaning of :func:`tf_outheads.data.clean`, as a graph function on batches.

    Both sides are stripped of ASCII whitespace, then the target of the
    appended boilerplate in `strip_target_suffixes` (repeatedly, with the
    whitespace before each, as :func:`tf_outheads.data.strip_suffixes`). Then
    the filters run in :func:`tf_outheads.data.clean`'s order and a pair is
    counted by the first that drops it: `"empty"`, `"max_length"`,
    `"length_ratio"`, `"contains"`. Lengths count tokens between ASCII
    whitespace, as `clean` does.

    Args:
        max_length: int or None. Longest side kept, in whitespace tokens.
        max_length_ratio: float or None. Largest longer/shorter ratio kept.
        drop_empty: bool. Drop pairs with an empty side. Defaults to `True`.
        drop_containing: tuple of str. Drop pairs whose target contains one.
        strip_target_suffixes: tuple of str. Boilerplate removed from the
            end of targets.

    Example:

    ```python
    rules = tf_outheads.data.CleaningRules(max_length=100, max_length_ratio=2.5)
    sources, targets, reasons = rules.apply(tf.constant(["Hola ."]), tf.constant(["Hi ."]))
    ```
    """

    max_length: int | None = None
    max_length_ratio: float | None = None
    drop_empty: bool = True
    drop_containing: tuple = ()
    strip_target_suffixes: tuple = ()

    def __post_init__(self):
        for name in ("drop_containing", "strip_target_suffixes"):
            values = tuple(str(value).strip() for value in (getattr(self, name) or ()))
            if any(not value for value in values):
                raise ValueError(f"`{name}` must hold non-empty strings. "
                                 f"Received: {name}={getattr(self, name)!r}")
            object.__setattr__(self, name, values)
        if self.max_length is not None and (isinstance(self.max_length, bool) or
                                            not isinstance(self.max_length, int) or
                                            self.max_length < 1):
            raise ValueError(f"`max_length` must be None or an int >= 1. "
                             f"Received: max_length={self.max_length!r}")
        if self.max_length_ratio is not None and not (
                isinstance(self.max_length_ratio, (int, float))
                and not isinstance(self.max_length_ratio, bool)
                and self.max_length_ratio >= 1):
            raise ValueError(f"`max_length_ratio` must be None or a number >= 1. "
                             f"Received: max_length_ratio={self.max_length_ratio!r}")

    @property
    def filters(self):
        """Names of the enabled filters, in order (the keys of the report)."""
        names = []
        if self.drop_empty:
            names.append("empty")
        if self.max_length is not None:
            names.append("max_length")
        if self.max_length_ratio is not None:
            names.append("length_ratio")
        if self.drop_containing:
            names.append("contains")
        return names

    def apply(self, sources, targets):
        """`(sources, targets, reasons)` of 1-D string tensors: stripped texts and, per pair,
        0 (kept) or 1 + the index in :attr:`filters` of the filter that drops it."""
        sources = tf.strings.strip(sources)
        targets = tf.strings.strip(targets)
        if self.strip_target_suffixes:
            alternatives = "|".join(_regex_literal(s) for s in self.strip_target_suffixes)
            targets = tf.strings.regex_replace(
                targets, f"(?:{_ASCII_SPACE}*(?:{alternatives}))+$", "")
        source_lengths = tf.strings.split(sources).row_lengths()
        target_lengths = tf.strings.split(targets).row_lengths()
        longer = tf.maximum(source_lengths, target_lengths)
        shorter = tf.minimum(source_lengths, target_lengths)
        reasons = tf.zeros_like(source_lengths, dtype=tf.int32)
        for code, name in enumerate(self.filters, start=1):
            if name == "empty":
                drop = tf.equal(shorter, 0)
            elif name == "max_length":
                drop = longer > self.max_length
            elif name == "length_ratio":
                ratio = (tf.cast(longer, tf.float64)
                         / tf.cast(tf.maximum(shorter, 1), tf.float64))
                drop = ratio > float(self.max_length_ratio)
            else:
                alternatives = "|".join(_regex_literal(s) for s in self.drop_containing)
                drop = tf.strings.regex_full_match(targets, f"(?s).*(?:{alternatives}).*")
            reasons = tf.where(tf.equal(reasons, 0) & drop, code, reasons)
        return sources, targets, reasons


def file_pairs(pairs):
    """`[(source_path, target_path), ...]` from one `{source, target}` mapping, a
    `(source, target)` tuple, or a list of either; checks that the files exist.

    Raises:
        ValueError: naming the entry, for a malformed one or a missing file.
    """
    if isinstance(pairs, (dict, tuple)):
        pairs = [pairs]
    result = []
    for index, pair in enumerate(pairs or ()):
        if isinstance(pair, dict):
            unknown = sorted(set(pair) - {"source", "target"})
            if unknown or "source" not in pair or "target" not in pair:
                raise ValueError(f"A file pair is {{source: PATH, target: PATH}}. "
                                 f"Received: pair {index}={pair!r}")
            pair = (pair["source"], pair["target"])
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"A file pair is (source_path, target_path). "
                             f"Received: pair {index}={pair!r}")
        for path in pair:
            if not os.path.isfile(path):
                raise CorpusError(f"{path}: no such file (file pair {index}: "
                                  f"source {pair[0]}, target {pair[1]}).")
        result.append((os.fspath(pair[0]), os.fspath(pair[1])))
    if not result:
        raise ValueError("`pairs` must name at least one (source, target) file pair. "
                         f"Received: pairs={pairs!r}")
    return result


class Reservoir:
    """A uniform sample of at most `size` items of a stream, returned in stream order.

    Algorithm R with `random.Random(seed)`: the same stream and seed give the
    same sample, whether the stream is a file or a list (an in-memory corpus gives the
    sample its file would: a tokenizer's training pairs, say). Ask `next_slot()`
    for every item; only an item that gets a slot needs to be built and `put`.

    Example:

    ```python
    reservoir = Reservoir(2, seed=0)
    for item in "abcde":
        slot = reservoir.next_slot()
        if slot is not None:
            reservoir.put(slot, item)
    reservoir.items()  # two of the letters, in stream order
    ```
    """

    def __init__(self, size, seed=0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"`size` must be an int >= 1. Received: size={size!r}")
        self.size = size
        self.seen = 0
        self._rng = random.Random(seed)
        self._entries = []  # (position in the stream, item)

    def next_slot(self):
        """Counts the next item of the stream; its slot in the sample, or None."""
        position = self.seen
        self.seen += 1
        if position < self.size:
            self._entries.append(None)
            return position
        slot = self._rng.randrange(position + 1)
        return slot if slot < self.size else None

    def put(self, slot, item):
        """Stores the item just counted in `slot` (from `next_slot`)."""
        self._entries[slot] = (self.seen - 1, item)

    def items(self):
        """The sampled items, in stream order."""
        return [item for _, item in sorted(self._entries, key=lambda entry: entry[0])]


@dataclasses.dataclass
class FileScan:
    """What :func:`scan_parallel_files` found.

    Attributes:
        pairs: list of `(source_path, target_path)`.
        lines: list of int, the line count of each pair.
        report: `CleaningReport` of the whole corpus.
        stripped: int. Targets that lost appended boilerplate.
        sample: `ParallelCorpus` of at most `sample_size` kept pairs (stripped
            texts), in file order; ids `"source_path:line"`.
        seconds: float. Time the scan took.
    """

    pairs: list
    lines: list
    report: CleaningReport
    stripped: int
    sample: ParallelCorpus
    seconds: float


def _paired_lines(source_path, target_path):
    """`(line_number, source_text, target_text)`; `CorpusError` if the counts differ."""
    sources, targets = _read_lines(source_path), _read_lines(target_path)
    for source in sources:
        target = next(targets, None)
        if target is None:
            extra = 1 + sum(1 for _ in sources)
            raise CorpusError(
                f"{source_path} has {source[0] + extra - 1} lines but {target_path} has "
                f"{source[0] - 1} lines; expected line-aligned files with equal line "
                f"counts.")
        yield source[0], source[1], target[1]
    rest = sum(1 for _ in targets)
    if rest:
        count = sum(1 for _ in _read_lines(source_path))
        raise CorpusError(
            f"{source_path} has {count} lines but {target_path} has {count + rest} "
            f"lines; expected line-aligned files with equal line counts.")


def scan_parallel_files(pairs, rules=None, sample_size=500_000, seed=0, log=None):
    """Reads line-aligned file pairs once: checks them, counts the cleaning, samples.

    Every line is decoded as :func:`tf_outheads.data.read_parallel_files`
    does; a problem stops the scan with a `CorpusError` naming the file and
    line (invalid UTF-8, a damaged or truncated `.gz`) or both files with
    their line counts. Each batch of pairs goes through `rules.apply`, the
    function :func:`make_text_dataset` applies in its graph, so the counts
    are those of the pairs training will see. The sample is a reservoir
    sample (seeded `random.Random(seed)`, Algorithm R) of the kept pairs,
    returned in file order; a corpus with no more kept pairs than
    `sample_size` is returned whole.

    Args:
        pairs: file pairs, as :func:`file_pairs` takes them.
        rules: `CleaningRules`, or None for `CleaningRules()` (drop empty).
        sample_size: int. Kept pairs sampled at most. Defaults to `500_000`.
        seed: int. Seed of the sample. Defaults to `0`.
        log: callable or None. Receives a progress line every 1M pairs.

    Returns:
        A `FileScan`.

    Raises:
        CorpusError: see above, or a file is empty, or every pair is dropped.

    Example:

    ```python
    scan = tf_outheads.data.scan_parallel_files(
        [("train.de.gz", "train.en.gz")], CleaningRules(max_length=100), sample_size=100_000)
    print(scan.report)
    ```
    """
    start = time.time()
    rules = rules or CleaningRules()
    pairs = file_pairs(pairs)
    if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1:
        raise ValueError(f"`sample_size` must be an int >= 1. Received: sample_size={sample_size!r}")
    apply = tf.function(rules.apply, input_signature=[
        tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string)])
    removed = np.zeros(len(rules.filters) + 1, dtype=np.int64)
    reservoir = Reservoir(sample_size, seed)  # of (source, target, id)
    stripped = 0
    line_counts = []
    total = 0

    def flush(batch, source_path):
        nonlocal stripped
        sources, targets, reasons = apply(tf.constant([b[1] for b in batch], tf.string),
                                          tf.constant([b[2] for b in batch], tf.string))
        reasons = reasons.numpy()
        removed[:] += np.bincount(reasons, minlength=len(removed))
        sources, targets = sources.numpy(), targets.numpy()
        for index in np.flatnonzero(reasons == 0):
            slot = reservoir.next_slot()
            if slot is not None:
                reservoir.put(slot, (sources[index].decode("utf-8"),
                                     targets[index].decode("utf-8"),
                                     f"{source_path}:{batch[index][0]}"))
        if rules.strip_target_suffixes:
            stripped += int(np.sum(
                [len(t.encode("utf-8").strip()) != len(s) for (_, _, t), s in
                 zip(batch, targets)]))

    for source_path, target_path in pairs:
        batch = []
        count = 0
        for line_number, source, target in _paired_lines(source_path, target_path):
            count = line_number
            batch.append((line_number, source, target))
            if len(batch) == _CLEAN_BATCH:
                flush(batch, source_path)
                batch = []
            if log is not None and (total + count) % 1_000_000 == 0:
                log(f"[data] scanned {total + count:,} pairs ({time.time() - start:.0f}s)")
        if batch:
            flush(batch, source_path)
        if count == 0:
            raise CorpusError(f"{source_path}: the file is empty; expected one sentence per line.")
        line_counts.append(count)
        total += count
    kept = reservoir.seen
    if kept == 0:
        raise CorpusError(f"{pairs[0][0]} -> {pairs[0][1]}: cleaning drops every one of the "
                          f"{total} pairs; expected some to pass {rules}.")
    sampled = reservoir.items()
    sample = ParallelCorpus(
        sources=[item[0] for item in sampled], targets=[item[1] for item in sampled],
        ids=[item[2] for item in sampled],
        origin=f"sample of {len(sampled)} of {kept} kept pairs of "
               + ", ".join(f"{s} -> {t}" for s, t in pairs),
        target_name=os.path.basename(pairs[0][1]))
    report = CleaningReport(total=total, kept=kept,
                            removed={name: int(removed[code])
                                     for code, name in enumerate(rules.filters, start=1)})
    return FileScan(pairs=pairs, lines=line_counts, report=report, stripped=stripped,
                    sample=sample, seconds=time.time() - start)


def _lines(path):
    compression = "GZIP" if os.fspath(path).endswith(".gz") else ""
    return tf.data.TextLineDataset(path, compression_type=compression)


def text_pairs(pairs, rules=None, num_shards=1, shard_index=0):
    """A `tf.data.Dataset` of the kept `(source, target)` pairs of file pairs, in file order.

    Lines are read with `tf.data.TextLineDataset` (gzip when a name ends in
    `.gz`), sharded by position (see the module docstring), stripped and
    cleaned by `rules.apply` in batches. The files are not checked here: run
    :func:`scan_parallel_files` on them first (it catches differing line
    counts, which `zip` would cut silently).

    Args:
        pairs: file pairs, as :func:`file_pairs` takes them.
        rules: `CleaningRules`, or None (drop empty pairs).
        num_shards: int. Workers reading the corpus. Defaults to `1`.
        shard_index: int in `[0, num_shards)`. This worker's shard.

    Returns:
        A `tf.data.Dataset` of scalar string pairs.
    """
    rules = rules or CleaningRules()
    pairs = file_pairs(pairs)
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"`num_shards` must be an int >= 1. Received: num_shards={num_shards!r}")
    if (isinstance(shard_index, bool) or not isinstance(shard_index, int)
            or not 0 <= shard_index < num_shards):
        raise ValueError(f"`shard_index` must be an int in [0, {num_shards}). "
                         f"Received: shard_index={shard_index!r}")
    dataset = None
    for source_path, target_path in pairs:
        zipped = tf.data.Dataset.zip((_lines(source_path), _lines(target_path)))
        dataset = zipped if dataset is None else dataset.concatenate(zipped)
    if num_shards > 1:
        dataset = dataset.shard(num_shards, shard_index)
    dataset = dataset.batch(_STREAM_CLEAN_BATCH).map(
        rules.apply, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.unbatch().filter(lambda source, target, reason: tf.equal(reason, 0))
    return dataset.map(lambda source, target, reason: (source, target))


def make_text_dataset(pairs, source_tokenizer, target_tokenizer, rules=None,
                      num_shards=1, shard_index=0, **batching):
    """Training batches streamed from line-aligned text files.

    :func:`text_pairs` (read, shard, strip, clean) followed by
    :func:`tf_outheads.data.batch_pairs` (tokenize, drop over-long examples,
    shuffle within `shuffle_buffer` examples, length buckets). Pairs longer
    than `max_length` subword tokens are dropped as they stream; they are not
    counted beforehand (that would tokenize the corpus twice).

    Args:
        pairs: file pairs, as :func:`file_pairs` takes them.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`.
        rules: `CleaningRules`, or None (drop empty pairs).
        num_shards, shard_index: this worker's shard (see :func:`text_pairs`).
        **batching: keyword arguments of :func:`tf_outheads.data.batch_pairs`
            (`batch_tokens`, `max_length`, `shuffle`, `seed`, `bucket_width`,
            `shuffle_buffer`, `repeat`, `subword_sampling`).

    Returns:
        A `tf.data.Dataset` of `({"source_ids", "target_in"}, target_out)` batches.

    Example:

    ```python
    dataset = tf_outheads.data.make_text_dataset(
        [("train.de.gz", "train.en.gz")], source_tokenizer, target_tokenizer,
        CleaningRules(max_length=100), batch_tokens=4096, shuffle_buffer=100_000, repeat=True)
    ```
    """
    return batch_pairs(text_pairs(pairs, rules, num_shards, shard_index),
                       source_tokenizer, target_tokenizer, **batching)
