"""One training step as TensorFlow runs it: the graphs that `Trainer` calls.

What the step does (steps 1–4 of :mod:`tf_outheads.training.trainer`, whose host
loop calls it):

1. take `accumulation_steps` *global* batches from the dataset's iterator and
   split each into one slice of sentences per replica;
2. on each replica: forward, the compiled loss, gradient of the loss scaled by the
   optimizer (`LossScaleOptimizer` under `mixed_float16`);
3. sum the gradients over replicas and micro-batches, each micro-batch weighted
   by its share of the window's tokens;
4. if the loss is finite (and at most `max_loss`), clip and apply them once; the
   optimizer must not sum them over replicas again
   (:func:`gradients_summed_by_caller`).

:meth:`StepFunctions.train_function` runs `steps_per_execution` such steps in one
call; :meth:`StepFunctions.evaluate_function` computes the loss of one batch.
What runs on the host between steps (callbacks, logs, backups, signals) is the
loop's.
"""

import contextlib
import functools

import keras
import tensorflow as tf

from tf_outheads.losses.objective import count_target_tokens
from tf_outheads.training.strategy import num_workers

__all__ = ["StepFunctions", "batch_fingerprint", "gradients_summed_by_caller", "unpack_batch"]


def _training_outputs(model):
    """A seq2seq model returns what its losses read (`Seq2SeqModel.training_outputs`);
    any other Keras model its outputs."""
    outputs = getattr(model, "training_outputs", None)
    return outputs() if callable(outputs) else contextlib.nullcontext()


def unpack_batch(batch):
    """`(features, labels, sample_weight)` (Keras' unpacking), labels required."""
    features, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
    if labels is None:
        raise ValueError("Training batches must be (features, labels) or (features, labels, "
                         f"sample_weight). Received: a {type(batch).__name__} without labels")
    return features, labels, sample_weight


def batch_fingerprint(batch):
    """An int64 that identifies a batch's contents (its source and target ids).

    Logged for every step (`data_fingerprint`), so the data order of a resumed
    run can be checked against an uninterrupted one.
    """
    total = tf.constant(0, tf.int64)
    for tensor in tf.nest.flatten(batch):
        if tensor.dtype.is_integer:
            flat = tf.reshape(tf.cast(tensor, tf.int64), [-1])
            weights = tf.range(1, tf.size(flat, tf.int64) + 1, dtype=tf.int64) % 65521 + 1
            total = (total * 31 + tf.reduce_sum(flat * weights)) % 2147483647
    return total


def _add_gradients(total, gradient):
    if total is None or gradient is None:
        return gradient if total is None else total
    if isinstance(total, tf.IndexedSlices) and isinstance(gradient, tf.IndexedSlices):
        # Sparse (sampled-softmax) gradients stay sparse: rows concatenated.
        return tf.IndexedSlices(tf.concat([total.values, gradient.values], 0),
                                tf.concat([total.indices, gradient.indices], 0),
                                total.dense_shape)
    return tf.convert_to_tensor(total) + tf.convert_to_tensor(gradient)


def _scale_gradient(gradient, factor):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * tf.cast(factor, gradient.values.dtype),
                                gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(factor, gradient.dtype)


@contextlib.contextmanager
def gradients_summed_by_caller(optimizer):
    """Keras' optimizer all-reduces gradients after clipping them; the trainer
    sums them first, so the optimizer must not sum them again.

    Replaces (on this instance, while tracing) `_all_reduce_sum_gradients` —
    the one step of Keras' TensorFlow optimizer that sums over replicas — by
    the identity. Keras is pinned below 3.16, where this method exists.
    """
    optimizers = [optimizer]
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None:
        optimizers.append(inner)
    for each in optimizers:
        if not hasattr(each, "_all_reduce_sum_gradients"):
            raise RuntimeError(f"{type(each).__name__} has no _all_reduce_sum_gradients: this "
                               "Keras version is not supported by tf_outheads.training.fit")
        each._all_reduce_sum_gradients = list
    try:
        yield
    finally:
        for each in optimizers:
            del each._all_reduce_sum_gradients


