"""Tests for `tf_outheads_zoo.lstm.LSTMSeq2Seq`: decoding contract, padding, saving, training."""

import itertools
import random

import keras
import numpy as np
import pytest
from keras import ops

from tf_outheads.data import SubwordTokenizer
from tf_outheads.data import make_training_dataset
from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import greedy_search
from tf_outheads.layers.heads import SoftmaxHead, TiedSoftmaxHead
from tf_outheads.layers.joint_head import JointEmbeddingHead
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.metrics import parameter_report
from tf_outheads_zoo.lstm import LSTMSeq2Seq

SOURCE_VOCAB_SIZE = 23
TARGET_VOCAB_SIZE = 19
EMBEDDING_DIM = 8
HIDDEN_DIM = 10  # != EMBEDDING_DIM: the tied head has a projection

# Three sentences of different lengths, padded with PAD_ID (0).
SOURCE_LENGTHS = [4, 6, 2]
TARGET_LENGTHS = [3, 5, 2]


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(4, SOURCE_VOCAB_SIZE, size=(3, max(SOURCE_LENGTHS))).astype("int32")
    target_in = rng.integers(4, TARGET_VOCAB_SIZE, size=(3, max(TARGET_LENGTHS))).astype("int32")
    target_in[:, 0] = BOS_ID
    for row, (source_length, target_length) in enumerate(zip(SOURCE_LENGTHS, TARGET_LENGTHS)):
        source[row, source_length - 1] = EOS_ID
        source[row, source_length:] = PAD_ID
        target_in[row, target_length:] = PAD_ID
    return source, target_in


def make_model(head="softmax", randomize=True, **kwargs):
    """A small model; `randomize` draws every weight (biases too) from N(0, 0.3²)."""
    config = dict(embedding_dim=EMBEDDING_DIM, hidden_dim=HIDDEN_DIM, num_layers=1, dropout=0.0)
    config.update(kwargs)
    model = LSTMSeq2Seq(SOURCE_VOCAB_SIZE, TARGET_VOCAB_SIZE, head=head, **config)
    if randomize:
        rng = np.random.default_rng(1)
        for weight in model.weights:
            weight.assign(0.3 * rng.normal(size=weight.shape).astype("float32"))
    return model


def unique_weights(model):
    return list({id(w): w for w in model.weights}.values())


def size(weight):
    return int(np.prod(weight.shape))


ARCHITECTURES = list(itertools.product(["softmax", "tied"], [1, 2], [False, True], [False, True]))
ARCHITECTURES += [("joint", 2, True, True), ("joint", 1, False, False)]
ARCHITECTURE_IDS = [
    f"{head}-{layers}layer{'-bi' if bi else ''}{'-feed' if feed else ''}"
    for head, layers, bi, feed in ARCHITECTURES
]


# -- the decoding contract ------------------------------------------------------


