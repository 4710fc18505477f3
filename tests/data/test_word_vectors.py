import gzip

import numpy as np
import pytest

from tf_outheads.data import BOS_ID
from tf_outheads.data import EOS_ID
from tf_outheads.data import PAD_ID
from tf_outheads.data import UNK_ID
from tf_outheads.data import CorpusError
from tf_outheads.data import TargetTable
from tf_outheads.data import load_word_vectors
from tf_outheads.data import target_embedding_table
from tf_outheads.data import train_word_vectors

SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)


def cosine(first, second):
    return float(first @ second / (np.linalg.norm(first) * np.linalg.norm(second)))


@pytest.fixture(scope="module")
def bible_vectors(bible_slice, bible_tokenizer, tmp_path_factory):
    """`(path, words, vectors)` of 64-d fastText vectors on the 2000 target verses."""
    path = train_word_vectors(
        bible_slice.targets,
        bible_tokenizer,
        tmp_path_factory.mktemp("word_vectors") / "target.vec",
        dim=64,
        epochs=5,
    )
    words, vectors = load_word_vectors(path)
    return path, words, vectors


@pytest.fixture(scope="module")
def bible_table(bible_tokenizer, bible_vectors):
    _, words, vectors = bible_vectors
    return target_embedding_table(bible_tokenizer, words, vectors)


# --- train_word_vectors ----------------------------------------------------------------


def test_training_is_deterministic_given_the_seed(bible_slice, bible_tokenizer, tmp_path):
    sentences = bible_slice.targets[:1000]
    options = dict(dim=32, epochs=2, seed=7)
    first = train_word_vectors(sentences, bible_tokenizer, tmp_path / "a.vec", **options)
    train_word_vectors(sentences, bible_tokenizer, tmp_path / "b.vec", **options)
    assert first == str(tmp_path / "a.vec")
    assert (tmp_path / "a.vec").read_bytes() == (tmp_path / "b.vec").read_bytes()
    other = train_word_vectors(
        sentences, bible_tokenizer, tmp_path / "c.vec", dim=32, epochs=2, seed=8
    )
    first_words, first_vectors = load_word_vectors(first)
    other_words, other_vectors = load_word_vectors(other)
    assert first_words == other_words
    assert not np.allclose(first_vectors, other_vectors)


def test_vectors_are_per_piece_of_the_tokenizer(bible_slice, bible_tokenizer, bible_vectors):
    _, words, vectors = bible_vectors
    pieces = {bible_tokenizer.id_to_piece(i) for i in range(bible_tokenizer.vocab_size)}
    assert set(words) <= pieces
    # Every piece of the tokenized targets has a vector (min_count=1), and no
    # other piece does: the joint tokenizer's Spanish-only pieces get none.
    seen = {
        bible_tokenizer.id_to_piece(i)
        for row in bible_tokenizer.tokenize(bible_slice.targets).to_list()
        for i in row
    }
    assert set(words) == seen
    assert "▁God" in words and "▁Dios" not in words
    assert vectors.dtype == np.float32 and vectors.shape == (len(words), 64)
    # Most frequent piece first, as word2vec tools write them.
    assert words[0] in {",", "▁the", "▁and", "."}


def test_vectors_place_related_pieces_closer(bible_vectors):
    _, words, vectors = bible_vectors
    vector = {word: vectors[index] for index, word in enumerate(words)}
    related = [
        ("▁God", "▁Yahweh"), ("▁son", "▁sons"), ("▁two", "▁seven"), ("▁his", "▁her")
    ]
    unrelated = [("▁God", ","), ("▁God", "▁two"), ("▁son", "▁seven"), ("▁his", "▁water")]
    related_cosines = [cosine(vector[a], vector[b]) for a, b in related]
    unrelated_cosines = [cosine(vector[a], vector[b]) for a, b in unrelated]
    # Untrained (random) or collapsed (all alike) vectors fail this margin.
    assert min(related_cosines) > max(unrelated_cosines) + 0.1, (
        related_cosines,
        unrelated_cosines,
    )
    # "▁Yahweh" is among the 5 nearest pieces of "▁God".
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = unit @ unit[words.index("▁God")]
    nearest = [words[i] for i in np.argsort(-scores)[1:6]]
    assert "▁Yahweh" in nearest, nearest


