"""int8 inference of the zoo models (`Seq2SeqModel.quantize`, `quantized_copy`) for every
categorical head: what is quantized, what is left float, and how close the scores stay."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.zoo.test_shared_private_models import pairs
from tf_outheads.models import quantized_copy
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq

SOURCE_VOCAB, TARGET_VOCAB = 23, 19
SMALL = {
    LSTMSeq2Seq: dict(embedding_dim=16, hidden_dim=16, num_layers=1, dropout=0.0),
    TransformerSeq2Seq: dict(model_dim=16, ffn_dim=32, num_heads=2, encoder_layers=1,
                             decoder_layers=1, dropout=0.0, attention_dropout=0.0,
                             ffn_dropout=0.0),
}
HEADS = ["softmax", "tied", "joint", "shared_private"]


def make_model(model_type, head):
    config = dict(SMALL[model_type])
    if head == "shared_private":
        config.update(head="tied", shared_private={"pairs": pairs(),
                                                   "sharing_ratios": (0.9, 0.7, 0.5)})
    else:
        config.update(head=head)
    keras.utils.set_random_seed(0)
    return model_type(SOURCE_VOCAB, TARGET_VOCAB, **config)


def step_scores(model, source):
    state = model.initial_decoding_state(source, 6)
    step_fn = model.make_step_fn()
    ids = tf.fill([source.shape[0]], 2)
    all_scores = []
    for _ in range(3):
        scores, state = step_fn(ids, state)
        all_scores.append(scores.numpy())
        ids = tf.argmax(scores, axis=-1, output_type=tf.int32)
    return np.stack(all_scores)


def source_batch():
    return np.random.default_rng(0).integers(4, SOURCE_VOCAB, (4, 5)).astype("int32")


# The Transformer keeps one head, tied, in the fast suite; the others run
# in the slow set.
@pytest.mark.parametrize("head, model_type", [
    pytest.param(head, model_type, id=f"{head}-{model_type.__name__}",
                 marks=pytest.mark.slow if model_type is TransformerSeq2Seq and head != "tied"
                 else ())
    for head in HEADS for model_type in (LSTMSeq2Seq, TransformerSeq2Seq)])
def test_a_quantized_copy_scores_close_to_its_float_model_which_stays_float(model_type, head):
    model = make_model(model_type, head)
    before = [w.numpy().copy() for w in model.weights]
    copy = quantized_copy(model)

    # The original is untouched.
    assert model.quantization is None and model.head.inference_quantization is None
    assert all(np.array_equal(b, w.numpy()) for b, w in zip(before, model.weights))
    assert model.head.inference_cache()["output_kernel"].dtype == tf.float32

    # The copy: int8 output kernel with per-word scales, int8 Dense layers, float tables.
    assert copy.quantization == "int8"
    cache = copy.head.inference_cache()
    assert cache["output_kernel"].dtype == tf.int8
    assert tuple(cache["output_scale"].shape) == (TARGET_VOCAB,)
    dense = [layer for layer in copy._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    if model_type is TransformerSeq2Seq:
        assert dense and all(layer.quantization_mode == "int8" for layer in dense)
    assert copy.target_embedding.embeddings.dtype == "float32"

    source = source_batch()
    float_scores, int8_scores = step_scores(model, source), step_scores(copy, source)
    assert np.all(np.isfinite(int8_scores))
    assert not np.array_equal(float_scores, int8_scores)  # it is not the float model
    np.testing.assert_allclose(int8_scores, float_scores, atol=0.05)
    # A teacher-forced pass gives the same scores as the steps (one int8 path).
    target_in = np.array([[2, 5, 6]] * 4, "int32")
    logits = copy({"source_ids": source, "target_in": target_in})
    state = copy.initial_decoding_state(source, 6)
    step_fn = copy.make_step_fn()
    for t in range(3):
        scores, state = step_fn(tf.constant(target_in[:, t]), state)
        np.testing.assert_allclose(tf.nn.log_softmax(logits[:, t]), scores, atol=1e-4)


def test_quantizing_says_what_it_takes():
    model = make_model(TransformerSeq2Seq, "tied")
    with pytest.raises(ValueError, match="mode='int4'"):
        model.quantize("int4")
    with pytest.raises(ValueError, match="filters="):
        model.quantize("int8", filters="ffn")
    with pytest.raises(ValueError, match="weight_quantizer="):
        model.quantize(config=keras.quantizers.Int8QuantizationConfig(
            weight_quantizer=keras.quantizers.AbsMaxQuantizer(axis=0)))
    model.quantize("int8")
    with pytest.raises(ValueError, match="already quantized"):
        model.quantize("int8")
    with pytest.raises(ValueError, match="already quantized"):
        quantized_copy(model)


@pytest.mark.slow  # two Transformers built and stepped
def test_weight_only_int8_multiplies_in_float():
    model = make_model(TransformerSeq2Seq, "joint")
    copy = make_model(TransformerSeq2Seq, "joint")
    copy.set_weights(model.get_weights())
    copy.quantize(config=keras.quantizers.Int8QuantizationConfig(activation_quantizer=None))
    assert copy.head.inference_activations == "float"
    dense = [layer for layer in copy._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    assert all(layer.inputs_quantizer is None for layer in dense)
    source = source_batch()
    float_scores, int8_scores = step_scores(model, source), step_scores(copy, source)
    assert not np.array_equal(float_scores, int8_scores)
    np.testing.assert_allclose(int8_scores, float_scores, atol=0.05)
