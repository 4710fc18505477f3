"""The model section of the run configuration, and the model types' registry.

`ModelConfig` holds the keys every model type has (`model_type`, `head`, `rewe`,
`shared_private`, `selection`); a model type's section subclasses it with its own keys and
registers the type with class keywords (`model_type=`, `model=`), filling
`MODEL_TYPES`, which the schema (`tf_outheads_zoo.config`), the builders
(`tf_outheads_zoo.components`), the CLI and the conformance tests read. The
built-in sections, `LSTMConfig` and `TransformerConfig`, are here; a user's model
file holds its own. This module loads no TensorFlow.
"""

import copy
import dataclasses
import importlib
import inspect

from tf_outheads_zoo.schema import ConfigError, above, at_least, check_probability, setting

# The model types by name (`model.model_type`) → their config section: filled by the
# sections themselves (`ModelConfig`'s `model_type=` class keyword), read by the schema,
# the builders (`tf_outheads_zoo.components`), the CLI and the conformance tests.
MODEL_TYPES = {}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The keys of every model type; a model type's section adds its own.

    A model type is registered by its section, once, with class keywords::

        @dataclasses.dataclass(frozen=True)
        class GRUConfig(ModelConfig, model_type="gru", model=GRUSeq2Seq):
            "GRU encoder-decoder (the first line: `tf-outheads components` prints it)."
            hidden_dim: int = setting(256, "GRU units")

    `model` is the `tf_outheads.models.Seq2SeqModel` subclass, or its
    `"module:Class"` path (imported when a model is built, so that reading the
    schema loads no TensorFlow). The section's keys, other than those of
    `ModelConfig` itself and `model_type`, are the class's keyword arguments;
    `head`, `rewe`, `shared_private` and a set `selection` are passed to it too.
    """

    model_type: str = setting("lstm", "the zoo model type (`tf-outheads components` lists "
                              "them)", choices=lambda: tuple(MODEL_TYPES))
    head: str | dict = setting(
        "softmax", "output layer: a registered head name, or {class_name, config}",
        keys=("class_name", "config"))
    rewe: dict | None = setting(None, "ReWE head options (hidden_dim, embedding_dim, "
                                "targets, prediction), or None: no ReWE head")
    shared_private: dict | None = setting(
        None, "shared-private embeddings (pairs, threshold, sharing_ratios), or None: "
        "separate tables")
    selection: dict | None = setting(
        None, "neural vocabulary selection head on the encoder outputs ({pooling: "
        "logit_max or state_max, block_gradient}), or None: none",
        keys=("pooling", "block_gradient"))

    # Arguments of a small instance, for the conformance tests
    # (tests/conformance/test_contracts.py builds every registered model with them).
    small = {}

    def __init_subclass__(cls, model_type=None, model=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if model_type is None:
            return
        if not isinstance(model, (type, str)):
            raise TypeError(f"Model type {model_type!r}: `model=` must be the model class or "
                            f"its 'module:Class' path. Received: model={model!r}")
        old = MODEL_TYPES.get(model_type)
        if old is not None and old.__qualname__ != cls.__qualname__:
            raise TypeError(f"The model type {model_type!r} is registered by "
                            f"{old.__module__}.{old.__qualname__}; "
                            f"unregister_model_type({model_type!r}) first.")
        cls.registered_model_type = model_type
        cls._model = model
        MODEL_TYPES[model_type] = cls

    @classmethod
    def model_class(cls):
        """The model class of this section's type (its path imported on first use)."""
        if isinstance(cls._model, str):
            module, _, name = cls._model.partition(":")
            cls._model = getattr(importlib.import_module(module), name)
        return cls._model

    @classmethod
    def description(cls):
        """One line: the section's docstring's first line."""
        return (inspect.getdoc(cls) or cls.__name__).splitlines()[0]

    def arguments(self):
        """The model class's keyword arguments: every key but `model_type`, and
        `selection` only when set (a model type registered before it existed
        need not take it)."""
        return {field.name: copy.deepcopy(getattr(self, field.name))
                for field in dataclasses.fields(self) if field.name != "model_type"
                and not (field.name == "selection" and self.selection is None)}

    def check_across(self):
        """Checks between this section's keys (each key's own are in its field); raises
        `ConfigError` naming them. None here; a model type's section adds its own."""

    @property
    def width(self):
        """The model width (d_model) an inverse-square-root schedule is scaled by, or
        `None` (the schedule then needs its own `model_dim`)."""
        return None

    def summary(self):
        """The model in a few words, for the presets catalogue."""
        return self.model_type


