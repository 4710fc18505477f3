"""tf.data pipelines: in-graph tokenization, length bucketing, token batching.

Training batches are

```
({"source_ids": (B, S) int32, "target_in": (B, T) int32}, target_out (B, T) int32)
```

with `source_ids = ids(source) + [EOS]`, `target_in = [BOS] + ids(target)`,
`target_out = ids(target) + [EOS]`, padded with `PAD_ID` (0). Padding masks
are derived downstream from `ids != PAD_ID`; nothing else travels in a batch.

Batching counts tokens, like OpenNMT-py/-tf `batch_type: tokens` and fairseq
`--max-tokens`: examples are grouped by length into buckets `bucket_width`
wide, and a bucket whose longest possible example has `U` tokens is batched
`max(1, batch_tokens // U)` examples at a time, so every padded batch has
`B * S <= batch_tokens` and `B * T <= batch_tokens`.

A repeated dataset (`repeat=True`, what `tf-outheads train` uses) fills batches
as OpenNMT-py 3.5 does (it sorts a pool of examples by length and cuts it
greedily into batches of at most `batch_tokens` padded tokens): buckets one
token wide whose partial batches carry over from one pass over the data to the
next. On the Bible corpus with a 4K vocabulary and `batch_tokens=2048` that
gives ~1,910 real target tokens a batch, as OpenNMT-py's ~1,900; 8-wide buckets
flushed at every pass gave ~1,730, so each step saw ~9% fewer tokens than the
peer's (issue 17, benchmarks/docs/peer_opennmt.md). A finite dataset flushes every bucket's
partial batch at the end of each pass, so there fewer, 8-token buckets waste
less (one-token buckets gave ~1,710 on the same corpus, and far smaller
batches on a few hundred pairs).
"""

import logging

import numpy as np
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.subword_sampling import SubwordSampling

__all__ = [
    "make_training_dataset",
    "batch_pairs",
    "dataset_from_corpus",
    "make_inference_dataset",
    "count_tokens",
]

logger = logging.getLogger(__name__)

# Batches are shuffled again after bucketing, in a buffer of this many
# batches, so that consecutive steps do not come from the same bucket.
_BATCH_SHUFFLE_BUFFER = 128
# Sentences tokenized per call when only lengths are needed.
_COUNT_BATCH_SIZE = 1024