def test_word2vec_model(bible_slice, bible_tokenizer, tmp_path):
    path = train_word_vectors(
        bible_slice.targets[:300], bible_tokenizer, tmp_path / "w2v.vec",
        dim=8, epochs=1, model="word2vec",
    )
    words, vectors = load_word_vectors(path)
    assert vectors.shape == (len(words), 8) and "▁God" in words


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(dim=0), "dim=0"),
        (dict(epochs=1.5), "epochs=1.5"),
        (dict(workers=True), "workers=True"),
        (dict(seed=-1), "seed=-1"),
        (dict(model="glove"), "model='glove'"),
    ],
    ids=["dim", "epochs", "workers", "seed", "model"],
)
def test_training_argument_errors(bible_tokenizer, tmp_path, arguments, message):
    with pytest.raises(ValueError, match=f"Received: {message}"):
        train_word_vectors(["God said."], bible_tokenizer, tmp_path / "x.vec", **arguments)


def test_training_rejects_a_single_string_and_blank_input(bible_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="not one string"):
        train_word_vectors("God said.", bible_tokenizer, tmp_path / "x.vec")
    with pytest.raises(ValueError, match="all blank"):
        train_word_vectors(["", "  "], bible_tokenizer, tmp_path / "x.vec")


# --- load_word_vectors -----------------------------------------------------------------


def test_vec_round_trip_is_exact(bible_vectors, tmp_path):
    path, words, vectors = bible_vectors
    text = open(path, encoding="utf-8").read().splitlines()
    assert text[0] == f"{len(words)} 64"
    assert text[1].split(" ")[0] == words[0] and len(text) == len(words) + 1
    # Written by hand in fastText's own layout (a trailing space), gzipped.
    gz_path = tmp_path / "copy.vec.gz"
    with gzip.open(gz_path, "wt", encoding="utf-8") as stream:
        stream.write(f"{len(words)} 64\n")
        for word, row in zip(words, vectors):
            stream.write(word + " " + " ".join(repr(float(value)) for value in row) + " \n")
    again_words, again_vectors = load_word_vectors(gz_path)
    assert again_words == words
    np.testing.assert_array_equal(again_vectors, vectors)
    # Loading the written file is stable too.
    reread_words, reread_vectors = load_word_vectors(path)
    assert reread_words == words
    np.testing.assert_array_equal(reread_vectors, vectors)


def test_bin_files_load(bible_slice, bible_tokenizer, tmp_path):
    gensim = pytest.importorskip("gensim")
    pieces = [
        [bible_tokenizer.id_to_piece(i) for i in row]
        for row in bible_tokenizer.tokenize(bible_slice.targets[:200]).to_list()
    ]
    model = gensim.models.FastText(
        pieces, vector_size=12, min_count=1, epochs=1, bucket=5000, seed=0, workers=1
    )
    # Facebook fastText binary: full word vectors rebuilt from rows + n-grams.
    facebook_path = str(tmp_path / "model.bin")
    gensim.models.fasttext.save_facebook_model(model, facebook_path)
    words, vectors = load_word_vectors(facebook_path)
    assert words == list(model.wv.index_to_key)
    np.testing.assert_allclose(vectors, model.wv.vectors, rtol=1e-5, atol=1e-6)
    # word2vec binary.
    word2vec_path = str(tmp_path / "vectors.bin")
    model.wv.save_word2vec_format(word2vec_path, binary=True)
    words, vectors = load_word_vectors(word2vec_path)
    assert words == list(model.wv.index_to_key) and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, model.wv.vectors)


