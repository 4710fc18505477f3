"""Training: compile settings, callbacks (dev BLEU, limits), the fit path."""

from tf_outheads.training.callbacks import BleuCallback
from tf_outheads.training.callbacks import StepLimit
from tf_outheads.training.callbacks import TimeLimit
from tf_outheads.training.fit import compile_for_translation
from tf_outheads.training.fit import translation_callbacks
from tf_outheads.training.head_loss import HeadLossMixin
from tf_outheads.training.optimizers import LazyAdam
from tf_outheads.training.schedules import InverseSquareRootSchedule

__all__ = ["BleuCallback", "HeadLossMixin", "InverseSquareRootSchedule", "LazyAdam", "StepLimit",
           "TimeLimit", "compile_for_translation", "translation_callbacks"]
