"""Optimizers for sampled training: Adam that leaves unsampled rows alone."""

import keras
import tensorflow as tf
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.registry import register_optimizer


# Keras' Adam, as presets name it (OpenNMT-py's and fairseq's optimizer of these models).
register_optimizer("adam", keras.optimizers.Adam,
                   description="Keras' Adam (Kingma & Ba 2015)")


@register_optimizer("lazy_adam")
@export
class LazyAdam(keras.optimizers.Adam):
    """Adam whose sparse gradients update only the rows they touch.

    A sampled softmax (`tf_outheads.SampledSoftmaxLoss`) gives the output
    weights (`SoftmaxHead`'s kernel, the tied or joint head's `E`, the bias) a
    gradient on the candidate rows only, a `tf.IndexedSlices`. Keras' `Adam`
    turns it into a dense `(V, d)` tensor and updates the moments and weights of
    all `|V|` rows at every step — at `|V|` = 128K × 512 that update alone costs
    about as much as the sampled forward and backward pass
    (`benchmarks/sampled.py`). `LazyAdam` updates the moments and weights of the
    touched rows only (duplicate rows summed first), as TensorFlow Addons' and
    OpenNMT-tf's LazyAdam did; dense gradients take Keras' `Adam` path unchanged.

    The difference from Adam: the moments of a row that was not sampled do not
    decay at that step, so its next update uses older moments (rows of rare
    words move less). With every row sampled it is exactly Adam.

    Not compilable with XLA (`tf.unique` has a data-dependent shape): use it
    with `jit_compile=False`, the library's CPU default.

    Args:
        As `keras.optimizers.Adam`; `amsgrad` is not supported.

    Example:
    ```python
    from tf_outheads import LazyAdam, SampledSoftmaxLoss, compile_for_translation
    model = ...  # a `tf_outheads.models.Seq2SeqModel` with head="tied", say
    compile_for_translation(model, optimizer=LazyAdam(1e-3, clipnorm=5.0),
                            loss=SampledSoftmaxLoss(fraction=0.05))
    ```

    References:
        Kingma & Ba 2015 (Adam); TensorFlow Addons `LazyAdam`.
    """

    def __init__(self, *args, amsgrad=False, name="lazy_adam", **kwargs):
        if amsgrad:
            raise ValueError("LazyAdam does not support amsgrad. Received: amsgrad=True")
        super().__init__(*args, amsgrad=False, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        # One row per index: duplicates (a word both looked up and scored) summed.
        indices, positions = tf.unique(gradient.indices)
        values = tf.math.unsorted_segment_sum(gradient.values, positions, tf.shape(indices)[0])
        values = ops.cast(values, variable.dtype)
        lr = ops.cast(learning_rate, variable.dtype)
        local_step = ops.cast(self.iterations + 1, variable.dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, variable.dtype), local_step)
        beta_2_power = ops.power(ops.cast(self.beta_2, variable.dtype), local_step)
        alpha = lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)

        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        m_rows = self.beta_1 * ops.take(m, indices, axis=0) + (1 - self.beta_1) * values
        v_rows = (self.beta_2 * ops.take(v, indices, axis=0)
                  + (1 - self.beta_2) * ops.square(values))
        shape = tf.shape(variable, out_type=indices.dtype)
        self.assign(m, tf.IndexedSlices(m_rows, indices, shape))
        self.assign(v, tf.IndexedSlices(v_rows, indices, shape))
        step = m_rows * alpha / (ops.sqrt(v_rows) + self.epsilon)
        self.assign_sub(variable, tf.IndexedSlices(step, indices, shape))
