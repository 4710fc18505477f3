import collections
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data import BOS_ID
from tf_outheads.data import EOS_ID
from tf_outheads.data import PAD_ID
from tf_outheads.data import count_tokens
from tf_outheads.data import dataset_from_corpus
from tf_outheads.data import make_inference_dataset
from tf_outheads.data import make_training_dataset

LOGGER = "tf_outheads.data.pipeline"


def batches_of(dataset):
    """One epoch as numpy: [(source_ids, target_in, target_out), ...]."""
    return [
        (features["source_ids"].numpy(), features["target_in"].numpy(), target_out.numpy())
        for features, target_out in dataset
    ]


def unpadded_pairs(batches):
    """Multiset of (source_ids, target_out) rows with padding removed."""
    pairs = collections.Counter()
    for source_ids, _, target_out in batches:
        for source_row, target_row in zip(source_ids, target_out):
            source_tokens = tuple(source_row[source_row != PAD_ID])
            target_tokens = tuple(target_row[target_row != PAD_ID])
            pairs[(source_tokens, target_tokens)] += 1
    return pairs


def expected_pairs(corpus, tokenizer):
    source_ids = tokenizer.tokenize(corpus.sources).to_list()
    target_ids = tokenizer.tokenize(corpus.targets).to_list()
    return collections.Counter(
        (tuple(source + [EOS_ID]), tuple(target + [EOS_ID]))
        for source, target in zip(source_ids, target_ids)
    )


@pytest.fixture(scope="module")
def epoch(bible_slice, bible_tokenizer):
    dataset = dataset_from_corpus(bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=1024)
    return batches_of(dataset)


def test_batch_structure(bible_slice, bible_tokenizer):
    dataset = make_training_dataset(
        bible_slice.sources[:100], bible_slice.targets[:100], bible_tokenizer, bible_tokenizer
    )
    features_spec, target_spec = dataset.element_spec
    assert set(features_spec) == {"source_ids", "target_in"}
    for spec in (features_spec["source_ids"], features_spec["target_in"], target_spec):
        assert spec.dtype == tf.int32 and spec.shape.as_list() == [None, None]


@pytest.mark.parametrize("batch_tokens", [256, 1024, 4096], ids=["256", "1024", "4096"])
def test_every_batch_respects_token_budget(bible_slice, bible_tokenizer, batch_tokens):
    dataset = dataset_from_corpus(
        bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=batch_tokens
    )
    batches = batches_of(dataset)
    for source_ids, target_in, target_out in batches:
        assert source_ids.size <= batch_tokens
        assert target_in.size <= batch_tokens and target_in.shape == target_out.shape
        assert source_ids.shape[0] == target_in.shape[0]
    # Token batching: short buckets get more rows than long ones.
    assert len({batch[0].shape[0] for batch in batches}) > 1
    assert sum(batch[0].shape[0] for batch in batches) == len(bible_slice)


def test_target_shift_and_padding(epoch):
    for source_ids, target_in, target_out in epoch:
        for source_row, in_row, out_row in zip(source_ids, target_in, target_out):
            source_length = np.count_nonzero(source_row)
            length = np.count_nonzero(out_row)
            # Real tokens first, then only padding.
            assert (source_row[source_length:] == PAD_ID).all()
            assert (in_row[length:] == PAD_ID).all() and (out_row[length:] == PAD_ID).all()
            assert np.count_nonzero(in_row) == length
            # source = ids + </s>; target_in = <s> + ids; target_out = ids + </s>.
            assert source_row[source_length - 1] == EOS_ID
            assert in_row[0] == BOS_ID and out_row[length - 1] == EOS_ID
            np.testing.assert_array_equal(in_row[1:length], out_row[: length - 1])
            assert BOS_ID not in out_row and EOS_ID not in in_row
            assert EOS_ID not in source_row[: source_length - 1]


