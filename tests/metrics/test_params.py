"""Tests for `tf_outheads.metrics.params`."""

import keras
import numpy as np
import pytest

from tf_outheads.metrics import ParameterReport
from tf_outheads.metrics import parameter_report

VOCAB_SIZE = 10
EMBEDDING_DIM = 4
HIDDEN_DIM = 3


class TiedOutput(keras.layers.Layer):
    """Logits against the embedding matrix plus an own bias (tied head)."""

    def __init__(self, embedding, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding

    def build(self, input_shape):
        self.bias = self.add_weight(
            shape=(VOCAB_SIZE,), initializer="zeros", name="bias"
        )

    def call(self, h):
        return keras.ops.matmul(
            h, keras.ops.transpose(self.embedding.embeddings)
        ) + self.bias


class TinySeq2Seq(keras.Model):
    """Embedding, encoder, decoder and a tied output layer."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(
            VOCAB_SIZE, EMBEDDING_DIM, name="embedding"
        )
        self.encoder = keras.layers.Dense(HIDDEN_DIM, name="encoder")
        self.norm = keras.layers.BatchNormalization(name="norm")
        self.decoder = keras.layers.Dense(EMBEDDING_DIM, name="decoder")
        self.output_layer = TiedOutput(self.embedding, name="output_layer")

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.encoder.build((None, EMBEDDING_DIM))
        self.norm.build((None, HIDDEN_DIM))
        self.decoder.build((None, HIDDEN_DIM))
        self.output_layer.build((None, EMBEDDING_DIM))
        # A weight of the model itself, in no group.
        self.step_count = self.add_weight(
            shape=(), initializer="zeros", trainable=False, name="step_count"
        )

    def call(self, ids):
        h = self.norm(self.encoder(self.embedding(ids)))
        return self.output_layer(self.decoder(h))

    def parameter_groups(self):
        return {
            "embeddings": [self.embedding.embeddings],
            "encoder": self.encoder.weights + self.norm.weights,
            "decoder": self.decoder.weights,
            # Lists the tied matrix again: it must count once, above.
            "output_layer": [self.embedding.embeddings, self.output_layer.bias],
        }


def built_model(model):
    model.build((None,))
    return model


EMBEDDINGS = VOCAB_SIZE * EMBEDDING_DIM  # 40
ENCODER = EMBEDDING_DIM * HIDDEN_DIM + HIDDEN_DIM  # 15
NORM = 4 * HIDDEN_DIM  # 12, half of it moving statistics
DECODER = HIDDEN_DIM * EMBEDDING_DIM + EMBEDDING_DIM  # 16
OUTPUT_BIAS = VOCAB_SIZE  # 10
STEP_COUNT = 1


def unique_weight_count(model):
    unique = {id(variable): variable for variable in model.weights}
    return sum(int(np.prod(v.shape)) for v in unique.values())


class WithoutGroups(TinySeq2Seq):
    """The same model without `parameter_groups()`: the fallback path."""

    parameter_groups = None


def test_parameter_groups_protocol():
    report = parameter_report(built_model(TinySeq2Seq()))
    assert isinstance(report, ParameterReport)
    assert report.groups == {
        "embeddings": EMBEDDINGS,
        "encoder": ENCODER + NORM,
        "decoder": DECODER,
        "output_layer": OUTPUT_BIAS,
        "other": STEP_COUNT,
    }


def test_shared_variable_counted_once():
    model = built_model(TinySeq2Seq())
    report = parameter_report(model)
    assert report.total == (
        EMBEDDINGS + ENCODER + NORM + DECODER + OUTPUT_BIAS + STEP_COUNT
    )
    assert report.total == unique_weight_count(model)
    assert report.total == sum(report.groups.values())


def test_trainable_counted_separately():
    report = parameter_report(built_model(TinySeq2Seq()))
    moving_statistics = 2 * HIDDEN_DIM
    assert report.trainable == report.total - moving_statistics - STEP_COUNT
    assert report.non_trainable == moving_statistics + STEP_COUNT
    assert report.trainable_groups == {
        "embeddings": EMBEDDINGS,
        "encoder": ENCODER + NORM - moving_statistics,
        "decoder": DECODER,
        "output_layer": OUTPUT_BIAS,
        "other": 0,
    }


def test_first_group_listing_a_variable_wins():
    class OutputFirst(TinySeq2Seq):
        def parameter_groups(self):
            groups = super().parameter_groups()
            return {
                "output_layer": groups["output_layer"],
                "embeddings": groups["embeddings"],
            }

    report = parameter_report(built_model(OutputFirst()))
    assert report.groups["output_layer"] == EMBEDDINGS + OUTPUT_BIAS
    assert report.groups["embeddings"] == 0
    assert report.groups["other"] == ENCODER + NORM + DECODER + STEP_COUNT


def test_backend_value_maps_to_its_variable():
    class BackendValues(TinySeq2Seq):
        def parameter_groups(self):
            return {"embeddings": [self.embedding.embeddings.value]}

    report = parameter_report(built_model(BackendValues()))
    assert report.groups["embeddings"] == EMBEDDINGS


def test_variable_outside_model_weights_raises():
    stranger = keras.Variable(np.zeros((2, 2)), name="stranger")

    class ListsAStranger(TinySeq2Seq):
        def parameter_groups(self):
            return {"embeddings": [self.embedding.embeddings, stranger]}

    with pytest.raises(ValueError, match="'embeddings' lists the variable"):
        parameter_report(built_model(ListsAStranger()))


def test_fallback_groups_by_top_level_layer():
    model = built_model(WithoutGroups())
    report = parameter_report(model)
    # The output layer tracks the embedding layer, which was counted first.
    assert report.groups == {
        "embedding": EMBEDDINGS,
        "encoder": ENCODER,
        "norm": NORM,
        "decoder": DECODER,
        "output_layer": OUTPUT_BIAS,
        "other": STEP_COUNT,
    }
    assert report.total == unique_weight_count(model)


def test_fallback_sequential_skips_layers_without_weights():
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, name="hidden"),
            keras.layers.Dropout(0.1, name="dropout"),
            keras.layers.Dense(2, name="output_layer"),
        ]
    )
    report = parameter_report(model)
    assert report.groups == {"hidden": 40, "output_layer": 18}
    assert report.total == report.trainable == 58


def test_unbuilt_model_raises():
    with pytest.raises(ValueError, match="must be built"):
        parameter_report(TinySeq2Seq())


def test_str_is_a_table():
    report = parameter_report(built_model(TinySeq2Seq()))
    text = str(report)
    lines = text.splitlines()
    assert lines[0].split() == ["group", "parameters", "trainable", "share"]
    for name, count in report.groups.items():
        row = next(line for line in lines if line.startswith(name))
        assert f"{count:,}" in row
    assert lines[-1].split()[:2] == ["total", f"{report.total:,}"]
