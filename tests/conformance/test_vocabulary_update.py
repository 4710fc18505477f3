"""A vocabulary update moves every piece-indexed table of every head in every model:
kept pieces keep their rows, and a sentence of kept pieces scores as under the parent."""

import numpy as np
import pytest
from keras import ops

from tf_outheads.data import WordPairs
from tf_outheads.layers import HEADS, ContinuousOutputHead
from tf_outheads.models.weight_transfer import NEW_PIECE_BIAS, piece_tables, transfer_weights
from tf_outheads_zoo.model_config import MODEL_TYPES

PARENT = (23, 19)  # source, target pieces
CHILD = (27, 22)


def _map(child_size, parent_size, seed, merge=True):
    """Child id → parent id: the four special pieces fixed, the parent's other pieces
    at shuffled ids (merge: all of them; else two thirds, the rest dropped), new pieces
    (−1) in the other slots."""
    rng = np.random.default_rng(seed)
    mapping = np.full(child_size, -1)
    mapping[:4] = np.arange(4)
    kept = rng.permutation(np.arange(4, parent_size))
    if not merge:
        kept = kept[:(2 * len(kept)) // 3]
    slots = rng.permutation(np.arange(4, child_size))[:len(kept)]
    mapping[slots] = kept
    return mapping


def _build(model_type, head, sizes, shared_private=None, seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    section = MODEL_TYPES[model_type]
    model = section.model_class()(*sizes, **section.small, head=head,
                                  rewe={"hidden_dim": 4}, shared_private=shared_private)
    for layer in model.target_vector_layers():
        layer.set_target_vectors(np.random.default_rng(seed).normal(size=(sizes[1], 8)))
    return model


def _pairs(sizes):
    n = 12
    return WordPairs(np.arange(4, 4 + n), np.arange(4, 4 + n)[::-1], np.arange(n) % 3, *sizes)


def _child_pairs(parent_pairs, maps):
    return parent_pairs.remapped(*maps, [str(i) for i in range(CHILD[0])],
                                 [str(i) for i in range(CHILD[1])])


def _spec(head):
    if issubclass(HEADS[head], ContinuousOutputHead):
        return {"class_name": head, "config": {"output_dim": 8}}
    return head


@pytest.mark.parametrize("merge", [True, False], ids=["merge", "replace"])
@pytest.mark.parametrize("shared", [False, True], ids=["embeddings", "shared-private"])
@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
@pytest.mark.parametrize("head", sorted(HEADS))
def test_kept_pieces_keep_their_rows_and_their_scores(head, model_type, shared, merge):
    maps = (_map(CHILD[0], PARENT[0], 1, merge), _map(CHILD[1], PARENT[1], 2, merge))
    parent_pairs = _pairs(PARENT) if shared else None
    sp = (lambda pairs: {"pairs": pairs, "sharing_ratios": (0.9, 0.7, 0.5)}) if shared else (
        lambda pairs: None)
    parent = _build(model_type, _spec(head), PARENT, sp(parent_pairs), seed=0)
    child = _build(model_type, _spec(head), CHILD,
                   sp(_child_pairs(parent_pairs, maps) if shared else None), seed=5)
    report = transfer_weights(parent, child, *maps)
    assert report["copied"] > 0
    # Every table: kept rows are the parent's; a new piece's output bias is NEW_PIECE_BIAS.
    for old, new in zip(piece_tables(parent), piece_tables(child)):
        mapping = maps[0 if new.side == "source" else 1]
        kept = np.flatnonzero(mapping >= 0)
        np.testing.assert_allclose(new.read()[kept], old.read()[mapping[kept]], atol=1e-6,
                                   err_msg=new.name)
        if new.role == "output_bias":
            np.testing.assert_array_equal(new.read()[mapping < 0], NEW_PIECE_BIAS)
    if not merge:  # the dropped pieces' probability is gone: other scores
        return
    # Merged: a sentence of kept pieces, in each model's own ids, scores the same.
    rng = np.random.default_rng(3)
    child_source = rng.choice(np.flatnonzero(maps[0] >= 4), (2, 6))
    child_target = rng.choice(np.flatnonzero(maps[1] >= 4), (2, 5))
    child_target[:, 0] = 2  # <s>
    x_child = {"source_ids": child_source.astype("int32"),
               "target_in": child_target.astype("int32")}
    x_parent = {"source_ids": maps[0][child_source].astype("int32"),
                "target_in": maps[1][child_target].astype("int32")}
    out_parent, out_child = parent(x_parent), child(x_child)
    if issubclass(HEADS[head], ContinuousOutputHead):  # vectors, not scores
        np.testing.assert_allclose(out_child, out_parent, rtol=1e-5, atol=1e-5)
        return
    gold_child = np.roll(child_target, -1, axis=1)
    gold_child[:, -1] = 3
    log_p_parent = ops.take_along_axis(ops.log_softmax(out_parent, axis=-1),
                                       maps[1][gold_child][..., None], axis=-1)
    log_p_child = ops.take_along_axis(ops.log_softmax(out_child, axis=-1),
                                      gold_child[..., None], axis=-1)
    np.testing.assert_allclose(log_p_child, log_p_parent, rtol=1e-5, atol=1e-5)


def test_a_head_that_hides_a_piece_indexed_variable_is_named():
    parent = _build("lstm", "softmax", PARENT)
    child = _build("lstm", "softmax", CHILD)
    child.head.piece_variables = lambda: []  # a custom head that forgot to declare them
    parent.head.piece_variables = lambda: []
    with pytest.raises(ValueError, match=r"kernel \(22, .*the parent has shape \(19, .*"
                                         "piece_variables"):
        transfer_weights(parent, child, _map(CHILD[0], PARENT[0], 1),
                         _map(CHILD[1], PARENT[1], 2))
