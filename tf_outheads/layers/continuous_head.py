"""Continuous outputs: the decoder predicts a word *vector*, not a distribution.

Kumar & Tsvetkov (2019) replace the softmax layer by a map from the decoder
state to an m-dimensional vector ê and train it with the von Mises–Fisher
negative log-likelihood of the gold word's pretrained (frozen, unit-norm)
vector e(w) (`tf_outheads.VMFLoss`). The output layer has no `|V|`-sized
parameters; decoding is a nearest-neighbour search over the target table.
"""


import keras
import numpy as np
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.layers.linear_scores import LinearScores, dense_affine, fold, to_numpy
from tf_outheads.losses.vmf import VMFLoss
from tf_outheads.ops.bessel import log_vmf_normalizer
from tf_outheads.registry import register_head
from tf_outheads.validation import positive_int

SCORINGS = ("posterior", "log_likelihood", "cosine")


@register_head("continuous")
@export
class ContinuousOutputHead(keras.layers.Layer):
    """Predicts a target word vector ê ∈ R^m; scores words by the vMF likelihood.

    ``ê = W_2·σ(W_1·h + b_1) + b_2`` with `hidden_units`, or ``ê = W·h + b``
    (Kumar & Tsvetkov use a linear map). The target table `E_t (V, m)` is a
    frozen, L2-normalised weight of the layer (saved with its weights, not in
    its config): `tf_outheads.data.target_embedding_table` builds one from
    word vectors trained on the corpus or loaded from a `.vec` file.

    Decoding scores (`scores`), per word `w` for one step, with κ = ‖ê‖:

    - `"posterior"` (default): `log softmax_w(ê·e(w))` — the vMF likelihoods of
      the vocabulary's vectors normalised over the vocabulary (a uniform
      prior over words): `f(e(w); ê) ∝ exp(ê·e(w))` since `C_m(κ)` does not
      depend on `w`. A distribution over words, so a beam compares
      hypotheses fairly.
    - `"log_likelihood"`: `log C_m(κ) + ê·e(w)`, the vMF log-density of each
      word's vector (Eq. 2 of the VIVO report); not normalised over words.
    - `"cosine"`: `cos(ê, e(w))`.

    All three have the same arg-max: greedy decoding is nearest-neighbour
    decoding (Kumar & Tsvetkov §3) whichever is chosen.

    Args:
        vocabulary_size: int `V`.
        output_dim: int `m`, the size of the word vectors.
        target_vectors: optional `(V, m)` array; rows are L2-normalised here
            (zero rows, e.g. PAD, stay zero). Defaults to `None` (set later
            with `set_target_vectors`, or restored by `load_weights`).
        hidden_units: int or `None`. A hidden layer of this size (with
            `activation`) before the output map. Defaults to `None` (linear).
        activation: hidden-layer activation. Defaults to `"tanh"`.
        scoring: `"posterior"`, `"log_likelihood"` or `"cosine"`. Defaults to
            `"posterior"`.
        kernel_initializer: Defaults to `"glorot_uniform"`.
        **kwargs: passed to `keras.layers.Layer`.

    Example:
    ```python
    import numpy as np
    from tf_outheads import ContinuousOutputHead
    table = np.random.normal(size=(100, 16)).astype("float32")
    head = ContinuousOutputHead(100, 16, target_vectors=table)
    vectors = head(np.zeros((2, 5, 32), "float32"))        # (2, 5, 16)
    scores = head.scores(np.zeros((2, 32), "float32"))     # (2, 100)
    ```

    References:
        Kumar & Tsvetkov 2019, §3–4; the VIVO report, Eq. 1–2.
    """

    uses_target_embedding = False
    # The loss scores the head's output vector against `target_vectors()`.
    capacity_equation = "d_h·m + m (|V|·m frozen target vectors not counted)"

    def __init__(self, vocabulary_size, output_dim, target_vectors=None, hidden_units=None,
                 activation="tanh", scoring="posterior", kernel_initializer="glorot_uniform",
                 **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = positive_int("vocabulary_size", vocabulary_size)
        self.output_dim = positive_int("output_dim", output_dim)
        if hidden_units is not None:
            hidden_units = positive_int("hidden_units", hidden_units)
        if scoring not in SCORINGS:
            raise ValueError(f"`scoring` must be one of {SCORINGS}. Received: scoring={scoring!r}")
        self.hidden_units = hidden_units
        self.activation = keras.activations.get(activation)
        self.scoring = scoring
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._initial_vectors = None
        if target_vectors is not None:
            self._initial_vectors = self._normalised(target_vectors)

    def _normalised(self, vectors):
        vectors = np.asarray(vectors, dtype="float32")
        if vectors.shape != (self.vocabulary_size, self.output_dim):
            raise ValueError(
                f"`target_vectors` must have shape (vocabulary_size, output_dim) = "
                f"({self.vocabulary_size}, {self.output_dim}). "
                f"Received: target_vectors of shape {vectors.shape}")
        if not np.all(np.isfinite(vectors)):
            raise ValueError("`target_vectors` has non-finite values. Received: "
                             f"{int(np.sum(~np.isfinite(vectors)))} non-finite entries")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.where(norms > 0, vectors / np.maximum(norms, 1e-12), 0.0).astype("float32")

    def build(self, input_shape):
        self.hidden_layer = None
        if self.hidden_units:
            self.hidden_layer = keras.layers.Dense(
                self.hidden_units, activation=self.activation,
                kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy,
                name="hidden")
            self.hidden_layer.build(tuple(input_shape))
            input_shape = tuple(input_shape[:-1]) + (self.hidden_units,)
        self.output_layer = keras.layers.Dense(
            self.output_dim, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name="output")
        self.output_layer.build(tuple(input_shape))
        self.target_table = self.add_weight(
            name="target_table", shape=(self.vocabulary_size, self.output_dim),
            initializer="zeros", trainable=False, dtype="float32",
            autocast=False)  # float32 even when read inside a mixed-precision call
        if self._initial_vectors is not None:
            self.target_table.assign(self._initial_vectors)

    # Its table comes from pretrained word vectors (`Seq2SeqModel.target_vector_layers`).
    needs_target_vectors = True

    def set_target_vectors(self, vectors):
        """Replace the target table (rows L2-normalised here)."""
        vectors = self._normalised(vectors)
        if not self.built:
            self._initial_vectors = vectors
        else:
            self.target_table.assign(vectors)

    def default_loss(self, label_smoothing=0.0):
        """The loss this head trains with unless told otherwise: the regularised vMF
        NLL of Kumar & Tsvetkov (2019), with the λ1 = 0.02 and λ2 = 0.1 of their
        regularised losses (the presets' vMF runs), `VMFLoss(norm_penalty=0.02,
        dot_scale=0.1)`. A continuous output has no label smoothing: any other
        value raises `ValueError`."""
        if label_smoothing:
            raise ValueError("A continuous head's vMF loss has no label smoothing. "
                             f"Received: label_smoothing={label_smoothing!r}")
        return VMFLoss(norm_penalty=0.02, dot_scale=0.1)

    def piece_variables(self):
        """`[(variable, axis, role)]` indexed by target piece: its target table, if it
        has its own (see `CategoricalHead.piece_variables`)."""
        table = getattr(self, "target_table", None)
        return [] if table is None else [(table, 0, "rows")]

    def target_vectors(self):
        """The frozen unit-norm target table `(V, m)`, float32."""
        return ops.convert_to_tensor(self.target_table)

    def call(self, h):
        x = h
        if self.hidden_layer is not None:
            x = self.hidden_layer(x)
        return self.output_layer(x)

    @property
    def scores_are_log_probabilities(self):
        """Whether `scores` are log-probabilities (`"posterior"`): forced-decoding scores
        (`tf_outheads.decoding.Scorer`) are then a log-probability, else the search's."""
        return self.scoring == "posterior"

    @property
    def max_step_score(self):
        """Upper bound of one step's `scores` (beam search's early stop); `None`: none."""
        return {"posterior": 0.0, "cosine": 1.0, "log_likelihood": None}[self.scoring]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim,)

    def inference_cache(self):
        """`{"target_kernel": (m, V)}`: the table pre-transposed, once per model."""
        return {"target_kernel": ops.transpose(self.target_vectors())}

    def linear_scores(self):
        """The head as one linear output layer (`LinearScores`), for engines that end the
        decoder with one (CTranslate2 export): `ê = h·K + b` (a hidden layer folded in
        when its activation is linear), then `ê·e(w)` for every word, `(T·Kᵀ) h + T·b`.

        With `scoring="posterior"` the log-softmax of these logits is `scores`
        exactly (every search agrees). With `"cosine"` or `"log_likelihood"` only
        the arg-max is the head's (greedy, nearest-neighbour decoding): `exact` is
        False and the scores an engine reports are not vMF likelihoods.

        Raises:
            ValueError: the hidden layer has a nonlinearity.
        """
        if not self.built:
            raise ValueError(f"Build the head before exporting it: {self.name}")
        owner = f"ContinuousOutputHead {self.name!r}"
        kernel, bias = dense_affine(self.output_layer, owner, "its output layer")
        if self.hidden_layer is not None:
            inner, inner_bias = dense_affine(self.hidden_layer, owner,
                                             f"its hidden layer (hidden_units={self.hidden_units})")
            kernel, bias = fold(kernel.T, bias, (inner, inner_bias))  # ê = h·(K₁K₂) + ...
            kernel = kernel.T
        weight, bias = fold(to_numpy(self.target_table), None, (kernel, bias))
        exact = self.scoring == "posterior"
        note = (f"ContinuousOutputHead: dot products with the unit target table, "
                f"scoring={self.scoring!r}" + ("" if exact else
                                               ": the arg-max (nearest neighbour) only"))
        return LinearScores(weight, bias, exact=exact, note=note)

    def scores(self, h_t, cache=None):
        """Per-word scores `(B, V)` float32 of one decoding step (see the class doc)."""
        predicted = ops.cast(self(h_t), "float32")  # (B, m); builds the layer if needed
        if cache is None:
            cache = self.inference_cache()
        dots = ops.matmul(predicted, cache["target_kernel"])  # (B, V)
        if self.scoring == "posterior":
            return ops.log_softmax(dots, axis=-1)
        kappa = ops.sqrt(ops.sum(ops.square(predicted), axis=-1, keepdims=True))
        if self.scoring == "cosine":
            return dots / ops.maximum(kappa, 1e-12)
        return dots + log_vmf_normalizer(kappa, self.output_dim)

    def output_capacity(self):
        """Trainable output-layer parameters (the frozen table is not capacity)."""
        if not self.built:
            raise ValueError(f"Build the head before asking for its capacity: {self.name}")
        terms = [(getattr(w, "path", w.name).split("/", 1)[-1], tuple(int(d) for d in w.shape))
                 for w in self.trainable_weights]
        return {"equation": self.capacity_equation, "terms": terms,
                "parameters": sum(int(np.prod(shape)) for _, shape in terms)}

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "output_dim": self.output_dim,
            "hidden_units": self.hidden_units,
            "activation": keras.activations.serialize(self.activation),
            "scoring": self.scoring,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config

