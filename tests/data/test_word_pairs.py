"""Tests for `tf_outheads.data.word_pairs`: pairing source and target words
(Liu et al. 2019, §2.1) on a real slice of the Bible corpus, and the pairs file."""

import collections

import numpy as np
import pytest

from tf_outheads.data.word_pair_table import CATEGORIES
from tf_outheads.data.word_pair_table import PairingError
from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.data.word_pairs import build_word_pairs
from tf_outheads.data.alignment_links import eflomal_links
from tf_outheads.data.word_pairs import split_words
from tf_outheads.data.word_pairs import word_pairs_from_tokenizers
from tf_outheads.data.word_pairs import word_vocabulary

# eflomal's own iteration counts for 2,000 verses take ~17 s of sampling; a few
# iterations of each model align this slice well enough to pair its words (~1 s).
ITERATIONS = (4, 4, 4)

pytest.importorskip("eflomal")


@pytest.fixture(scope="module")
def words(bible_slice):
    """Word-level tokens of the first 2000 train verses, and their vocabularies."""
    source = [split_words(s) for s in bible_slice.sources]
    target = [split_words(t) for t in bible_slice.targets]
    return source, target, word_vocabulary(source), word_vocabulary(target)


@pytest.fixture(scope="module")
def links(words):
    source, target, _, _ = words
    return eflomal_links(source, target, n_iterations=ITERATIONS)


@pytest.fixture(scope="module")
def word_pairs(words, links):
    source, target, source_vocabulary, target_vocabulary = words
    return build_word_pairs(source, target, source_vocabulary, target_vocabulary, links=links)


def test_word_level_pairs_are_translations(word_pairs):
    for source, target in [("dios", "god"), ("rey", "king"), ("dijo", "said"),
                           ("hijos", None), ("jehová", "yahweh"), ("faraón", "pharaoh"),
                           ("egipto", "egypt"), ("agua", "water")]:
        paired, category = word_pairs.target_of(source)
        assert category == "lm", (source, paired)
        if target is not None:
            assert paired == target, (source, paired)
    assert word_pairs.target_of("hijos")[0] in ("sons", "children")


def test_pairing_is_one_to_one_and_covers_the_smaller_vocabulary(word_pairs):
    assert len(set(word_pairs.source_ids.tolist())) == len(word_pairs)
    assert len(set(word_pairs.target_ids.tolist())) == len(word_pairs)
    # Spanish has more word forms than English here: every English word is paired.
    assert word_pairs.source_vocabulary_size > word_pairs.target_vocabulary_size
    stats = word_pairs.statistics()
    assert stats["unpaired_target"] == 0
    assert stats["lm"] + stats["wf"] + stats["ur"] == word_pairs.target_vocabulary_size
    assert stats["unpaired_source"] == (word_pairs.source_vocabulary_size
                                        - word_pairs.target_vocabulary_size)


def test_lexical_pairs_are_above_the_threshold_and_the_rest_not_aligned(word_pairs):
    lm = word_pairs.categories == CATEGORIES.index("lm")
    assert (word_pairs.probabilities[lm] > 0.05).all()
    assert np.isnan(word_pairs.probabilities[~lm]).all()
    # Same-form pairs really are the same form.
    for s, t, c in zip(word_pairs.source_ids, word_pairs.target_ids, word_pairs.categories):
        if CATEGORIES[c] == "wf":
            assert word_pairs.source_tokens[s] == word_pairs.target_tokens[t]


def test_a_higher_threshold_pairs_fewer_words_by_meaning(words, links, word_pairs):
    # Table 5: the threshold trades lexical pairs for unrelated ones.
    source, target, source_vocabulary, target_vocabulary = words
    strict = build_word_pairs(source, target, source_vocabulary, target_vocabulary,
                              links=links, threshold=0.5)
    assert 0 < strict.counts()["lm"] < word_pairs.counts()["lm"]
    assert strict.counts()["ur"] > word_pairs.counts()["ur"]
    assert strict.target_of("dios") == ("god", "lm")


def test_identical_names_are_paired_by_form_without_alignments(words):
    source, target, source_vocabulary, target_vocabulary = words
    pairs = build_word_pairs(source, target, source_vocabulary, target_vocabulary,
                             links=[[] for _ in source])
    assert pairs.counts()["lm"] == 0
    for name in ("abraham", "isaac", "jacob", "josé", "noé"):
        if name in target_vocabulary:
            assert pairs.target_of(name) == (name, "wf")
    assert pairs.target_of("josé")[1] == "ur"  # "Joseph" in English: no same form
    assert pairs.target_of("<unk>") == ("<unk>", "wf")
    # Unrelated words go by frequency rank: the k-th most frequent Spanish word
    # left is paired with the k-th most frequent English word left.
    source_freq = collections.Counter(w for sentence in source for w in sentence)
    target_freq = collections.Counter(w for sentence in target for w in sentence)
    ur = pairs.categories == CATEGORIES.index("ur")
    ur_source = [source_freq[pairs.source_tokens[i]] for i in pairs.source_ids[ur]]
    ur_target = [target_freq[pairs.target_tokens[i]] for i in pairs.target_ids[ur]]
    assert ur_source == sorted(ur_source, reverse=True) and ur_source[0] > 100
    assert ur_target == sorted(ur_target, reverse=True) and ur_target[0] > 100


