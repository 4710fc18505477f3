"""Unknown-word replacement: copy the most-attended source word over `<unk>`.

A model that outputs `<unk>` (id `UNK_ID`) says "a word I have no entry
for". Luong et al. 2015 ("Addressing the rare word problem in NMT") and
Jean et al. 2015 replace it by the source word the decoder attended to most
when it emitted the `<unk>`; Kumar & Tsvetkov 2019 and the VIVO report
(Table 3, "Unk replacement") do the same for continuous outputs, whose
vocabulary is the target words that have a pretrained vector. Names and
numbers, the usual unknown words, are mostly spelled the same in both
languages.

With subword vocabularies the attended position is a source *piece*; the
whole source word around it is copied (from the piece that starts the word,
marked `▁`, to the piece before the next word), so a name split into pieces
comes over whole. Consecutive `<unk>` tokens attending to the same source
word give that word once.

The replacement is written with TensorFlow ops (SentencePiece's in-graph
`id_to_string`, string joins and segment joins), so the same function runs
eagerly for `Translator` and inside an exported SavedModel
(`tf_outheads.export`); its string work is pinned to the CPU, where the
string kernels live.
"""

import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

_WORD_START = "\u2581"  # "▁", SentencePiece's word-boundary marker
_NOT_WORDS = (PAD_ID, BOS_ID, EOS_ID)
# What Python's `str.strip()` removes: ASCII \t-\r, the separators
# \x1c-\x1f, NEL and every Unicode space/line/paragraph separator (RE2).
_STRIP = r"^[\t-\r\x{1c}-\x{1f}\x{85}\p{Z}]+|[\t-\r\x{1c}-\x{1f}\x{85}\p{Z}]+$"


def _is_any(ids, values):
    return tf.reduce_any(tf.equal(ids[..., tf.newaxis], tf.constant(values, ids.dtype)), axis=-1)


def _as_text(pieces):
    """`"".join(pieces).replace("▁", " ").strip()` on string tensors (last axis joined)."""
    text = tf.strings.reduce_join(pieces, axis=-1)
    text = tf.strings.regex_replace(text, _WORD_START, " ")
    return tf.strings.regex_replace(text, _STRIP, "")


def _check_shapes(ids, source_ids, alignments):
    ids_shape, source_shape, alignments_shape = ids.shape, source_ids.shape, alignments.shape
    compatible = (
        ids_shape.rank == 2 and source_shape.rank == 2 and alignments_shape.rank == 3
        and alignments_shape[:2].is_compatible_with(ids_shape)
        and alignments_shape[:1].is_compatible_with(source_shape[:1])
        and alignments_shape[2:].is_compatible_with(source_shape[1:])
    )
    if not compatible:
        raise ValueError(
            "Expected ids (batch, T), source_ids (batch, S) and alignments (batch, T, S). "
            f"Received: ids {ids_shape}, source_ids {source_shape}, "
            f"alignments {alignments_shape}")


