"""`Seq2SeqModel`: what every encoder–decoder shares, whatever its backbone.

A subclass (an attentional LSTM, a Transformer) brings its encoder and decoder and keeps
only what differs between backbones:

- `hidden_size`: the size of the decoder outputs `h` the heads read;
- `build_network()`: build its embeddings, encoder and decoder (every shape is
  known at construction);
- `teacher_forced(source_ids, target_in, training, return_alignments)` → `h`
  `(B, T, d_h)` (and the attention `(B, T, S)` with `return_alignments`);
- `initial_decoding_state(source_ids, max_length)` and
  `decoder_step(ids_t, state)` → `(h_t (B, d_h), new state)`;
- `initialize(variables)`: its initialisation scheme beyond the layers'
  initializers (the LSTM's U(±a)), if any;
- to take a neural vocabulary selection head (`returns_memory = True`): with
  `return_memory=True`, `teacher_forced` and `initial_decoding_state` also return
  the encoder outputs `(memory (B, S, d), mask (B, S) bool)` as a second element.

This class owns the rest, once: the source and target embeddings (separate, or
the two sides of shared-private embeddings, Liu et al. 2019), the output head
and the auxiliary heads, ReWE and neural vocabulary selection (built after every
other weight, so a model with λ = 0 starts, and trains, exactly as the plain one), what it returns in a
loss step (`training_outputs()`), the decoding step function, the parameter
groups and the config of those parts.

It trains with an `Objective` it holds (`tf_outheads.losses.objective`: the
contract between model, losses and trainer), not one it inherits: `compile`
builds `self.objective`, and Keras' hooks (`compute_loss`, `compute_metrics`,
`metrics`, the compile config) delegate to it, so `model.fit`, `evaluate` and
`tf_outheads.training.Trainer` train the same loss. Nothing here imports
`tf_outheads.training` (`tests/conformance/test_layering.py`).
"""

import contextlib

import keras
from keras import ops

from tf_outheads.compat import (FirstReplicaBuild, has_compiled_metrics, in_xla_context,
                                loss_tracker, one_garbage_collection)
from tf_outheads.layers.heads import build_head, head_to_spec
from tf_outheads.layers.rewe_head import build_rewe_head, rewe_to_spec
from tf_outheads.layers.selection_head import build_selection_head, selection_to_spec
from tf_outheads.layers.shared_private import shared_private_argument, shared_private_to_spec
from tf_outheads.losses.objective import (HEAD_OUTPUT, HIDDEN_OUTPUT, MEMORY_MASK_OUTPUT,
                                          MEMORY_OUTPUT, Objective, StepOutputs)
from tf_outheads.ops.quantize import QUANTIZATION_MODES
from tf_outheads.validation import positive_int

__all__ = ["ObjectiveHooks", "Seq2SeqModel", "inference_model", "quantized_copy"]