def test_bad_bin_files(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(CorpusError, match="empty.bin: the file is empty"):
        load_word_vectors(empty)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not a header\n\x00\x01")
    with pytest.raises(CorpusError, match="garbage.bin: cannot be read as a word2vec"):
        load_word_vectors(garbage)


GOOD = "2 3\n▁God 0.1 0.2 0.3\n, 1 2 3\n"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"bad.vec: the file is empty"),
        (b"2\n", r"bad.vec:1: the header is '2'"),
        (b"two 3\n", r"bad.vec:1: the header is 'two 3'"),
        (b"0 3\n", r"bad.vec:1: the header is '0 3'"),
        ("2 3\n▁God 0.1 0.2\n, 1 2 3\n".encode(), r"bad.vec:2: found 2 value\(s\)"),
        ("2 3\n▁God 0.1 0.2 0.3\n, 1 2 3 4\n".encode(), r"bad.vec:3: found 4 value\(s\)"),
        ("2 3\n▁God 0.1 x 0.3\n, 1 2 3\n".encode(), r"bad.vec:2: value 2 of '▁God' is 'x'"),
        ("2 3\n▁God 0.1 nan 0.3\n, 1 2 3\n".encode(), r"bad.vec:2: value 2 .* not finite"),
        (
            "2 3\n▁God 0.1 0.2 0.3\n▁God 1 2 3\n".encode(),
            r"bad.vec:3: the word '▁God' repeats line 2",
        ),
        (
            "3 3\n▁God 0.1 0.2 0.3\n, 1 2 3\n".encode(),
            r"bad.vec:1: the header announces 3 vector\(s\) but the file holds 2",
        ),
        ((GOOD + ". 4 5 6\n").encode(), r"bad.vec:4: one line more than the header's 2"),
        ("2 3\n▁God 0.1 0.2 0.3\n\n".encode(), r"bad.vec:3: the line is empty"),
        (b"2 3\n\xe2\x96\x81God 0.1 0.2 0.3\n\xff, 1 2 3\n", r"bad.vec:3: invalid UTF-8"),
    ],
    ids=[
        "empty",
        "header_fields",
        "header_not_int",
        "header_zero",
        "too_few_values",
        "too_many_values",
        "non_numeric",
        "non_finite",
        "duplicate_word",
        "fewer_lines_than_header",
        "more_lines_than_header",
        "blank_line",
        "invalid_utf8",
    ],
)
def test_malformed_vec_names_the_line(tmp_path, content, message):
    path = tmp_path / "bad.vec"
    path.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        load_word_vectors(path)


def test_good_small_vec(tmp_path):
    path = tmp_path / "good.vec"
    path.write_text(GOOD, encoding="utf-8")
    words, vectors = load_word_vectors(path)
    assert words == ["▁God", ","]
    np.testing.assert_array_equal(vectors, np.float32([[0.1, 0.2, 0.3], [1, 2, 3]]))


# --- target_embedding_table ------------------------------------------------------------



def test_vec_with_a_leading_byte_order_mark(tmp_path):
    path = tmp_path / "bom.vec"
    path.write_bytes("\ufeff".encode("utf-8") + GOOD.encode("utf-8"))
    words, vectors = load_word_vectors(path)
    assert words == ["▁God", ","]
    np.testing.assert_array_equal(vectors, np.float32([[0.1, 0.2, 0.3], [1, 2, 3]]))


def test_truncated_vec_gz_names_the_file_and_line(bible_vectors, tmp_path):
    source_path, words, _ = bible_vectors
    data = gzip.compress(open(source_path, "rb").read())
    path = tmp_path / "cut.vec.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusError, match="truncated or damaged") as info:
        load_word_vectors(path)
    assert str(info.value).startswith(f"{path}:")
    line = int(str(info.value)[len(str(path)) + 1:].split(":")[0])
    assert 1 < line <= len(words) + 1

def test_table_rows_follow_the_tokenizer_ids(bible_tokenizer, bible_vectors, bible_table):
    _, words, vectors = bible_vectors
    assert isinstance(bible_table, TargetTable)
    assert bible_table.vectors.shape == (bible_tokenizer.vocab_size, 64)
    assert bible_table.vectors.dtype == np.float32
    index = {word: i for i, word in enumerate(words)}
    for piece_id in range(bible_tokenizer.vocab_size):
        piece = bible_tokenizer.id_to_piece(piece_id)
        if piece_id in SPECIAL_IDS:
            assert not bible_table.has_vector[piece_id]
        elif piece in index:
            assert bible_table.has_vector[piece_id]
            expected = vectors[index[piece]] / np.linalg.norm(vectors[index[piece]])
            np.testing.assert_allclose(bible_table.vectors[piece_id], expected, atol=1e-6)
        else:
            assert not bible_table.has_vector[piece_id]
            np.testing.assert_array_equal(
                bible_table.vectors[piece_id], bible_table.vectors[UNK_ID]
            )


def test_table_norms_and_pad(bible_table):
    norms = np.linalg.norm(bible_table.vectors, axis=1)
    assert np.all(bible_table.vectors[PAD_ID] == 0)
    np.testing.assert_allclose(np.delete(norms, PAD_ID), 1.0, atol=1e-5)


