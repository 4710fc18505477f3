"""The beam-major layout of a search state: `batch * beam_size` rows.

Row `b * beam_size + j` of every tensor of a beam search's state is beam `j`
of sentence `b`: `tile_for_beam` lays a batch out this way before the search,
and `gather_beams` (`reorder_state`, inside `tf_outheads.decoding.beam_search`)
reorders the rows after every step, as the surviving hypotheses pick their
parents.
"""

import tensorflow as tf


def tile_for_beam(state, beam_size):
    """Repeat every row of a nested state `beam_size` times.

    `(batch, ...)` becomes `(batch * beam_size, ...)` with row
    `b * beam_size + j` a copy of row `b`: the layout `beam_search` and
    `gather_beams` use. A model whose step function closes over encoder
    outputs (instead of carrying them in the state) tiles them with this.

    Args:
        state: nested structure (dict / list / tuple) of tensors, each with a
            leading batch dimension.
        beam_size: int, copies of each row.

    Returns:
        The same structure with leading dimension `batch * beam_size`.

    Example:

    ```python
    import tensorflow as tf
    from tf_outheads.decoding import tile_for_beam
    tile_for_beam({"memory": tf.constant([[1.0], [2.0]])}, 3)["memory"]
    # -> [[1.], [1.], [1.], [2.], [2.], [2.]]
    ```
    """
    return tf.nest.map_structure(
        lambda tensor: tf.repeat(tensor, beam_size, axis=0), state
    )


def gather_beams(state, beam_indices, beam_size):
    """Select beams of every sentence from a beam-major nested state.

    Args:
        state: nested structure of tensors with leading dimension
            `batch * beam_size` (row `b * beam_size + j` is beam `j` of
            sentence `b`).
        beam_indices: int32 tensor `(batch, n)`, for every sentence the
            beams (in `[0, beam_size)`) to keep, in the new order. A beam may
            be picked several times.
        beam_size: int, beams per sentence in `state`.

    Returns:
        The same structure with leading dimension `batch * n`: row
        `b * n + i` is row `b * beam_size + beam_indices[b, i]` of `state`.

    Example:

    ```python
    import tensorflow as tf
    from tf_outheads.decoding import gather_beams
    state = tf.constant([10, 11, 20, 21])          # 2 sentences x 2 beams
    gather_beams(state, tf.constant([[1, 1], [1, 0]]), beam_size=2)
    # -> [11, 11, 21, 20]
    ```
    """
    flat_indices = _flat_beam_indices(beam_indices, beam_size)
    return tf.nest.map_structure(
        lambda tensor: tf.gather(tensor, flat_indices, axis=0), state
    )


def _flat_beam_indices(beam_indices, beam_size):
    """`(batch, n)` beams per sentence → `(batch * n,)` rows of the flat state."""
    beam_indices = tf.cast(beam_indices, tf.int32)
    offsets = tf.range(tf.shape(beam_indices)[0]) * beam_size  # (batch,)
    return tf.reshape(beam_indices + offsets[:, tf.newaxis], [-1])


def reorder_state(new_state, old_state, beam_indices, beam_size):
    """`gather_beams` of the entries `step_fn` changed; the others as they are.

    An entry `step_fn` returns unchanged (the very tensor it was given, as the
    encoder memory, its attention keys and mask) has never changed since
    `tile_for_beam` made the `beam_size` rows of each sentence equal, so
    reordering rows within a sentence would copy it for nothing: at beam 8
    that copy was most of the search's own time per step (benchmarks/decode.py).
    """
    new_flat = tf.nest.flatten(new_state)
    old_flat = tf.nest.flatten(old_state)
    if len(new_flat) != len(old_flat):
        tf.nest.assert_same_structure(new_state, old_state)  # raises a clear error
    flat_indices = _flat_beam_indices(beam_indices, beam_size)
    reordered = [new if new is old else tf.gather(new, flat_indices, axis=0)
                 for new, old in zip(new_flat, old_flat)]
    return tf.nest.pack_sequence_as(new_state, reordered)


__all__ = ["gather_beams", "reorder_state", "tile_for_beam"]