def unregister_model_type(model_type):
    """Remove a model type (tests that register one for their own use)."""
    MODEL_TYPES.pop(model_type, None)


@dataclasses.dataclass(frozen=True)
class LSTMConfig(ModelConfig, model_type="lstm", model="tf_outheads_zoo.lstm:LSTMSeq2Seq"):
    """`tf_outheads_zoo.LSTMSeq2Seq`: attentional LSTM (Luong et al. 2015); defaults are the class's."""

    embedding_dim: int = setting(512, "target (and source) embedding size",
                                check=at_least(1))
    source_embedding_dim: int | None = setting(None, "source embedding size; None: "
                                               "embedding_dim", check=at_least(1))
    hidden_dim: int = setting(512, "LSTM units (both directions together when bidirectional)",
                             check=at_least(1))
    num_layers: int = setting(2, "LSTM layers of the encoder and of the decoder",
                             check=at_least(1))
    encoder_layers: int | None = setting(None, "encoder layers; None: num_layers",
                                         check=at_least(1))
    decoder_layers: int | None = setting(None, "decoder layers; None: num_layers",
                                         check=at_least(1))
    bidirectional_encoder: bool = setting(False, "a bidirectional encoder")
    dropout: float = setting(0.3, "dropout between layers and on the attentional state",
                            check=check_probability)
    input_feeding: bool = setting(True, "feed the previous attentional state to the decoder")
    attention_score: str = setting("general", "Luong attention score",
                                   choices=("general", "dot"))
    scaled_attention: bool = setting(False, "divide the attention scores by √hidden_dim "
                                     "(against the attention's early collapse onto </s>)")
    uniform_init: float | None = setting(0.1, "every weight drawn from U(-a, a) "
                                         "(OpenNMT-py); None: Keras' initialisers",
                                         check=above(0))

    small = {"embedding_dim": 16, "hidden_dim": 16, "num_layers": 1, "dropout": 0.0}

    def check_across(self):
        if self.bidirectional_encoder and self.hidden_dim % 2:
            raise ConfigError("model.hidden_dim counts both directions of a bidirectional "
                              "encoder: it must be even. Received: model.hidden_dim="
                              f"{self.hidden_dim}, model.bidirectional_encoder=True")

    @property
    def width(self):
        return self.hidden_dim

    def summary(self):
        """`"biLSTM 1×256"`, `"LSTM 1+2×1024"`."""
        layers = self.num_layers
        if self.encoder_layers or self.decoder_layers:
            layers = f"{self.encoder_layers or layers}+{self.decoder_layers or layers}"
        encoder = "biLSTM" if self.bidirectional_encoder else "LSTM"
        return f"{encoder} {layers}×{self.hidden_dim}"


@dataclasses.dataclass(frozen=True)
class TransformerConfig(ModelConfig, model_type="transformer",
                        model="tf_outheads_zoo.transformer:TransformerSeq2Seq"):
    """`tf_outheads_zoo.TransformerSeq2Seq` (Vaswani et al. 2017); defaults are the class's (base)."""

    model_dim: int = setting(512, "d_model", check=at_least(1))
    ffn_dim: int = setting(2048, "d_ff, the feed-forward inner size", check=at_least(1))
    num_heads: int = setting(8, "attention heads", check=at_least(1))
    encoder_layers: int = setting(6, "encoder layers", check=at_least(1))
    decoder_layers: int = setting(6, "decoder layers", check=at_least(1))
    dropout: float = setting(0.1, "dropout on residuals and embeddings",
                            check=check_probability)
    attention_dropout: float = setting(0.1, "dropout on attention weights",
                                      check=check_probability)
    ffn_dropout: float = setting(0.1, "dropout inside the feed-forward block",
                                check=check_probability)
    norm: str = setting("post", "layer norm placement", choices=("post", "pre"))

    small = {"model_dim": 16, "ffn_dim": 32, "num_heads": 2, "encoder_layers": 1,
             "decoder_layers": 1, "dropout": 0.0, "attention_dropout": 0.0,
             "ffn_dropout": 0.0}

    def check_across(self):
        if self.model_dim % self.num_heads or self.model_dim % 2:
            raise ConfigError("model.model_dim must be even and divisible by model.num_heads. "
                              f"Received: model.model_dim={self.model_dim}, "
                              f"model.num_heads={self.num_heads}")

    @property
    def width(self):
        return self.model_dim

    def summary(self):
        """`"Transformer 6+6, 512/2048, post-norm"`."""
        return (f"Transformer {self.encoder_layers}+{self.decoder_layers}, "
                f"{self.model_dim}/{self.ffn_dim}, {self.norm}-norm")