def _check_int(name, value, minimum=1, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        allowed = f"None or an int >= {minimum}" if allow_none else f"an int >= {minimum}"
        raise ValueError(f"`{name}` must be {allowed}. Received: {name}={value!r}")


def _check_batching(batch_tokens, max_length, bucket_width, shuffle_buffer, seed, repeat,
                    whole_buffer):
    """Checks the batching arguments; returns the bucket width (`None`: 1 with
    `repeat`, else 8). `shuffle_buffer` may be `None` (the whole data) if `whole_buffer`."""
    _check_int("batch_tokens", batch_tokens)
    _check_int("max_length", max_length, allow_none=True)
    _check_int("bucket_width", bucket_width, allow_none=True)
    _check_int("shuffle_buffer", shuffle_buffer, allow_none=whole_buffer)
    _check_int("seed", seed, minimum=0)
    if bucket_width is None:
        return 1 if repeat else 8
    return bucket_width


def _string_tensor(texts):
    return tf.constant([str(text) for text in texts], dtype=tf.string, shape=[len(texts)])


def count_tokens(texts, tokenizer):
    """Counts the subword tokens of each text (special tokens excluded).

    Args:
        texts: list of str. The sentences.
        tokenizer: `SubwordTokenizer`. The model to count with.

    Returns:
        An int64 numpy array `(len(texts),)`.

    Example:

    ```python
    lengths = tf_outheads.data.count_tokens(corpus.targets, target_tokenizer)
    lengths.mean()
    ```
    """
    texts = list(texts)
    if not texts:
        return np.zeros([0], dtype=np.int64)
    tokenizer.ensure_resource()  # a seed set since loading frees it

    def batch_lengths(batch):
        return tokenizer.tokenize(batch).row_lengths()

    dataset = (
        tf.data.Dataset.from_tensor_slices(_string_tensor(texts))
        .batch(_COUNT_BATCH_SIZE)
        .map(batch_lengths, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    )
    return np.concatenate([lengths.numpy() for lengths in dataset]).astype(np.int64)


def make_training_dataset(
    sources,
    targets,
    source_tokenizer,
    target_tokenizer,
    batch_tokens=4096,
    max_length=None,
    shuffle=True,
    seed=0,
    bucket_width=None,
    shuffle_buffer=None,
    repeat=False,
    num_parallel_calls=tf.data.AUTOTUNE,
    shuffle_indices=True,
    subword_sampling=None,
):
    """Builds the token-batched, length-bucketed training dataset.

    The length of an example is `max(len(source_ids), len(target_in))`, i.e.
    the number of time steps it occupies, `</s>` or `<s>` included. Before
    the dataset is built, one tokenization pass measures every example; those
    longer than `max_length`, or longer than `batch_tokens` (they would not
    fit in a batch on their own), are dropped and counted in a warning of the
    `tf_outheads.data.pipeline` logger. Every other example appears exactly
    once per epoch.

    Order: drop the over-long examples measured above → shuffle examples
    (seeded, reshuffled every pass) → tokenize in-graph → bucket by length
    and pad → shuffle batches → prefetch; the batches :func:`batch_pairs`
    gives for the same pairs. With
    `repeat=True` the examples are repeated before they are bucketed: a bucket
    that is not full when one pass over the data ends is filled from the next
    pass, so no bucket cuts a partial batch at a pass boundary; each pass is
    still a new shuffle of every example. The dataset is deterministic
    (`options.deterministic = True`): two datasets built with the same
    arguments yield the same batches, epoch by epoch, as long as TensorFlow's
    global seed is the same too.

    Args:
        sources: list of str. Source sentences.
        targets: list of str. Target sentences, aligned with `sources`.
        source_tokenizer: `SubwordTokenizer` for the sources.
        target_tokenizer: `SubwordTokenizer` for the targets.
        batch_tokens: int. Largest padded size `B * max_len` of a batch, for
            the source and for the target tensors. Defaults to `4096`.
        max_length: int or None. Longest example kept, in time steps (see
            above). Defaults to `None` (only the `batch_tokens` limit).
        shuffle: bool. Shuffle examples and batches. Defaults to `True`.
        seed: int. Seed of both shuffles. Defaults to `0`.
        bucket_width: int or None. Width of the length buckets, in tokens.
            Defaults to `None`: 1 with `repeat=True`, 8 without (see the
            module docstring).
        shuffle_buffer: int or None. Example shuffle buffer; `None` means the
            whole dataset (a uniform shuffle). Defaults to `None`.
        repeat: bool. Repeat indefinitely. Defaults to `False`.
        num_parallel_calls: int. Parallelism of the tokenizing map. Defaults
            to `tf.data.AUTOTUNE`.
        shuffle_indices: bool. Shuffle the examples' indices and look the
            sentences up after the shuffle, rather than shuffling the sentences:
            the same order and batches, but an iterator checkpoint (a training
            backup) holds 8 bytes per buffered example, not its text (the
            embedded corpus: 16.7 → 9.2 MB an iterator; the rest is the length
            buckets' partial batches and the batch shuffle). `False`: the
            structure of iterator checkpoints written before this option, which
            only it restores. Defaults to `True`.
        subword_sampling: `SubwordSampling`, its config dict, or None. Draw each
            example's segmentations (both sides) among their `nbest_size` best
            (Kudo 2018), with a stateless seed made of `seed` and the example's
            position in the stream (counted over passes): every pass gives a
            sentence new pieces, and a resumed iterator the same ones as an
            uninterrupted one. A drawn segmentation is never longer than the
            longest kept example (the best ones measured above). Needs unigram
            models. Defaults to `None` (the best segmentation).

    Returns:
        A `tf.data.Dataset` of `({"source_ids", "target_in"}, target_out)`
        int32 batches, padded with `PAD_ID`.

    Raises:
        ValueError: if `sources` and `targets` differ in length or are
            empty, an argument is out of range, or every example is too long.

    Example:

    ```python
    corpus = tf_outheads.data.read_tsv("bible-es-en.tsv.gz")
    source_tokenizer, target_tokenizer = tf_outheads.data.build_tokenizers(
        corpus.sources, corpus.targets, "run/tokenizer")
    dataset = tf_outheads.data.make_training_dataset(
        corpus.sources, corpus.targets, source_tokenizer, target_tokenizer,
        batch_tokens=4096, max_length=200)
    features, target_out = next(iter(dataset))
    ```
    """
    sources = list(sources)
    targets = list(targets)
    if len(sources) != len(targets):
        raise ValueError(
            f"`sources` and `targets` must have the same length. "
            f"Received: len(sources)={len(sources)}, len(targets)={len(targets)}"
        )
    if not sources:
        raise ValueError("`sources` must not be empty. Received: len(sources)=0")
    bucket_width = _check_batching(batch_tokens, max_length, bucket_width, shuffle_buffer,
                                   seed, repeat, whole_buffer=True)

    # One measuring pass, for the counts of the warning only: the pipeline
    # drops the same pairs in the graph (`batch_pairs`).
    lengths = np.maximum(
        count_tokens(sources, source_tokenizer) + 1,
        count_tokens(targets, target_tokenizer) + 1,
    )
    too_long = np.zeros(len(lengths), dtype=bool)
    if max_length is not None:
        too_long = lengths > max_length
    over_budget = ~too_long & (lengths > batch_tokens)
    keep = ~too_long & ~over_budget
    if not keep.all():
        logger.warning(
            "make_training_dataset: dropped %d of %d pairs: %d longer than "
            "max_length=%s, %d longer than batch_tokens=%d (lengths count "
            "subword tokens plus </s> or <s>).",
            (~keep).sum(), len(keep), too_long.sum(), max_length,
            over_budget.sum(), batch_tokens,
        )
    if not keep.any():
        raise ValueError(
            f"Every pair is longer than the length limit. "
            f"Received: max_length={max_length}, batch_tokens={batch_tokens}, "
            f"shortest example length={int(lengths.min())}"
        )
    # The kept pairs shuffled (by index, or as strings: the structure of older
    # iterator checkpoints), then encoded: the same batches as `batch_pairs`
    # gives for the same pairs (tests/data/test_streaming.py). A shuffle's
    # draws do not depend on its elements: shuffling the indices gives the
    # order shuffling the pairs gives.
    kept_indices = np.flatnonzero(keep)
    kept = (_string_tensor([sources[i] for i in kept_indices]),
            _string_tensor([targets[i] for i in kept_indices]))
    limit = min(int(lengths[keep].max()), batch_tokens)
    sampling = SubwordSampling.from_config(subword_sampling)
    if sampling is not None:
        dataset = _sampled_examples(
            tf.data.Dataset.range(len(kept_indices)),
            lambda index: (tf.gather(kept[0], index), tf.gather(kept[1], index)),
            source_tokenizer, target_tokenizer, sampling, seed, limit,
            shuffle_buffer=(shuffle_buffer or len(kept_indices)) if shuffle else None,
            repeat=repeat, num_parallel_calls=num_parallel_calls)
        return _bucketed(dataset, batch_tokens, limit, bucket_width, shuffle, seed)
    encode = _encoder(source_tokenizer, target_tokenizer)
    if shuffle_indices:
        dataset = tf.data.Dataset.range(len(kept_indices))
    else:
        dataset = tf.data.Dataset.from_tensor_slices(kept)
    if shuffle:
        dataset = dataset.shuffle(
            shuffle_buffer or len(kept_indices), seed=seed, reshuffle_each_iteration=True
        )
    if repeat:
        dataset = dataset.repeat()
    if shuffle_indices:
        dataset = dataset.map(lambda index: encode(tf.gather(kept[0], index),
                                                   tf.gather(kept[1], index)),
                              num_parallel_calls=num_parallel_calls)
    else:
        dataset = dataset.map(encode, num_parallel_calls=num_parallel_calls)
    return _bucketed(dataset, batch_tokens, limit, bucket_width, shuffle, seed)


def _example(source_ids, target_ids):
    """A training example of one pair's piece ids (without `</s>`)."""
    source_ids = tf.concat([source_ids, [EOS_ID]], axis=0)
    target_in = tf.concat([[BOS_ID], target_ids], axis=0)
    target_out = tf.concat([target_ids, [EOS_ID]], axis=0)
    return {"source_ids": source_ids, "target_in": target_in}, target_out


def _encoder(source_tokenizer, target_tokenizer):
    def encode(source, target):
        return _example(source_tokenizer.tokenize(source), target_tokenizer.tokenize(target))

    return encode


def _sampled_examples(items, lookup, source_tokenizer, target_tokenizer, sampling, seed,
                      limit, shuffle_buffer, repeat, num_parallel_calls):
    """Examples of `items` (shuffled in `shuffle_buffer` unless `None`, repeated, then
    counted) with pieces drawn by `sampling`: `lookup(item)` gives `(source, target)`,
    and each example's draw is seeded by `(seed, its count)` (one seed split in two, a
    side each), so an iterator restored at a count draws what it drew before. No side
    is drawn longer than `limit - 1` pieces unless its best segmentation is."""
    if shuffle_buffer is not None:
        items = items.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        items = items.repeat()
    sample_source = sampling.sampler(source_tokenizer, "source tokenizer")
    sample_target = sampling.sampler(target_tokenizer, "target tokenizer")
    max_pieces = limit - 1

    def encode(count, item):
        source, target = lookup(item)
        seeds = tf.random.experimental.stateless_split(
            tf.stack([tf.constant(seed, tf.int64), tf.cast(count, tf.int64)]), 2)
        return _example(sample_source(source, seeds[0], max_pieces),
                        sample_target(target, seeds[1], max_pieces))

    return items.enumerate().map(encode, num_parallel_calls=num_parallel_calls,
                                 deterministic=True)


def _example_length(features, target_out):
    return tf.maximum(tf.shape(features["source_ids"])[0], tf.shape(features["target_in"])[0])


def _bucketed(dataset, batch_tokens, limit, bucket_width, shuffle, seed):
    """Length buckets `bucket_width` wide up to `limit`, batches of at most
    `batch_tokens` padded tokens, shuffled batches, prefetch, deterministic."""
    # Bucket k (1-based) holds lengths in ((k - 1) * w, k * w]; the last one
    # everything longer. Buckets no example falls in cost nothing.
    num_buckets = -(-limit // bucket_width)
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=_example_length,
        bucket_boundaries=[k * bucket_width + 1 for k in range(1, num_buckets)],
        bucket_batch_sizes=[max(1, batch_tokens // (k * bucket_width))
                            for k in range(1, num_buckets + 1)],
        padding_values=({"source_ids": PAD_ID, "target_in": PAD_ID}, PAD_ID),
        pad_to_bucket_boundary=False,
        drop_remainder=False,
    )
    if shuffle:
        dataset = dataset.shuffle(
            _BATCH_SHUFFLE_BUFFER, seed=seed + 1, reshuffle_each_iteration=True
        )
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options)


def batch_pairs(
    pairs,
    source_tokenizer,
    target_tokenizer,
    batch_tokens=4096,
    max_length=None,
    shuffle=True,
    seed=0,
    bucket_width=None,
    shuffle_buffer=100_000,
    repeat=False,
    num_parallel_calls=tf.data.AUTOTUNE,
    subword_sampling=None,
):
    """Token batches from a dataset of `(source, target)` string pairs.

    The batching of streamed text files
    (`tf_outheads.data.streaming.make_text_dataset`). It gives the batches of
    :func:`make_training_dataset` for the same pairs in the same order (that
    one drops over-long pairs before its shuffle, in Python, and keeps the
    structure its earlier runs' iterator checkpoints were saved with).

    Order: tokenize in-graph (parallel, order kept) → drop examples longer
    than `max_length` or `batch_tokens` → shuffle `shuffle_buffer` examples
    (seeded, reshuffled every pass) → repeat (if `repeat`) → bucket by length
    and pad → shuffle batches → prefetch. Nothing is measured beforehand: the
    buckets cover every length up to the limit (`max_length`, else
    `batch_tokens`); buckets no example falls in cost nothing. A shuffle
    buffer at least as large as the data is a uniform shuffle, and gives the
    same order as one exactly as large.

    Args:
        pairs: `tf.data.Dataset` of `(source, target)` scalar strings.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`.
        batch_tokens, max_length, shuffle, seed, bucket_width, repeat,
            num_parallel_calls: as :func:`make_training_dataset`.
        shuffle_buffer: int. Examples in the shuffle buffer; it bounds the
            memory of the pipeline and the size of an iterator checkpoint.
            Defaults to `100_000`.
        subword_sampling: as :func:`make_training_dataset`; the pairs are then
            shuffled (and repeated) as strings and tokenized after, each drawn
            segmentation at most `limit - 1` pieces long (`limit`: `max_length`,
            else `batch_tokens`). Defaults to `None`.

    Returns:
        A `tf.data.Dataset` of `({"source_ids", "target_in"}, target_out)`
        int32 batches, as :func:`make_training_dataset`.

    Example:

    ```python
    pairs = tf.data.Dataset.from_tensor_slices((["Hola ."], ["Hello ."]))
    dataset = tf_outheads.data.batch_pairs(pairs, source_tokenizer, target_tokenizer)
    ```
    """
    bucket_width = _check_batching(batch_tokens, max_length, bucket_width, shuffle_buffer,
                                   seed, repeat, whole_buffer=False)
    source_tokenizer.ensure_resource()
    target_tokenizer.ensure_resource()
    limit = batch_tokens if max_length is None else min(max_length, batch_tokens)
    sampling = SubwordSampling.from_config(subword_sampling)
    if sampling is not None:
        dataset = _sampled_examples(
            pairs, lambda pair: pair, source_tokenizer, target_tokenizer, sampling, seed,
            limit, shuffle_buffer=shuffle_buffer if shuffle else None, repeat=repeat,
            num_parallel_calls=num_parallel_calls)
        dataset = dataset.filter(lambda features, target_out: _example_length(
            features, target_out) <= limit)
        return _bucketed(dataset, batch_tokens, limit, bucket_width, shuffle, seed)
    dataset = pairs.map(_encoder(source_tokenizer, target_tokenizer),
                        num_parallel_calls=num_parallel_calls, deterministic=True)
    dataset = dataset.filter(lambda features, target_out: _example_length(
        features, target_out) <= limit)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return _bucketed(dataset, batch_tokens, limit, bucket_width, shuffle, seed)


def dataset_from_corpus(corpus, source_tokenizer, target_tokenizer, **kwargs):
    """`make_training_dataset` on the sources and targets of a `ParallelCorpus`.

    Args:
        corpus: `ParallelCorpus`. Its references and ids are not used.
        source_tokenizer: `SubwordTokenizer` for the sources.
        target_tokenizer: `SubwordTokenizer` for the targets.
        **kwargs: passed to :func:`make_training_dataset`.

    Returns:
        A `tf.data.Dataset`, as :func:`make_training_dataset`.

    Example:

    ```python
    dataset = tf_outheads.data.dataset_from_corpus(
        corpus, source_tokenizer, target_tokenizer, batch_tokens=2048)
    ```
    """
    return make_training_dataset(
        corpus.sources, corpus.targets, source_tokenizer, target_tokenizer, **kwargs
    )


def make_inference_dataset(sources, source_tokenizer, batch_size=64):
    """Builds batches of source ids for translation, in the input order.

    Args:
        sources: list of str. Sentences to translate.
        source_tokenizer: `SubwordTokenizer` for the sources.
        batch_size: int. Sentences per batch (the last one may be smaller).
            Defaults to `64`.

    Returns:
        A `tf.data.Dataset` of `{"source_ids": (B, S) int32}`, each row the
        source ids followed by `EOS_ID` and padded with `PAD_ID`, batches in
        the order of `sources`.

    Raises:
        ValueError: if `batch_size` is not a positive int.

    Example:

    ```python
    dataset = tf_outheads.data.make_inference_dataset(corpus.sources, source_tokenizer)
    for features in dataset:
        features["source_ids"]  # (64, S)
    ```
    """
    _check_int("batch_size", batch_size)
    sources = list(sources)
    source_tokenizer.ensure_resource()

    def encode(batch):
        ids = source_tokenizer.tokenize(batch)  # (batch, None)
        eos = tf.fill(tf.stack([ids.nrows(), 1]), EOS_ID)
        ids = tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1)
        return {"source_ids": ids.to_tensor(default_value=PAD_ID)}

    dataset = (
        tf.data.Dataset.from_tensor_slices(_string_tensor(sources))
        .batch(batch_size)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    return dataset