def replace_unknown_words(ids, source_ids, alignments, source_tokenizer, target_tokenizer,
                          unk_id=UNK_ID):
    """Detokenize outputs, writing the most-attended source word over each `<unk>`.

    TensorFlow ops only: runs eagerly and inside `tf.function` / a SavedModel
    (batch and lengths may be unknown there). Per row:

    - the output tokens before the first `EOS_ID` are read, `PAD_ID` and
      `BOS_ID` among them skipped;
    - an `<unk>` becomes the whole source word (all its pieces, from the one
      marked `▁` to the next word) that holds the most-attended source
      piece; `PAD_ID`, `BOS_ID` and `EOS_ID` source positions are never
      chosen;
    - consecutive `<unk>` tokens (skipped tokens between them do not count)
      that attend to the same source word give that word once;
    - text = pieces joined, `▁` → space, stripped (as `str.strip`).

    A row without `<unk>`, or whose source holds no word, is exactly
    `target_tokenizer.detokenize` of it.

    Args:
        ids: int tensor or array `(batch, T)`: decoder outputs without BOS, as
            from `greedy_search` or `beam_search` (EOS, then `PAD_ID`).
        source_ids: int tensor or array `(batch, S)`: the source ids the
            outputs were decoded from (padded with `PAD_ID`).
        alignments: float tensor or array `(batch, T, S)`: row `t` is the
            attention over source positions when output `t` was scored (e.g.
            `LSTMSeq2Seq.source_alignments(source_ids, [BOS] + ids[:, :-1])`).
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s (in-graph
            SentencePiece: piece strings of ids, and `detokenize` for the
            target).
        unk_id: int. Defaults to `UNK_ID`.

    Returns:
        string tensor `(batch,)`, UTF-8.

    Raises:
        ValueError: if the (static) shapes do not line up.

    Example:

    ```python
    target_in = np.concatenate([np.full((batch, 1), BOS_ID), ids[:, :-1]], axis=1)
    alignments = model.source_alignments(source_ids, target_in)
    texts = replace_unknown_words(ids, source_ids, alignments, source_tok, target_tok)
    [text.decode("utf-8") for text in texts.numpy()]
    ```

    References:
        Luong et al. 2015, "Addressing the rare word problem in neural
        machine translation"; Jean et al. 2015, "On using very large target
        vocabulary for neural machine translation", §3.2.
    """
    ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
    source_ids = tf.cast(tf.convert_to_tensor(source_ids), tf.int32)
    alignments = tf.cast(tf.convert_to_tensor(alignments), tf.float32)
    _check_shapes(ids, source_ids, alignments)
    # String kernels exist only on the CPU; pinning them lets the same graph
    # run on a GPU model server.
    with tf.device("/cpu:0"):
        batch_size, source_length = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        plain = target_tokenizer.detokenize(ids)  # (B,)

        # Source words: a word starts at position 0, at a piece marked ▁, and
        # next to a position that is no word (PAD/BOS/EOS).
        source_not_word = _is_any(source_ids, _NOT_WORDS)  # (B, S)
        source_pieces = source_tokenizer.id_to_string(source_ids)  # (B, S)
        marked = tf.equal(tf.strings.substr(source_pieces, 0, len(_WORD_START.encode())),
                          _WORD_START)
        after_not_word = tf.pad(source_not_word[:, :-1], [[0, 0], [1, 0]], constant_values=True)
        boundary = marked | source_not_word | after_not_word
        word_index = tf.cumsum(tf.cast(boundary, tf.int32), axis=1) - 1  # (B, S)
        rows = tf.range(batch_size)[:, tf.newaxis]
        segments = rows * source_length + word_index  # one segment per (row, word)
        words = tf.strings.unsorted_segment_join(
            tf.reshape(source_pieces, [-1]), tf.reshape(segments, [-1]),
            num_segments=batch_size * source_length)
        words = _WORD_START + _as_text(words[:, tf.newaxis])  # (B * S,)

        # The word each output step attended to most.
        candidates = tf.logical_not(source_not_word)  # (B, S)
        weights = tf.where(candidates[:, tf.newaxis, :], alignments, float("-inf"))
        attended = tf.argmax(weights, axis=-1, output_type=tf.int32)  # (B, T)
        attended_word = tf.gather(word_index, attended, batch_dims=1)  # (B, T)
        copied = tf.gather(words, rows * source_length + attended_word)  # (B, T)

        # Output tokens read: before the first EOS, PAD and BOS skipped.
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
        read = before_eos & tf.logical_not(_is_any(ids, _NOT_WORDS))
        is_unk = read & tf.equal(ids, unk_id)
        texts = tf.where(is_unk, copied, target_tokenizer.id_to_string(ids))  # (B, T)

        # An <unk> whose previous read token is an <unk> on the same word adds
        # nothing. Compare each read token with the one read before it.
        read_unk = tf.ragged.boolean_mask(is_unk, read).to_tensor(False)
        read_word = tf.ragged.boolean_mask(attended_word, read).to_tensor(-1)
        repeat = read_unk[:, 1:] & read_unk[:, :-1] & tf.equal(read_word[:, 1:], read_word[:, :-1])
        repeat = tf.pad(repeat, [[0, 0], [1, 0]])
        read_texts = tf.ragged.boolean_mask(texts, read).to_tensor("")
        replaced = _as_text(tf.where(repeat, "", read_texts))  # (B,)

        replace = tf.reduce_any(is_unk, axis=1) & tf.reduce_any(candidates, axis=1)
        return tf.where(replace, replaced, plain)


__all__ = ["replace_unknown_words"]
