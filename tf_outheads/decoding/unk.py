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
"""

import numpy as np

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

_WORD_START = "\u2581"  # "▁", SentencePiece's word-boundary marker
_NOT_WORDS = (PAD_ID, BOS_ID, EOS_ID)


def _source_word(source_pieces, source_ids, position):
    """The text of the source word holding piece `position`."""
    start = position
    while start > 0 and not source_pieces[start].startswith(_WORD_START) \
            and source_ids[start - 1] not in _NOT_WORDS:
        start -= 1
    end = position + 1
    while end < len(source_pieces) and source_ids[end] not in _NOT_WORDS \
            and not source_pieces[end].startswith(_WORD_START):
        end += 1
    return "".join(source_pieces[start:end]).replace(_WORD_START, " ").strip(), start


def replace_unknown_words(ids, source_ids, alignments, source_tokenizer, target_tokenizer,
                          unk_id=UNK_ID):
    """Detokenize outputs, writing the most-attended source word over each `<unk>`.

    Args:
        ids: int array `(batch, T)`: decoder outputs without BOS, as from
            `greedy_search` or `beam_search` (EOS, then `PAD_ID`).
        source_ids: int array `(batch, S)`: the source ids the outputs were
            decoded from (padded with `PAD_ID`).
        alignments: float array `(batch, T, S)`: row `t` is the attention over
            source positions when output `t` was scored (e.g.
            `LSTMSeq2Seq.source_alignments(source_ids, [BOS] + ids[:, :-1])`).
            Padding, `<s>` and `</s>` source positions are never chosen.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s (anything with
            `id_to_piece`, and `decode_to_text` for the target).
        unk_id: int. Defaults to `UNK_ID`.

    Returns:
        list of str, one per row. A row without `<unk>` is exactly
        `target_tokenizer.decode_to_text` of it.

    Raises:
        ValueError: if the shapes do not line up.

    Example:

    ```python
    target_in = np.concatenate([np.full((batch, 1), BOS_ID), ids[:, :-1]], axis=1)
    alignments = model.source_alignments(source_ids, target_in)
    texts = replace_unknown_words(ids, source_ids, alignments, source_tok, target_tok)
    ```
    """
    ids = np.asarray(ids)
    source_ids = np.asarray(source_ids)
    alignments = np.asarray(alignments, dtype=np.float32)
    if ids.ndim != 2 or source_ids.ndim != 2 or alignments.ndim != 3 or \
            alignments.shape[:2] != ids.shape or alignments.shape[0] != source_ids.shape[0] or \
            alignments.shape[2] != source_ids.shape[1]:
        raise ValueError(
            "Expected ids (batch, T), source_ids (batch, S) and alignments (batch, T, S). "
            f"Received: ids {ids.shape}, source_ids {source_ids.shape}, "
            f"alignments {alignments.shape}")
    texts = target_tokenizer.decode_to_text(ids)
    for row in np.flatnonzero((ids == unk_id).any(axis=1)):
        length = ids.shape[1]
        eos = np.flatnonzero(ids[row] == EOS_ID)
        if eos.size:
            length = int(eos[0])
        candidates = ~np.isin(source_ids[row], _NOT_WORDS)
        if not candidates.any():
            continue
        source_pieces = [source_tokenizer.id_to_piece(int(i)) for i in source_ids[row]]
        pieces, last_copied = [], None
        for t in range(length):
            token = int(ids[row, t])
            if token in _NOT_WORDS:
                continue
            if token != unk_id:
                pieces.append(target_tokenizer.id_to_piece(token))
                last_copied = None
                continue
            weights = np.where(candidates, alignments[row, t], -np.inf)
            word, start = _source_word(source_pieces, source_ids[row], int(np.argmax(weights)))
            if start != last_copied:
                pieces.append(_WORD_START + word)
            last_copied = start
        texts[row] = "".join(pieces).replace(_WORD_START, " ").strip()
    return texts


__all__ = ["replace_unknown_words"]
