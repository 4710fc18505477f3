"""A trained model's pieces, updated for new data: merged or replaced SentencePiece models,
and the map from new piece ids to old ones that moves every piece-indexed table.

OpenNMT-tf (`update_vocab`), OpenNMT-py/eole (`-update_vocab`) and fairseq let a model
go on training with the vocabulary of new data. Here the vocabulary is a SentencePiece
model, so the update is made on the models themselves:

- `"merge"` (:func:`merge_sentencepiece`): the parent's model, with the new data's
  pieces it lacks appended. Every parent piece keeps its id and its score, so the
  parent's text is cut as before; a BPE model's new pieces merge after every old one
  (their order kept), a unigram model's keep their log-probabilities.
- `"replace"`: the new data's model as it is; pieces only the parent had are dropped.

:func:`piece_map` then gives, for each new id, the parent's id of the same piece (or
−1 for a new piece): what `tf_outheads.models.weight_transfer.transfer_weights` moves rows by.
"""

import numpy as np
from sentencepiece import sentencepiece_model_pb2

__all__ = ["UPDATE_MODES", "merge_sentencepiece", "piece_map", "updated_model_proto"]

UPDATE_MODES = ("merge", "replace")
_NORMAL = sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL


def _parse(model_proto):
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_proto)
    return proto


def merge_sentencepiece(old_proto, new_proto):
    """The serialized model with `old_proto`'s pieces, then `new_proto`'s others.

    Args:
        old_proto, new_proto: bytes. Serialized SentencePiece models of the same
            type (`SubwordTokenizer.model_proto`).

    Returns:
        bytes: the merged model. Ids `0 .. |old| − 1` are the old model's pieces in
        their order; the new model's pieces the old one lacks follow, in the new
        model's order. A BPE model's appended pieces score below every old piece, so
        they merge after every old merge; a unigram model's keep their scores.

    Raises:
        ValueError: if the two models are of different types.
    """
    old, new = _parse(old_proto), _parse(new_proto)
    if old.trainer_spec.model_type != new.trainer_spec.model_type:
        name = sentencepiece_model_pb2.TrainerSpec.ModelType.Name
        raise ValueError(
            "A vocabulary merge needs two SentencePiece models of one type. Received: "
            f"{name(old.trainer_spec.model_type)} and {name(new.trainer_spec.model_type)}")
    have = {piece.piece for piece in old.pieces}
    bpe = old.trainer_spec.model_type == sentencepiece_model_pb2.TrainerSpec.BPE
    lowest = min((piece.score for piece in old.pieces if piece.type == _NORMAL), default=0.0)
    added = [piece for piece in new.pieces if piece.type == _NORMAL and piece.piece not in have]
    top = max((piece.score for piece in added), default=0.0)
    for piece in added:
        copy = old.pieces.add()
        copy.CopyFrom(piece)
        if bpe:  # after every old merge, in the new model's order
            copy.score = lowest - 1.0 - (top - piece.score)
    old.trainer_spec.vocab_size = len(old.pieces)
    return old.SerializeToString()


def updated_model_proto(mode, old_proto, new_proto):
    """The model of a vocabulary update `mode` (`UPDATE_MODES`).

    Raises:
        ValueError: naming `mode` if it is not one of `UPDATE_MODES`.
    """
    if mode == "merge":
        return merge_sentencepiece(old_proto, new_proto)
    if mode == "replace":
        return bytes(new_proto)
    raise ValueError(f"`update_vocab` must be one of {UPDATE_MODES}. Received: {mode!r}")


def piece_map(old_tokenizer, new_tokenizer):
    """`(|V_new|,)` int64: for each new id, the old id of the same piece, −1 if new.

    The special pieces (`<pad>`, `<unk>`, `<s>`, `</s>`, ids 0–3 in both) map to
    themselves.

    Example:

    ```python
    old_ids = piece_map(parent_tokenizer, child_tokenizer)
    kept = np.flatnonzero(old_ids >= 0)  # new ids of the pieces the parent had
    ```
    """
    old = {piece: index for index, piece in enumerate(old_tokenizer.vocabulary())}
    return np.array([old.get(piece, -1) for piece in new_tokenizer.vocabulary()], np.int64)