class ObjectiveHooks(FirstReplicaBuild):
    """Keras' training hooks of a seq2seq model, delegated to the `Objective` it holds.

    `compile(loss=..., loss_weights=...)` builds `self.objective` (one term per
    head: `{"logits": self.head, **self.auxiliary_heads()}`); `compute_loss`,
    `metrics` and the compile config are the objective's, and inside
    `training_outputs()` (every training and evaluation step) `call` returns
    `{"hidden": h}` through `head_outputs`. The model only says what it returns;
    the loss is the objective's (`tf_outheads.losses.objective`). Put it before
    `keras.Model` in the bases (`Seq2SeqModel` does).
    """

    # The objective `compile` built (`None` before, or compiled without a loss).
    objective = None
    _returns_training_outputs = False

    def auxiliary_heads(self):
        """`{name: layer}`: heads trained next to the output layer (none here)."""
        return {}

    @contextlib.contextmanager
    def training_outputs(self):
        """Inside this block `call` returns `{"hidden": h}`, what the losses read."""
        previous = self._returns_training_outputs
        self._returns_training_outputs = True
        try:
            yield
        finally:
            self._returns_training_outputs = previous

    def head_outputs(self, hidden, training=False, source=None):
        """What `call` returns: the head's output, or `{"hidden": h}` in a loss step
        (and the encoder outputs `source = (memory, mask)`, when given)."""
        if self._returns_training_outputs:
            if source is not None:
                return {HIDDEN_OUTPUT: hidden, MEMORY_OUTPUT: source[0],
                        MEMORY_MASK_OUTPUT: source[1]}
            return {HIDDEN_OUTPUT: hidden}
        return self.head(hidden)

    def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, **kwargs):
        objective = None
        if loss is not None:
            objective = Objective(loss, loss_weights,
                                  {HEAD_OUTPUT: self.head, **self.auxiliary_heads()})
        # Keras' own compiled loss would map losses onto outputs; ours maps them onto heads.
        super().compile(optimizer=optimizer, loss=None, **kwargs)
        self.objective = objective
        self.loss = loss
        self.loss_weights = loss_weights

    def get_compile_config(self):
        config = super().get_compile_config()
        if config and self.objective is not None:
            config.update(self.objective.get_config())
        return config

    def compile_from_config(self, config):
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.optimizer is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    @property
    def metrics(self):
        metrics = super().metrics
        if self.objective is None:
            return metrics
        return self.objective.metrics(metrics, loss_tracker(self))

    def train_step(self, *args, **kwargs):
        with self.training_outputs():
            return super().train_step(*args, **kwargs)

    def test_step(self, *args, **kwargs):
        with self.training_outputs():
            return super().test_step(*args, **kwargs)

    def step_outputs(self, y_pred, training=True):
        """`StepOutputs` of what `call` returned (the structure, or the head's output)."""
        step = self.optimizer.iterations if getattr(self, "optimizer", None) is not None else 0
        # Static sizes wherever XLA compiles the step (Keras' or the trainer's jit_compile).
        return StepOutputs.from_prediction(
            y_pred, self.head, step=step, training=training,
            static_size=in_xla_context() or bool(getattr(self, "jit_compile", False)))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The objective's per-token mean (`Objective.compute_loss`), plus `self.losses`."""
        if self.objective is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return self.objective.compute_loss(y, self.step_outputs(y_pred, training), sample_weight,
                                           extra_losses=self.losses)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Compiled metrics, if any, see the head's output, computed for them in a loss step."""
        if isinstance(y_pred, dict) and HIDDEN_OUTPUT in y_pred:
            if not has_compiled_metrics(self):
                return self.get_metrics_result()
            y_pred = self.head(y_pred[HIDDEN_OUTPUT])
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)


