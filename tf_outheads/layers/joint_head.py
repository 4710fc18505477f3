"""The structure-aware output layer of Pappas et al. (2018): a joint input-output space.

``logits = σ(E·U + b_u) · σ(V·h + b_v) + b`` (Eq. 14/15), with `E` the target
*input* embedding table (shared, not copied). The two flags of
:class:`JointEmbeddingHead` switch each nonlinear projection off, which gives the
ablations of the paper's Table 3 and, with both off, plain weight tying (Eq. 18).
"""

import numbers

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.layers.heads import CategoricalHead
from tf_outheads.layers.heads import target_embedding_argument
from tf_outheads.layers.linear_scores import dense_affine
from tf_outheads.registry import register_head


def _check_flag(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")


@register_head("joint")
@export
class JointEmbeddingHead(CategoricalHead):
    """Joint input-output embedding head (Pappas et al. 2018, Eq. 14–15).

    The output embedding of word `j` is the target input embedding `e_j`
    mapped to a joint space of size `d_j`, ``e'_j = σ(U·e_jᵀ + b_u)`` (Eq. 12),
    the decoder state is mapped to the same space, ``h'_t = σ(V·h_t + b_v)``
    (Eq. 13), and the logits are ``E'·h'_t + b`` (Eq. 14). `E' = g_out(E)`
    depends only on weights: it is computed once per call (once per training
    step for a whole `(batch, time)` tensor), only for the candidate rows in
    `logits_for` (sampled training), and once per model for decoding through
    `inference_cache()` — never at every decoding step, as the authors' code did.

    The flags select the variants of Table 3:

    | variant | flags | formula | `d_j` |
    | --- | --- | --- | --- |
    | full (Eq. 15) | both `True` | σ(E·W_o)·σ(W_c·h) | `joint_dim` (default `d`) |
    | output structure (Eq. 7a) | `context_structure=False` | σ(E·W)·h | `d_h` |
    | context structure (Eq. 7b) | `output_structure=False` | E·σ(W·h) | `d` |
    | bilinear (Eq. 6) | Eq. 7b with `activation="linear"`, `projection_bias=False` | E·W·h | `d` |
    | weight tying (Eq. 18) | both `False` | E·h | needs `d_h == d` |

    With identity projections (both flags on, `activation="linear"`, identity
    kernels, zero projection biases) the head computes exactly the tied head's
    logits: Eq. 18.

    Args:
        embedding: `keras.layers.Embedding`. The target input embedding `E`
            `(V, d)`; its variable is used, not copied.
        joint_dim: int or `None`. Size `d_j` of the joint space (the capacity
            knob of Eq. 16). Only for the full variant; `None` uses `d`. The
            one-sided variants have a fixed joint size (see the table).
            Defaults to `None`.
        activation: str or callable. The nonlinearity σ of Eq. 12–13.
            Defaults to `"tanh"` (as in the authors' code).
        output_structure: bool. Learn output structure: project `E` with
            `U` (Eq. 12). Defaults to `True`.
        context_structure: bool. Learn context structure: project `h` with
            `V` (Eq. 13). Defaults to `True`.
        use_bias: bool. Per-word output bias `b` (Eq. 14). Defaults to `True`.
        projection_bias: bool. Biases `b_u`, `b_v` of the projections.
            Defaults to `True`.
        kernel_initializer: initializer of `U` and `V`. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer of `b`, `b_u`, `b_v`. Defaults to `"zeros"`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        h: float tensor `(..., d_h)`, decoder outputs.

    Example:

    ```python
    import keras, numpy as np
    from tf_outheads import JointEmbeddingHead
    embedding = keras.layers.Embedding(100, 16)
    embedding.build((None,))
    head = JointEmbeddingHead(embedding, joint_dim=64)
    logits = head(np.zeros((2, 5, 32), "float32"))  # (2, 5, 100)
    ```

    References:
        Pappas, Miculicich & Henderson 2018, "Beyond Weight Tying: Learning
        Joint Input-Output Embeddings for Neural Machine Translation",
        Eq. 6, 7, 12–18 and Table 3.
    """

    uses_target_embedding = True

    def __init__(
        self,
        embedding,
        joint_dim=None,
        activation="tanh",
        output_structure=True,
        context_structure=True,
        use_bias=True,
        projection_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        embedding = target_embedding_argument(embedding)
        for name, value in (
            ("output_structure", output_structure),
            ("context_structure", context_structure),
            ("use_bias", use_bias),
            ("projection_bias", projection_bias),
        ):
            _check_flag(name, value)
        if joint_dim is not None and (
            isinstance(joint_dim, bool)
            or not isinstance(joint_dim, numbers.Integral)
            or joint_dim < 1
        ):
            raise ValueError(
                f"`joint_dim` must be None or a positive int. Received: joint_dim={joint_dim!r}"
            )
        if joint_dim is not None and not (output_structure and context_structure):
            raise ValueError(
                "`joint_dim` sets the joint space of the full variant only; with "
                "one projection the joint size is fixed (d_h for Eq. 7a, d for "
                "Eq. 7b) and with none there is no joint space. Received: "
                f"joint_dim={joint_dim}, output_structure={output_structure}, "
                f"context_structure={context_structure}"
            )
        self.embedding = embedding
        self.joint_dim = None if joint_dim is None else int(joint_dim)
        self.activation = keras.activations.get(activation)
        self.output_structure = output_structure
        self.context_structure = context_structure
        self.use_bias = use_bias
        self.projection_bias = projection_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.vocabulary_size = embedding.input_dim

    def resolved_joint_dim(self, hidden_dim):
        """The joint space size `d_j` this head uses for decoder size `hidden_dim`."""
        embedding_dim = self.embedding.output_dim
        if self.output_structure and self.context_structure:
            return self.joint_dim or embedding_dim
        if self.output_structure:  # Eq. 7a: σ(E·W) lives in the decoder's space
            return hidden_dim
        return embedding_dim  # Eq. 7b / Eq. 18: the embedding's space

    def build(self, input_shape):
        if not self.embedding.built:
            self.embedding.build((None,))
        hidden_dim = int(input_shape[-1])
        embedding_dim = self.embedding.output_dim
        if not (self.output_structure or self.context_structure) and hidden_dim != embedding_dim:
            raise ValueError(
                "Without projections (Eq. 18, weight tying) the decoder output size "
                "must equal the embedding size. Received: "
                f"hidden_dim={hidden_dim}, embedding_dim={embedding_dim}"
            )
        joint_dim = self.resolved_joint_dim(hidden_dim)
        # U: d → d_j on embedding rows (Eq. 12); V: d_h → d_j on h (Eq. 13).
        self.output_projection = (
            self._projection("output_projection", embedding_dim, joint_dim)
            if self.output_structure else None
        )
        self.context_projection = (
            self._projection("context_projection", hidden_dim, joint_dim)
            if self.context_structure else None
        )
        self.bias = None
        if self.use_bias:
            # float32 inside `call` as well: added to float32 logits (see `SoftmaxHead`).
            self.bias = self.add_weight(
                name="bias", shape=(self.vocabulary_size,), initializer=self.bias_initializer,
                autocast=False,
            )

    def _projection(self, name, input_dim, joint_dim):
        projection = keras.layers.Dense(
            joint_dim,
            use_bias=self.projection_bias,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name=name,
        )
        projection.build((None, input_dim))
        return projection

    def project_hidden(self, h):
        # g_inp(h) = σ(V·h + b_v), Eq. 13.
        if self.context_projection is None:
            return h
        return self.activation(self.context_projection(h))

    def hidden_affine(self):
        # Affine only with a linear σ: then W = E′·V and b = E′·b_v + b (one matrix).
        if self.context_projection is None:
            return None
        return dense_affine(self.context_projection, f"JointEmbeddingHead {self.name!r}",
                            "its context projection σ(V·h + b_v) (Eq. 13)",
                            activation=self.activation)

    def _project_outputs(self, rows):
        # g_out(e) = σ(U·eᵀ + b_u), Eq. 12, for any set of embedding rows.
        rows = ops.cast(rows, self.compute_dtype)
        if self.output_projection is None:
            return rows
        return self.activation(self.output_projection(rows))

    def output_weights(self):
        # E' = g_out(E): one (V, d) → (V, d_j) product per call of the head.
        return self._project_outputs(self.embedding.embeddings)

    def output_weights_for(self, candidate_ids):
        # Only the candidate rows are projected (sampled training).
        return self._project_outputs(self.embedding(candidate_ids))

    @property
    def output_bias(self):
        return self.bias

    @property
    def capacity_equation(self):
        if self.output_structure and self.context_structure:
            return "Eq. 16, d·d_j + d_j·d_h + |V|"
        if self.output_structure or self.context_structure:
            return "Eq. 10, d·d_h + |V|"
        return "Eq. 9, |V|"

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embedding": keras.saving.serialize_keras_object(self.embedding),
                "joint_dim": self.joint_dim,
                "activation": keras.activations.serialize(self.activation),
                "output_structure": self.output_structure,
                "context_structure": self.context_structure,
                "use_bias": self.use_bias,
                "projection_bias": self.projection_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