def test_table_counts(bible_tokenizer, bible_vectors, bible_table):
    _, words, _ = bible_vectors
    counts = bible_table.counts
    assert counts["vocabulary"] == bible_tokenizer.vocab_size
    assert counts["special"] == 4
    assert counts["with_vector"] == int(bible_table.has_vector.sum()) == len(words)
    assert counts["with_vector"] + counts["without_vector"] + 4 == counts["vocabulary"]
    # The joint es+en tokenizer has Spanish-only pieces never seen in targets.
    assert counts["without_vector"] > 100
    assert counts["file_words"] == len(words)
    assert counts["file_words_outside_vocabulary"] == 0
    assert counts["zero_vectors"] == 0
    assert set(bible_table.special) == {"<pad>", "<unk>", "<s>", "</s>"}
    assert "without" in str(bible_table) and "</s>" in str(bible_table)


def test_eos_is_far_from_every_piece(bible_table):
    table = bible_table.vectors
    vocabulary = table[bible_table.has_vector]
    eos = table[EOS_ID]
    assert np.max(vocabulary @ eos) < 0.3
    # No piece has </s> as its nearest neighbour among the other rows.
    scores = vocabulary @ table.T  # (pieces, vocab)
    scores[np.arange(len(vocabulary)), np.flatnonzero(bible_table.has_vector)] = -np.inf
    assert not np.any(np.argmax(scores, axis=1) == EOS_ID)
    # The specials are mutually orthogonal, and </s> is orthogonal to the mean.
    for first, second in [(EOS_ID, UNK_ID), (BOS_ID, UNK_ID), (BOS_ID, EOS_ID)]:
        assert abs(float(table[first] @ table[second])) < 1e-5
    mean = vocabulary.mean(axis=0)
    assert abs(cosine(eos, mean)) < 1e-5


def test_unk_is_far_from_every_piece_when_none_is_missing(
        bible_tokenizer, bible_vectors, bible_table):
    # Every file word is a piece: <unk> is no training target, and the mean of
    # all vectors (where an untrained model's predictions land) would win the
    # nearest-neighbour search for almost any prediction.
    _, words, vectors = bible_vectors
    table = bible_table.vectors
    vocabulary = table[bible_table.has_vector]
    unk = table[UNK_ID]
    assert abs(float(np.linalg.norm(unk)) - 1.0) < 1e-6
    assert abs(cosine(unk, vocabulary.mean(axis=0))) < 1e-5
    assert np.max(vocabulary @ unk) < 0.3
    assert "no file word lies outside" in bible_table.special["<unk>"]
    # The mean of the vocabulary is nearest to a piece, not to <unk>.
    scores = table @ (vocabulary.mean(axis=0) / np.linalg.norm(vocabulary.mean(axis=0)))
    assert bible_table.has_vector[int(np.argmax(scores))]
    # unk="far" is the same vector; unk="mean_of_all" the normalised mean.
    far = target_embedding_table(bible_tokenizer, words, vectors, unk="far")
    np.testing.assert_array_equal(far.vectors, table)
    mean_of_all = target_embedding_table(bible_tokenizer, words, vectors, unk="mean_of_all")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = unit.mean(axis=0) / np.linalg.norm(unit.mean(axis=0))
    np.testing.assert_allclose(mean_of_all.vectors[UNK_ID], expected, atol=1e-6)
    assert "mean of all" in mean_of_all.special["<unk>"]


def test_unk_is_the_mean_of_words_outside_the_vocabulary(bible_tokenizer, bible_vectors):
    _, words, vectors = bible_vectors
    rng = np.random.default_rng(3)
    foreign = rng.standard_normal((2, vectors.shape[1])).astype(np.float32)
    foreign[1] *= 10.0  # Raw norms do not weigh in: each vector is normalised first.
    extended_words = words + ["lightning", "▁<not a piece>"]
    extended = np.concatenate([vectors, foreign])
    table = target_embedding_table(bible_tokenizer, extended_words, extended)
    unit = foreign / np.linalg.norm(foreign, axis=1, keepdims=True)
    expected = unit.mean(axis=0) / np.linalg.norm(unit.mean(axis=0))
    np.testing.assert_allclose(table.vectors[UNK_ID], expected, atol=1e-6)
    assert table.counts["file_words_outside_vocabulary"] == 2
    assert "2 file vectors of words outside" in table.special["<unk>"]
    # unk="mean_of_all" ignores the split.
    table_all = target_embedding_table(
        bible_tokenizer, extended_words, extended, unk="mean_of_all"
    )
    unit_all = extended / np.linalg.norm(extended, axis=1, keepdims=True)
    expected_all = unit_all.mean(axis=0) / np.linalg.norm(unit_all.mean(axis=0))
    np.testing.assert_allclose(table_all.vectors[UNK_ID], expected_all, atol=1e-6)


