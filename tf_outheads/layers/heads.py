"""Categorical output heads: the plain softmax layer and weight tying.

Every head implements the output-head contract of ``docs/architecture.md``:

- ``call(h)`` → logits ``(..., V)`` in float32, what the training loss consumes;
- ``logits_for(h, candidate_ids)`` → logits over a subset of the vocabulary only,
  so that sampled training projects only the candidate rows of the output weights;
- ``inference_cache()`` → tensors that depend only on the weights, computed once
  per model and reused at every decoding step;
- ``scores(h_t, cache)`` → per-word log-probabilities ``(B, V)`` for decoding.

A categorical head is described by three pieces, which subclasses provide:
``project_hidden(h)`` (the decoder state as seen by the output layer),
``output_weights_for(ids)`` (the output embedding rows of some words) and
``output_bias``. Everything else is shared in :class:`CategoricalHead`.
"""

import inspect
import math
import numbers

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.layers.linear_scores import LinearScores, fold, to_numpy
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.ops.quantize import (ACTIVATIONS, QUANTIZATION_MODES, int8_matmul,
                                      quantize_int8)
from tf_outheads.registry import HEADS, register_head


def target_embedding_argument(embedding):
    """The `embedding=` argument of a head that reuses the target embedding.

    Accepts the layer itself or its serialized config (standalone
    deserialization) and refuses anything without `input_dim`/`output_dim`.
    """
    if isinstance(embedding, dict):
        embedding = keras.saving.deserialize_keras_object(embedding)
    if not hasattr(embedding, "input_dim") or not hasattr(embedding, "output_dim"):
        raise ValueError(
            "`embedding` must be a keras.layers.Embedding (the target input "
            f"embedding). Received: embedding={embedding!r}"
        )
    return embedding


