"""Every zoo model and head under Keras mixed precision (`mixed_float16`, `mixed_bfloat16`).

The contract: variables stay float32, the layers compute in float16/bfloat16,
logits, losses and decoding scores are float32 (softmax and losses in float32);
`mixed_float16` trains through Keras' `LossScaleOptimizer`; training lowers the
loss, greedy and beam search give finite scores equal to the training logits,
and `.keras` files keep the policy. Tiny models: float16 matmuls are slow on CPU.
"""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tf_outheads import SampledSoftmaxLoss, VMFLoss, compile_for_translation
from tf_outheads.data import build_tokenizers
from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.decoding import Translator, beam_search, greedy_search
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq

# Every head and model under both policies (about a minute): `pytest -m slow`.
pytestmark = pytest.mark.slow

POLICIES = ["mixed_float16", "mixed_bfloat16"]
MODELS = ["lstm", "transformer"]
JOINT = {"class_name": "joint", "config": {"joint_dim": 24}}
HEADS = {"softmax": "softmax", "tied": "tied", "joint": JOINT}
VOCAB = 23
DIM = 16
MAX_LENGTH = 6


@pytest.fixture(params=POLICIES)
def policy(request):
    """The global policy for one test; float32 again afterwards (it is global state)."""
    keras.mixed_precision.set_dtype_policy(request.param)
    try:
        yield request.param
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def compute_dtype(policy):
    return tf.float16 if policy == "mixed_float16" else tf.bfloat16


def make_model(kind, head="softmax", seed=0, **kwargs):
    """A tiny model; Keras' unseeded initializers draw their seeds from Python's `random`,
    seeded here and restored (`keras.utils.set_random_seed` would free the SentencePiece
    resources of session-scoped tokenizers)."""
    state = random.getstate()
    random.seed(seed)
    try:
        if kind == "lstm":
            return LSTMSeq2Seq(VOCAB, VOCAB, embedding_dim=DIM, hidden_dim=DIM, num_layers=1,
                               dropout=0.0, head=head, **kwargs)
        return TransformerSeq2Seq(VOCAB, VOCAB, model_dim=DIM, ffn_dim=32, num_heads=2,
                                  encoder_layers=1, decoder_layers=1, dropout=0.0,
                                  attention_dropout=0.0, ffn_dropout=0.0, head=head, **kwargs)
    finally:
        random.setstate(state)


def make_batch():
    """Four sentences with source and target padding; `target_out` ends with EOS."""
    rng = np.random.default_rng(0)
    source = rng.integers(4, VOCAB, (4, 6)).astype("int32")
    source[2, 4:] = PAD_ID
    target_out = rng.integers(4, VOCAB, (4, 5)).astype("int32")
    target_out[:, -1] = EOS_ID
    target_out[3, 2] = EOS_ID
    target_out[3, 3:] = PAD_ID
    target_in = np.concatenate([np.full((4, 1), BOS_ID, "int32"), target_out[:, :-1]], axis=1)
    target_in[3, 3:] = PAD_ID
    return {"source_ids": source, "target_in": target_in}, target_out


def hidden_states(model, x):
    """The decoder outputs `(B, T, d)` the head reads."""
    if isinstance(model, LSTMSeq2Seq):
        return model.decoder(x["target_in"], model.encode(x["source_ids"]))
    memory, source_mask = model.encode(x["source_ids"])
    return model.decode(x["target_in"], memory, source_mask)


def compile_model(model, run_eagerly=True, **kwargs):
    """`compile_for_translation` at lr 1e-2. Eager by default: the same casts and loss
    scaling as the compiled step, and about 5x faster than tracing these tiny models
    on CPU (`test_compiled_train_step_lowers_the_loss_and_skips_no_step` runs the
    compiled step)."""
    compile_for_translation(model, learning_rate=1e-2, **kwargs)
    model.run_eagerly = run_eagerly
    return model


def fit_history(model, x, y, epochs=4):
    return model.fit(x, y, batch_size=4, epochs=epochs, shuffle=False, verbose=0).history


def assert_mixed_model(model, policy):
    """Float32 variables, layers computing in the policy's half type."""
    assert model.dtype_policy.name == policy
    assert {w.dtype for w in model.weights} == {"float32"}
    if policy == "mixed_float16":
        # Keras wraps the optimizer for dynamic loss scaling.
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    else:
        assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


def assert_trains(losses):
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses


def decode(model, source_ids, beam_size=1):
    """Greedy or beam search through the model's step function: `(ids, scores)`."""
    state = model.initial_decoding_state(source_ids, max_length=MAX_LENGTH)
    step_fn = model.make_step_fn()
    batch = source_ids.shape[0]
    if beam_size == 1:
        result = greedy_search(step_fn, state, batch, MAX_LENGTH)
        return result.ids, result.scores
    bound = getattr(model.head, "max_step_score", 0.0)
    result = beam_search(step_fn, state, batch, beam_size, MAX_LENGTH, max_step_score=bound,
                         num_hypotheses=2)
    return result.ids, result.scores


