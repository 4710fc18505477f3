"""Training: compile settings, callbacks (dev BLEU, limits), the fit path."""

from tf_outheads.training.backup import BackupManager
from tf_outheads.training.backup import CheckpointError
from tf_outheads.training.backup import average_checkpoints
from tf_outheads.training.callbacks import BleuCallback
from tf_outheads.training.callbacks import EpochHistory
from tf_outheads.training.callbacks import StepLimit
from tf_outheads.training.callbacks import TimeLimit
from tf_outheads.training.callbacks import stopped_by
from tf_outheads.training.translation import compile_for_translation
from tf_outheads.training.translation import translation_callbacks
from tf_outheads.training.optimizers import LazyAdam
from tf_outheads.training.schedules import InverseSquareRootSchedule
from tf_outheads.training.strategy import make_strategy
from tf_outheads.training.strategy import set_precision
from tf_outheads.training.strategy import split_cpu
from tf_outheads.training.trainer import NonFiniteLossError
from tf_outheads.training.trainer import Trainer
from tf_outheads.training.stopping import TrainingPreempted
from tf_outheads.training.trainer import fit

__all__ = ["BackupManager", "BleuCallback", "CheckpointError", "EpochHistory",
           "InverseSquareRootSchedule", "LazyAdam", "NonFiniteLossError", "StepLimit", "TimeLimit",
           "Trainer", "TrainingPreempted", "average_checkpoints", "compile_for_translation", "fit", "make_strategy",
           "set_precision", "split_cpu", "stopped_by", "translation_callbacks"]