class Seq2SeqModel(ObjectiveHooks, keras.Model):
    """Base class of the encoder–decoders that take any output head.

    Args:
        source_vocabulary_size: int.
        target_vocabulary_size: int.
        **kwargs: passed to `keras.Model`.

    A subclass's `__init__` calls `super().__init__(V_s, V_t, **kwargs)`, then
    `self.build_embeddings(...)`, creates its encoder and decoder, and ends
    with `self.build_heads(head, rewe, selection)`. See the module doc for what it
    defines.

    Call arguments:
        inputs: dict with `"source_ids"` `(B, S)` and `"target_in"` `(B, T)`,
            int32, padded with 0.
        training: bool.

    Returns:
        The head's output: logits `(B, T, V)` for categorical heads, vectors
        `(B, T, m)` for continuous ones. Inside `model.training_outputs()`
        (training and evaluation steps) `{"hidden": (B, T, d_h)}`, which every
        loss reads (`tf_outheads.losses.objective`).

    `compile(loss=..., loss_weights=...)` takes a loss or a dict `{"logits":
    loss, name: loss}` (one per head, see `Objective`) and builds
    `model.objective`; the rest goes to Keras.
    """

    def __init__(self, source_vocabulary_size, target_vocabulary_size, **kwargs):
        super().__init__(**kwargs)
        self.source_vocabulary_size = positive_int("source_vocabulary_size",
                                                   source_vocabulary_size)
        self.target_vocabulary_size = positive_int("target_vocabulary_size",
                                                   target_vocabulary_size)

    # -- construction -----------------------------------------------------
    def build_embeddings(self, source_dim, target_dim, initializer, shared_private=None):
        """Create `self.source_embedding` and `self.target_embedding`.

        Two `keras.layers.Embedding` (`source_dim`, `target_dim` columns), or,
        with `shared_private`, the two sides of a `SharedPrivateEmbedding` of
        `target_dim` columns (`self.shared_private`; `source_dim` must then
        equal `target_dim`). The target side is the embedding every tied,
        joint or ReWE head reuses.

        Args:
            initializer: callable returning a fresh Keras initializer (one
                per table: a Keras random initializer repeats its draw).
        """
        if shared_private is not None:
            if source_dim != target_dim:
                raise ValueError(
                    "Shared-private embeddings have one size for both sides. "
                    f"Received: source size {source_dim}, target size {target_dim}")
            self.shared_private = shared_private_argument(
                shared_private, self.source_vocabulary_size, self.target_vocabulary_size,
                target_dim, embeddings_initializer=initializer(), dtype=self.dtype_policy)
            self.source_embedding = self.shared_private.source
            self.target_embedding = self.shared_private.target
            return
        self.shared_private = None
        self.source_embedding = keras.layers.Embedding(
            self.source_vocabulary_size, source_dim, embeddings_initializer=initializer(),
            dtype=self.dtype_policy, name="source_embedding")
        self.target_embedding = keras.layers.Embedding(
            self.target_vocabulary_size, target_dim, embeddings_initializer=initializer(),
            dtype=self.dtype_policy, name="target_embedding")

    # Whether `teacher_forced` and `initial_decoding_state` take `return_memory`
    # (module doc), which a neural vocabulary selection head needs.
    returns_memory = False
    # The selection head, once `build_heads` ran with one.
    selection = None

    def build_heads(self, head, rewe, selection=None):
        """Create the output head, build the whole network, then the auxiliary heads.

        Order: the head object, `build_network()` (embeddings, encoder,
        decoder), the head's weights, `initialize(self.weights)`; then the
        auxiliary ReWE head and `initialize` of its trainable weights, then
        the selection head (`tf_outheads.VocabularySelectionHead`, Keras'
        initializers), so every other weight draws the same values with or
        without them.
        """
        self.head = build_head(head, self.target_vocabulary_size, self.target_embedding,
                               dtype=self.dtype_policy)
        self.build_network()
        if not self.head.built:
            self.head.build((None, None, self.hidden_size))
        self.built = True
        self.initialize(self.weights)
        self.rewe = build_rewe_head(rewe, self.target_vocabulary_size, self.target_embedding,
                                    dtype=self.dtype_policy)
        if self.rewe is not None:
            if not self.rewe.built:
                self.rewe.build((None, None, self.hidden_size))
            # Its trainable weights only: a pretrained target table stays as given.
            self.initialize(self.rewe.trainable_weights)
        self.selection = build_selection_head(selection, self.target_vocabulary_size,
                                              dtype=self.dtype_policy)
        if self.selection is not None:
            if not self.returns_memory:
                raise ValueError(
                    f"{type(self).__name__} cannot take a vocabulary selection head: its "
                    "`teacher_forced` and `initial_decoding_state` do not return the encoder "
                    "outputs (`returns_memory`). Received: selection="
                    f"{selection_to_spec(self.selection)}")
            self.selection.build((None, None, self.memory_size))

    @property
    def hidden_size(self):
        """Size of the decoder outputs `h` the heads read."""
        raise NotImplementedError

    @property
    def memory_size(self):
        """Size of the encoder outputs (`return_memory`); the decoder's by default."""
        return self.hidden_size

    def build_network(self):
        """Build the embeddings, encoder and decoder (shapes known at construction)."""
        raise NotImplementedError

    def initialize(self, variables):
        """Re-draw `variables` by the model's initialisation scheme; none by default."""

    # -- the two passes ---------------------------------------------------
    def teacher_forced(self, source_ids, target_in, training=False, return_alignments=False,
                       return_memory=False):
        """`h (B, T, d_h)` of a teacher-forced pass (and the attention `(B, T, S)`); with
        `return_memory`, `(that, (memory, mask))` (module doc)."""
        raise NotImplementedError

    def call(self, inputs, training=False):
        if self.selection is not None and self._returns_training_outputs:
            h, source = self.teacher_forced(inputs["source_ids"], inputs["target_in"],
                                            training=training, return_memory=True)
            return self.head_outputs(h, training, source=source)
        h = self.teacher_forced(inputs["source_ids"], inputs["target_in"], training=training)
        return self.head_outputs(h, training)

    def initial_decoding_state(self, source_ids, max_length=None, return_memory=False):
        """The decoding state of a batch of sources (`DecodingModel`: `max_length` under
        XLA, for caches of that many steps; `None` elsewhere); with `return_memory`,
        `(state, (memory, mask))` (module doc)."""
        raise NotImplementedError

    def selection_probabilities(self, source_ids):
        """`(B, V)` float32: the selection head's probability that each target piece
        occurs in each source's translation (`VocabularySelectionHead`).

        Raises:
            ValueError: the model has no selection head.
        """
        if self.selection is None:
            raise ValueError(f"{self.name!r} has no vocabulary selection head (built "
                             "without `selection=`)")
        _, (memory, mask) = self.initial_decoding_state(source_ids, return_memory=True)
        return self.selection.probabilities(memory, mask)

    def decoder_step(self, ids_t, state):
        """One decoding step: `ids_t (B,)` int32 → `(h_t (B, d_h), new state)`."""
        raise NotImplementedError

    def make_step_fn(self, cache=None):
        """`step_fn(ids_t, state) → (log_scores (B, V), new_state)` for the decoders.

        The head's `inference_cache()` is computed once here, not per step.
        """
        if cache is None:
            cache = self.head.inference_cache()

        def step_fn(ids_t, state):
            h_t, new_state = self.decoder_step(ops.cast(ids_t, "int32"), state)
            return self.head.scores(h_t, cache), new_state

        return step_fn

    def source_alignments(self, source_ids, target_in):
        """Attention weights `(B, T, S)` float32 of every target position.

        Row `t` is where the decoder attended when it scored the word after
        `target_in[:, t]`: run on `[BOS] + output[:-1]`, it says where each
        output word came from (`tf_outheads.decoding.replace_unknown_words`).
        Source padding gets weight 0.
        """
        _, alignments = self.teacher_forced(source_ids, target_in, training=False,
                                            return_alignments=True)
        return alignments

    # -- int8 inference ---------------------------------------------------
    # What `quantize` made of this model: None (float32) or "int8".
    quantization = None

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Int8 weights for inference, in place (Keras' `Model.quantize`, for seq2seq).

        Keras' own `Model.quantize` would quantize every `Embedding` and `Dense`
        leaf, and so turn the target table a tied or joint head multiplies by into
        int8 without the head knowing. Here:

        - every `keras.layers.Dense` of the encoder and decoder (the Transformer's
          projections and feed-forward layers) gets Keras' own int8 quantization
          (per-channel int8 kernel, inputs quantized per row when called);
        - the output head scores with an int8 copy of its output weights
          (`CategoricalHead.quantize_inference`; a continuous head stays float);
        - `quantize_backbone(mode)`: what a subclass quantizes of its own layers
          (nothing by default);
        - embedding lookups stay float (a table row is read, not multiplied), and
          the ReWE head, trained only, is left as it is.

        The model is then for decoding and scoring: do not train it, and keep
        the float model to save (`tf_outheads.models.quantized_copy` leaves it
        untouched). Runs on the CPU through oneDNN's int8 kernels; the same ops
        run on a GPU.

        Args:
            mode: `"int8"`.
            config: `None`, or a `keras.quantizers.Int8QuantizationConfig` without
                a weight quantizer: with `activation_quantizer=None` every product
                runs in float on int8 weights turned back into floats (weight-only
                int8), else activations are quantized per row (the default).
            filters: not supported (must be `None`).

        Raises:
            ValueError: another mode, a weight quantizer, `filters`, or a model
                that is already quantized.
        """
        # Keras' wrapper of every layer's `quantize` turns a mode into its default config.
        if config is not None and not isinstance(config, keras.quantizers.Int8QuantizationConfig):
            mode = getattr(config, "mode", config)
        if (mode != "int8" or filters is not None or kwargs
                or getattr(config, "weight_quantizer", None) is not None):
            raise ValueError(
                "A seq2seq model quantizes to 'int8' only, without `filters` or a weight "
                "quantizer of its own. Received: "
                f"mode={mode!r}, filters={filters!r}, weight_quantizer="
                f"{getattr(config, 'weight_quantizer', None)!r}"
                + (f", {sorted(kwargs)}" if kwargs else ""))
        if self.quantization is not None:
            raise ValueError(f"The model is already quantized ({self.quantization!r}).")
        # An Int8QuantizationConfig(activation_quantizer=None): int8 weights, float products.
        activations = ("float" if config is not None and config.activation_quantizer is None
                       else "dynamic")
        auxiliary = {id(layer) for head in self.auxiliary_heads().values()
                     for layer in head._flatten_layers()}
        with one_garbage_collection():  # not one per Dense kernel (compat's module doc)
            for layer in self._flatten_layers():
                if isinstance(layer, keras.layers.Dense) and id(layer) not in auxiliary:
                    layer.quantize(mode, config=config)
        if hasattr(self.head, "quantize_inference"):
            self.head.quantize_inference(mode, activations=activations)
        self.quantize_backbone(mode, activations)
        self.quantization = mode
        # Keras' compiled step functions read the float weights.
        self.train_function = self.test_function = self.predict_function = None

    def quantize_backbone(self, mode, activations="dynamic"):
        """Quantize the backbone's own (non-`Dense`) layers for inference; none here.
        `activations`: `"dynamic"` or `"float"` (`tf_outheads.ops.quantize.int8_matmul`)."""

    def ctranslate2_backbone(self, max_positions):
        """This model's embeddings, encoder and decoder as a
        `ctranslate2.specs.TransformerSpec`, its output projection and vocabularies left
        for `tf_outheads.export.to_ctranslate2` (from the head and the tokenizers).

        Args:
            max_positions: int, the position encodings to write.

        Raises:
            NotImplementedError: naming why; here, always: a model type that
                CTranslate2 can run overrides this (a Transformer encoder-decoder).
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no CTranslate2 form: CTranslate2 runs Transformer "
            "encoder-decoders only and has no RNN decoder (OpenNMT/CTranslate2 #796). "
            "Export a SavedModel instead (tf_outheads.export.export_translator)")

    # -- parts ------------------------------------------------------------
    def auxiliary_heads(self):
        """`{"rewe": ReWEHead, "selection": VocabularySelectionHead}`, those the model
        has (trained next to the head)."""
        heads = {"rewe": self.rewe, "selection": self.selection}
        return {name: head for name, head in heads.items() if head is not None}

    def target_vector_layers(self):
        """The head and auxiliary heads that read a table of pretrained target word
        vectors (`needs_target_vectors`), each given it with `set_target_vectors`."""
        return [layer for layer in (self.head, *self.auxiliary_heads().values())
                if getattr(layer, "needs_target_vectors", False)]

    def parameter_groups(self):
        """Variables by part of the model, for `tf_outheads.metrics.parameter_report`."""
        embeddings = self.source_embedding.weights + self.target_embedding.weights
        return {
            "embeddings": embeddings,
            "encoder": self.encoder.weights,
            # A decoder that embeds its own inputs holds the target table too.
            "decoder": [w for w in self.decoder.weights if all(w is not e for e in embeddings)],
            "output_layer": self.head.weights,
            # Training only: not part of the inference model.
            **({"rewe": self.rewe.weights} if self.rewe is not None else {}),
            # Read once per sentence to choose the decoder's vocabulary.
            **({"selection": self.selection.weights} if self.selection is not None else {}),
        }

    def get_config(self):
        config = super().get_config()
        config.update({
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "head": head_to_spec(self.head),
            "rewe": rewe_to_spec(self.rewe) if self.rewe is not None else None,
            "shared_private": (shared_private_to_spec(self.shared_private)
                               if self.shared_private is not None else None),
        })
        if self.selection is not None:
            # Only when there is one: a subclass written before `selection=` existed
            # need not take it.
            config["selection"] = selection_to_spec(self.selection)
        return config


def quantized_copy(model, mode="int8"):
    """A quantized copy of a seq2seq model for inference; `model` stays as it is.

    The copy is built from `model.get_config()`, given `model`'s weights, then
    quantized (`Seq2SeqModel.quantize`). A model that is already quantized is
    refused: quantize its float original.
    """
    if model.quantization is not None:
        raise ValueError(f"The model is already quantized ({model.quantization!r}): "
                         "copy its float original.")
    copy = model.__class__.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    copy.quantize(mode)
    return copy


def inference_model(model, quantize=None):
    """The model a decoder should run for `quantize` (the `quantize=` argument of
    `Translator`, `Scorer` and `export_translator`): `model` itself for `None` (as it
    is, float or already quantized) or when it already is quantized that way, else
    its `quantized_copy` (`model` untouched).

    Raises:
        ValueError: `quantize` is neither `None` nor `"int8"`.
    """
    if quantize not in QUANTIZATION_MODES:
        raise ValueError(f"`quantize` must be one of {QUANTIZATION_MODES}. "
                         f"Received: quantize={quantize!r}")
    if quantize is None or getattr(model, "quantization", None) == quantize:
        return model
    return quantized_copy(model, quantize)
