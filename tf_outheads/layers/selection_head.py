"""Neural vocabulary selection (NVS): predict the bag of target pieces from the source.

Domhan et al. (2022, "The Devil is in the Details: On the Pitfalls of Vocabulary
Selection in Neural Machine Translation", Sec. 4) add to the encoder a small
multi-label classifier that predicts which target pieces the translation will
contain; at inference the pieces it predicts with probability above a threshold
are the vocabulary the decoder scores (`tf_outheads.decoding.NeuralSelection`),
instead of an alignment shortlist, which misses the pieces of non-compositional
phrases. With `z_s` the encoder state of source position `s`:

    logit_max:   b = max_s (W·z_s + c)          (Sockeye's default, the paper's)
    state_max:   b = W·(max_s z_s) + c          (one projection per sentence)
    p(v ∈ y | x) = σ(b_v)

trained with a binary cross-entropy on the bag of target pieces
(`tf_outheads.losses.BagOfWordsLoss`), added to the model's loss with a weight
like ReWE's auxiliary head. `logit_max` projects every source position (`S·d·V`
per sentence, as much as the output layer over a target of the same length);
`state_max` pools first and costs `d·V`.

A model with a selection head (`Seq2SeqModel.build_heads(..., selection=...)`)
lists it in `auxiliary_heads()` as `"selection"`; in training and evaluation steps
it returns the encoder memory next to the decoder outputs, and the objective runs
this head on it (`reads_source`).
"""

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.losses.bag_of_words import DEFAULT_SELECTION_WEIGHT, BagOfWordsLoss
from tf_outheads.validation import positive_int, spec_class_and_config

POOLINGS = ("logit_max", "state_max")
# The logit of a padded source position before the max (finite: no NaN in gradients).
_MASKED = -1e9


@export
class VocabularySelectionHead(keras.layers.Layer):
    """Neural vocabulary selection: encoder memory `(B, S, d)` → logits `(B, V)`.

    `σ(logits)[b, v]` is the predicted probability that target piece `v` occurs in
    the translation of source `b` (Domhan et al. 2022, Sec. 4).

    Args:
        vocabulary_size: int `V`, the target vocabulary size.
        pooling: `"logit_max"` (project each source position, then max over
            positions: Sockeye's `--neural-vocab-selection logit_max`) or
            `"state_max"` (max over positions, then one projection). Defaults to
            `"logit_max"`.
        block_gradient: bool. Stop the selection loss's gradient at the encoder
            memory, so it trains this head only and leaves the translation model
            as it would be without it (Sockeye's
            `--neural-vocab-selection-block-loss`). Defaults to `False`.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        memory: float `(B, S, d)`, the encoder's outputs.
        mask: bool `(B, S)`, `True` at source pieces (not padding).

    Returns:
        float32 logits `(B, V)`.
    """

    reads_source = True
    # Its term's weight in `compile_for_translation` (Sockeye's `--bow-task-weight`).
    default_weight = DEFAULT_SELECTION_WEIGHT

    def __init__(self, vocabulary_size, pooling="logit_max", block_gradient=False, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = positive_int("vocabulary_size", vocabulary_size)
        if pooling not in POOLINGS:
            raise ValueError(f"`pooling` must be one of {POOLINGS}. Received: pooling={pooling!r}")
        self.pooling = pooling
        self.block_gradient = bool(block_gradient)
        self.projection = keras.layers.Dense(vocabulary_size, dtype=self.dtype_policy,
                                             name="projection")
        # It takes the source mask as an argument (an LSTM's memory also carries a
        # Keras mask) and returns one row per sentence, unmasked.
        self.supports_masking = True

    def build(self, memory_shape, mask_shape=None):
        self.projection.build(tuple(memory_shape[:-2]) + (memory_shape[-1],))
        self.built = True

    def call(self, memory, mask):
        if self.block_gradient:
            memory = ops.stop_gradient(memory)
        mask = ops.cast(mask, "bool")[:, :, None]
        if self.pooling == "state_max":
            pooled = ops.max(ops.where(mask, memory, ops.cast(_MASKED, memory.dtype)), axis=1)
            # A source of padding only pools to zeros, not to the masking value.
            pooled = ops.where(ops.any(mask, axis=1), pooled, ops.zeros_like(pooled))
            return ops.cast(self.projection(pooled), "float32")
        logits = ops.cast(self.projection(memory), "float32")
        logits = ops.max(ops.where(mask, logits, _MASKED), axis=1)
        return ops.where(ops.any(mask, axis=1), logits, ops.zeros_like(logits))

    def compute_mask(self, memory, mask=None):
        return None

    def default_loss(self):
        """The loss it trains with unless told: `BagOfWordsLoss()`."""
        return BagOfWordsLoss()

    def probabilities(self, memory, mask):
        """`σ(logits)` `(B, V)` float32: each piece's predicted probability of occurring."""
        return ops.sigmoid(self(memory, mask))

    def compute_output_shape(self, memory_shape, mask_shape=None):
        return (memory_shape[0], self.vocabulary_size)

    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary_size": self.vocabulary_size, "pooling": self.pooling,
                       "block_gradient": self.block_gradient})
        return config


def selection_to_spec(selection):
    """Serializable description of a selection head (its config without dtype)."""
    config = selection.get_config()
    for key in ("vocabulary_size", "trainable", "dtype"):
        config.pop(key, None)
    return {"class_name": keras.saving.get_registered_name(type(selection)), "config": config}


def build_selection_head(spec, vocabulary_size, dtype=None):
    """A model's selection head from its `selection=` argument, or `None`.

    Args:
        spec: `None`/`False` (none), `True` (the defaults), a config dict of
            :class:`VocabularySelectionHead` (`{"pooling": "state_max"}`), a spec
            dict `{"class_name": ..., "config": {...}}` as `selection_to_spec`
            writes, or a `VocabularySelectionHead` of `vocabulary_size` pieces.
        vocabulary_size: int, the target vocabulary size.
        dtype: dtype policy for a new head.

    Raises:
        ValueError: naming `selection`, for anything else.
    """
    if spec is None or spec is False:
        return None
    if isinstance(spec, keras.layers.Layer):
        if (not isinstance(spec, VocabularySelectionHead)
                or spec.vocabulary_size != vocabulary_size):
            raise ValueError(f"`selection` must be a VocabularySelectionHead of the target "
                             f"vocabulary ({vocabulary_size} pieces). Received: selection={spec!r}")
        return spec
    cls, config = spec_class_and_config(spec, VocabularySelectionHead,
                                        ("VocabularySelectionHead",), "selection",
                                        "selection head")
    unknown = sorted(set(config) - {"pooling", "block_gradient", "name"})
    if unknown:
        raise ValueError(f"Unknown selection head options {unknown}: it takes `pooling` "
                         f"{POOLINGS} and `block_gradient`. Received: selection={spec!r}")
    config["vocabulary_size"] = vocabulary_size
    if dtype is not None:
        config.setdefault("dtype", dtype)
    config.setdefault("name", "selection")
    return cls(**config)


__all__ = ["POOLINGS", "VocabularySelectionHead", "build_selection_head", "selection_to_spec"]