def test_table_is_deterministic_and_seeded(bible_tokenizer, bible_vectors, bible_table):
    _, words, vectors = bible_vectors
    again = target_embedding_table(bible_tokenizer, words, vectors)
    np.testing.assert_array_equal(again.vectors, bible_table.vectors)
    other = target_embedding_table(bible_tokenizer, words, vectors, seed=1)
    assert not np.allclose(other.vectors[EOS_ID], bible_table.vectors[EOS_ID])
    assert not np.allclose(other.vectors[UNK_ID], bible_table.vectors[UNK_ID])


def test_file_vectors_for_special_pieces_and_zero_vectors_are_ignored(bible_tokenizer):
    words = ["▁God", "▁Yahweh", "</s>", "<unk>", "▁said"]
    vectors = np.eye(5, 6, dtype=np.float32)
    vectors[4] = 0.0
    table = target_embedding_table(bible_tokenizer, words, vectors)
    assert table.has_vector.sum() == 2
    assert table.counts["zero_vectors"] == 1
    assert table.counts["without_vector"] == bible_tokenizer.vocab_size - 4 - 2
    said = bible_tokenizer.piece_to_id("▁said")
    np.testing.assert_array_equal(table.vectors[said], table.vectors[UNK_ID])
    assert abs(float(table.vectors[EOS_ID] @ vectors[2])) < 0.99


@pytest.mark.parametrize(
    "words, vectors, unk, message",
    [
        (["▁God"], np.ones((1, 3)), "mean_of_missing", r"dim >= 4"),
        (["▁God"], np.ones((2, 8)), "mean_of_missing", r"len\(words\)=1"),
        (["▁God"], np.full((1, 8), np.nan), "mean_of_missing", r"finite"),
        (["▁God"], np.ones((1, 8)), "negative_mean", r"unk='negative_mean'"),
        (["God", "Dios2"], np.ones((2, 8)), "mean_of_missing", r"No ordinary piece"),
    ],
    ids=["dim", "length", "non_finite", "unk", "no_overlap"],
)
def test_table_errors(bible_tokenizer, words, vectors, unk, message):
    with pytest.raises(ValueError, match=message):
        target_embedding_table(bible_tokenizer, words, vectors, unk=unk)


# --- post-processing and the </s> choices (issue 41) ----------------------------------


def _unit(rows):
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_centring_and_all_but_the_top(bible_tokenizer, bible_vectors, bible_table):
    from tf_outheads.metrics import hubness

    _, words, vectors = bible_vectors
    centred = target_embedding_table(bible_tokenizer, words, vectors, center=True)
    abtt = target_embedding_table(bible_tokenizer, words, vectors, center=True,
                                  remove_components=2)
    rows = bible_table.has_vector
    np.testing.assert_array_equal(centred.has_vector, rows)
    for table in (centred, abtt):
        np.testing.assert_allclose(np.linalg.norm(table.vectors[rows], axis=1), 1.0, atol=1e-5)
    # The rows are the file's unit vectors minus their mean, renormalised.
    ids = [bible_tokenizer.piece_to_id(word) for word in words]
    unit = _unit(vectors.astype(np.float64))
    mean = unit.mean(axis=0)
    np.testing.assert_allclose(centred.vectors[ids], _unit(unit - mean), atol=1e-5)
    # All-but-the-top: orthogonal to the two top principal directions of the centred rows.
    _, _, right = np.linalg.svd(unit - mean, full_matrices=False)
    assert np.max(np.abs(abtt.vectors[ids] @ right[:2].T)) < 1e-5
    assert np.max(np.abs(abtt.vectors[ids] @ right[2:4].T)) > 0.1
    assert "centred" in centred.postprocessing and "2 principal" in abtt.postprocessing
    assert bible_table.postprocessing == "L2-normalised"
    # The common direction was what made hubs: the skewness of the 10-occurrence drops.
    skew = {name: hubness(table.vectors[rows], k=10).skewness
            for name, table in (("plain", bible_table), ("centred", centred), ("abtt", abtt))}
    assert skew["centred"] < skew["plain"] and skew["abtt"] < skew["plain"], skew
    # The specials still stand apart from every piece.
    for table in (centred, abtt):
        assert np.max(table.vectors[rows] @ table.vectors[EOS_ID]) < 0.5


