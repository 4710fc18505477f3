"""Learning-rate schedules: the Transformer's inverse-square-root warm-up."""

import numbers

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.registry import register_schedule
from tf_outheads.validation import positive_int


@register_schedule("inverse_sqrt")
@export
class InverseSquareRootSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then decay with the inverse square root of the step.

    Formula (Vaswani et al. 2017, Eq. 3, with a `scale` factor as in
    tensor2tensor's `learning_rate_constant`):
    ```
    lr(n) = scale · d_model^-0.5 · min(n^-0.5, n · warmup_steps^-1.5)
    ```
    `n` is the 1-based number of the update: Keras calls a schedule with the
    optimizer's `iterations` (0 for the first update), and the schedule
    evaluates the formula at `iterations + 1`, so the first update has a
    non-zero rate and the peak, `scale · (d_model · warmup_steps)^-0.5`, is
    reached at update `warmup_steps`. With `d_model = 512` and
    `warmup_steps = 4000` the peak is about 7.0e-4.

    Args:
        model_dim: int, d_model of the model.
        warmup_steps: int, updates of the linear warm-up. Defaults to 4000
            (the paper).
        scale: float > 0, multiplies every rate. Defaults to 1.0 (the paper).
        name: str or `None`. Defaults to `None`.

    Example:
    ```python
    import keras
    from tf_outheads.training import InverseSquareRootSchedule
    schedule = InverseSquareRootSchedule(model_dim=512, warmup_steps=4000)
    optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    ```

    References:
        Vaswani et al. 2017, "Attention is all you need", §5.3, Eq. 3.
    """

    def __init__(self, model_dim, warmup_steps=4000, scale=1.0, name=None):
        super().__init__()
        self.model_dim = positive_int("model_dim", model_dim)
        self.warmup_steps = positive_int("warmup_steps", warmup_steps)
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not scale > 0:
            raise ValueError(f"`scale` must be a positive float. Received: scale={scale!r}")
        self.scale = float(scale)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0  # the update's 1-based number
        warmup = float(self.warmup_steps)
        factor = ops.minimum(ops.rsqrt(step), step * warmup ** -1.5)
        return (self.scale * self.model_dim ** -0.5) * factor

    def get_config(self):
        return {"model_dim": self.model_dim, "warmup_steps": self.warmup_steps,
                "scale": self.scale, "name": self.name}


__all__ = ["InverseSquareRootSchedule"]