@pytest.mark.parametrize(
    "head, num_layers, bidirectional, input_feeding", ARCHITECTURES, ids=ARCHITECTURE_IDS
)
def test_teacher_forcing_equals_step_wise_decoding(head, num_layers, bidirectional, input_feeding):
    model = make_model(
        head, num_layers=num_layers, bidirectional_encoder=bidirectional,
        input_feeding=input_feeding,
    )
    source, target_in = make_batch()
    hidden = ops.convert_to_numpy(model.decoder(target_in, model.encode(source)))
    logits = model({"source_ids": source, "target_in": target_in})
    assert tuple(hidden.shape) == (3, 5, HIDDEN_DIM)
    assert tuple(logits.shape) == (3, 5, TARGET_VOCAB_SIZE)

    state = model.initial_decoding_state(source)
    cache = model.head.inference_cache()
    step_hidden, step_scores = [], []
    for t in range(target_in.shape[1]):
        h_t, state = model.decoder.step(target_in[:, t], state)
        step_hidden.append(ops.convert_to_numpy(h_t))
        step_scores.append(ops.convert_to_numpy(model.head.scores(h_t, cache)))
    np.testing.assert_allclose(np.stack(step_hidden, axis=1), hidden, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        np.stack(step_scores, axis=1), ops.log_softmax(logits, axis=-1), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("encoder_layers, decoder_layers", [(1, 2), (2, 1), (1, 3)])
def test_separate_layer_counts_and_source_embedding(encoder_layers, decoder_layers):
    # The VIVO report's Table 3 shape: 1 encoder layer, 2 decoder layers, a
    # source embedding wider than the target's.
    model = make_model("tied", num_layers=4, encoder_layers=encoder_layers,
                       decoder_layers=decoder_layers, source_embedding_dim=12,
                       bidirectional_encoder=True)
    assert len(model.encoder.rnn_layers) == encoder_layers
    assert len(model.decoder.cells) == decoder_layers
    assert tuple(model.source_embedding.embeddings.shape) == (SOURCE_VOCAB_SIZE, 12)
    assert tuple(model.target_embedding.embeddings.shape) == (TARGET_VOCAB_SIZE, EMBEDDING_DIM)
    source, target_in = make_batch()

    embedded = model.source_embedding(source)
    _, hidden, cell = model.encoder(embedded, mask=source != PAD_ID)
    state = model.initial_decoding_state(source)
    shared = min(encoder_layers, decoder_layers)
    for name, final in (("hidden", hidden), ("cell", cell)):
        assert tuple(state[name].shape) == (3, decoder_layers, HIDDEN_DIM)
        np.testing.assert_allclose(state[name][:, :shared], final[:, :shared], rtol=1e-6)
        np.testing.assert_array_equal(state[name][:, shared:], 0.0)

    logits = model({"source_ids": source, "target_in": target_in})
    step_fn = model.make_step_fn()
    step_scores = []
    for t in range(target_in.shape[1]):
        scores, state = step_fn(target_in[:, t], state)
        step_scores.append(ops.convert_to_numpy(scores))
    np.testing.assert_allclose(
        np.stack(step_scores, axis=1), ops.log_softmax(logits, axis=-1), rtol=1e-5, atol=1e-5)

    clone = LSTMSeq2Seq.from_config(model.get_config())
    assert len(clone.encoder.rnn_layers) == encoder_layers
    assert len(clone.decoder.cells) == decoder_layers
    assert clone.count_params() == model.count_params()


@pytest.mark.parametrize("head", ["softmax", "tied"])
def test_make_step_fn_scores_are_head_scores(head):
    model = make_model(head)
    source, target_in = make_batch()
    state = model.initial_decoding_state(source)
    scores, new_state = model.make_step_fn()(target_in[:, 0], state)
    h_t, _ = model.decoder.step(target_in[:, 0], state)
    np.testing.assert_allclose(scores, model.head.scores(h_t), rtol=1e-6, atol=1e-6)
    assert set(new_state) == set(state)
    for key in state:
        assert tuple(new_state[key].shape) == tuple(state[key].shape), key


@pytest.mark.parametrize(
    "num_layers, bidirectional",
    [(1, False), (1, True), (2, False), (2, True)],
    ids=["1layer", "1layer-bi", "2layer", "2layer-bi"],
)
def test_sentence_alone_equals_sentence_in_padded_batch(num_layers, bidirectional):
    model = make_model("tied", num_layers=num_layers, bidirectional_encoder=bidirectional)
    source, target_in = make_batch()
    logits = ops.convert_to_numpy(model({"source_ids": source, "target_in": target_in}))
    for row, (source_length, target_length) in enumerate(zip(SOURCE_LENGTHS, TARGET_LENGTHS)):
        alone = model(
            {
                "source_ids": source[row : row + 1, :source_length],
                "target_in": target_in[row : row + 1, :target_length],
            }
        )
        np.testing.assert_allclose(
            alone[0], logits[row, :target_length], rtol=1e-5, atol=1e-5,
            err_msg=f"sentence {row}",
        )


def test_greedy_alone_equals_greedy_in_padded_batch():
    model = make_model("tied", num_layers=2, bidirectional_encoder=True)
    source, _ = make_batch()
    batch = greedy_search(model.make_step_fn(), model.initial_decoding_state(source), 3, 7)
    for row, source_length in enumerate(SOURCE_LENGTHS):
        alone_source = source[row : row + 1, :source_length]
        alone = greedy_search(model.make_step_fn(), model.initial_decoding_state(alone_source), 1, 7)
        np.testing.assert_array_equal(alone.ids[0], batch.ids[row])
        np.testing.assert_allclose(alone.scores[0], batch.scores[row], rtol=1e-5)


def test_dropout_only_in_training():
    model = make_model("softmax", num_layers=2, dropout=0.3)
    source, target_in = make_batch()
    inputs = {"source_ids": source, "target_in": target_in}
    inference = ops.convert_to_numpy(model(inputs, training=False))
    np.testing.assert_array_equal(model(inputs, training=False), inference)
    training = ops.convert_to_numpy(model(inputs, training=True))
    assert np.all(np.isfinite(training))
    assert not np.allclose(training, inference, atol=1e-4)


def test_scaled_attention_divides_the_scores_in_training_and_decoding():
    # Without input feeding the decoder's LSTM states do not depend on the attention,
    # so the scaled model's alignment is the plain one's scores over √hidden_dim.
    plain = make_model("tied", bidirectional_encoder=True, input_feeding=False)
    scaled = make_model("tied", bidirectional_encoder=True, input_feeding=False,
                        scaled_attention=True)  # the same weights (make_model's seed)
    source, target_in = make_batch()
    alignments = [ops.convert_to_numpy(m.decoder(target_in, m.encode(source),
                                                 return_alignments=True)[1])
                  for m in (plain, scaled)]
    real = (source != PAD_ID)[:, None, :]
    scores = np.where(real, np.log(np.where(real, alignments[0], 1.0)), -np.inf)
    scores = scores / np.sqrt(HIDDEN_DIM)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(alignments[1], expected, rtol=1e-4, atol=1e-6)
    # Input feeding: the fused training op, the step loop and step-wise decoding agree.
    model = make_model("tied", bidirectional_encoder=True, scaled_attention=True)
    unscaled = make_model("tied", bidirectional_encoder=True)
    fused = ops.convert_to_numpy(model.decoder(target_in, model.encode(source), training=True))
    model.decoder.fused = False
    looped = ops.convert_to_numpy(model.decoder(target_in, model.encode(source), training=True))
    np.testing.assert_allclose(fused, looped, rtol=1e-5, atol=1e-6)
    state = model.initial_decoding_state(source)
    steps = []
    for t in range(target_in.shape[1]):
        h_t, state = model.decoder.step(target_in[:, t], state)
        steps.append(ops.convert_to_numpy(h_t))
    np.testing.assert_allclose(np.stack(steps, axis=1), fused, rtol=1e-5, atol=1e-6)
    other = ops.convert_to_numpy(unscaled.decoder(target_in, unscaled.encode(source),
                                                  training=True))
    assert np.abs(other - fused).max() > 1e-3


# -- saving and configuration ---------------------------------------------------


@pytest.mark.parametrize("head", ["softmax", "tied", "joint"])
def test_keras_save_load_safe_mode(head, tmp_path):
    model = make_model(head, num_layers=2, bidirectional_encoder=True)
    source, target_in = make_batch()
    inputs = {"source_ids": source, "target_in": target_in}
    expected = ops.convert_to_numpy(model(inputs))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is LSTMSeq2Seq
    np.testing.assert_allclose(loaded(inputs), expected, rtol=1e-6, atol=1e-6)
    assert len(unique_weights(loaded)) == len(unique_weights(model))
    if head in ("tied", "joint"):
        assert type(loaded.head) is {"tied": TiedSoftmaxHead, "joint": JointEmbeddingHead}[head]
        assert loaded.head.embedding is loaded.target_embedding
        table = loaded.target_embedding.embeddings
        assert any(w is table for w in loaded.head.weights)
        table.assign(table * 2.0)  # still one variable after loading
        if head == "tied":
            np.testing.assert_array_equal(loaded.head.output_weights(), table)
        else:  # E' = σ(E·U + b_u) follows the doubled input embedding
            expected_rows = loaded.head._project_outputs(table)
            np.testing.assert_allclose(loaded.head.output_weights(), expected_rows)
    else:
        assert type(loaded.head) is SoftmaxHead


@pytest.mark.parametrize("head", ["softmax", "tied", "joint"])
def test_config_round_trip(head):
    model = make_model(head, num_layers=2, attention_score="dot", uniform_init=0.1,
                       scaled_attention=True)
    config = model.get_config()
    assert config["scaled_attention"] is True
    revived = LSTMSeq2Seq.from_config(config)
    assert revived.get_config() == config
    assert type(revived.head) is type(model.head)
    if head in ("tied", "joint"):
        assert revived.head.embedding is revived.target_embedding
    revived.set_weights(model.get_weights())
    source, target_in = make_batch()
    inputs = {"source_ids": source, "target_in": target_in}
    np.testing.assert_allclose(revived(inputs), model(inputs), rtol=1e-6, atol=1e-6)


def test_head_spec_dict():
    model = make_model(
        {"class_name": "tied", "config": {"projection": True, "use_bias": False}},
        embedding_dim=HIDDEN_DIM, randomize=False,
    )
    assert type(model.head) is TiedSoftmaxHead
    assert model.head.projection_layer is not None  # forced although sizes match
    assert model.head.bias is None
    assert model.get_config()["head"]["config"]["projection"] is True


# -- parameter counts -------------------------------------------------------------


def expected_groups(head, embedding_dim, hidden_dim, num_layers, bidirectional, feeding=True):
    def lstm(input_dim, units):
        return 4 * units * (input_dim + units + 1)

    encoder = 0
    for index in range(num_layers):
        input_dim = embedding_dim if index == 0 else hidden_dim
        if bidirectional:
            encoder += 2 * lstm(input_dim, hidden_dim // 2)
        else:
            encoder += lstm(input_dim, hidden_dim)
    decoder = lstm(embedding_dim + (hidden_dim if feeding else 0), hidden_dim)
    decoder += (num_layers - 1) * lstm(hidden_dim, hidden_dim)
    decoder += hidden_dim * hidden_dim + 2 * hidden_dim * hidden_dim  # W_a, W_c
    if head == "softmax":
        output_layer = TARGET_VOCAB_SIZE * hidden_dim + TARGET_VOCAB_SIZE
    else:
        projection = hidden_dim * embedding_dim if hidden_dim != embedding_dim else 0
        output_layer = TARGET_VOCAB_SIZE + projection
    return {
        "embeddings": (SOURCE_VOCAB_SIZE + TARGET_VOCAB_SIZE) * embedding_dim,
        "encoder": encoder,
        "decoder": decoder,
        "output_layer": output_layer,
    }


@pytest.mark.parametrize("head", ["softmax", "tied"])
@pytest.mark.parametrize("embedding_dim", [HIDDEN_DIM, EMBEDDING_DIM], ids=["d_eq_h", "d_ne_h"])
def test_parameter_report_groups(head, embedding_dim):
    model = make_model(
        head, embedding_dim=embedding_dim, num_layers=2, bidirectional_encoder=True,
        randomize=False,
    )
    report = parameter_report(model)
    assert report.groups == expected_groups(head, embedding_dim, HIDDEN_DIM, 2, True)
    assert report.total == sum(size(w) for w in unique_weights(model))
    assert report.total == report.trainable


@pytest.mark.parametrize("embedding_dim", [HIDDEN_DIM, EMBEDDING_DIM], ids=["d_eq_h", "d_ne_h"])
def test_tied_model_is_smaller_by_the_output_matrix(embedding_dim):
    untied = parameter_report(make_model("softmax", embedding_dim=embedding_dim, randomize=False))
    tied = parameter_report(make_model("tied", embedding_dim=embedding_dim, randomize=False))
    # Untied: W (V×h) + b. Tied: b, plus the projection h×d when h != d.
    projection = HIDDEN_DIM * embedding_dim if embedding_dim != HIDDEN_DIM else 0
    assert untied.total - tied.total == TARGET_VOCAB_SIZE * HIDDEN_DIM - projection
    if embedding_dim == HIDDEN_DIM:
        assert untied.total - tied.total == TARGET_VOCAB_SIZE * embedding_dim  # exactly V×d


# -- initialisation ------------------------------------------------------------------

UNIFORM_INIT = 0.05


def test_uniform_init_bounds_kernels_and_embeddings():
    model = make_model("tied", num_layers=2, bidirectional_encoder=True,
                       uniform_init=UNIFORM_INIT, randomize=False)
    checked = [
        w for w in model.weights
        if not w.path.startswith("head/") and w.path.endswith(("kernel", "embeddings"))
    ]
    # 2 embeddings, 2 biLSTM layers × 2 directions × 2 kernels, 2 cells × 2, attention 2.
    assert len(checked) == 2 + 8 + 4 + 2
    for weight in checked:
        values = np.abs(ops.convert_to_numpy(weight))
        assert values.max() <= UNIFORM_INIT, weight.path
        assert values.max() > 0.5 * UNIFORM_INIT, weight.path  # drawn with this bound


def test_uniform_init_bounds_lstm_biases():
    model = make_model("softmax", num_layers=2, uniform_init=UNIFORM_INIT, randomize=False)
    biases = [w for w in model.encoder.weights + model.decoder.weights if w.path.endswith("bias")]
    assert len(biases) == 4
    for weight in biases:
        assert np.abs(ops.convert_to_numpy(weight)).max() <= UNIFORM_INIT, weight.path


@pytest.mark.parametrize("head", ["softmax", "tied"])
def test_uniform_init_bounds_head_weights(head):
    model = make_model(head, uniform_init=UNIFORM_INIT, randomize=False)
    for weight in model.head.weights:
        assert np.abs(ops.convert_to_numpy(weight)).max() <= UNIFORM_INIT, weight.path


def test_uniform_init_draws_each_weight_independently():
    model = make_model("softmax", uniform_init=UNIFORM_INIT, randomize=False)
    source_table = ops.convert_to_numpy(model.source_embedding.embeddings)
    target_table = ops.convert_to_numpy(model.target_embedding.embeddings)
    assert not np.array_equal(source_table[:TARGET_VOCAB_SIZE], target_table)
    memory_kernel = ops.convert_to_numpy(model.decoder.attention.memory_kernel)
    output_kernel = ops.convert_to_numpy(model.decoder.attention.output_kernel)
    assert np.isin(memory_kernel, output_kernel).mean() < 0.5


# -- arguments -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_layers": 0}, "Received: num_layers=0"),
        ({"num_layers": 9}, "Received: num_layers=9"),
        ({"num_layers": 1.5}, "Received: num_layers=1.5"),
        ({"encoder_layers": 0}, "Received: encoder_layers=0"),
        ({"decoder_layers": True}, "Received: decoder_layers=True"),
        ({"source_embedding_dim": 0}, "Received: source_embedding_dim=0"),
        ({"dropout": 1.0}, "Received: dropout=1.0"),
        ({"dropout": -0.1}, "Received: dropout=-0.1"),
        ({"bidirectional_encoder": True, "hidden_dim": 7}, "Received: hidden_dim=7"),
        ({"attention_score": "concat"}, "Received: score=concat"),
        ({"head": "no_such_head"}, "Unknown head 'no_such_head'"),
    ],
    ids=[
        "num_layers_zero",
        "num_layers_too_many",
        "num_layers_float",
        "encoder_layers_zero",
        "decoder_layers_bool",
        "source_embedding_dim_zero",
        "dropout_one",
        "dropout_negative",
        "bidirectional_odd_hidden",
        "attention_score",
        "head_unknown",
    ],
)
def test_invalid_arguments(kwargs, message):
    config = dict(embedding_dim=EMBEDDING_DIM, hidden_dim=HIDDEN_DIM, num_layers=1)
    config.update(kwargs)
    with pytest.raises(ValueError, match=message):
        LSTMSeq2Seq(SOURCE_VOCAB_SIZE, TARGET_VOCAB_SIZE, **config)