class CategoricalHead(keras.layers.Layer):
    """Base class of heads whose logits are ``project_hidden(h) · Wᵀ + b``.

    Subclasses define ``vocabulary_size``, ``project_hidden``,
    ``output_weights_for`` and (optionally) ``output_bias``; this class derives
    the full contract (``call``, ``logits_for``, ``inference_cache``,
    ``scores``) from them, so every head is computed the same way in training,
    sampled training and decoding.
    """

    # Heads that reuse the target input embedding take it as `embedding=`.
    uses_target_embedding = False
    # Which of Pappas et al. (2018) Eq. 8–10, 16 counts this head's capacity.
    capacity_equation = "parameters of the head"

    # Inference in int8 (`quantize_inference`): None, or "int8"; and its activations.
    inference_quantization = None
    inference_activations = "dynamic"

    def quantize_inference(self, mode="int8", activations="dynamic"):
        """Score with int8 output weights from now on (inference only).

        The output kernel of `inference_cache()` becomes int8 with one float32
        scale per word (`tf_outheads.ops.quantize.quantize_int8`: symmetric,
        per channel), and `scores` and `call` multiply the decoder state, quantized
        per row when the product runs, in integers (`int8_matmul`). The weights
        themselves stay float: a joint head's E′ (or a shared-private table) is
        computed in float and quantized as a whole, once per cache. Training a
        quantized head is not supported (`logits_for`, the sampled-softmax path,
        stays float). `Seq2SeqModel.quantize("int8")` calls this.

        Args:
            mode: `"int8"`, or `None` to go back to float32. Defaults to `"int8"`.
            activations: `"dynamic"` (the decoder state quantized per row, an
                integer product) or `"float"` (int8 weights turned back into
                floats for a float product). Defaults to `"dynamic"`.
        """
        if mode not in QUANTIZATION_MODES:
            raise ValueError(f"`mode` must be one of {QUANTIZATION_MODES}. "
                             f"Received: mode={mode!r}")
        if activations not in ACTIVATIONS:
            raise ValueError(f"`activations` must be one of {ACTIVATIONS}. "
                             f"Received: activations={activations!r}")
        self.inference_quantization = mode
        self.inference_activations = activations

    def default_loss(self, label_smoothing=0.0):
        """The loss a categorical head trains with unless told otherwise: the masked
        token cross-entropy (`MaskedSequenceCrossEntropy`), with `label_smoothing`."""
        return MaskedSequenceCrossEntropy(label_smoothing=label_smoothing)

    def project_hidden(self, h):
        """Decoder output as seen by the output layer: ``(..., d_h) → (..., d_o)``."""
        return h

    def output_weights(self):
        """All output embedding rows, ``(V, d_o)``."""
        raise NotImplementedError

    def output_weights_for(self, candidate_ids):
        """Output embedding rows of ``candidate_ids`` only, ``(..., K, d_o)``."""
        return ops.take(self.output_weights(), candidate_ids, axis=0)

    @property
    def output_bias(self):
        """Per-word bias ``(V,)``, or ``None``."""
        return None

    def hidden_affine(self):
        """`project_hidden` as an affine map, for `linear_scores`: `None` (the identity),
        or `(kernel (d_h, d_o), bias (d_o,) or None)` as numpy.

        Raises:
            ValueError: naming why, where `project_hidden` is not affine.
        """
        return None

    def linear_scores(self):
        """The head as one linear output layer (`LinearScores`), for engines that end
        the decoder with one (CTranslate2 export).

        `scores(h)` is `log_softmax(project_hidden(h) · E′ᵀ + b)`; with an affine
        `project_hidden` (`hidden_affine`) the two products fold into one matrix
        (`tf_outheads.layers.linear_scores.fold`), so the map is exact for every
        search. The weights are the float ones, whatever `quantize_inference` says.

        Raises:
            ValueError: naming why, where `project_hidden` is not affine (a joint
                head's context projection with a nonlinearity).
        """
        if not self.built:
            raise ValueError(f"Build the head before exporting it: {self.name}")
        affine = self.hidden_affine()
        bias = None if self.output_bias is None else to_numpy(self.output_bias)
        weight, bias = fold(to_numpy(self.output_weights()), bias, affine)
        note = ("log_softmax(h·E′ᵀ + b)" if affine is None
                else "log_softmax(h·(E′·P)ᵀ + E′·b_p + b): the head's hidden projection P folded")
        return LinearScores(weight, bias, exact=True, note=f"{type(self).__name__}: {note}")

    def piece_variables(self):
        """``[(variable, axis, role)]``: this head's own variables indexed by target piece
        along ``axis`` (``role`` ``"rows"`` or ``"output_bias"``), which a vocabulary
        update moves row by row (`tf_outheads.models.weight_transfer`). Tables the head
        reads from elsewhere (a tied embedding) belong to their own layer."""
        bias = self.output_bias
        return [] if bias is None else [(bias, 0, "output_bias")]

    def call(self, h):
        if self.inference_quantization is not None:
            return self._cached_logits(self.project_hidden(h), self.inference_cache())
        weights = self.output_weights()
        logits = ops.matmul(self.project_hidden(h), ops.transpose(weights))
        return self._add_bias(logits, self.output_bias)

    @staticmethod
    def _add_bias(logits, bias):
        """`logits + bias` in float32: softmax and losses run in float32 whatever the
        compute dtype. The bias (a float32 variable, not autocast) is added after the
        cast, as `scores` adds it, so training and decoding see the same logits under
        a mixed policy (added in bfloat16, a bias of ~10 was off by up to 0.03)."""
        logits = ops.cast(logits, "float32")
        if bias is not None:
            logits = logits + ops.cast(bias, "float32")
        return logits

    def logits_for(self, h, candidate_ids):
        """Logits of the candidate words only.

        Args:
            h: float tensor `(..., d_h)`, decoder outputs.
            candidate_ids: int tensor, either `(K,)` (one candidate set shared
                by every position, as in Pappas et al. 2018 §3.2) or
                `h.shape[:-1] + (K,)` (a candidate set per position).

        Returns:
            float32 tensor `h.shape[:-1] + (K,)`; column `k` equals column
            `candidate_ids[..., k]` of `call(h)`.
        """
        projected = self.project_hidden(h)
        weights = self.output_weights_for(candidate_ids)
        if len(candidate_ids.shape) == 1:
            logits = ops.matmul(projected, ops.transpose(weights))  # (..., K)
        else:
            logits = ops.einsum("...d,...kd->...k", projected, weights)
        bias = None
        if self.output_bias is not None:
            bias = ops.take(self.output_bias, candidate_ids, axis=0)
        return self._add_bias(logits, bias)

    def inference_cache(self):
        """Weight-only tensors reused at every decoding step.

        Returns:
            dict with `"output_kernel"` `(d_o, V)` — the output weights already
            transposed, so a step is one plain matmul (transposing `(V, d_o)` at
            every step made greedy decoding 0.77× a hand-written loop) — and
            `"output_bias"` `(V,)` (zeros when the head has no bias). A decoder
            (or an exported graph) computes them once per model, not per step.
            With `quantize_inference("int8")`: the kernel int8 and
            `"output_scale"` `(V,)` float32, its per-word scales.
        """
        kernel = ops.transpose(self.output_weights())
        bias = self.output_bias
        if bias is None:
            bias = ops.zeros((self.vocabulary_size,), dtype=kernel.dtype)
        if self.inference_quantization == "int8":
            # int8 (d_o, V) and one scale per word (`quantize_inference`).
            kernel, scale = quantize_int8(kernel, axis=0)
            return {"output_kernel": kernel, "output_scale": scale, "output_bias": bias}
        return {"output_kernel": kernel, "output_bias": bias}

    def scores(self, h_t, cache=None):
        """Log-probabilities of every word for one decoding step.

        Args:
            h_t: float tensor `(B, d_h)`.
            cache: the dict from `inference_cache()`; computed here if `None`.

        Returns:
            float32 tensor `(B, V)` of log-softmax scores.
        """
        if cache is None:
            cache = self.inference_cache()
        return ops.log_softmax(self._cached_logits(self.project_hidden(h_t), cache), axis=-1)

    def _cached_logits(self, projected, cache):
        """Float32 logits of `projected (..., d_o)` from an `inference_cache()`: a
        float product, or an int8 one where the cache holds `"output_scale"`."""
        if "output_scale" in cache:
            logits = int8_matmul(projected, cache["output_kernel"], cache["output_scale"],
                                 activations=self.inference_activations)
        else:
            logits = ops.matmul(projected, ops.cast(cache["output_kernel"], projected.dtype))
        return ops.cast(logits, "float32") + ops.cast(cache["output_bias"], "float32")

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.vocabulary_size,)

    def output_capacity(self):
        """The output layer's own parameters, as Pappas et al. (2018) count them.

        A tied or joint head reuses the target embedding; its capacity is what
        it adds on top (Eq. 8 softmax ``|V|·d_h + |V|``, Eq. 9 tying ``|V|``,
        Eq. 10 bilinear ``d·d_h + |V|``, Eq. 16 joint ``d·d_j + d_j·d_h + |V|``).

        Returns:
            dict with `"equation"` (str), `"terms"` (list of
            `(weight path, shape)`) and `"parameters"` (int, their total).

        Raises:
            ValueError: if the head is not built.
        """
        if not self.built:
            raise ValueError(f"Build the head before asking for its capacity: {self.name}")
        embedding = getattr(self, "embedding", None)
        # Every variable of the embedding it reuses (one table, or the
        # sub-matrices of a shared-private embedding).
        shared = {id(w) for w in embedding.weights} if embedding is not None else set()
        terms = []
        for weight in self.weights:
            if id(weight) in shared:
                continue
            path = getattr(weight, "path", weight.name)
            terms.append((path.split("/", 1)[-1], tuple(int(d) for d in weight.shape)))
        return {
            "equation": self.capacity_equation,
            "terms": terms,
            "parameters": sum(math.prod(shape) for _, shape in terms),
        }