# -- training ----------------------------------------------------------------------------------

@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("kind", MODELS)
def test_training_keeps_float32_variables_logits_and_loss(kind, head, policy):
    x, y = make_batch()
    model = compile_model(make_model(kind, HEADS[head]))
    assert_mixed_model(model, policy)
    assert hidden_states(model, x).dtype == compute_dtype(policy)
    logits = model(x)
    assert logits.dtype == tf.float32
    assert model.loss(y, logits).dtype == tf.float32
    assert_trains(fit_history(model, x, y)["loss"])


@pytest.mark.parametrize("kind", MODELS)
def test_compiled_train_step_lowers_the_loss_and_skips_no_step(kind, policy):
    x, y = make_batch()
    model = compile_model(make_model(kind, "tied"), run_eagerly=False)
    assert_mixed_model(model, policy)
    assert_trains(fit_history(model, x, y)["loss"])
    # Every step applied: no float16 gradient overflowed at the initial loss scale.
    assert int(model.optimizer.iterations.numpy()) == 4
    if policy == "mixed_float16":
        assert float(model.optimizer.dynamic_scale.numpy()) == 2.0 ** 15


@pytest.mark.parametrize("kind", MODELS)
def test_sampled_softmax_trains_with_float32_candidate_logits(kind, policy):
    x, y = make_batch()
    model = compile_model(make_model(kind, "tied"),
                          loss=SampledSoftmaxLoss(fraction=0.3, seed=1))
    assert_mixed_model(model, policy)
    with model.training_outputs():  # a training step: the loss reads h, not logits
        hidden = model(x, training=True)["hidden"]
    assert hidden.dtype == compute_dtype(policy)
    assert model.head.logits_for(hidden, tf.constant([2, 5, 7])).dtype == tf.float32
    per_token = model.loss.token_losses(y, model.step_outputs({"hidden": hidden}), model.head)
    assert per_token.dtype == tf.float32
    assert_trains(fit_history(model, x, y)["loss"])


def test_rewe_trains_both_outputs(policy):
    x, y = make_batch()
    model = compile_model(make_model("lstm", "softmax", rewe={"hidden_dim": 8}),
                          auxiliary_weights={"rewe": 1.0})
    assert_mixed_model(model, policy)
    with model.training_outputs():
        outputs = model.step_outputs(model(x, training=True))
    assert outputs.of(model.head).dtype == tf.float32
    assert outputs.of(model.rewe).dtype == compute_dtype(policy)  # the loss computes in float32
    assert model.rewe.target_vectors().dtype == tf.float32
    # Under float16 the first steps overflow at the initial loss scale (2^15): the
    # cosine loss's gradient grows as 1/‖ê‖, and on this tiny batch some ê start near
    # 0. They are skipped while the scale halves (dynamic loss scaling): more epochs.
    history = fit_history(model, x, y, epochs=10)
    assert_trains(history["logits_loss"])
    assert_trains(history["rewe_loss"])


@pytest.mark.parametrize("kind", MODELS)
def test_shared_private_embeddings_train(kind, policy):
    x, y = make_batch()
    rng = np.random.default_rng(0)
    # 17 pairs (8 lm, 3 wf, 6 ur); the rest of each vocabulary unpaired.
    pairs = WordPairs(np.arange(17), rng.permutation(17), np.repeat([0, 1, 2], [8, 3, 6]),
                      VOCAB, VOCAB)
    model = compile_model(make_model(kind, "tied", shared_private={
        "pairs": pairs, "sharing_ratios": (0.9, 0.7, 0.5)}))
    assert_mixed_model(model, policy)
    assert model.target_embedding(x["target_in"]).dtype == compute_dtype(policy)
    assert model(x).dtype == tf.float32
    assert_trains(fit_history(model, x, y)["loss"])


def test_vmf_head_trains_and_decodes_by_likelihood(policy):
    x, y = make_batch()
    head = {"class_name": "continuous", "config": {"output_dim": DIM,
                                                   "scoring": "log_likelihood"}}
    model = make_model("lstm", head)
    model.head.set_target_vectors(np.random.default_rng(3).normal(size=(VOCAB, DIM)))
    compile_model(model, loss=VMFLoss(norm_penalty=0.02))
    assert_mixed_model(model, policy)
    assert model(x).dtype == compute_dtype(policy)  # ê; the vMF loss computes in float32
    assert model.head.target_vectors().dtype == tf.float32
    assert_trains(fit_history(model, x, y)["loss"])
    # The exact log-Bessel normaliser of every step's scores, from float32 κ.
    for beam_size in (1, 3):
        _, scores = decode(model, x["source_ids"], beam_size=beam_size)
        assert scores.dtype == tf.float32 and np.all(np.isfinite(scores.numpy()))


# -- decoding ----------------------------------------------------------------------------------

