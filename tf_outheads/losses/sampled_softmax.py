"""Sampled softmax: train any categorical head on a subset of the vocabulary.

Both estimators call only the head's `logits_for(h, candidate_ids)`, so an
untied head gathers `K` rows of its weights, a tied head `K` rows of `E`, and
a joint head (Pappas et al. 2018) projects `K` rows of `E` instead of `|V|` —
and every gradient of the output parameters is sparse, on those rows only.

Evaluation (`model.evaluate`, validation during `fit`) and decoding always use
the full softmax: given full logits, :class:`SampledSoftmaxLoss` is the masked
sequence cross-entropy.
"""

import random

import tensorflow as tf
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import sequence_cross_entropy_per_token
from tf_outheads.ops import candidate_sampling
from tf_outheads.registry import register_loss

MODES = ("batch",) + candidate_sampling.SAMPLERS
# Large negative instead of −inf: masked candidates, finite in float32 and XLA.
_MASKED_LOGIT = -1e9


def _check_mode_arguments(mode, fraction, num_sampled, label_smoothing):
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {MODES}. Received: mode={mode!r}")
    if mode == "batch":
        if num_sampled is not None:
            raise ValueError("mode='batch' takes `fraction` (p of Pappas et al. Table 4), "
                             f"not `num_sampled`. Received: num_sampled={num_sampled!r}")
        if fraction is None:
            raise ValueError("mode='batch' needs `fraction` in (0, 1]. Received: fraction=None")
    else:
        if (fraction is None) == (num_sampled is None):
            raise ValueError(
                f"mode={mode!r} takes exactly one of `fraction` and `num_sampled`. "
                f"Received: fraction={fraction!r}, num_sampled={num_sampled!r}")
        if num_sampled is not None and (isinstance(num_sampled, bool)
                                        or not isinstance(num_sampled, int) or num_sampled < 1):
            raise ValueError(f"`num_sampled` must be a positive int. Received: num_sampled={num_sampled!r}")
        if label_smoothing:
            # Smoothing spreads mass over the vocabulary; the importance-sampled
            # normaliser estimates only the softmax's partition function.
            raise ValueError(
                f"label smoothing is only defined for mode='batch' (over the candidate set). "
                f"Received: mode={mode!r}, label_smoothing={label_smoothing}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"`label_smoothing` must be in [0, 1). Received: label_smoothing={label_smoothing}")


def sampled_softmax_per_token(head, hidden, y_true, seed, mode="batch", fraction=None,
                              num_sampled=None, label_smoothing=0.0, unigram_counts=None,
                              distortion=1.0, static_size=False):
    """Per-token sampled-softmax losses `(…)` in float32 (padding not yet masked).

    Args:
        head: a `tf_outheads.layers.heads.CategoricalHead` (softmax, tied, joint...).
        hidden: float tensor `(…, d_h)`, the decoder outputs the head consumes.
        y_true: int tensor `(…)`, gold ids.
        seed: int tensor `(2,)`, stateless seed of this step
            (`tf_outheads.ops.candidate_sampling.step_seed`).
        mode: `"batch"` (Pappas et al. 2018: all targets of the batch + uniform
            negatives, no correction) or a sampler of the standard estimator:
            `"uniform"`, `"log_uniform"`, `"unigram"`.
        fraction: float `p` in `(0, 1]`: the candidate set has `⌈p·|V|⌉` words
            (batch mode), or `⌈p·|V|⌉` negatives are drawn (other modes).
        num_sampled: int `S`, negatives drawn (samplers only; instead of `fraction`).
        label_smoothing: float, batch mode only: `ε` spread uniformly over the
            candidate set (with `p = 1` exactly the full smoothed loss).
        unigram_counts: `(V,)` counts for `"unigram"`.
        distortion: float, exponent of the unigram proposal. Defaults to `1.0`.
        static_size: bool, batch mode: a shape-only set size, for XLA (see
            `tf_outheads.ops.candidate_sampling.batch_candidates`).

    Returns:
        float32 tensor with the shape of `y_true`.

    Formula:
    ```
    batch:    loss_t = −log softmax(s(h_t, C))[y_t],   C = targets(batch) ∪ negatives
    sampler:  loss_t = −log softmax([s(y_t) − log S·Q(y_t), s(w_k) − log S·Q(w_k)]_k)[0]
              w_k ~ Q i.i.d., k = 1..S, columns with w_k = y_t removed
    ```
    """
    _check_mode_arguments(mode, fraction, num_sampled, label_smoothing)
    vocabulary_size = int(head.vocabulary_size)
    y_true = ops.cast(y_true, "int32")
    if mode == "batch":
        num_candidates = candidate_sampling.num_candidates_for(fraction, vocabulary_size)
        candidate_ids, labels = candidate_sampling.batch_candidates(
            y_true, vocabulary_size, num_candidates, seed, static_size=static_size)
        logits = head.logits_for(hidden, candidate_ids)  # (…, K)
        return sequence_cross_entropy_per_token(labels, logits, label_smoothing)

    if num_sampled is None:
        num_sampled = candidate_sampling.num_candidates_for(fraction, vocabulary_size)
    candidate_sampling._check_sampler(mode, vocabulary_size, unigram_counts)
    table = None
    if mode == "unigram":
        table = candidate_sampling.unigram_log_probabilities(unigram_counts, distortion)
    sampled_ids = candidate_sampling.sample_candidates(mode, num_sampled, vocabulary_size, seed,
                                                       table)
    true_logits = head.logits_for(hidden, y_true[..., None])[..., 0]  # (…)
    true_logits -= candidate_sampling.log_expected_count(mode, y_true, num_sampled,
                                                         vocabulary_size, table)
    sampled_logits = head.logits_for(hidden, sampled_ids)  # (…, S)
    sampled_logits -= candidate_sampling.log_expected_count(
        mode, sampled_ids, num_sampled, vocabulary_size, table)
    # Accidental hits: a draw of the gold word is not a negative for that position.
    hits = ops.equal(y_true[..., None], sampled_ids)
    sampled_logits = ops.where(hits, _MASKED_LOGIT, sampled_logits)
    logits = ops.concatenate([true_logits[..., None], sampled_logits], axis=-1)
    return ops.logsumexp(logits, axis=-1) - true_logits


def sampled_softmax_loss(head, hidden, y_true, seed, mode="batch", fraction=None,
                         num_sampled=None, label_smoothing=0.0, unigram_counts=None,
                         distortion=1.0, pad_id=PAD_ID, static_size=False):
    """Mean sampled-softmax loss per non-padding target token (float32 scalar).

    Arguments as :func:`sampled_softmax_per_token`, plus `pad_id` (default 0).

    Example:
    ```python
    import numpy as np, tensorflow as tf
    from tf_outheads import SoftmaxHead, sampled_softmax_loss
    head = SoftmaxHead(1000)
    h = np.random.rand(2, 5, 16).astype("float32")
    y = np.array([[5, 7, 9, 3, 0], [8, 8, 3, 0, 0]])
    loss = sampled_softmax_loss(head, h, y, seed=tf.constant([1, 0]), fraction=0.05)
    ```
    """
    if not head.built:
        head.build(tuple(hidden.shape))
    per_token = sampled_softmax_per_token(
        head, hidden, y_true, seed, mode=mode, fraction=fraction, num_sampled=num_sampled,
        label_smoothing=label_smoothing, unigram_counts=unigram_counts,
        distortion=distortion, static_size=static_size)
    mask = ops.not_equal(ops.cast(y_true, "int32"), pad_id)
    per_token = ops.where(mask, per_token, 0.0)
    return ops.divide_no_nan(ops.sum(per_token), ops.sum(ops.cast(mask, "float32")))


@register_loss("sampled_softmax")
@export
class SampledSoftmaxLoss(MaskedSequenceCrossEntropy):
    """Keras loss for sampled-softmax training of a seq2seq model's head.

    Compile a `Seq2SeqModel` with it and `fit` as usual: in training it reads the
    decoder outputs and the head (`token_losses`, the protocol of
    `tf_outheads.losses.objective`), and only the candidate words are scored;
    in evaluation it is the full masked cross-entropy of the head's logits (same
    label smoothing), so `val_loss` is comparable with a full-softmax model's.

    Two estimators (`mode`):

    - `"batch"` (default) — Pappas et al. (2018) §3.2: one candidate set per batch
      with every distinct target word of the batch plus uniform negatives, `K =
      ⌈p·|V|⌉` in all (`p` = `fraction`, the "sampling percentage" of their
      Table 4). No correction: the objective is the softmax over the set. When
      the batch has more distinct targets than `K`, the set keeps them all (the
      authors' code crashes there) — the step then scores more than `K` words.
    - `"uniform"`, `"log_uniform"`, `"unigram"` — the standard estimator with the
      log-Q correction (Jean et al. 2015; same numbers as
      `tf.nn.sampled_softmax_loss(remove_accidental_hits=True)` given the same
      draws): `S` negatives drawn with replacement from the proposal, shared by
      the batch; the gold word's logit and each draw's logit minus
      `log(S·Q(w))`; a draw equal to a position's gold word is removed there.
      `Σ_k exp(s(w_k))/(S·Q(w_k))` estimates the partition function without
      bias (the loss, a log of it, is biased low by Jensen's inequality and
      consistent as `S` grows).

    Padding (`y_true == pad_id`) contributes nothing. Randomness is stateless:
    the candidates of a step depend on `seed`, the optimizer step and the
    replica, so runs are reproducible and a resumed run draws what the
    uninterrupted one would.

    Args:
        fraction: float `p` in `(0, 1]`. Defaults to `0.25` unless
            `num_sampled` is given.
        mode: `"batch"`, `"uniform"`, `"log_uniform"` or `"unigram"`.
            Defaults to `"batch"`.
        num_sampled: int, negatives per step for the samplers, instead of
            `fraction`. Defaults to `None`.
        label_smoothing: float in `[0, 1)`; batch mode only (uniform over the
            candidates in training, over the vocabulary in evaluation).
            Defaults to `0.0`.
        unigram_counts: list/array of `V` counts for `mode="unigram"` (e.g.
            `tf_outheads.data.target_token_counts`). Defaults to `None`.
        distortion: float, unigram exponent (word2vec uses 0.75). Defaults to `1.0`.
        seed: int or `None`; `None` draws one from Python's `random` (seeded by
            `keras.utils.set_random_seed`). Defaults to `None`.
        pad_id: int. Defaults to `0`.
        reduction, name: as `keras.losses.Loss`.

    Example:
    ```python
    from tf_outheads import SampledSoftmaxLoss, compile_for_translation
    model = ...  # a `tf_outheads.models.Seq2SeqModel` with head="joint", say
    compile_for_translation(model, loss=SampledSoftmaxLoss(fraction=0.05))
    ```

    Formula:
    ```
    loss = Σ_{t: y_t≠pad} −log softmax(s(h_t, C_t))[y_t] / #(y≠pad)
    ```

    References:
        Pappas, Miculicich & Henderson 2018, §3.2, Table 4;
        Jean, Cho, Memisevic & Bengio 2015 (importance-sampled softmax);
        Bengio & Senécal 2008 (the log-Q correction).
    """

    def __init__(self, fraction=None, mode="batch", num_sampled=None, label_smoothing=0.0,
                 unigram_counts=None, distortion=1.0, seed=None, pad_id=PAD_ID,
                 reduction="sum_over_batch_size", name="sampled_softmax", dtype=None):
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, reduction=reduction,
                         name=name, dtype=dtype)
        if fraction is None and num_sampled is None:
            fraction = 0.25
        _check_mode_arguments(mode, fraction, num_sampled, label_smoothing)
        if fraction is not None:
            candidate_sampling.num_candidates_for(fraction, 2)  # validates the range
        if unigram_counts is not None:
            unigram_counts = [float(c) for c in unigram_counts]
            if any(c < 0 for c in unigram_counts):
                raise ValueError("`unigram_counts` must be non-negative. Received a negative count.")
        if mode == "unigram" and unigram_counts is None:
            raise ValueError("mode='unigram' needs `unigram_counts`. Received: unigram_counts=None")
        self.fraction = fraction
        self.mode = mode
        self.num_sampled = num_sampled
        self.unigram_counts = unigram_counts
        self.distortion = distortion
        self.seed = int(seed) if seed is not None else random.randint(0, 2**31 - 1)

    def _per_token_kwargs(self):
        counts = None
        if self.unigram_counts is not None:
            counts = tf.constant(self.unigram_counts, tf.float32)
        return dict(mode=self.mode, fraction=self.fraction, num_sampled=self.num_sampled,
                    label_smoothing=self.label_smoothing, unigram_counts=counts,
                    distortion=self.distortion)

    def token_losses(self, y_true, outputs, head):
        """Per-token losses `(B, T)` in a model's step (`tf_outheads.losses.SequenceLoss`).

        In training, the sampled softmax of `head` on the decoder outputs; the
        draws depend on `seed`, the optimizer step and the replica. In
        evaluation, the full cross-entropy of the head's logits.
        """
        if not outputs.training:
            return super().token_losses(y_true, outputs, head)
        if outputs.hidden is None:
            raise ValueError(
                "A sampled softmax scores rows of the head from the decoder outputs: call "
                "the model inside `with model.training_outputs():` in a custom training "
                "loop. Received: only the head's output")
        replica = 0
        context = tf.distribute.get_replica_context()
        if context is not None:
            replica = context.replica_id_in_sync_group
        seed = candidate_sampling.step_seed(self.seed, outputs.step, replica)
        return sampled_softmax_per_token(
            head, outputs.hidden, ops.cast(y_true, "int32"), seed,
            static_size=outputs.static_size, **self._per_token_kwargs())

    def get_config(self):
        config = super().get_config()  # label_smoothing, pad_id
        config.update({
            "fraction": self.fraction,
            "mode": self.mode,
            "num_sampled": self.num_sampled,
            "unigram_counts": self.unigram_counts,
            "distortion": self.distortion,
            "seed": self.seed,
        })
        return config