@register_head("softmax")
@export
class SoftmaxHead(CategoricalHead):
    """The untied softmax output layer: ``logits = h · Wᵀ + b``.

    The output weights are stored as a `(V, d_h)` matrix of word rows (like an
    embedding table), so `logits_for` gathers rows and its gradient is sparse.

    Args:
        vocabulary_size: int. Number of target words `V`.
        use_bias: bool. Whether to add a per-word bias. Defaults to `True`.
        kernel_initializer: initializer of the `(V, d_h)` output weights.
            Defaults to `"glorot_uniform"`.
        bias_initializer: initializer of the bias. Defaults to `"zeros"`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        h: float tensor `(..., d_h)`.

    Example:
    ```python
    import numpy as np
    from tf_outheads import SoftmaxHead
    head = SoftmaxHead(vocabulary_size=100)
    logits = head(np.zeros((2, 5, 16), "float32"))  # (2, 5, 100)
    ```

    References:
        Luong et al. 2015, Eq. 6 (the softmax output layer every paper here
        compares against).
    """

    capacity_equation = "Eq. 8, |V|·d_h + |V|"

    def __init__(
        self,
        vocabulary_size,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        # numbers.Integral: numpy ints (e.g. from a vocabulary array) are ints too.
        if (
            isinstance(vocabulary_size, bool)
            or not isinstance(vocabulary_size, numbers.Integral)
            or vocabulary_size < 1
        ):
            raise ValueError(
                "`vocabulary_size` must be a positive int. "
                f"Received: vocabulary_size={vocabulary_size!r}"
            )
        self.vocabulary_size = int(vocabulary_size)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.vocabulary_size, input_shape[-1]),
            initializer=self.kernel_initializer,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(self.vocabulary_size,),
                initializer=self.bias_initializer,
                # Read as float32 inside `call` too (no float16/bfloat16 rounding
                # under a mixed policy): it is added to float32 logits.
                autocast=False,
            )

    def output_weights(self):
        return ops.cast(self.kernel, self.compute_dtype)

    def output_weights_for(self, candidate_ids):
        return ops.cast(ops.take(self.kernel, candidate_ids, axis=0), self.compute_dtype)

    @property
    def output_bias(self):
        return self.bias

    def piece_variables(self):
        return [(self.kernel, 0, "rows")] + super().piece_variables()

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@register_head("tied")
@export
class TiedSoftmaxHead(CategoricalHead):
    """Weight tying: the target input embedding is the output weight matrix.

    ``logits = P(h) · Eᵀ + b`` with `E` the `(V, d)` table of the
    `keras.layers.Embedding` passed in (the same variable, not a copy) and `P`
    an optional linear projection `d_h → d`, needed when the decoder size
    differs from the embedding size (Press & Wolf 2017, §4).

    Args:
        embedding: `keras.layers.Embedding`. The target input embedding.
        projection: bool or `None`. Whether to project `h` to the embedding
            size first; `None` projects only when `d_h != d`. Defaults to `None`.
        use_bias: bool. Per-word output bias. Defaults to `True`.
        bias_initializer: Defaults to `"zeros"`.
        **kwargs: passed to `keras.layers.Layer`.

    Example:
    ```python
    import keras, numpy as np
    from tf_outheads import TiedSoftmaxHead
    embedding = keras.layers.Embedding(100, 16)
    embedding.build((None,))
    head = TiedSoftmaxHead(embedding)
    logits = head(np.zeros((2, 5, 32), "float32"))  # projected 32 → 16
    ```

    References:
        Press & Wolf 2017; Inan et al. 2017; Pappas et al. 2018, Eq. 5 and 18.
    """

    uses_target_embedding = True
    capacity_equation = "Eq. 9, |V| (+ d_h·d with a projection)"

    def __init__(
        self,
        embedding,
        projection=None,
        use_bias=True,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        embedding = target_embedding_argument(embedding)
        if projection not in (None, True, False):
            raise ValueError(
                f"`projection` must be None, True or False. Received: projection={projection}"
            )
        self.embedding = embedding
        self.projection = projection
        self.use_bias = use_bias
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.vocabulary_size = embedding.input_dim

    def build(self, input_shape):
        if not self.embedding.built:
            self.embedding.build((None,))
        hidden_dim = input_shape[-1]
        use_projection = self.projection
        if use_projection is None:
            use_projection = hidden_dim != self.embedding.output_dim
        elif not use_projection and hidden_dim != self.embedding.output_dim:
            # Without a projection h is multiplied by Eᵀ directly: sizes must match.
            raise ValueError(
                "`projection=False` needs the decoder output size to equal the "
                "embedding size. "
                f"Received: hidden_dim={hidden_dim}, embedding_dim={self.embedding.output_dim}"
            )
        self.projection_layer = None
        if use_projection:
            self.projection_layer = keras.layers.Dense(
                self.embedding.output_dim,
                use_bias=False,
                dtype=self.dtype_policy,
                name="projection",
            )
            self.projection_layer.build(tuple(input_shape))
        self.bias = None
        if self.use_bias:
            # float32 inside `call` as well: added to float32 logits (see `SoftmaxHead`).
            self.bias = self.add_weight(
                name="bias", shape=(self.vocabulary_size,), initializer=self.bias_initializer,
                autocast=False,
            )

    def project_hidden(self, h):
        if self.projection_layer is not None:
            return self.projection_layer(h)
        return h

    def hidden_affine(self):
        if self.projection_layer is None:
            return None
        return to_numpy(self.projection_layer.kernel), None

    def output_weights(self):
        return ops.cast(self.embedding.embeddings, self.compute_dtype)

    def output_weights_for(self, candidate_ids):
        # Rows through the embedding layer itself: a lookup, never the whole
        # table (a shared-private embedding would otherwise assemble it).
        return ops.cast(self.embedding(candidate_ids), self.compute_dtype)

    @property
    def output_bias(self):
        return self.bias

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embedding": keras.saving.serialize_keras_object(self.embedding),
                "projection": self.projection,
                "use_bias": self.use_bias,
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


def head_to_spec(head):
    """Serializable description of `head` without the embedding it reuses."""
    config = head.get_config()
    config.pop("embedding", None)
    for key in ("trainable", "dtype"):
        config.pop(key, None)
    return {"class_name": keras.saving.get_registered_name(type(head)), "config": config}


def build_head(spec, vocabulary_size, target_embedding, dtype=None):
    """Create a head from a short name, a spec dict, or return a head instance.

    Args:
        spec: `"softmax"`, `"tied"` (or another registered short name), a dict
            `{"class_name": ..., "config": {...}}` as written by `head_to_spec`,
            or a `CategoricalHead` instance (heads that reuse the target
            embedding must be given by name or spec, so the model can pass its
            own embedding in).
        vocabulary_size: int, the target vocabulary size.
        target_embedding: the model's target input embedding layer.
        dtype: dtype policy for the new head.
    """
    if isinstance(spec, keras.layers.Layer):
        if getattr(spec, "uses_target_embedding", False) and spec.embedding is not target_embedding:
            raise ValueError(
                "A head that reuses the target embedding must be given by name or "
                "spec so the model can pass its own embedding. "
                f"Received: head={spec!r}"
            )
        return spec
    if isinstance(spec, str):
        spec = {"class_name": spec, "config": {}}
    if not isinstance(spec, dict) or "class_name" not in spec:
        raise ValueError(
            "`head` must be a registered name "
            f"({sorted(HEADS)}), a spec dict or a head layer. Received: head={spec!r}"
        )
    class_name = spec["class_name"]
    cls = HEADS.get(class_name) or keras.saving.get_registered_object(class_name)
    if cls is None:
        raise ValueError(
            f"Unknown head {class_name!r}; registered: {sorted(HEADS)}. "
            f"Received: head={spec!r}"
        )
    config = dict(spec.get("config", {}))
    params = inspect.signature(cls.__init__).parameters
    if "embedding" in params:
        config["embedding"] = target_embedding
    if "vocabulary_size" in params:
        config.setdefault("vocabulary_size", vocabulary_size)
    if dtype is not None:
        config.setdefault("dtype", dtype)
    config.setdefault("name", "head")
    return cls(**config)
