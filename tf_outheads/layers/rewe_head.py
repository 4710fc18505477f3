"""ReWE: a second output that regresses the gold word's embedding (a regulariser).

Jauregi Unanue et al. (2019) add, next to the categorical output layer, a small
network on the same decoder state s_j that predicts the gold word's embedding,

    e_j = ReWE(s_j) = W_2·ReLU(W_1·s_j + b_1) + b_2                    (Eq. 5)

trained with a cosine (or squared-error) loss against e(y_j) (Eq. 6) added to
the NLL with a weight λ (Eq. 7; `tf_outheads.losses.ReWELoss`). At inference
the model ignores e_j: decoding, export and the inference parameter count are
those of the plain model. :class:`ReWEHead` is that network; it also owns
where the gold vectors e(y) come from (`target_vectors()`).

A model that has a ReWE head (`Seq2SeqModel.build_heads(head, rewe)`) lists it
in `auxiliary_heads()` as `"rewe"`; its objective (`tf_outheads.losses.objective`)
runs it on the decoder outputs of training and evaluation steps, for the ReWE
loss, and the model returns only the logits otherwise.
"""


import keras
import numpy as np
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.layers.heads import target_embedding_argument
from tf_outheads.losses.rewe import PAPER_REWE_WEIGHT
from tf_outheads.losses.rewe import ReWELoss
from tf_outheads.validation import positive_int, spec_class_and_config

TARGETS = ("input_embedding", "pretrained")
PREDICTIONS = ("regression", "predicted_word")