@pytest.mark.slow  # eflomal on 2,000 verses
def test_subword_pairs_of_a_joint_vocabulary(bible_slice, bible_tokenizer):
    pairs = word_pairs_from_tokenizers(bible_slice.sources, bible_slice.targets,
                                       bible_tokenizer, bible_tokenizer)
    vocabulary_size = bible_tokenizer.vocab_size
    assert pairs.source_vocabulary_size == pairs.target_vocabulary_size == vocabulary_size
    assert len(pairs) == vocabulary_size  # a joint vocabulary pairs every piece
    assert pairs.target_of("▁Dios") == ("▁God", "lm")
    assert pairs.target_of("▁rey") == ("▁king", "lm")
    assert pairs.target_of("</s>") == ("</s>", "wf")
    counts = pairs.counts()
    assert counts["lm"] > 300 and counts["wf"] >= 4 and counts["ur"] > 0


def test_attention_links_pair_words_like_an_aligner():
    # A stand-in model whose attention puts target position j on source position j.
    from tf_outheads.data.alignment_links import attention_links

    class Diagonal:
        def source_alignments(self, source_ids, target_in):
            b, t = target_in.shape
            s = source_ids.shape[1]
            return np.broadcast_to(np.eye(t, s, dtype="float32"), (b, t, s))

    links = attention_links(Diagonal(), [[5, 6, 7], [8, 9]], [[1, 2, 3], [4, 5]])
    assert links == [[(0, 0), (1, 1), (2, 2)], [(0, 0), (1, 1)]]
    pairs = build_word_pairs([["a", "b", "c"], ["d", "a"]], [["x", "y", "z"], ["w", "x"]],
                             ["<unk>", "a", "b", "c", "d"], ["<unk>", "x", "y", "z", "w"],
                             links=links)
    assert pairs.target_of("a") == ("x", "lm")
    assert pairs.target_of("d") == ("w", "lm")


def test_pairs_file_round_trip(word_pairs, tmp_path):
    path = word_pairs.save(tmp_path / "pairs.tsv")
    loaded = WordPairs.load(path)
    for name in ("source_ids", "target_ids", "categories"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(word_pairs, name))
    np.testing.assert_allclose(loaded.probabilities, word_pairs.probabilities, rtol=1e-5)
    assert loaded.statistics() == word_pairs.statistics()
    assert loaded.target_of("dios") == ("god", "lm")
    assert loaded.target_of(",") == word_pairs.target_of(",")
    text = open(path, encoding="utf-8").read()
    assert f"# lm\t{word_pairs.counts()['lm']}\n" in text
    assert "\tdios\tgod\t" in text



def test_pairs_file_with_a_byte_order_mark_or_bad_utf8(word_pairs, tmp_path):
    path = word_pairs.save(tmp_path / "pairs.tsv")
    content = open(path, "rb").read()
    with_bom = tmp_path / "bom.tsv"
    with_bom.write_bytes("\ufeff".encode("utf-8") + content)
    assert WordPairs.load(with_bom).statistics() == word_pairs.statistics()
    latin = tmp_path / "latin.tsv"
    lines = content.split(b"\n")
    lines[4] += b"\xe9"
    latin.write_bytes(b"\n".join(lines))
    with pytest.raises(PairingError, match="UTF-8") as error:
        WordPairs.load(latin)
    assert str(error.value).startswith(f"{latin}:5: ")

@pytest.mark.parametrize("line, message", [
    ("lm\t1\t2\tx\ty", "expected 6 tab-separated fields"),
    ("zz\t1\t2\tx\ty\t", "starting with one of"),
    ("lm\tone\t2\tx\ty\t0.5", "invalid literal"),
    ("lm\t1\t999\tx\ty\t0.5", "target_ids"),
])
def test_a_bad_pairs_file_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "pairs.tsv"
    path.write_text("# source_vocabulary_size\t10\n# target_vocabulary_size\t10\n"
                    "category\tsource_id\ttarget_id\tsource_token\ttarget_token\tprobability\n"
                    "wf\t0\t0\t<pad>\t<pad>\t\n" + line + "\n", encoding="utf-8")
    with pytest.raises(PairingError, match=message) as error:
        WordPairs.load(path)
    if message != "target_ids":
        assert f"{path}:5" in str(error.value)
    else:
        assert str(path) in str(error.value)


def test_bad_input_is_refused_clearly():
    vocabulary = ["<unk>", "a"]
    with pytest.raises(PairingError, match="corpus is empty"):
        build_word_pairs([[]], [[]], vocabulary, vocabulary, links=[[]])
    with pytest.raises(PairingError, match="2 source and 1 target"):
        build_word_pairs([["a"], ["a"]], [["a"]], vocabulary, vocabulary, links=[[], []])
    with pytest.raises(PairingError, match="outside the sentence"):
        build_word_pairs([["a"]], [["a"]], vocabulary, vocabulary, links=[[(0, 3)]])
    with pytest.raises(PairingError, match="not in the target vocabulary"):
        build_word_pairs([["a"]], [["b"]], vocabulary, ["x", "a"], links=[[]])
    with pytest.raises(PairingError, match="give token lists"):
        build_word_pairs(["a"], ["a"], vocabulary, vocabulary, links=[[]])
    with pytest.raises(PairingError, match="threshold"):
        build_word_pairs([["a"]], [["a"]], vocabulary, vocabulary, links=[[]], threshold=1.5)
    with pytest.raises(PairingError, match="repeats id 1"):
        WordPairs(np.array([1, 1]), np.array([0, 1]), np.array([0, 0]), 3, 3)
    with pytest.raises(PairingError, match="target_ids"):
        WordPairs(np.array([0]), np.array([7]), np.array([0]), 3, 3)
