"""The pieces of a run built from its preset: model, loss, optimizer, learning rate,
target vectors; with the name tables the preset's values refer to (`MODEL_TYPES`,
`LOSSES`, `OPTIMIZERS`, `LEARNING_RATE_SCHEDULES`).

A new model type is one class and one entry in `MODEL_TYPES` (with its section of
`tf_outheads_zoo.config`); a new loss, one entry in `LOSSES`.
"""

import os
import time

import keras

from tf_outheads import data as tfo_data
from tf_outheads.losses.embedding_regression import CosineEmbeddingLoss, MSEEmbeddingLoss
from tf_outheads.losses.rewe import PAPER_REWE_WEIGHT, ReWELoss
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.losses.vmf import VMFLoss
from tf_outheads.training.optimizers import LazyAdam
from tf_outheads.training.schedules import InverseSquareRootSchedule
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq

MODEL_TYPES = {"lstm": LSTMSeq2Seq, "transformer": TransformerSeq2Seq}
# `train.learning_rate_schedule["name"]` → schedule class.
LEARNING_RATE_SCHEDULES = {"inverse_sqrt": InverseSquareRootSchedule}
# `train.loss` by name: losses of heads that need their own.
LOSSES = {"vmf": VMFLoss, "cosine": CosineEmbeddingLoss, "mse": MSEEmbeddingLoss}
# `train.optimizer` by name.
OPTIMIZERS = {"adam": keras.optimizers.Adam, "lazy_adam": LazyAdam}


def model_arguments(preset):
    """`(model class, keyword arguments)` of a preset's `model` section: its
    `model_type` picks the class, the other keys are the class's arguments."""
    arguments = dict(preset["model"])
    return MODEL_TYPES[arguments.pop("model_type")], arguments


def build_model(preset, source_vocabulary_size, target_vocabulary_size):
    model_cls, arguments = model_arguments(preset)
    return model_cls(source_vocabulary_size, target_vocabulary_size, **arguments)


def learning_rate(preset):
    """The preset's learning rate: `train.learning_rate`, or its schedule.

    `train.learning_rate_schedule` (optional): `None`, or
    `{"name": "inverse_sqrt", "warmup_steps": 4000, "scale": 1.0}`
    (`tf_outheads.training.InverseSquareRootSchedule`; its `model_dim`
    defaults to the model's `model_dim`, else `hidden_dim`). A schedule
    replaces `train.learning_rate`.
    """
    train_config = preset["train"]
    schedule = train_config.get("learning_rate_schedule")
    if not schedule:
        if train_config.get("learning_rate") is None:
            raise ValueError("train.learning_rate must be a float when there is no "
                             "train.learning_rate_schedule. Received: learning_rate=None")
        return train_config["learning_rate"]
    if not isinstance(schedule, dict) or schedule.get("name") not in LEARNING_RATE_SCHEDULES:
        raise ValueError("train.learning_rate_schedule must be None or {'name': one of "
                         f"{sorted(LEARNING_RATE_SCHEDULES)}, ...options}}. "
                         f"Received: {schedule!r}")
    options = {key: value for key, value in schedule.items() if key != "name"}
    model_config = preset["model"]
    options.setdefault("model_dim", model_config.get("model_dim") or model_config.get("hidden_dim"))
    return LEARNING_RATE_SCHEDULES[schedule["name"]](**options)