class StepFunctions:
    """The graphs of one `Trainer`'s steps, under the model's strategy (see module doc).

    Args:
        model: a compiled `keras.Model`, built and compiled inside
            `strategy.scope()`.
        strategy: the model's `tf.distribute.Strategy`.
        accumulation_steps: int. Global batches per optimizer update.
        per_worker_data: bool. Each worker's dataset yields its own share of the
            global batch (several workers only).
        jit_compile: bool. Compile each replica's forward and backward pass (and,
            with one replica, the update) with XLA.
        max_loss: float or `None`. A step whose loss is above it is not applied.
    """

    def __init__(self, model, strategy, accumulation_steps=1, per_worker_data=False,
                 jit_compile=False, max_loss=None):
        self.model = model
        self.strategy = strategy
        self.accumulation_steps = accumulation_steps
        self.per_worker_data = per_worker_data
        self.jit_compile = jit_compile
        self.max_loss = max_loss

    def _distribute(self, batch, per_worker=False):
        """One slice of sentences of the global `batch` per replica (with `per_worker`:
        of this worker's batch per local replica).

        A batch with fewer sentences than replicas (one long sentence alone in
        its length bucket, the last dev batch) is first completed with copies
        of its first sentence whose labels are all padding: they hold no
        target token, so they add nothing to the loss or the gradients, and no
        replica gets an empty slice.
        """
        replicas = self.strategy.num_replicas_in_sync
        if per_worker:
            replicas //= num_workers(self.strategy)
        if replicas == 1:  # one replica takes the batch (per worker: its own worker's)
            return batch
        features, labels, sample_weight = unpack_batch(batch)
        size = tf.shape(tf.nest.flatten(labels)[0])[0]

        def completed():
            missing = replicas - size

            def complete(tensor, blank=False):
                extra = tf.repeat(tensor[:1], missing, axis=0)
                return tf.concat([tensor, tf.zeros_like(extra) if blank else extra], axis=0)

            blank = functools.partial(complete, blank=True)
            return (tf.nest.map_structure(complete, features),
                    tf.nest.map_structure(blank, labels),
                    None if sample_weight is None else tf.nest.map_structure(blank, sample_weight))

        # The copy is made only for such a batch, not at every step.
        features, labels, sample_weight = tf.cond(
            size < replicas, completed, lambda: (features, labels, sample_weight))
        batch = (features, labels) if sample_weight is None else (features, labels,
                                                                  sample_weight)
        size = tf.maximum(size, replicas)

        def replica_slice(context):
            # Replica ids run worker by worker: a worker's own are consecutive.
            index = context.replica_id_in_sync_group % replicas
            start, end = index * size // replicas, (index + 1) * size // replicas
            return tf.nest.map_structure(lambda tensor: tensor[start:end], batch)

        return self.strategy.experimental_distribute_values_from_function(replica_slice)

    def _forward_backward(self, batch):
        model = self.model
        features, labels, sample_weight = unpack_batch(batch)
        with tf.GradientTape() as tape, _training_outputs(model):
            predictions = model(features, training=True)
            loss = model.compute_loss(x=features, y=labels, y_pred=predictions,
                                      sample_weight=sample_weight, training=True)
            scaled = model.optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        return gradients, tf.cast(loss, tf.float32), count_target_tokens(labels)

    def _apply(self, gradients, window_tokens):
        model = self.model
        present = [index for index, gradient in enumerate(gradients) if gradient is not None]
        if self.strategy.num_replicas_in_sync > 1 and present:
            summed = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [gradients[index] for index in present])
            gradients = list(gradients)
            for index, gradient in zip(present, summed):
                gradients[index] = gradient
        self._update(gradients, window_tokens)

    def _update(self, gradients, window_tokens):
        """The optimizer update of the summed gradients (clipping included)."""
        if self.accumulation_steps > 1:
            gradients = [_scale_gradient(g, 1.0 / tf.maximum(window_tokens, 1.0))
                         for g in gradients]
        self.model.optimizer.apply(gradients, self.model.trainable_variables)

    def _replica_functions(self):
        """`(forward_backward, apply)` as each replica runs them: XLA-compiled with
        `jit_compile` (the update only with one replica: Keras' optimizer merges
        across replicas, which XLA cannot hold)."""
        if not self.jit_compile:
            return self._forward_backward, self._apply
        forward_backward = tf.function(self._forward_backward, jit_compile=True,
                                       reduce_retracing=True)
        if self.strategy.num_replicas_in_sync > 1:
            return forward_backward, self._apply
        return forward_backward, tf.function(self._update, jit_compile=True,
                                             reduce_retracing=True)

    def _accumulated_gradients(self, iterator, forward_backward):
        """Steps 1–3 of the module doc: `(gradients, loss, window_tokens, fingerprint)`
        of the next `accumulation_steps` global batches, the gradients summed over
        replicas and micro-batches, the loss a per-token mean over the window."""
        strategy = self.strategy
        steps = self.accumulation_steps
        gradients, loss, window_tokens = None, 0.0, 0.0
        fingerprint = tf.constant(0, tf.int64)
        for _ in range(steps):
            batch = next(iterator)
            fingerprint = (fingerprint * 31 + batch_fingerprint(batch)) % 2147483647
            shards = self._distribute(batch, per_worker=self.per_worker_data)
            step_gradients, step_loss, tokens = strategy.run(forward_backward,
                                                             args=(shards,))
            global_loss = strategy.reduce(tf.distribute.ReduceOp.SUM, step_loss, axis=None)
            global_tokens = strategy.reduce(tf.distribute.ReduceOp.SUM, tokens, axis=None)
            if steps > 1:
                # Weight each micro-batch by its tokens (divided by the
                # window's total in `_update`): a per-token mean over the window.
                step_gradients = strategy.run(
                    lambda g, n: [_scale_gradient(x, n) for x in g],
                    args=(step_gradients, global_tokens))
            if gradients is None:
                gradients = step_gradients
            else:
                gradients = strategy.run(
                    lambda a, b: [_add_gradients(x, y) for x, y in zip(a, b)],
                    args=(gradients, step_gradients))
            loss += global_loss * global_tokens
            window_tokens += global_tokens
        loss = tf.math.divide_no_nan(loss, window_tokens)
        return gradients, loss, window_tokens, fingerprint

    def _one_step(self, iterator, forward_backward, apply_gradients):
        """One optimizer step: `(loss, window_tokens, applied, fingerprint)`. The
        gradients are applied only if the loss is finite (and at most `max_loss`)."""
        strategy = self.strategy
        gradients, loss, window_tokens, fingerprint = self._accumulated_gradients(
            iterator, forward_backward)
        finite = tf.math.is_finite(loss)
        if self.max_loss is not None:  # diverged: as a non-finite loss
            finite = tf.logical_and(finite, loss <= self.max_loss)

        def apply():
            strategy.run(apply_gradients, args=(gradients, window_tokens))
            return tf.constant(True)

        applied = tf.cond(finite, apply, lambda: tf.constant(False))
        return loss, window_tokens, applied, fingerprint

    def train_function(self, steps_per_execution=1, keep_going_after_nan=False):
        """`train(iterator, n)`: up to `n` optimizer steps in one call; returns the
        number run, and each step's loss, target tokens, applied flag and batch
        fingerprint. Without `keep_going_after_nan` it stops after a non-finite step.

        With `steps_per_execution=1` the graph holds one step and no loop (`n` is
        ignored); otherwise a `tf.while_loop` of up to `n` steps.
        """
        forward_backward, apply_gradients = self._replica_functions()

        def one_step(iterator):
            return self._one_step(iterator, forward_backward, apply_gradients)

        if steps_per_execution == 1:
            def train_function(iterator, n):
                del n  # always one step: no loop in the graph
                return tuple([tf.constant(1)] + [tf.expand_dims(x, 0) for x in one_step(iterator)])

            return tf.function(train_function)

        def train_function(iterator, n):
            arrays = tuple(tf.TensorArray(dtype, size=n) for dtype in
                           (tf.float32, tf.float32, tf.bool, tf.int64))

            def body(i, _, arrays):
                values = one_step(iterator)
                arrays = tuple(array.write(i, value) for array, value in zip(arrays, values))
                return i + 1, tf.logical_or(values[2], keep_going_after_nan), arrays

            count, _, arrays = tf.while_loop(
                lambda i, go, _: tf.logical_and(i < n, go), body,
                (tf.constant(0), tf.constant(True), arrays),
                maximum_iterations=n)
            return (count,) + tuple(array.gather(tf.range(count)) for array in arrays)

        return tf.function(train_function)

    def evaluate_function(self, element_spec):
        """`evaluate(batch)`: `(Σ loss × tokens, tokens)` of one global batch of
        `element_spec`, summed over the replicas (the compiled loss, not training)."""
        strategy = self.strategy
        model = self.model

        def replica_evaluate(batch):
            features, labels, sample_weight = unpack_batch(batch)
            with _training_outputs(model):
                predictions = model(features, training=False)
                loss = model.compute_loss(x=features, y=labels, y_pred=predictions,
                                          sample_weight=sample_weight, training=False)
            tokens = count_target_tokens(labels)
            # Keras divides each replica's mean by the replica count.
            loss = tf.cast(loss, tf.float32) * float(strategy.num_replicas_in_sync)
            return loss * tokens, tokens

        def evaluate_function(batch):
            total, tokens = strategy.run(replica_evaluate, args=(self._distribute(batch),))
            return (strategy.reduce(tf.distribute.ReduceOp.SUM, total, axis=None),
                    strategy.reduce(tf.distribute.ReduceOp.SUM, tokens, axis=None))

        return tf.function(evaluate_function, input_signature=[element_spec])
