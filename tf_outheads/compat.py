"""Every use of Keras internals in tf_outheads, in one place.

Keras 3 keeps a few things this library needs out of its public API. They are
imported or called here and nowhere else, so that a Keras upgrade has one module
to check, and `tests/test_compat.py` fails loudly, naming the piece, when one of
them moves or changes behaviour. The versions this was written against are the
ones `setup.cfg` pins (Keras 3.15).

- `set_keras_mask(tensor, mask)`: the mask `keras.losses.Loss.__call__` reads
  from the values `Loss.call` returns. The per-token losses of this library
  set it so that the `"sum_over_batch_size"` reduction of a standalone call
  (`loss(y_true, y_pred)`) is the mean over non-padding tokens, not over padded
  slots. Keras 3.15 has no public setter for that mask.
- `symbolic_build(model, data_batch)`: what `model.fit` does before its first
  step under a `tf.distribute` strategy (`Trainer._symbolic_build`): builds
  every layer, the compiled metrics and the optimizer's inputs from one batch,
  without running a step. `tf_outheads.training.Trainer` builds the model this
  way before restoring a backup into it.
- `loss_tracker(model)` and `has_compiled_metrics(model)`: the `Mean` Keras
  logs as `loss` (the objective's term trackers go right after it, as Keras
  orders a multi-output model's), and whether `compile` got metrics (they need
  the head's output, computed for them only then).
- :class:`FirstReplicaBuild`, mixed into the seq2seq models: `model.fit` under
  `MirroredStrategy` (`Trainer._maybe_symbolic_build`) gets the shapes of the
  first batch by reducing the distributed batch with MEAN over the replicas,
  which fails (`AddN ... must have the same size and shape`) whenever the
  replicas' shares differ in size, e.g. an odd number of sentences on 2
  replicas; the override builds from the first replica's share instead.
- `cudnn_lstm(inputs, hidden, cell, kernel, recurrent_kernel, bias)`: Keras' own
  cuDNN call for an LSTM layer over a whole sequence (what `keras.layers.LSTM`
  runs on a GPU), on given weights rather than a layer's; `None` where cuDNN
  cannot run it (no GPU). `tf_outheads.ops.sequence_lstm` uses it.
- `in_xla_context()` (a TensorFlow internal): whether the function being traced
  will be XLA-compiled (`tf.function(jit_compile=True)`, Keras' `jit_compile`,
  the trainer's `jit_compile`), for the ops that need static sizes there (the
  sampled softmax's candidate set).
"""

import contextlib
import gc

import tensorflow as tf
from keras.src.backend import set_keras_mask as _set_keras_mask
from tensorflow.python.ops import control_flow_util as _control_flow_util

__all__ = ["FirstReplicaBuild", "cudnn_lstm", "has_compiled_metrics", "in_xla_context",
           "loss_tracker", "one_garbage_collection", "set_keras_mask", "symbolic_build"]


def cudnn_lstm(inputs, hidden, cell, kernel, recurrent_kernel, bias):
    """`(B, T, H)` outputs of Keras' cuDNN LSTM on these weights, or `None` where it
    cannot run (Keras raises NotImplementedError there: no GPU, no cuDNN)."""
    from keras.src.backend.tensorflow.rnn import lstm as keras_lstm

    try:
        _, outputs, _ = keras_lstm(inputs, hidden, cell, None, kernel, recurrent_kernel, bias,
                                   tf.tanh, tf.sigmoid, return_sequences=True)
    except NotImplementedError:
        return None
    return outputs


def in_xla_context():
    """Whether the graph being traced (or one it is nested in) is XLA-compiled."""
    return bool(_control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def set_keras_mask(tensor, mask):
    """Attach `mask` to `tensor` as the Keras mask `Loss.__call__` reads.

    Args:
        tensor: the per-token losses a `keras.losses.Loss.call` returns.
        mask: bool tensor of the same shape, `True` where a token counts.
    """
    _set_keras_mask(tensor, mask)


def loss_tracker(model):
    """The `keras.metrics.Mean` a compiled model logs as `loss`, or `None`."""
    return getattr(model, "_loss_tracker", None)


def has_compiled_metrics(model):
    """Whether `model.compile` was given `metrics` or `weighted_metrics`."""
    return getattr(model, "_compile_metrics", None) is not None


def symbolic_build(model, data_batch):
    """Build `model`'s layers and compiled metrics from `data_batch` (`(x, y)`).

    What `model.fit` does before its first step under a strategy; no step runs.
    """
    model._symbolic_build(data_batch=data_batch)


@contextlib.contextmanager
def one_garbage_collection():
    """Within the block, `gc.collect()` (which Keras' `Layer.__delattr__` calls once per
    deleted variable) only counts its calls; on leaving, one collection runs if any
    was asked for. Not for blocks that run beside other threads' collections."""
    collect, asked = gc.collect, []
    gc.collect = lambda generation=2: asked.append(generation) or 0
    try:
        yield
    finally:
        gc.collect = collect
        if asked:
            gc.collect()


class FirstReplicaBuild:
    """Mix into a `keras.Model`: `fit` under a strategy builds from the first
    replica's share of the first batch (see the module doc)."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = getattr(self, "_distribute_strategy", None)
        if iterator is not None and strategy is not None:
            for _, _, batches in iterator:  # Keras resets the iterator afterwards
                first = next(batches)
                data_batch = tf.nest.map_structure(
                    lambda value: (strategy.experimental_local_results(value)[0]
                                   if isinstance(value, tf.distribute.DistributedValues)
                                   else value), first)
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
