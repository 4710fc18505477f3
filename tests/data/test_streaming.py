"""Streamed text-file corpora (`tf_outheads.data.streaming`): the scan, the cleaning in the
graph, the same batches as the in-memory path, shards and small iterator checkpoints."""

import collections
import gzip
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads import data as tfo_data
from tf_outheads.data import CleaningRules, CorpusError, PAD_ID
from tf_outheads_zoo.config import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS

RULES = dict(max_length=100, max_length_ratio=2.5)


@pytest.fixture(scope="module")
def bible_train():
    return tfo_data.read_tsv(EMBEDDED_CORPUS, split="train")


def write_pair(directory, corpus, source_name="train.es", target_name="train.en.gz"):
    """`corpus` as a plain source file and a gzip target file; returns the paths."""
    source, target = os.path.join(directory, source_name), os.path.join(directory, target_name)
    with open(source, "w", encoding="utf-8") as f:
        f.write("".join(text + "\n" for text in corpus.sources))
    opener = gzip.open if target.endswith(".gz") else open
    with opener(target, "wt", encoding="utf-8") as f:
        f.write("".join(text + "\n" for text in corpus.targets))
    return source, target


def cleaned_in_memory(corpus):
    """What the zoo's TSV path trains on: suffixes stripped, then `clean`."""
    corpus, _ = tfo_data.strip_suffixes(corpus, BIBLE_WEB_ARTIFACTS)
    return tfo_data.clean(corpus, drop_containing=BIBLE_WEB_ARTIFACTS, **RULES)


def bible_rules():
    return CleaningRules(drop_containing=BIBLE_WEB_ARTIFACTS,
                         strip_target_suffixes=BIBLE_WEB_ARTIFACTS, **RULES)


def as_numpy(batches):
    return [[t.numpy() for t in tf.nest.flatten(batch)] for batch in batches]


@pytest.fixture(scope="module")
def slice_files(bible_train, tmp_path_factory):
    # Verses 20,000-22,000 hold appended Psalm headings to strip, and pairs the
    # ratio filter drops.
    corpus = bible_train.select(range(20_000, 22_000))
    directory = tmp_path_factory.mktemp("text")
    return corpus, write_pair(str(directory), corpus)


@pytest.fixture(scope="module")
def tokenizers(slice_files, tmp_path_factory):
    cleaned, _ = cleaned_in_memory(slice_files[0])
    return tfo_data.build_tokenizers(cleaned.sources, cleaned.targets,
                                     tmp_path_factory.mktemp("spm"), vocab_size=500)


def test_the_scan_counts_and_samples_what_clean_keeps(bible_train, tmp_path):
    cleaned, report = cleaned_in_memory(bible_train)
    paths = write_pair(str(tmp_path), bible_train)
    scan = tfo_data.scan_parallel_files([paths], bible_rules(), sample_size=10**6)
    assert scan.lines == [len(bible_train)]
    assert scan.report.kept == report.kept and scan.report.removed == report.removed
    assert sum(scan.report.removed.values()) > 30 and scan.stripped > 9000
    # The whole kept corpus when it fits, in order: the tokenizer sees what it saw.
    assert scan.sample.sources == cleaned.sources and scan.sample.targets == cleaned.targets
    assert scan.sample.ids[0] == f"{paths[0]}:1"


def test_a_sample_is_seeded_in_file_order_and_drawn_from_the_kept_pairs(slice_files):
    corpus, paths = slice_files
    cleaned, _ = cleaned_in_memory(corpus)
    scans = [tfo_data.scan_parallel_files([paths], bible_rules(), sample_size=300, seed=seed)
             for seed in (1, 1, 2)]
    sample = scans[0].sample
    assert len(sample) == 300 and scans[0].report.kept == len(cleaned)
    assert sample.sources == scans[1].sample.sources != scans[2].sample.sources
    lines = [int(pair_id.rsplit(":", 1)[1]) for pair_id in sample.ids]
    assert lines == sorted(lines)
    kept = dict(zip(cleaned.ids, zip(cleaned.sources, cleaned.targets)))
    assert all(kept[corpus.ids[line - 1]] == pair
               for line, pair in zip(lines, zip(sample.sources, sample.targets)))


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_streamed_batches_are_the_in_memory_batches(slice_files, tokenizers):
    corpus, paths = slice_files
    cleaned, _ = cleaned_in_memory(corpus)
    source_tokenizer, target_tokenizer = tokenizers
    options = dict(batch_tokens=1024, max_length=60, seed=11, repeat=True,
                   shuffle_buffer=100_000)
    keras.utils.set_random_seed(3)
    in_memory = as_numpy(tfo_data.make_training_dataset(
        cleaned.sources, cleaned.targets, source_tokenizer, target_tokenizer,
        **options).take(120))
    keras.utils.set_random_seed(3)
    streamed = as_numpy(tfo_data.make_text_dataset(
        [paths], source_tokenizer, target_tokenizer, bible_rules(), **options).take(120))
    assert len(streamed) == len(in_memory) == 120  # more than one pass over the pairs
    for left, right in zip(in_memory, streamed):
        assert all(np.array_equal(a, b) for a, b in zip(left, right))
    # Another seed is another order: the comparison can fail.
    keras.utils.set_random_seed(3)
    other = as_numpy(tfo_data.make_text_dataset(
        [paths], source_tokenizer, target_tokenizer, bible_rules(),
        **dict(options, seed=12)).take(3))
    assert any(a.shape != b.shape or not np.array_equal(a, b)
               for a, b in zip(other[0], in_memory[0]))