def build_optimizer(preset):
    """The preset's Adam (or `LazyAdam`, `train.optimizer: "lazy_adam"`).

    `train` keys: `learning_rate` or `learning_rate_schedule` (see
    `learning_rate`), `adam_beta_2` (`None`: Keras' 0.999; the Transformer's
    0.98), `adam_epsilon` (`None`: Keras' 1e-7; OpenNMT-py and PyTorch 1e-8,
    Vaswani et al. 1e-9), `clipnorm` (each gradient clipped to this norm on
    its own, Keras' `clipnorm`) and `global_clipnorm` (all gradients scaled
    together so that their joint norm is at most this: OpenNMT-py's
    `max_grad_norm`, fairseq's `--clip-norm`). At most one of the two
    clipping keys may be set.
    """
    train_config = preset["train"]
    beta_2, epsilon = train_config.get("adam_beta_2"), train_config.get("adam_epsilon")
    clipnorm, global_clipnorm = train_config.get("clipnorm"), train_config.get("global_clipnorm")
    if clipnorm is not None and global_clipnorm is not None:
        raise ValueError("Set at most one of train.clipnorm (per variable) and "
                         "train.global_clipnorm (joint norm of all gradients). "
                         f"Received: clipnorm={clipnorm!r}, global_clipnorm={global_clipnorm!r}")
    name = train_config.get("optimizer") or "adam"
    if name not in OPTIMIZERS:
        raise ValueError(f"train.optimizer must be one of {sorted(OPTIMIZERS)}. "
                         f"Received: optimizer={name!r}")
    return OPTIMIZERS[name](
        learning_rate=learning_rate(preset),
        beta_2=0.999 if beta_2 is None else beta_2,
        epsilon=1e-7 if epsilon is None else epsilon,
        clipnorm=clipnorm,
        global_clipnorm=global_clipnorm,
    )


def training_loss(train_config):
    """`compile_for_translation` keywords for the preset's losses.

    The output layer's loss (`_output_loss`) and, with `train.rewe`
    (`{"weight": λ, "distance": "cosine" | "mse"}`, Eq. 7 of ReWE), the ReWE
    loss of a model built with `model.rewe`.
    """
    keywords = _output_loss(train_config)
    rewe = train_config.get("rewe")
    if rewe:
        if not isinstance(rewe, dict) or set(rewe) - {"weight", "distance"}:
            raise ValueError("train.rewe must be {'weight': λ, 'distance': 'cosine' or 'mse'} "
                             f"or None. Received: {rewe!r}")
        keywords.update(auxiliary_losses={"rewe": ReWELoss(rewe.get("distance", "cosine"))},
                        auxiliary_weights={"rewe": rewe.get("weight", PAPER_REWE_WEIGHT)})
    return keywords


def _output_loss(train_config):
    """`compile_for_translation` keywords for the preset's loss: full or sampled softmax."""
    named = train_config.get("loss")
    if named:
        if not isinstance(named, dict) or named.get("class_name") not in LOSSES:
            raise ValueError(f"train.loss must be {{'class_name': one of {sorted(LOSSES)}, "
                             f"'config': {{...}}}} or None. Received: {named!r}")
        return {"loss": LOSSES[named["class_name"]](**named.get("config", {}))}
    sampled = train_config.get("sampled_softmax")
    if not sampled:
        return {"label_smoothing": train_config["label_smoothing"]}
    if not isinstance(sampled, dict):
        raise ValueError("train.sampled_softmax must be a dict of SampledSoftmaxLoss options "
                         f"(e.g. {{'fraction': 0.05}}) or None. Received: {sampled!r}")
    return {"loss": SampledSoftmaxLoss(label_smoothing=train_config["label_smoothing"],
                                       seed=train_config["seed"], **sampled)}


def prepare_target_vectors(data_config, train, target_tokenizer, run_dir, seed, log=print):
    """The target table of a continuous head: load `path`, or train FastText once.

    Trained vectors are cached in `run_dir/target_vectors.vec` and reused.
    """
    options = data_config.get("target_vectors") or {}
    path = options.get("path")
    if not path:
        path = os.path.join(run_dir, "target_vectors.vec")
        if not os.path.exists(path):
            start = time.time()
            tfo_data.train_word_vectors(train.targets, target_tokenizer, path,
                                        dim=options.get("dim", 300),
                                        epochs=options.get("epochs", 5), seed=seed)
            log(f"[vectors] trained FastText on {len(train)} target sentences "
                f"in {time.time() - start:.0f} s → {path}")
    words, vectors = tfo_data.load_word_vectors(path)
    table = tfo_data.target_embedding_table(target_tokenizer, words, vectors, seed=seed)
    log(f"[vectors] {path}: {table.counts}")
    return table