# -- a short training run on the real corpus -------------------------------------------


@pytest.fixture
def python_seeded():
    """Seeds Keras' unseeded initializers through Python's `random`, then restores it.

    Not `keras.utils.set_random_seed`: its `tf.random.set_seed` clears TF's
    kernel cache, which destroys the SentencePiece resource of every tokenizer
    already built (the session-scoped `bible_tokenizer`): NotFoundError later.
    """
    state = random.getstate()
    random.seed(0)
    yield
    random.setstate(state)


@pytest.mark.slow  # ~12 s: in the slow set, for the fast suite's 10-minute budget
@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed")
@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_training_on_bible_slice_lowers_loss_and_greedy_decodes(
    bible_slice, bible_tokenizer, python_seeded
):
    # A fresh copy of the session tokenizer: another test's `tf.random.set_seed`
    # (e.g. tf_outheads_zoo.train.run_training) destroys the fixture's SentencePiece resource.
    tokenizer = SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)
    dataset = make_training_dataset(
        bible_slice.sources[:400], bible_slice.targets[:400], tokenizer, tokenizer,
        batch_tokens=512, max_length=32, seed=0,
    )
    vocabulary_size = tokenizer.vocab_size
    model = LSTMSeq2Seq(
        vocabulary_size, vocabulary_size, embedding_dim=64, hidden_dim=64, num_layers=1,
        dropout=0.0, head="tied",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3), loss=MaskedSequenceCrossEntropy(),
        jit_compile=False,
    )
    history = model.fit(dataset, epochs=8, verbose=0)  # 9 batches an epoch
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses

    features, _ = next(iter(dataset))
    source = features["source_ids"]
    batch_size, max_length = int(source.shape[0]), 12
    result = greedy_search(
        model.make_step_fn(), model.initial_decoding_state(source), batch_size, max_length
    )
    ids, lengths = result.ids.numpy(), result.lengths.numpy()
    assert ids.shape == (batch_size, max_length) and ids.dtype == np.int32
    assert np.all((ids >= 0) & (ids < vocabulary_size))
    for row, length in zip(ids, lengths):
        assert 1 <= length <= max_length
        assert np.all(row[length:] == PAD_ID)
        eos = np.flatnonzero(row[:length] == EOS_ID)
        assert len(eos) <= 1  # a sentence ends at its first EOS
        if len(eos):
            assert eos[0] == length - 1
        else:
            assert length == max_length
    # Teacher forcing on the greedy output picks the same words with the same scores.
    target_in = np.concatenate([np.full((batch_size, 1), BOS_ID), ids[:, :-1]], axis=1)
    target_in = np.where(np.arange(max_length) < lengths[:, None], target_in, PAD_ID)
    log_probs = ops.convert_to_numpy(ops.log_softmax(
        model({"source_ids": source, "target_in": target_in.astype("int32")}), axis=-1
    ))
    emitted = np.arange(max_length) < lengths[:, None]
    np.testing.assert_array_equal(np.argmax(log_probs, -1)[emitted], ids[emitted])
    word_scores = np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    np.testing.assert_allclose(
        (word_scores * emitted).sum(-1), result.scores, rtol=1e-4, atol=1e-4
    )