def test_one_epoch_has_every_example_once(bible_slice, bible_tokenizer, epoch):
    assert sum(batch[0].shape[0] for batch in epoch) == len(bible_slice)
    assert unpadded_pairs(epoch) == expected_pairs(bible_slice, bible_tokenizer)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_same_seed_same_batches_every_epoch(bible_slice, bible_tokenizer):
    first, second = (
        dataset_from_corpus(
            bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=1024, seed=7
        )
        for _ in range(2)
    )
    epochs_first = [batches_of(first), batches_of(first)]
    epochs_second = [batches_of(second), batches_of(second)]
    for batches_first, batches_second in zip(epochs_first, epochs_second):
        assert len(batches_first) == len(batches_second)
        for one, other in zip(batches_first, batches_second):
            for array, other_array in zip(one, other):
                np.testing.assert_array_equal(array, other_array)
    # Reshuffled each epoch.
    assert not all(
        one[0].shape == other[0].shape and (one[0] == other[0]).all()
        for one, other in zip(*epochs_first)
    )


def test_different_seeds_give_different_orders(bible_slice, bible_tokenizer):
    orders = []
    for seed in (0, 1):
        dataset = dataset_from_corpus(
            bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=1024, seed=seed
        )
        rows = [row for source_ids, _, _ in batches_of(dataset) for row in source_ids]
        orders.append([tuple(row[row != PAD_ID]) for row in rows])
    assert orders[0] != orders[1]
    assert sorted(orders[0]) == sorted(orders[1])


def test_without_shuffle_is_deterministic(bible_slice, bible_tokenizer):
    dataset = make_training_dataset(
        bible_slice.sources[:300], bible_slice.targets[:300], bible_tokenizer,
        bible_tokenizer, batch_tokens=512, shuffle=False,
    )
    first, second = batches_of(dataset), batches_of(dataset)
    assert [batch[0].tolist() for batch in first] == [batch[0].tolist() for batch in second]


def test_max_length_drops_and_counts(bible_slice, bible_tokenizer, caplog):
    max_length = 40
    lengths = np.maximum(
        count_tokens(bible_slice.sources, bible_tokenizer),
        count_tokens(bible_slice.targets, bible_tokenizer),
    ) + 1
    expected_dropped = int((lengths > max_length).sum())
    assert 0 < expected_dropped < len(bible_slice)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        dataset = dataset_from_corpus(
            bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=1024, max_length=max_length
        )
    assert f"dropped {expected_dropped} of {len(bible_slice)} pairs" in caplog.text
    batches = batches_of(dataset)
    assert sum(batch[0].shape[0] for batch in batches) == len(bible_slice) - expected_dropped
    assert max(max(batch[0].shape[1], batch[1].shape[1]) for batch in batches) <= max_length


def test_examples_longer_than_budget_are_dropped(bible_slice, bible_tokenizer, caplog):
    batch_tokens = 48
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        dataset = dataset_from_corpus(
            bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=batch_tokens
        )
    assert f"longer than batch_tokens={batch_tokens}" in caplog.text
    for source_ids, target_in, _ in batches_of(dataset):
        assert source_ids.size <= batch_tokens and target_in.size <= batch_tokens


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_repeat_goes_past_one_epoch(bible_slice, bible_tokenizer):
    dataset = make_training_dataset(
        bible_slice.sources[:20], bible_slice.targets[:20], bible_tokenizer,
        bible_tokenizer, batch_tokens=4096, repeat=True,
    )
    rows = sum(int(target_out.shape[0]) for _, target_out in dataset.take(10))
    assert rows > 20


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_repeated_batches_are_full_like_a_sorted_pool(bible_slice, bible_tokenizer):
    """Issue 17: batches as full as OpenNMT-py's sorted-pool token batches.

    One-token buckets that carry over pass boundaries: every batch holds
    `batch_tokens // U` examples of length exactly `U`, over several passes
    over the data (the old 8-wide buckets flushed every pass were ~9% emptier).
    """
    batch_tokens = 1024
    dataset = dataset_from_corpus(
        bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=batch_tokens, repeat=True
    )
    one_pass = len(batches_of(dataset_from_corpus(
        bible_slice, bible_tokenizer, bible_tokenizer, batch_tokens=batch_tokens)))
    real = padded = 0
    for features, target_out in dataset.take(3 * one_pass):
        source_ids, target_in = features["source_ids"].numpy(), features["target_in"].numpy()
        length = max(source_ids.shape[1], target_in.shape[1])
        lengths = np.maximum((source_ids != PAD_ID).sum(1), (target_in != PAD_ID).sum(1))
        assert (lengths == length).all()
        assert source_ids.shape[0] == max(1, batch_tokens // length)
        real += int((target_out.numpy() != PAD_ID).sum())
        padded += source_ids.shape[0] * length
    # Only the shorter side of each pair is padded.
    assert padded / (3 * one_pass) > 0.95 * batch_tokens


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"targets": ["one"]}, "len(targets)=1"),
        ({"batch_tokens": 0}, "Received: batch_tokens=0"),
        ({"bucket_width": 0}, "Received: bucket_width=0"),
        ({"max_length": 1}, "Received: max_length=1"),  # every pair too long
    ],
    ids=["unaligned", "batch_tokens", "bucket_width", "all_too_long"],
)
def test_training_dataset_rejects_bad_arguments(bible_tokenizer, arguments, message):
    kwargs = {
        "sources": ["Y dijo Dios", "Sea la luz"],
        "targets": ["God said", "Let there be light"],
    }
    kwargs.update(arguments)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_training_dataset(
            source_tokenizer=bible_tokenizer, target_tokenizer=bible_tokenizer, **kwargs
        )


