"""The `model.fit` path for translation models: compile settings and callbacks."""

import os

import keras

from tf_outheads.layers.rewe_head import LOGITS_OUTPUT, REWE_OUTPUT
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.rewe import PAPER_REWE_WEIGHT, ReWELoss
from tf_outheads.training.callbacks import (BestWeights, BleuCallback, EarlyStopping, StepLimit,
                                           TimeLimit)
from tf_outheads.training.optimizers import LazyAdam


def compile_for_translation(model, learning_rate=1e-3, clipnorm=5.0, label_smoothing=0.0,
                            jit_compile=False, optimizer=None, loss=None, rewe_weight=None,
                            rewe_loss="cosine"):
    """Compile `model` with Adam, gradient clipping and the masked sequence loss.

    `optimizer` is a Keras optimizer, or `"adam"` (default) / `"lazy_adam"`
    (`LazyAdam`: sparse gradients of sampled training update only their rows),
    built with `learning_rate` and `clipnorm`.

    `loss` replaces the default `MaskedSequenceCrossEntropy(label_smoothing)`,
    e.g. `SampledSoftmaxLoss(fraction=0.05)` (which has its own `label_smoothing`;
    giving both is refused).

    A model with a ReWE head (`model.rewe`, Jauregi Unanue et al. 2019) is
    compiled with two outputs: `loss` (or the default) for `"logits"` and
    `ReWELoss(rewe_loss)` for `"rewe"`, weighted 1 and `rewe_weight` (λ of
    Eq. 7; `None`: the paper's 20). `rewe_loss` is `"cosine"` (the paper's
    CEL), `"mse"` or a loss object. ReWE cannot be combined with a sampled
    softmax `loss`.

    `jit_compile` defaults to `False`: on CPU, XLA ran this library's LSTM
    model about 3× slower than graph mode (benchmarks/throughput.py); on a GPU
    try `True`.
    """
    if optimizer is None or optimizer == "adam":
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate, clipnorm=clipnorm)
    elif optimizer == "lazy_adam":
        optimizer = LazyAdam(learning_rate=learning_rate, clipnorm=clipnorm)
    if loss is None:
        loss = MaskedSequenceCrossEntropy(label_smoothing=label_smoothing)
    elif label_smoothing:
        raise ValueError("Give label smoothing to the loss itself when passing `loss`. "
                         f"Received: loss={loss!r}, label_smoothing={label_smoothing}")
    loss_weights = None
    if getattr(model, "rewe", None) is not None:
        if getattr(loss, "needs_hidden_states", False):
            raise ValueError(
                "Sampled softmax and ReWE cannot be combined: give a ReWE model a "
                "full-softmax `loss` (or none), or build it without `rewe`. "
                f"Received: loss={loss!r}, rewe_weight={rewe_weight!r}")
        if isinstance(rewe_loss, str):
            rewe_loss = ReWELoss(rewe_loss)
        loss = {LOGITS_OUTPUT: loss, REWE_OUTPUT: rewe_loss}
        weight = PAPER_REWE_WEIGHT if rewe_weight is None else float(rewe_weight)
        loss_weights = {LOGITS_OUTPUT: 1.0, REWE_OUTPUT: weight}
    elif rewe_weight is not None:
        raise ValueError("`rewe_weight` weights the loss of a ReWE head, and this model has "
                         f"none (build it with `rewe=`). Received: rewe_weight={rewe_weight!r}")
    model.compile(
        optimizer=optimizer,
        loss=loss,
        loss_weights=loss_weights,
        jit_compile=jit_compile,
    )
    return model


def translation_callbacks(run_dir, dev_sources=None, dev_references=None,
                          source_tokenizer=None, target_tokenizer=None, patience=None,
                          max_minutes=None, max_steps=None, decode_options=None,
                          bleu_every_n_steps=None, chief=True):
    """The standard callbacks, in the order that lets each see the previous one's logs.

    dev BLEU (writes `val_bleu`) → early stopping on dev BLEU → best weights
    (`run_dir/checkpoints/best.weights.h5`, written atomically: `BestWeights`)
    → TensorBoard (`run_dir/logs`) → CSV log → optional wall-clock / step
    limits. Resuming an interrupted run is the trainer's job
    (`tf_outheads.training.fit(..., backup_dir=...)`: mid-epoch, with the
    data position), not a callback's. With `chief=False` (the other workers
    of a multi-worker job) nothing is written to `run_dir`.

    Returns:
        `(callbacks, bleu_callback)`; `bleu_callback` is `None` without a dev set.
    """
    callbacks = []
    bleu = None
    monitor, mode = "val_loss", "min"
    if dev_sources is not None:
        bleu = BleuCallback(dev_sources, dev_references, source_tokenizer, target_tokenizer,
                            every_n_steps=bleu_every_n_steps,
                            output_dir=run_dir if chief else None,
                            **(decode_options or {}))
        callbacks.append(bleu)
        monitor, mode = "val_bleu", "max"
    if patience:
        callbacks.append(EarlyStopping(
            monitor=monitor, mode=mode, patience=patience, verbose=1))
    callbacks.append(BestWeights(os.path.join(run_dir, "checkpoints", "best.weights.h5"),
                                 monitor=monitor, mode=mode, chief=chief))
    if chief:
        callbacks.append(keras.callbacks.TensorBoard(os.path.join(run_dir, "logs"),
                                                     update_freq=50))
        callbacks.append(keras.callbacks.CSVLogger(os.path.join(run_dir, "history.csv"),
                                                   append=True))
    if max_minutes:
        callbacks.append(TimeLimit(max_minutes))
    if max_steps:
        callbacks.append(StepLimit(max_steps))
    return callbacks, bleu
