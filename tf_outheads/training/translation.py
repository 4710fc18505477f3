"""The `model.fit` path for translation models: compile settings and callbacks."""

import os

import keras

from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.objective import HEAD_OUTPUT
from tf_outheads.training.callbacks import (BestWeights, BleuCallback, EarlyStopping,
                                           EpochHistory, StepLimit, TimeLimit)
from tf_outheads.registry import OPTIMIZERS


def compile_for_translation(model, learning_rate=1e-3, clipnorm=5.0, label_smoothing=0.0,
                            jit_compile=False, optimizer=None, loss=None, auxiliary_losses=None,
                            auxiliary_weights=None):
    """Compile `model` with Adam, gradient clipping and the masked sequence loss.

    `optimizer` is a Keras optimizer, or a name of `tf_outheads.registry.OPTIMIZERS`:
    `"adam"` (default), `"lazy_adam"` (`LazyAdam`: sparse gradients of sampled
    training update only their rows); built with `learning_rate` and `clipnorm`.

    `loss` replaces the default, the head's `default_loss(label_smoothing)`
    (categorical heads: `MaskedSequenceCrossEntropy(label_smoothing)`; the
    continuous head: the regularised `VMFLoss`), e.g. `SampledSoftmaxLoss(fraction=0.05)` (which has
    its own `label_smoothing`; giving both is refused).

    Every auxiliary head of the model (`model.auxiliary_heads()`, e.g. the ReWE
    head of Jauregi Unanue et al. 2019) trains with `auxiliary_losses[name]`
    weighted by `auxiliary_weights[name]`; a head missing from either gets its
    own `default_loss()` / `default_weight` (ReWE: `ReWELoss("cosine")`, λ = 20
    of Eq. 7). The weights are Keras' `loss_weights`; the head's loss has weight 1.

    `jit_compile` (Keras' `model.fit` only; `tf_outheads.training.fit` takes
    its own) defaults to `False`: on 2 CPU cores XLA gave this library's LSTM
    0.99–1.01× the graph step's speed through `model.fit` and 0.80× through
    the trainer (benchmarks/docs/training.md); on a GPU, measure (benchmarks/gpu.sh).

    Raises:
        ValueError: `loss` with `label_smoothing`, or an auxiliary loss or
            weight for a head the model does not have (the message lists them).
    """
    if optimizer is None or isinstance(optimizer, str):
        optimizer = OPTIMIZERS.lookup(optimizer or "adam", "optimizer")(
            learning_rate=learning_rate, clipnorm=clipnorm)
    if loss is None:
        head = getattr(model, "head", None)
        loss = (head.default_loss(label_smoothing=label_smoothing)
                if callable(getattr(head, "default_loss", None))
                else MaskedSequenceCrossEntropy(label_smoothing=label_smoothing))
    elif label_smoothing:
        raise ValueError("Give label smoothing to the loss itself when passing `loss`. "
                         f"Received: loss={loss!r}, label_smoothing={label_smoothing}")
    auxiliary_heads = (model.auxiliary_heads()
                       if callable(getattr(model, "auxiliary_heads", None)) else {})
    auxiliary_losses = dict(auxiliary_losses or {})
    auxiliary_weights = dict(auxiliary_weights or {})
    for argument, given in (("auxiliary_losses", auxiliary_losses),
                            ("auxiliary_weights", auxiliary_weights)):
        unknown = sorted(set(given) - set(auxiliary_heads))
        if unknown:
            raise ValueError(
                f"`{argument}` names {unknown}, which this model has no auxiliary head for "
                f"(it has {sorted(auxiliary_heads) or 'none'}; build it with one, e.g. "
                f"`rewe=`). Received: {argument}={given!r}")
    loss_weights = None
    if auxiliary_heads:
        loss = {HEAD_OUTPUT: loss}
        loss_weights = {HEAD_OUTPUT: 1.0}
        for name, head in auxiliary_heads.items():
            loss[name] = auxiliary_losses.get(name) or head.default_loss()
            loss_weights[name] = float(auxiliary_weights.get(name, head.default_weight))
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
    → TensorBoard (`run_dir/logs`) → `history.csv` (`EpochHistory`) → optional wall-clock / step
    limits (a `TimeLimit` is always there: with no budget it keeps the training
    clock, resumes included). Resuming an interrupted run is the trainer's job
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
        callbacks.append(EpochHistory(os.path.join(run_dir, "history.csv")))
    callbacks.append(TimeLimit(max_minutes or None))  # without a budget: the clock only
    if max_steps:
        callbacks.append(StepLimit(max_steps))
    return callbacks, bleu
