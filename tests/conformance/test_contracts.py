"""Every registered head and every zoo model keeps the contracts of `tf_outheads.models`.

A new head (`register_head`) or model is picked up here and held to the same
checks: the `typing.Protocol` it must satisfy, and the behaviour behind it
(shapes, dtypes, a step function that keeps the state's structure, a model that
returns the decoder outputs in a loss step and its head's output elsewhere).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.layers import HEADS, ContinuousOutputHead
from tf_outheads.models import AuxiliaryHead, DecodingModel, OutputHead, Seq2SeqModel
from tf_outheads_zoo.model_config import MODEL_TYPES

SOURCE_VOCAB, TARGET_VOCAB, SIZE = 23, 19, 16


def build(model_type, **kwargs):
    """A small instance of a registered model type (its section's `small` arguments)."""
    section = MODEL_TYPES[model_type]
    return section.model_class()(SOURCE_VOCAB, TARGET_VOCAB, **section.small, **kwargs)


def head_spec(name):
    if HEADS[name] is ContinuousOutputHead or issubclass(HEADS[name], ContinuousOutputHead):
        return {"class_name": name, "config": {"output_dim": 8}}
    return name


def batch():
    rng = np.random.default_rng(0)
    source = rng.integers(4, SOURCE_VOCAB, (3, 5)).astype("int32")
    target_in = rng.integers(4, TARGET_VOCAB, (3, 4)).astype("int32")
    source[2, 3:] = 0
    target_in[1, 2:] = 0
    return {"source_ids": source, "target_in": target_in}


def contract_cases():
    """Every head × every model × float and int8. The Transformer's int8 cases (~8 s
    each) keep one head, tied, in the fast suite; the others run in the slow set."""
    for head in sorted(HEADS):
        for model_name in sorted(MODEL_TYPES):
            for quantized in (False, True):
                slow = quantized and model_name == "transformer" and head != "tied"
                yield pytest.param(
                    head, model_name, quantized, marks=pytest.mark.slow if slow else (),
                    id=f"{head}-{model_name}-{'int8' if quantized else 'float'}")


@pytest.mark.parametrize("head, model_name, quantized", list(contract_cases()))
def test_every_head_in_every_model_keeps_the_contracts(model_name, head, quantized):
    model = build(model_name, head=head_spec(head), rewe={"hidden_dim": 4})
    for layer in model.target_vector_layers():  # the continuous head (ReWE learns its own)
        layer.set_target_vectors(np.random.default_rng(1).normal(size=(TARGET_VOCAB, 8)))
    if quantized:  # int8 inference (`Seq2SeqModel.quantize`) keeps every contract
        model.quantize("int8")
        assert model.quantization == "int8"
    assert isinstance(model.head.default_loss(), keras.losses.Loss)
    assert isinstance(model, Seq2SeqModel) and isinstance(model, DecodingModel)
    assert isinstance(model.head, OutputHead) and model.head.vocabulary_size == TARGET_VOCAB
    assert set(model.auxiliary_heads()) == {"rewe"}
    assert all(isinstance(h, AuxiliaryHead) for h in model.auxiliary_heads().values())
    x = batch()

    # The head's output outside a loss step, the decoder outputs inside one.
    output = model(x)
    assert tuple(output.shape[:2]) == (3, 4)
    with model.training_outputs():
        outputs = model(x, training=True)
    assert set(outputs) == {"hidden"}
    assert tuple(outputs["hidden"].shape) == (3, 4, model.hidden_size)
    np.testing.assert_allclose(model.head(outputs["hidden"]), output, rtol=1e-5, atol=1e-5)

    # Decoding: a step keeps the state's structure and shapes, scores are (B, V) float32.
    state = model.initial_decoding_state(x["source_ids"], 6)
    scores, new_state = model.make_step_fn()(tf.fill([3], 2), state)
    assert scores.dtype == tf.float32 and tuple(scores.shape) == (3, TARGET_VOCAB)
    assert np.all(np.isfinite(scores.numpy()))
    tf.nest.assert_same_structure(state, new_state)
    for before, after in zip(tf.nest.flatten(state), tf.nest.flatten(new_state)):
        assert before.shape == after.shape and before.dtype == after.dtype
    alignments = model.source_alignments(x["source_ids"], x["target_in"])
    assert tuple(alignments.shape) == (3, 4, 5) and alignments.dtype == tf.float32
    np.testing.assert_allclose(np.asarray(alignments)[2, :, 3:], 0.0)  # source padding


@pytest.mark.parametrize("model_name", sorted(MODEL_TYPES))
def test_the_base_config_round_trips_the_shared_parts(model_name):
    model = build(model_name, head="tied", rewe={"hidden_dim": 4})
    config = model.get_config()
    for key in ("source_vocabulary_size", "target_vocabulary_size", "head", "rewe",
                "shared_private"):
        assert key in config, key
    revived = type(model).from_config(config)
    assert revived.get_config() == config
    assert revived.head.embedding is revived.target_embedding
    assert sorted(revived.parameter_groups()) == ["decoder", "embeddings", "encoder",
                                                  "output_layer", "rewe"]


def test_a_model_missing_a_backbone_method_says_which():
    class Incomplete(Seq2SeqModel):
        pass

    model = Incomplete(5, 5)
    with pytest.raises(NotImplementedError):
        model.teacher_forced(None, None)
    with pytest.raises(NotImplementedError):
        model.decoder_step(None, None)
    assert not isinstance(keras.layers.Dense(3), OutputHead)  # the check can fail