@export
class ReWEHead(keras.layers.Layer):
    """Regressing word embeddings (ReWE): `h → e`, Linear → ReLU → Linear (Eq. 5).

    The auxiliary output of Jauregi Unanue et al. (2019): from the decoder
    output `h` (the same `s_j` the categorical head reads) it predicts a vector
    `e` of the word-embedding size, which `tf_outheads.losses.ReWELoss` pulls
    towards the gold word's embedding e(y). It is used in training only.

    Where e(y) comes from (`targets`), read through `target_vectors()`:

    - `"input_embedding"` (default): the model's target input embedding table
      `E (V, m)`, read with a stop-gradient, so the ReWE loss trains the
      decoder and this head, never the table it regresses to (what the
      authors' code does: the decoder's embedding, initialised from fastText).
      The model passes its embedding layer in (`embedding=`); this layer reads
      it but does not own it (its weights are not this layer's weights).
    - `"pretrained"`: a frozen `(V, m)` table of pretrained vectors (e.g. from
      `tf_outheads.data.target_embedding_table`), a non-trainable weight of
      this layer, saved with the model's weights, not its config. Rows are
      used as given (MSE depends on their scale; the cosine does not).

    What the head predicts (`prediction`):

    - `"regression"` (default): Eq. 5.
    - `"predicted_word"`: the contrastive set-up A of the paper's supplementary
      C, "ReWE removed from the architecture": `e = E[argmax logits]`, the
      input embedding of the categorical head's arg-max word (no weights of
      its own; the ReWE loss then trains the rows of E of the predicted words,
      the only path a gradient has). Needs `targets="input_embedding"` and
      the logits (`call(h, logits=...)`).

    Args:
        embedding_dim: int `m`, the size of the target embeddings regressed
            (the paper: 300).
        hidden_dim: int. Width of the ReLU layer (the paper: 200). Defaults to
            `200`.
        targets: `"input_embedding"` or `"pretrained"`. Defaults to
            `"input_embedding"`.
        embedding: `keras.layers.Embedding`, the model's target input
            embedding. Required for `targets="input_embedding"` and
            `prediction="predicted_word"`. Defaults to `None`.
        vocabulary_size: int `V`. Required for `targets="pretrained"` (taken
            from `embedding` otherwise). Defaults to `None`.
        target_vectors: optional `(V, m)` array, the pretrained table
            (`targets="pretrained"`); not part of the config. Defaults to
            `None` (zeros until `set_target_vectors` or `load_weights`).
        prediction: `"regression"` or `"predicted_word"`. Defaults to
            `"regression"`.
        activation: hidden activation. Defaults to `"relu"` (Eq. 5).
        kernel_initializer: Defaults to `"glorot_uniform"`.
        bias_initializer: Defaults to `"zeros"`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        h: float tensor `(..., d_h)`, decoder outputs.
        logits: float tensor `(..., V)`, the categorical head's logits; only
            read with `prediction="predicted_word"`. Defaults to `None`.

    Returns:
        `(..., m)` in the layer's compute dtype.

    Example:
    ```python
    import keras, numpy as np
    from tf_outheads import ReWEHead
    embedding = keras.layers.Embedding(100, 16)
    embedding.build((None,))
    head = ReWEHead(16, hidden_dim=8, embedding=embedding)
    vectors = head(np.zeros((2, 5, 32), "float32"))   # (2, 5, 16)
    table = head.target_vectors()                      # (100, 16), no gradient
    ```

    References:
        Jauregi Unanue, Zare Borzeshi, Esmaili & Piccardi 2019, Eq. 5–7 and
        supplementary A (sizes) and C (contrastive set-ups).
    """

    def __init__(self, embedding_dim, hidden_dim=200, targets="input_embedding",
                 embedding=None, vocabulary_size=None, target_vectors=None,
                 prediction="regression", activation="relu",
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.embedding_dim = positive_int("embedding_dim", embedding_dim)
        self.hidden_dim = positive_int("hidden_dim", hidden_dim)
        if targets not in TARGETS:
            raise ValueError(f"`targets` must be one of {TARGETS}. Received: targets={targets!r}")
        if prediction not in PREDICTIONS:
            raise ValueError(
                f"`prediction` must be one of {PREDICTIONS}. Received: prediction={prediction!r}")
        if prediction == "predicted_word" and targets != "input_embedding":
            # e(argmax p) from a frozen table has no gradient: nothing would train.
            raise ValueError(
                "prediction='predicted_word' (contrastive set-up A) regresses the input "
                "embedding of the predicted word, the only thing it can train: it needs "
                "targets='input_embedding'. "
                f"Received: prediction={prediction!r}, targets={targets!r}")
        needs_embedding = targets == "input_embedding" or prediction == "predicted_word"
        if embedding is not None:
            embedding = target_embedding_argument(embedding)
            if needs_embedding and embedding.output_dim != self.embedding_dim:
                raise ValueError(
                    "The regressed embeddings are the target embedding's rows: "
                    "`embedding_dim` must equal its size. "
                    f"Received: embedding_dim={embedding_dim}, "
                    f"embedding.output_dim={embedding.output_dim}")
        elif needs_embedding:
            raise ValueError(
                f"targets={targets!r} / prediction={prediction!r} read the model's target "
                "input embedding: pass `embedding=` (a keras.layers.Embedding). "
                "Received: embedding=None")
        if vocabulary_size is None and embedding is not None:
            vocabulary_size = embedding.input_dim
        if targets == "pretrained":
            vocabulary_size = positive_int("vocabulary_size", vocabulary_size)
        self.targets = targets
        self.prediction = prediction
        self.vocabulary_size = vocabulary_size
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        # Read, never owned: a closure keeps the embedding out of this layer's
        # weights (the model owns, saves and counts it once).
        self._embedding = (lambda: embedding) if embedding is not None else None
        self._initial_vectors = None
        if target_vectors is not None:
            if targets != "pretrained":
                raise ValueError("`target_vectors` is the table of targets='pretrained'. "
                                 f"Received: targets={targets!r} with target_vectors")
            self._initial_vectors = self._checked(target_vectors)

    # An auxiliary head of a seq2seq model (`tf_outheads.losses.objective`):
    # the loss and weight `compile_for_translation` gives it unless told otherwise.
    default_weight = PAPER_REWE_WEIGHT  # λ of Eq. 7, the paper's main results

    def default_loss(self):
        """`ReWELoss("cosine")`, the paper's CEL (Eq. 6)."""
        return ReWELoss("cosine")

    @property
    def needs_logits(self):
        """Whether `call` reads the categorical logits (`prediction="predicted_word"`)."""
        return self.prediction == "predicted_word"

    @property
    def embedding(self):
        """The target input embedding layer this head reads, or `None`."""
        return self._embedding() if self._embedding is not None else None

    def _checked(self, vectors):
        vectors = np.asarray(vectors, dtype="float32")
        if vectors.shape != (self.vocabulary_size, self.embedding_dim):
            raise ValueError(
                "`target_vectors` must have shape (vocabulary_size, embedding_dim) = "
                f"({self.vocabulary_size}, {self.embedding_dim}). "
                f"Received: target_vectors of shape {vectors.shape}")
        if not np.all(np.isfinite(vectors)):
            raise ValueError("`target_vectors` has non-finite values. Received: "
                             f"{int(np.sum(~np.isfinite(vectors)))} non-finite entries")
        return vectors

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        self.hidden_layer = self.output_layer = None
        if self.prediction == "regression":
            self.hidden_layer = keras.layers.Dense(
                self.hidden_dim, activation=self.activation,
                kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer, dtype=self.dtype_policy, name="hidden")
            self.hidden_layer.build(input_shape)
            self.output_layer = keras.layers.Dense(
                self.embedding_dim, kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer, dtype=self.dtype_policy, name="output")
            self.output_layer.build(input_shape[:-1] + (self.hidden_dim,))
        self.target_table = None
        if self.targets == "pretrained":
            self.target_table = self.add_weight(
                name="target_table", shape=(self.vocabulary_size, self.embedding_dim),
                initializer="zeros", trainable=False, dtype="float32",
                autocast=False)  # float32 even when read inside a mixed-precision call
            if self._initial_vectors is not None:
                self.target_table.assign(self._initial_vectors)
                self._initial_vectors = None

    @property
    def needs_target_vectors(self):
        """Whether it regresses pretrained vectors (`targets="pretrained"`), whose table
        `set_target_vectors` gives it (`Seq2SeqModel.target_vector_layers`)."""
        return self.targets == "pretrained"

    def set_target_vectors(self, vectors):
        """Replace the pretrained table (`targets="pretrained"`), rows as given."""
        if self.targets != "pretrained":
            raise ValueError("Only a head with targets='pretrained' has its own table. "
                             f"Received: targets={self.targets!r}")
        vectors = self._checked(vectors)
        if self.built:
            self.target_table.assign(vectors)
        else:
            self._initial_vectors = vectors

    def piece_variables(self):
        """`[(variable, axis, role)]` indexed by target piece: its target table, if it
        has its own (see `CategoricalHead.piece_variables`)."""
        table = getattr(self, "target_table", None)
        return [] if table is None else [(table, 0, "rows")]

    def target_vectors(self):
        """The gold-vector table `(V, m)` float32 the ReWE loss gathers e(y) from.

        `targets="input_embedding"`: the target embedding under a
        stop-gradient; `"pretrained"`: the frozen table.
        """
        if self.targets == "pretrained":
            if not self.built:
                raise ValueError(f"Build {self.name} before reading its target table.")
            return ops.convert_to_tensor(self.target_table)
        return ops.stop_gradient(ops.cast(self.embedding.embeddings, "float32"))

    def call(self, h, logits=None):
        if self.prediction == "predicted_word":
            if logits is None:
                raise ValueError("prediction='predicted_word' embeds the arg-max word of the "
                                 "categorical logits: call the head with `logits=`. "
                                 "Received: logits=None")
            predicted = ops.argmax(logits, axis=-1)  # (..., ) ids, no gradient
            return ops.cast(self.embedding(predicted), self.compute_dtype)
        return self.output_layer(self.hidden_layer(h))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.embedding_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "embedding_dim": self.embedding_dim,
            "hidden_dim": self.hidden_dim,
            "targets": self.targets,
            "embedding": (keras.saving.serialize_keras_object(self.embedding)
                          if self.embedding is not None else None),
            "vocabulary_size": self.vocabulary_size,
            "prediction": self.prediction,
            "activation": keras.activations.serialize(self.activation),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        })
        return config