def rows(batches):
    """Multiset of unpadded target rows."""
    found = collections.Counter()
    for features, target_out in batches:
        for row in target_out.numpy():
            found[tuple(row[row != PAD_ID])] += 1
    return found


def test_shards_are_disjoint_and_cover_the_corpus_in_one_epoch(slice_files, tokenizers):
    _, paths = slice_files
    source_tokenizer, target_tokenizer = tokenizers
    options = dict(batch_tokens=1024, seed=5, shuffle_buffer=500)
    whole = rows(tfo_data.make_text_dataset([paths], source_tokenizer, target_tokenizer,
                                            bible_rules(), **options))
    shards = [rows(tfo_data.make_text_dataset([paths], source_tokenizer, target_tokenizer,
                                              bible_rules(), num_shards=2, shard_index=index,
                                              **options))
              for index in (0, 1)]
    assert sum(whole.values()) > 1900
    assert shards[0] + shards[1] == whole
    assert abs(sum(shards[0].values()) - sum(shards[1].values())) < 50
    # Line-level: shard 1 starts with the corpus's second kept line.
    pairs = list(tfo_data.text_pairs([paths], bible_rules(), num_shards=2, shard_index=1)
                 .take(1).as_numpy_iterator())
    assert pairs[0][0].decode() == slice_files[0].sources[1]


def _iterator_checkpoint_bytes(dataset, directory, steps=30):
    iterator = iter(dataset)
    for _ in range(steps):
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    prefix = checkpoint.write(os.path.join(directory, "ckpt"))
    size = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
               if name.startswith(os.path.basename(prefix)))
    return size, iterator, prefix


@pytest.mark.slow  # ~20 s of checkpointed iteration (issue 37: CI runs it)
def test_the_iterator_checkpoint_does_not_grow_with_the_corpus_and_resumes_exactly(
        bible_train, tokenizers, tmp_path):
    source_tokenizer, target_tokenizer = tokenizers
    options = dict(batch_tokens=1024, seed=2, shuffle_buffer=300, repeat=True)
    # The same 2,000 verses once and 16 times over. What the iterator holds (file
    # offsets, 300 examples, partial buckets, 128 shuffled batches) varies with the
    # batches in flight, not with the corpus size.
    sizes = {}
    for pairs in (2_000, 32_000):
        directory = tmp_path / str(pairs)
        directory.mkdir()
        paths = write_pair(str(directory), bible_train.select(list(range(2_000)) * (pairs // 2_000)))
        dataset = tfo_data.make_text_dataset([paths], source_tokenizer, target_tokenizer,
                                             bible_rules(), **options)
        sizes[pairs], iterator, prefix = _iterator_checkpoint_bytes(
            dataset, str(directory / "ckpt"))
        expected = as_numpy([next(iterator) for _ in range(5)])
        restored = iter(dataset)
        tf.train.Checkpoint(iterator=restored).read(prefix).assert_consumed()
        resumed = as_numpy([next(restored) for _ in range(5)])
        for left, right in zip(expected, resumed):
            assert all(np.array_equal(a, b) for a, b in zip(left, right))
    assert sizes[32_000] < 1.2 * sizes[2_000], sizes
    # The in-memory path with a whole-corpus buffer grows with it: the check can fail.
    whole = {}
    for pairs in (2_000, 32_000):
        corpus = bible_train.select(list(range(2_000)) * (pairs // 2_000))
        dataset = tfo_data.make_training_dataset(corpus.sources, corpus.targets,
                                                 source_tokenizer, target_tokenizer,
                                                 batch_tokens=1024, seed=2, repeat=True)
        whole[pairs] = _iterator_checkpoint_bytes(dataset, str(tmp_path / f"whole{pairs}"))[0]
    assert whole[32_000] > 4 * whole[2_000], whole


def test_files_of_different_lengths_are_named_with_their_line_counts(tmp_path):
    source, target = tmp_path / "a.es", tmp_path / "a.en"
    source.write_text("uno\ndos\ntres\n", encoding="utf-8")
    target.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"{source} has 3 lines but {target} has 2 lines"):
        tfo_data.scan_parallel_files([(str(source), str(target))])
    with pytest.raises(CorpusError, match=rf"{target} has 2 lines but {source} has 3 lines"):
        tfo_data.scan_parallel_files([(str(target), str(source))])


def test_bad_bytes_are_named_by_file_and_line(tmp_path):
    source, target = tmp_path / "b.es", tmp_path / "b.en"
    source.write_bytes(b"uno\ndos \xff\n")
    target.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=rf"{source}:2: invalid UTF-8"):
        tfo_data.scan_parallel_files([(str(source), str(target))])
    with pytest.raises(CorpusError, match="no such file"):
        tfo_data.scan_parallel_files([(str(source), str(tmp_path / "missing.en"))])
    empty = tmp_path / "empty.en"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match="empty"):
        tfo_data.scan_parallel_files([(str(empty), str(empty))])


def test_cleaning_rules_name_their_bad_arguments():
    with pytest.raises(ValueError, match="max_length"):
        CleaningRules(max_length=0)
    with pytest.raises(ValueError, match="max_length_ratio"):
        CleaningRules(max_length_ratio=0.5)
    with pytest.raises(ValueError, match="drop_containing"):
        CleaningRules(drop_containing=("",))