def test_eos_from_the_file_and_from_the_full_stop(bible_slice, bible_tokenizer, tmp_path):
    path = train_word_vectors(bible_slice.targets[:600], bible_tokenizer, tmp_path / "e.vec",
                              dim=16, epochs=1, eos_token="</s>")
    words, vectors = load_word_vectors(path)
    assert "</s>" in words
    table = target_embedding_table(bible_tokenizer, words, vectors, eos="file")
    file_eos = vectors[words.index("</s>")]
    np.testing.assert_allclose(table.vectors[EOS_ID], _unit(file_eos), atol=1e-6)
    assert "vector file's </s> row" in table.special["</s>"]
    # Post-processed like the other rows.
    centred = target_embedding_table(bible_tokenizer, words, vectors, eos="file", center=True)
    kept = [index for index, word in enumerate(words)
            if centred.has_vector[bible_tokenizer.piece_to_id(word)]]
    assert len(kept) == len(words) - 1  # every piece but </s>
    mean = _unit(vectors[kept].astype(np.float64)).mean(axis=0)
    np.testing.assert_allclose(centred.vectors[EOS_ID], _unit(_unit(file_eos) - mean),
                               atol=1e-5)
    # Minus the full stop.
    negative = target_embedding_table(bible_tokenizer, words, vectors, eos="negative_period")
    period = bible_tokenizer.piece_to_id(".")
    assert negative.has_vector[period]
    np.testing.assert_allclose(negative.vectors[EOS_ID], -negative.vectors[period])
    assert "'.'" in negative.special["</s>"]
    # A file without </s>.
    no_eos = [w for w in words if w != "</s>"]
    without = vectors[[words.index(w) for w in no_eos]]
    with pytest.raises(ValueError, match=r"eos='file'.*eos_token='</s>'"):
        target_embedding_table(bible_tokenizer, no_eos, without, eos="file")
    # Only the file's </s> row, never <unk>'s or <s>'s, is read.
    assert not table.has_vector[EOS_ID]


@pytest.mark.parametrize("kwargs, message", [
    ({"eos": "period"}, r"`eos` must be one of"),
    ({"center": 1}, r"`center` must be a bool"),
    ({"remove_components": 2}, r"needs `center=True`"),
    ({"remove_components": -1, "center": True}, r"`remove_components` must be an int >= 0"),
    ({"remove_components": 61, "center": True}, r"at most dim - 4 = 60"),
])
def test_postprocessing_errors(bible_tokenizer, bible_vectors, kwargs, message):
    _, words, vectors = bible_vectors
    with pytest.raises(ValueError, match=message):
        target_embedding_table(bible_tokenizer, words, vectors, **kwargs)


def test_negative_period_needs_a_full_stop(bible_tokenizer):
    words = ["▁God", "▁Yahweh"]
    with pytest.raises(ValueError, match=r"neither '\.' nor '▁\.'"):
        target_embedding_table(bible_tokenizer, words, np.eye(2, 8), eos="negative_period")


def test_eos_token_must_be_one_word(bible_slice, bible_tokenizer, tmp_path):
    with pytest.raises(ValueError, match=r"`eos_token` must be"):
        train_word_vectors(bible_slice.targets[:10], bible_tokenizer, tmp_path / "x.vec",
                           eos_token="end of line")


def test_aligned_vectors_undo_a_rotation_and_place_the_new_words():
    from tf_outheads.data import align_word_vectors

    rng = np.random.default_rng(0)
    reference = rng.normal(size=(40, 6))
    rotation, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    words = [f"w{i}" for i in range(40)]
    # The other training: 30 of the reference's words and 5 of its own, rotated.
    extra = rng.normal(size=(5, 6))
    other_words = words[10:] + [f"new{i}" for i in range(5)]
    other = np.concatenate([reference[10:], extra]) @ rotation.T
    out_words, out_vectors, report = align_word_vectors(words, reference, other_words, other)
    assert out_words == words + [f"new{i}" for i in range(5)]
    np.testing.assert_allclose(out_vectors[:40], reference, atol=1e-5)
    np.testing.assert_allclose(out_vectors[40:], extra, atol=1e-4)  # the rotation undone
    assert report == {"shared": 30, "added": 5, "cosine": 1.0}
    with pytest.raises(ValueError, match="Only 2 words are in both"):
        align_word_vectors(words[:2], reference[:2], words[:2], reference[:2])


def test_written_word_vectors_read_back(tmp_path):
    from tf_outheads.data import write_word_vectors

    vectors = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    write_word_vectors(tmp_path / "v.vec", ["a", "▁b", "c"], vectors)
    words, read = load_word_vectors(str(tmp_path / "v.vec"))
    assert words == ["a", "▁b", "c"]
    np.testing.assert_array_equal(read, vectors)
