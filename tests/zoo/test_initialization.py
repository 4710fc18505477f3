"""The initial weights of the zoo models and the presets' optimizer defaults.

These are the reference implementations' defaults the zoo's baselines rest on
(issue "Sound baselines"): with Keras' own initializers the attentional LSTM
learned far slower than the same model in OpenNMT-py (benchmarks/docs/peer_opennmt.md). Each test fails if a default drifts back.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from tf_outheads_zoo.components import build_optimizer
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.presets import PRESETS, get_preset, preset_config
from tf_outheads_zoo.transformer import TransformerSeq2Seq

VOCAB = 400
LSTM_PRESETS = sorted(name for name, p in PRESETS.items() if p["model"]["model_type"] == "lstm")
TRANSFORMER_PRESETS = sorted(
    name for name, p in PRESETS.items() if p["model"]["model_type"] == "transformer")


def values(weight):
    return np.asarray(ops.convert_to_numpy(weight), dtype="float64")


def unique(weights):
    return list({id(w): w for w in weights}.values())


# -- attentional LSTM: OpenNMT-py's param_init, U(-0.1, 0.1) for every weight -------------
@pytest.mark.parametrize("head", ["softmax", "tied", {"class_name": "joint",
                                                      "config": {"joint_dim": 64}}])
def test_lstm_default_draws_every_weight_from_uniform_0_1(head):
    keras.utils.set_random_seed(0)  # the bounds below hold for most draws, not all
    model = LSTMSeq2Seq(VOCAB, VOCAB, embedding_dim=32, hidden_dim=32, num_layers=2,
                        bidirectional_encoder=True, head=head)
    weights = unique(model.weights)
    bound = 0.1
    pooled = np.concatenate([values(w).ravel() for w in weights])
    # U(-a, a): mean 0, sd a/√3; the pooled sample has tens of thousands of values.
    assert pooled.size > 20_000
    assert abs(pooled.mean()) < 0.003
    assert pooled.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    for weight in weights:
        drawn = values(weight)
        assert np.abs(drawn).max() <= bound, weight.path
        if drawn.size >= 512:  # each large variable spans the interval, not a narrower one
            assert np.abs(drawn).max() > 0.95 * bound, weight.path
            assert drawn.std() == pytest.approx(bound / math.sqrt(3), rel=0.1), weight.path


def test_lstm_default_has_no_keras_forget_bias_or_orthogonal_kernel():
    model = LSTMSeq2Seq(VOCAB, VOCAB, embedding_dim=32, hidden_dim=32, num_layers=1)
    cell = model.decoder.cells[0]
    units = cell.units
    forget_bias = values(cell.bias)[units:2 * units]
    assert np.abs(forget_bias).max() <= 0.1  # Keras' unit_forget_bias would make it 1
    recurrent = values(cell.recurrent_kernel)  # (units, 4·units)
    gram = recurrent[:, :units].T @ recurrent[:, :units]
    assert not np.allclose(gram, np.eye(units), atol=0.1)  # not Keras' orthogonal draw


def test_lstm_uniform_init_none_keeps_keras_initializers():
    model = LSTMSeq2Seq(VOCAB, VOCAB, embedding_dim=32, hidden_dim=32, num_layers=1,
                        uniform_init=None)
    cell = model.decoder.cells[0]
    np.testing.assert_array_equal(values(cell.bias)[cell.units:2 * cell.units], 1.0)


def test_lstm_uniform_init_is_in_the_saved_config():
    model = LSTMSeq2Seq(VOCAB, VOCAB, embedding_dim=16, hidden_dim=16, num_layers=1)
    assert model.get_config()["uniform_init"] == 0.1


@pytest.mark.parametrize("name", LSTM_PRESETS)
def test_lstm_presets_use_the_reference_initialisation_and_optimizer(name):
    config = preset_config(name)
    assert getattr(config.model, "uniform_init", 0.1) == 0.1
    optimizer = build_optimizer(config)
    # PyTorch's Adam ε and OpenNMT-py's max_grad_norm: one norm over all gradients.
    assert optimizer.epsilon == 1e-8
    assert optimizer.clipnorm is None
    assert optimizer.global_clipnorm == 5.0


def test_clipping_keys_are_exclusive():
    with pytest.raises(ValueError, match="at most one of train.clipnorm"):
        get_preset("lstm-tiny", {"train.clipnorm": 1.0})


@pytest.mark.parametrize("key,value", [("train.adam_epsilon", 1e-9), ("train.adam_beta_2", 0.98),
                                       ("train.optimizer", "lazy_adam"),
                                       ("train.learning_rate_schedule",
                                        {"name": "inverse_sqrt", "warmup_steps": 10})])
def test_optimizer_keys_settable_on_every_preset(key, value):
    for name in ("lstm-cpu", "lstm-tiny", "lstm-pappas", "transformer-cpu"):
        optimizer = build_optimizer(preset_config(name, {key: value}))
        if key == "train.optimizer":
            assert type(optimizer).__name__ == "LazyAdam"
        elif key == "train.adam_epsilon":
            assert optimizer.epsilon == value
        elif key == "train.adam_beta_2":
            assert optimizer.beta_2 == value


# -- Transformer: Xavier linear layers, N(0, d^-0.5) embeddings scaled by √d ----------------
def transformer(**kwargs):
    config = dict(model_dim=64, ffn_dim=128, num_heads=4, encoder_layers=2, decoder_layers=2)
    config.update(kwargs)
    return TransformerSeq2Seq(VOCAB, VOCAB, **config)


def test_transformer_embeddings_are_normal_with_sd_d_to_the_minus_half():
    model = transformer()
    for table in (model.source_embedding.embeddings, model.target_embedding.embeddings):
        drawn = values(table)
        assert abs(drawn.mean()) < 0.01
        assert drawn.std() == pytest.approx(64 ** -0.5, rel=0.03)
        # Normal, not uniform: about 4.6 % of the values lie beyond 2 sd.
        assert 0.03 < (np.abs(drawn) > 2 * 64 ** -0.5).mean() < 0.06


def test_transformer_dense_kernels_are_xavier_uniform_and_biases_zero():
    model = transformer()
    kernels = [w for w in model.weights if w.path.endswith("kernel")]
    assert len(kernels) == 2 * 6 + 2 * 10 + 1  # encoder, decoder layers, head
    for weight in kernels:
        fan_in, fan_out = weight.shape if "head" not in weight.path else weight.shape[::-1]
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        drawn = values(weight)
        assert np.abs(drawn).max() <= limit + 1e-7, weight.path
        assert drawn.std() == pytest.approx(limit / math.sqrt(3), rel=0.1), weight.path
    for weight in model.weights:
        if weight.path.endswith(("bias", "beta")):
            np.testing.assert_array_equal(values(weight), 0.0, err_msg=weight.path)
        elif weight.path.endswith("gamma"):
            np.testing.assert_array_equal(values(weight), 1.0, err_msg=weight.path)


def test_transformer_scales_embeddings_by_sqrt_d():
    model = transformer(dropout=0.0)
    ids = np.array([[5, 9, 17]], "int32")
    positions = np.arange(3, dtype="int32")[None, :]
    embedded = values(model._embed(model.source_embedding, ids, positions))
    table = values(model.source_embedding.embeddings)
    zero_positions = values(model._embed(model.source_embedding, ids, positions)) - math.sqrt(
        64) * table[ids[0]][None]
    # What is left after removing √d·E(ids) is the position encoding: the same for any ids.
    other = values(model._embed(model.source_embedding, ids + 1, positions)) - math.sqrt(
        64) * table[ids[0] + 1][None]
    np.testing.assert_allclose(zero_positions, other, atol=1e-5)
    assert np.abs(embedded).max() > 1.0  # √d·N(0, 1/d) has sd 1, not 1/8


@pytest.mark.parametrize("name", TRANSFORMER_PRESETS)
def test_transformer_presets_keep_vaswani_optimizer(name):
    optimizer = build_optimizer(preset_config(name))
    assert optimizer.beta_2 == 0.98
    assert optimizer.epsilon == 1e-9
    assert optimizer.clipnorm is None and optimizer.global_clipnorm is None