def test_inference_dataset_keeps_order(bible_slice, bible_tokenizer):
    sources = bible_slice.sources[:150]
    batches = [features["source_ids"].numpy() for features in make_inference_dataset(
        sources, bible_tokenizer, batch_size=64
    )]
    assert [batch.shape[0] for batch in batches] == [64, 64, 22]
    rows = [row for batch in batches for row in batch]
    expected = bible_tokenizer.tokenize(sources).to_list()
    for row, ids in zip(rows, expected, strict=True):
        assert row.dtype == np.int32
        assert row[: len(ids) + 1].tolist() == ids + [EOS_ID]
        assert (row[len(ids) + 1 :] == PAD_ID).all()


def test_seeding_after_loading_the_tokenizer_does_not_break_new_datasets(
    bible_tokenizer, bible_slice
):
    import keras

    # set_random_seed clears TF's eager kernel cache, freeing the SentencePiece
    # resource; datasets built afterwards must still tokenize.
    keras.utils.set_random_seed(7)
    dataset = make_training_dataset(
        bible_slice.sources[:50], bible_slice.targets[:50], bible_tokenizer, bible_tokenizer,
        batch_tokens=512, seed=0,
    )
    features, target_out = next(iter(dataset))
    assert int(tf.reduce_sum(tf.cast(target_out > 0, tf.int32))) > 0
    keras.utils.set_random_seed(8)
    batch = next(iter(make_inference_dataset(bible_slice.sources[:3], bible_tokenizer)))
    assert batch["source_ids"].shape[0] == 3


def test_index_shuffle_gives_the_same_batches_and_smaller_backups(bible_slice, bible_tokenizer,
                                                                  tmp_path):
    # The in-memory corpus shuffled by index or as sentences: the same batches, pass
    # after pass; an iterator checkpoint (what a training backup stores) holds the
    # buffered indices, not the buffered sentences.
    def dataset(shuffle_indices):
        return dataset_from_corpus(bible_slice, bible_tokenizer, bible_tokenizer,
                                   batch_tokens=512, seed=3, repeat=True,
                                   shuffle_indices=shuffle_indices)

    sizes = {}
    for shuffle_indices in (True, False):
        iterator = iter(dataset(shuffle_indices))
        batches = [next(iterator) for _ in range(60)]  # past one pass of the 2,000 pairs
        prefix = str(tmp_path / f"index-{shuffle_indices}" / "iterator")
        tf.train.Checkpoint(iterator=iterator).write(prefix)
        sizes[shuffle_indices] = sum(
            os.path.getsize(os.path.join(os.path.dirname(prefix), name))
            for name in os.listdir(os.path.dirname(prefix)))
        if shuffle_indices:
            by_index = batches
    for (a, a_out), (b, b_out) in zip(by_index, batches):
        np.testing.assert_array_equal(a["source_ids"], b["source_ids"])
        np.testing.assert_array_equal(a_out, b_out)
    text_bytes = sum(len(s.encode()) + len(t.encode())
                     for s, t in zip(bible_slice.sources, bible_slice.targets))
    # The sentence buffer holds about the corpus's text; the index one 8 bytes a pair.
    assert sizes[False] - sizes[True] > 0.7 * text_bytes, (sizes, text_bytes)