@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("kind", MODELS)
def test_step_scores_equal_the_training_log_probabilities(kind, head, policy):
    # The same float32 logits in teacher forcing and in decoding: the output bias is
    # read and added in float32 in both (`call` rounded it to float16/bfloat16, off by
    # up to 0.03/0.25 at this scale). The tolerance leaves room for a matmul kernel
    # that rounds a (B, 1, d) step differently from the (B, T, d) pass.
    x, _ = make_batch()
    model = make_model(kind, HEADS[head])
    model.head.bias.assign(np.random.default_rng(1).normal(size=VOCAB) * 30.0 + 0.3)
    full = ops.log_softmax(model(x), axis=-1).numpy()  # (B, T, V)
    state = model.initial_decoding_state(x["source_ids"], max_length=x["target_in"].shape[1])
    step_fn = model.make_step_fn()
    for t in range(x["target_in"].shape[1]):
        scores, state = step_fn(x["target_in"][:, t], state)
        assert scores.dtype == tf.float32
        rows = x["target_in"][:, t] != PAD_ID
        np.testing.assert_allclose(scores.numpy()[rows], full[rows, t],
                                   atol=2e-3 if policy == "mixed_float16" else 2e-2)


@pytest.mark.parametrize("kind", MODELS)
def test_greedy_and_beam_search_give_finite_float32_scores(kind, policy):
    x, _ = make_batch()
    model = make_model(kind, JOINT)
    greedy_ids, greedy_scores = decode(model, x["source_ids"])
    beam_ids, beam_scores = decode(model, x["source_ids"], beam_size=3)
    assert greedy_scores.dtype == beam_scores.dtype == tf.float32
    assert np.all(np.isfinite(greedy_scores.numpy()))
    assert np.all(np.isfinite(beam_scores.numpy()[:, 0]))
    assert beam_ids.shape == (4, 2, MAX_LENGTH)
    # Without a length penalty the best beam is at least as likely as the greedy path.
    assert np.all(beam_scores.numpy()[:, 0] >= greedy_scores.numpy() - 1e-4)


def test_coverage_penalty_reads_float32_lstm_alignments(policy):
    x, _ = make_batch()
    model = make_model("lstm", "tied")
    state = model.initial_decoding_state(x["source_ids"])
    _, new_state = model.make_step_fn()(np.full((4,), BOS_ID, "int32"), state)
    assert new_state["alignment"].dtype == tf.float32
    result = beam_search(model.make_step_fn(), state, 4, 3, MAX_LENGTH, length_penalty=0.6,
                         coverage_penalty=0.2)
    assert np.all(np.isfinite(result.scores.numpy()[:, 0]))


@pytest.fixture(scope="module")
def bible_pieces(bible_slice, tmp_path_factory):
    """A 300-piece tokenizer and 300 verses (a fraction of a second to build)."""
    verses = bible_slice.select(range(300))
    tokenizer, _ = build_tokenizers(verses.sources, verses.targets,
                                    tmp_path_factory.mktemp("mixed_tokenizer"), vocab_size=300)
    return tokenizer, verses.sources[:3]


@pytest.mark.parametrize("kind", MODELS)
def test_translator_translates_text_with_greedy_and_beam_search(kind, policy, bible_pieces):
    tokenizer, sources = bible_pieces
    state = random.getstate()
    random.seed(0)
    try:
        model = (LSTMSeq2Seq(tokenizer.vocab_size, tokenizer.vocab_size, embedding_dim=DIM,
                             hidden_dim=DIM, num_layers=1, head="tied") if kind == "lstm" else
                 TransformerSeq2Seq(tokenizer.vocab_size, tokenizer.vocab_size, model_dim=DIM,
                                    ffn_dim=32, num_heads=2, encoder_layers=1,
                                    decoder_layers=1, head="tied"))
    finally:
        random.setstate(state)
    for beam_size in (1, 3):
        translator = Translator(model, tokenizer, tokenizer, beam_size=beam_size,
                                max_length_offset=2, replace_unk=True)
        hypotheses = translator.translate(sources)
        assert len(hypotheses) == 3 and all(isinstance(h, str) for h in hypotheses)


# -- saving ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", MODELS)
def test_keras_file_keeps_the_policy(kind, policy, tmp_path):
    x, _ = make_batch()
    model = make_model(kind, JOINT)
    path = str(tmp_path / "model.keras")
    model.save(path)
    keras.mixed_precision.set_dtype_policy("float32")  # loading must not depend on it
    restored = keras.saving.load_model(path)
    for layer in (restored, restored.head, restored.encoder, restored.decoder,
                  restored.target_embedding):
        assert layer.dtype_policy.name == policy, layer.name
    assert {w.dtype for w in restored.weights} == {"float32"}
    assert hidden_states(restored, x).dtype == compute_dtype(policy)
    np.testing.assert_allclose(restored(x).numpy(), model(x).numpy(), atol=1e-6)