def rewe_to_spec(rewe):
    """Serializable description of a ReWE head without the embedding it reads."""
    config = rewe.get_config()
    for key in ("embedding", "trainable", "dtype"):
        config.pop(key, None)
    return {"class_name": keras.saving.get_registered_name(type(rewe)), "config": config}


def build_rewe_head(spec, vocabulary_size, target_embedding, dtype=None):
    """A model's ReWE head from its `rewe=` argument, or `None`.

    Args:
        spec: `None`/`False` (no ReWE head), `True` (the defaults), a config
            dict of :class:`ReWEHead` (`{"hidden_dim": 200, "targets":
            "pretrained"}`), a spec dict `{"class_name": ..., "config": {...}}`
            as written by `rewe_to_spec`, or a `ReWEHead` instance (one that
            reads the target embedding must read this model's).
            `embedding_dim` defaults to the target embedding's size.
        vocabulary_size: int, the target vocabulary size.
        target_embedding: the model's target input embedding layer.
        dtype: dtype policy for the new head.
    """
    if spec is None or spec is False:
        return None
    if isinstance(spec, keras.layers.Layer):
        if not isinstance(spec, ReWEHead):
            raise ValueError(f"`rewe` must be a ReWEHead. Received: rewe={spec!r}")
        if spec.embedding is not None and spec.embedding is not target_embedding:
            raise ValueError(
                "A ReWE head that reads the target embedding must be given as a config "
                "or spec dict, so the model can pass its own embedding. "
                f"Received: rewe={spec!r}")
        return spec
    cls, config = spec_class_and_config(spec, ReWEHead, ("ReWEHead", "rewe"), "rewe",
                                        "ReWE head")
    config.setdefault("embedding_dim", target_embedding.output_dim)
    config["embedding"] = target_embedding
    config["vocabulary_size"] = vocabulary_size
    if dtype is not None:
        config.setdefault("dtype", dtype)
    config.setdefault("name", "rewe")
    return cls(**config)
