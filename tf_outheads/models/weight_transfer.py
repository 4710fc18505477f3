"""Moving a trained model's weights into a model of other pieces (a vocabulary update).

With tied, joint, shared-private and continuous heads one table feeds both the input and
the output side, so a vocabulary update must move *every* table a piece indexes
(OpenNMT-tf needed a fix of its own for shared embeddings, its PR #828). A model's
piece-indexed tables are (`piece_tables`):

- the source and target embeddings (`keras.layers.Embedding`), or both sides of a
  `SharedPrivateEmbedding`, whose rows are assembled from shared and private
  sub-matrices per word pair (`SharedPrivateEmbedding.set_rows` writes whole rows back);
- what each head declares with `piece_variables()`: an untied softmax's kernel and
  bias, a tied or joint head's bias, a continuous or ReWE head's target table.

`transfer_weights(parent, child, source_map, target_map)` copies every other variable
as it is, and every kept piece's rows from the parent's id to the child's. A new piece
keeps what the child's initializers gave it, except its output bias: that is set to
`NEW_PIECE_BIAS`, so that at the start the new pieces carry no probability (e^-30 of a
kept piece's) and the child scores a sentence of kept pieces as its parent did; the
new pieces' embedding rows then train their logits up like any other.
"""

import numpy as np

__all__ = ["NEW_PIECE_BIAS", "PieceTable", "piece_tables", "transfer_weights"]

# The output bias of a piece the parent did not have: e^-30 ≈ 1e-13 of the probability
# of a kept piece of the same score, invisible in float32, and a few hundred Adam steps
# from the others' range through the piece's own embedding row.
NEW_PIECE_BIAS = -30.0
_SIDES = ("source", "target")


class PieceTable:
    """One piece-indexed table of a model: `name`, `side` ("source" / "target"),
    `role` ("rows" / "output_bias"), the `variables` it is stored in, `read()` (the
    rows, pieces on axis 0, numpy) and `write(ids, rows)`."""

    def __init__(self, name, side, variables, read, write, role="rows"):
        self.name, self.side, self.role = name, side, role
        self.variables, self.read, self.write = list(variables), read, write


def _variable_table(name, side, variable, axis=0, role="rows"):
    def read():
        return np.moveaxis(np.asarray(variable.numpy()), axis, 0)

    def write(ids, rows):
        values = read().copy()
        values[ids] = rows
        variable.assign(np.moveaxis(values, 0, axis))

    return PieceTable(name, side, [variable], read, write, role)


def _shared_private_tables(layer):
    """Both sides of a `SharedPrivateEmbedding`, a table each. A pair's shared columns
    belong to both: each side's write sets them from its own rows, which for a pair the
    parent had are the same values on both sides."""
    tables = []
    for side in _SIDES:
        def read(side=side):
            return np.asarray(layer.table(side))

        def write(ids, rows, side=side):
            layer.set_rows({side: (ids, rows)})

        tables.append(PieceTable(f"shared_private/{side}", side, layer.weights, read, write))
    return tables


def piece_tables(model):
    """Every piece-indexed table of a `Seq2SeqModel` (see the module docstring).

    Raises:
        ValueError: if the model is not built.
    """
    if not model.built:
        raise ValueError("Build the model (call it once) before reading its piece tables.")
    tables = []
    if getattr(model, "shared_private", None) is not None:
        tables += _shared_private_tables(model.shared_private)
    else:
        tables.append(_variable_table("source_embedding", "source",
                                      model.source_embedding.embeddings))
        if model.target_embedding is not model.source_embedding:
            tables.append(_variable_table("target_embedding", "target",
                                          model.target_embedding.embeddings))
    heads = {"head": model.head, **model.auxiliary_heads()}
    for name, layer in heads.items():
        for variable, axis, role in getattr(layer, "piece_variables", list)():
            tables.append(_variable_table(f"{name}/{variable.name}", "target", variable,
                                          axis, role))
    return tables


def transfer_weights(parent, child, source_map=None, target_map=None,
                     new_piece_bias=NEW_PIECE_BIAS):
    """Copies `parent`'s weights into `child`, moving piece-indexed rows by the maps.

    Args:
        parent, child: built `Seq2SeqModel`s of one architecture and head; their
            vocabularies may differ.
        source_map, target_map: int arrays `(|V_child|,)` of the side: the parent's
            id of each child piece, −1 for a new one (`tf_outheads.data.piece_map`).
            `None`: the same vocabulary (every row copied).
        new_piece_bias: float. The output bias of new pieces.

    Returns:
        dict: `{"copied": n variables copied as they are, "tables": {name: kept rows}}`.

    Raises:
        ValueError: naming the variable or table whose shape does not fit (another
            architecture, or a head whose piece-indexed variables are not declared by
            its `piece_variables()`).
    """
    parents, childs = piece_tables(parent), piece_tables(child)
    if [t.name for t in parents] != [t.name for t in childs]:
        raise ValueError("The parent's and the child's piece tables differ: "
                         f"{[t.name for t in parents]} and {[t.name for t in childs]}")
    covered = {id(v) for table in parents + childs for v in table.variables}
    theirs = {v.path: v for v in parent.variables if id(v) not in covered}
    copied = 0
    for variable in child.variables:
        # A dropout layer's random state (auto-numbered `seed_generator_N`) is no weight.
        if id(variable) in covered or "seed_generator" in variable.path:
            continue
        saved = theirs.get(variable.path)
        if saved is None or tuple(saved.shape) != tuple(variable.shape):
            raise ValueError(
                f"{variable.path} {tuple(variable.shape)}: the parent has "
                + ("no such variable" if saved is None else f"shape {tuple(saved.shape)}")
                + ". Not the same architecture; or a head keeps a piece-indexed variable "
                "it does not declare in piece_variables().")
        variable.assign(saved.numpy())
        copied += 1
    maps = {"source": source_map, "target": target_map}
    kept = {}
    for old, new in zip(parents, childs):
        rows, mapping = old.read(), maps[new.side]
        size = new.read().shape[0]
        if mapping is None:
            mapping = np.arange(size)
            if rows.shape[0] != size:
                raise ValueError(f"{new.name}: {rows.shape[0]} pieces in the parent, {size} "
                                 f"in the child, and no {new.side}_map")
        mapping = np.asarray(mapping, np.int64)
        if mapping.shape != (size,) or mapping.max(initial=-1) >= rows.shape[0]:
            raise ValueError(f"{new.side}_map must give a parent id (< {rows.shape[0]}) or "
                             f"-1 for each of the child's {size} pieces. Received: shape "
                             f"{mapping.shape}, largest {mapping.max(initial=-1)}")
        ids = np.flatnonzero(mapping >= 0)
        values = rows[mapping[ids]]
        if new.role == "output_bias":
            fresh = np.flatnonzero(mapping < 0)
            ids, values = (np.concatenate([ids, fresh]),
                           np.concatenate([values, np.full(len(fresh), new_piece_bias,
                                                           values.dtype)]))
        new.write(ids, values)
        kept[new.name] = int((mapping >= 0).sum())
    return {"copied": copied, "tables": kept}
