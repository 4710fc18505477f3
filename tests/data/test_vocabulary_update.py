"""Merged and replaced SentencePiece models for a vocabulary update, and the piece map."""

import numpy as np
import pytest

from tf_outheads.data import SubwordTokenizer, merge_sentencepiece, piece_map
from tf_outheads.data import WordPairs, train_sentencepiece, updated_model_proto
from tf_outheads.data.word_pair_table import PairingError


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def models(request, bible_slice, tmp_path_factory):
    """The first 1,000 English verses' model and the next 1,000's (other books' words)."""
    directory = tmp_path_factory.mktemp(request.param)
    texts = bible_slice.targets
    for name, part in (("old", texts[:1000]), ("new", texts[1000:])):
        train_sentencepiece(part, str(directory / name), 500, model_type=request.param)
    return (SubwordTokenizer(directory / "old.model"), SubwordTokenizer(directory / "new.model"),
            texts)


def test_a_merge_keeps_every_old_piece_at_its_id_and_adds_the_new_ones(models):
    old, new, texts = models
    merged = SubwordTokenizer.from_bytes(merge_sentencepiece(old.model_proto, new.model_proto))
    assert merged.model_type == old.model_type
    assert merged.vocabulary()[:old.vocab_size] == old.vocabulary()
    added = set(new.vocabulary()) - set(old.vocabulary())
    assert len(added) > 50 and set(merged.vocabulary()[old.vocab_size:]) == added
    mapping = piece_map(old, merged)
    np.testing.assert_array_equal(mapping[:old.vocab_size], np.arange(old.vocab_size))
    assert (mapping[old.vocab_size:] == -1).all()
    # The merged model spells every text back, and cuts the new texts into fewer pieces
    # than the old model did, using the new pieces.
    later = texts[1000:1300]
    for text in later[:50]:
        assert merged.decode_to_text([merged.tokenize(text).numpy().tolist()]) == [text]
    count = lambda tokenizer: sum(len(tokenizer.tokenize(t).numpy()) for t in later)  # noqa: E731
    assert count(merged) < 0.95 * count(old)
    assert any((merged.tokenize(t).numpy() >= old.vocab_size).any() for t in later)


def test_replace_is_the_new_model_and_maps_the_pieces_both_have(models):
    old, new, _ = models
    replaced = SubwordTokenizer.from_bytes(updated_model_proto("replace", old.model_proto,
                                                               new.model_proto))
    assert replaced.fingerprint == new.fingerprint
    mapping = piece_map(old, replaced)
    vocabulary = old.vocabulary()
    for new_id, old_id in enumerate(mapping):
        piece = replaced.id_to_piece(new_id)
        assert (vocabulary[old_id] == piece) if old_id >= 0 else (piece not in vocabulary)
    np.testing.assert_array_equal(mapping[:4], np.arange(4))


def test_a_merge_of_two_model_types_and_a_bad_mode_are_refused(models, bible_slice, tmp_path):
    old, _, texts = models
    other = "unigram" if old.model_type == "bpe" else "bpe"
    train_sentencepiece(texts[:500], str(tmp_path / "other"), 300, model_type=other)
    with pytest.raises(ValueError, match="two SentencePiece models of one type"):
        merge_sentencepiece(old.model_proto, (tmp_path / "other.model").read_bytes())
    with pytest.raises(ValueError, match="update_vocab` must be one of .*'append'"):
        updated_model_proto("append", old.model_proto, old.model_proto)


def test_remapped_pairs_follow_their_pieces_and_drop_a_dropped_side():
    pairs = WordPairs(np.array([4, 5, 6]), np.array([7, 4, 5]), np.array([0, 1, 2]), 8, 8)
    # New vocabularies of 9: old source 4 -> 8, 5 -> 4, 6 dropped; old target 7 -> 5,
    # 4 -> 6, 5 -> 7; ids 0-3 kept where they were.
    source = np.array([0, 1, 2, 3, 5, -1, -1, -1, 4])
    target = np.array([0, 1, 2, 3, -1, 7, 4, 5, -1])
    moved = pairs.remapped(source, target, [f"s{i}" for i in range(9)],
                           [f"t{i}" for i in range(9)])
    assert (moved.source_ids.tolist(), moved.target_ids.tolist(),
            moved.categories.tolist()) == ([8, 4], [5, 6], [0, 1])
    assert moved.source_vocabulary_size == moved.target_vocabulary_size == 9
    with pytest.raises(PairingError, match="old id \\(< 8\\)"):
        pairs.remapped(np.array([0, 9]), target, ["a", "b"], ["a"] * 9)
