"""Unknown-word replacement by the most-attended source word (real Bible pieces)."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tf_outheads.decoding import Translator, replace_unknown_words
from tf_outheads_zoo.lstm import LSTMSeq2Seq

SOURCE = "Y habló Jehová a Moisés en el desierto de Sinaí"
TARGET = "Yahweh spoke to"


def encode(tokenizer, text):
    return [int(i) for i in tokenizer.tokenize(text).numpy()]


def pieces_of(tokenizer, ids):
    return [tokenizer.id_to_piece(i) for i in ids]


def replace(*args, **kwargs):
    """`replace_unknown_words` as a list of Python strings."""
    return [text.decode("utf-8") for text in replace_unknown_words(*args, **kwargs).numpy()]


def one_hot_alignments(positions, source_length):
    """(1, T, S) attention putting all weight on `positions[t]`."""
    alignments = np.zeros((1, len(positions), source_length), np.float32)
    for t, position in enumerate(positions):
        alignments[0, t, position] = 1.0
    return alignments


@pytest.fixture(scope="module")
def sentence(bible_tokenizer):
    source = encode(bible_tokenizer, SOURCE) + [EOS_ID]
    pieces = pieces_of(bible_tokenizer, source[:-1])
    # Positions of the pieces of "Moisés" and "Sinaí" (each may be split).
    starts = [i for i, piece in enumerate(pieces) if piece.startswith("\u2581")]
    words = SOURCE.split()
    assert len(starts) == len(words), pieces
    spans = {word: (starts[k], starts[k + 1] if k + 1 < len(starts) else len(pieces))
             for k, word in enumerate(words)}
    return np.array([source + [PAD_ID, PAD_ID]], np.int32), spans


def test_unk_becomes_the_whole_attended_source_word(bible_tokenizer, sentence):
    source_ids, spans = sentence
    start, end = spans["Sinaí"]
    assert end - start >= 3  # "▁S in a í": the word is several pieces
    target = encode(bible_tokenizer, TARGET)
    ids = np.array([target + [UNK_ID, EOS_ID, PAD_ID]], np.int32)
    # The <unk> attends to a middle piece of "Sinaí": the whole word is copied.
    positions = [0] * len(target) + [start + 1, 0, 0]
    alignments = one_hot_alignments(positions, source_ids.shape[1])
    texts = replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer)
    assert texts == [TARGET + " Sinaí"]
    # Without replacement the same ids decode to SentencePiece's unknown mark.
    assert "\u2047" in bible_tokenizer.decode_to_text(ids)[0]


def test_rows_without_unk_are_plain_detokenization(bible_tokenizer, bible_slice):
    ids = [encode(bible_tokenizer, text)[:12] + [EOS_ID] for text in bible_slice.targets[:4]]
    width = max(map(len, ids))
    ids = np.array([row + [PAD_ID] * (width - len(row)) for row in ids], np.int32)
    source_ids = np.array([[5, 6, EOS_ID]] * 4, np.int32)
    alignments = np.full((4, width, 3), 1 / 3, np.float32)
    texts = replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer)
    assert texts == bible_tokenizer.decode_to_text(ids)


def test_consecutive_unks_on_one_word_copy_it_once(bible_tokenizer, sentence):
    source_ids, spans = sentence
    moses, sinai = spans["Moisés"], spans["Sinaí"]
    ids = np.array([[UNK_ID, UNK_ID, UNK_ID, UNK_ID, EOS_ID]], np.int32)
    alignments = one_hot_alignments([moses[0], moses[0], sinai[0], sinai[1] - 1, 0],
                                    source_ids.shape[1])
    texts = replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer)
    assert texts == ["Moisés Sinaí"]


def test_eos_and_padding_positions_are_never_copied(bible_tokenizer, sentence):
    source_ids, spans = sentence
    eos_position = int(np.flatnonzero(source_ids[0] == EOS_ID)[0])
    alignments = np.zeros((1, 2, source_ids.shape[1]), np.float32)
    alignments[0, 0, eos_position] = 0.6       # most weight on </s>
    alignments[0, 0, eos_position + 1] = 0.3   # then on padding
    alignments[0, 0, spans["Jehová"][0]] = 0.1  # then a real word
    ids = np.array([[UNK_ID, EOS_ID]], np.int32)
    texts = replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer)
    assert texts == ["Jehová"]


def test_shapes_are_checked(bible_tokenizer):
    with pytest.raises(ValueError, match=r"alignments \(1, 2, 4\)"):
        replace_unknown_words(np.zeros((1, 2), np.int32), np.zeros((1, 3), np.int32),
                              np.zeros((1, 2, 4)), bible_tokenizer, bible_tokenizer)


def test_translator_copies_source_words_for_a_model_that_only_says_unk(bible_tokenizer):
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=1, head="softmax")
    bias = np.zeros(bible_tokenizer.vocab_size, np.float32)
    bias[UNK_ID] = 100.0  # every step outputs <unk>, up to the length limit
    model.head.bias.assign(bias)
    sources = [SOURCE, "Dios es amor"]
    plain = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=0)
    assert all(set(text.split()) == {"\u2047"} for text in plain.translate(sources))
    replaced = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=0,
                          replace_unk=True).translate(sources)
    for source, text in zip(sources, replaced):
        assert text and set(text.split()) <= set(source.split()), (source, text)


def test_source_alignments_are_the_decoding_steps_attention(bible_tokenizer, sentence):
    source_ids, _ = sentence
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=2, head="tied")
    target_in = np.array([[BOS_ID] + encode(bible_tokenizer, TARGET)], np.int32)
    alignments = np.asarray(model.source_alignments(source_ids, target_in))
    assert alignments.shape == (1, target_in.shape[1], source_ids.shape[1])
    state = model.initial_decoding_state(source_ids)
    step_fn = model.make_step_fn()
    for t in range(target_in.shape[1]):
        _, state = step_fn(target_in[:, t], state)
        np.testing.assert_allclose(alignments[:, t], state["alignment"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(alignments[..., source_ids[0] == PAD_ID], 0.0)


def test_replace_unk_needs_alignments(bible_tokenizer):
    class NoAttention:
        head = None

    with pytest.raises(ValueError, match="source_alignments"):
        Translator(NoAttention(), bible_tokenizer, bible_tokenizer, replace_unk=True)


def reference_replace(ids, source_ids, alignments, source_tokenizer, target_tokenizer):
    """The former Python/numpy implementation, kept as the reference."""
    word_start, not_words = "\u2581", (PAD_ID, BOS_ID, EOS_ID)

    def source_word(pieces, row_ids, position):
        start = position
        while start > 0 and not pieces[start].startswith(word_start) \
                and row_ids[start - 1] not in not_words:
            start -= 1
        end = position + 1
        while end < len(pieces) and row_ids[end] not in not_words \
                and not pieces[end].startswith(word_start):
            end += 1
        return "".join(pieces[start:end]).replace(word_start, " ").strip(), start

    texts = target_tokenizer.decode_to_text(ids)
    for row in np.flatnonzero((ids == UNK_ID).any(axis=1)):
        length = ids.shape[1]
        eos = np.flatnonzero(ids[row] == EOS_ID)
        if eos.size:
            length = int(eos[0])
        candidates = ~np.isin(source_ids[row], not_words)
        if not candidates.any():
            continue
        source_pieces = [source_tokenizer.id_to_piece(int(i)) for i in source_ids[row]]
        pieces, last_copied = [], None
        for t in range(length):
            token = int(ids[row, t])
            if token in not_words:
                continue
            if token != UNK_ID:
                pieces.append(target_tokenizer.id_to_piece(token))
                last_copied = None
                continue
            weights = np.where(candidates, alignments[row, t], -np.inf)
            word, start = source_word(source_pieces, source_ids[row], int(np.argmax(weights)))
            if start != last_copied:
                pieces.append(word_start + word)
            last_copied = start
        texts[row] = "".join(pieces).replace(word_start, " ").strip()
    return texts


def random_case(tokenizer, sources, seed):
    """Real source sentences; outputs mixing real pieces, <unk>, PAD, BOS, EOS."""
    rng = np.random.default_rng(seed)
    rows = [encode(tokenizer, text)[:14] + [EOS_ID] for text in sources]
    source_ids = np.zeros((len(rows), max(map(len, rows)) + 2), np.int32)
    for index, row in enumerate(rows):
        source_ids[index, :len(row)] = row
    source_ids[-1] = 0
    source_ids[-1, :2] = [BOS_ID, EOS_ID]  # a source without any word
    length = 12
    choices = [UNK_ID] * 6 + [PAD_ID, BOS_ID, EOS_ID] + list(range(4, tokenizer.vocab_size))[:60]
    ids = rng.choice(choices, size=(len(rows), length)).astype(np.int32)
    ids[0, :4] = UNK_ID  # consecutive <unk>
    alignments = rng.random((len(rows), length, source_ids.shape[1])).astype(np.float32)
    alignments[0, 1] = alignments[0, 0]  # two <unk> on the same word
    return ids, source_ids, alignments


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tf_ops_match_the_python_reference(bible_tokenizer, bible_slice, seed):
    sources = bible_slice.sources[10 * seed:10 * seed + 8]
    ids, source_ids, alignments = random_case(bible_tokenizer, sources, seed)
    expected = reference_replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer)
    assert replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer) == expected
    assert any("\u2047" not in text and text != plain for text, plain in
               zip(expected, bible_tokenizer.decode_to_text(ids)))  # something was replaced


def test_runs_in_a_graph_with_unknown_shapes(bible_tokenizer, bible_slice):
    ids, source_ids, alignments = random_case(bible_tokenizer, bible_slice.sources[:5], 3)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32),
                                  tf.TensorSpec([None, None], tf.int32),
                                  tf.TensorSpec([None, None, None], tf.float32)])
    def in_graph(ids, source_ids, alignments):
        return replace_unknown_words(ids, source_ids, alignments, bible_tokenizer,
                                     bible_tokenizer)

    texts = [text.decode("utf-8") for text in in_graph(ids, source_ids, alignments).numpy()]
    assert texts == replace(ids, source_ids, alignments, bible_tokenizer, bible_tokenizer)
    empty = in_graph(np.zeros((0, 3), np.int32), np.zeros((0, 2), np.int32),
                     np.zeros((0, 3, 2), np.float32))
    assert empty.shape == (0,)
