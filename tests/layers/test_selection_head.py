"""Neural vocabulary selection (Domhan et al. 2022): the head's pooling, its loss against
a NumPy transcription of Sockeye's, and its place in a model (built last, trained by
`model.fit`, saved in the config)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads import BagOfWordsLoss, VocabularySelectionHead
from tf_outheads.losses.bag_of_words import bag_of_words
from tf_outheads.training.translation import compile_for_translation
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq


def sigmoid_terms(logits, bag, positive_weight):
    """Sockeye's `BinaryCrossEntropyBowLoss.forward`, in NumPy: per-sentence losses."""
    positives = bag.sum()
    weight = positive_weight * (bag.size - positives) / positives
    p = 1.0 / (1.0 + np.exp(-logits))
    terms = -(weight * bag * np.log(p) + (1 - bag) * np.log(1 - p))
    scale = 1.0 / (bag.shape[1] + bag.sum(1).mean() * (weight - 1.0))
    return terms.sum(1) * scale


@pytest.mark.parametrize("pooling", ["logit_max", "state_max"])
def test_pooling_is_the_max_over_the_source_pieces_only(pooling):
    rng = np.random.default_rng(0)
    memory = rng.normal(size=(3, 5, 4)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=bool)
    head = VocabularySelectionHead(7, pooling=pooling)
    logits = head(memory, mask).numpy()
    kernel, bias = (w.numpy() for w in head.projection.weights)
    for row in range(2):
        states = memory[row][mask[row]]
        expected = ((states @ kernel + bias).max(0) if pooling == "logit_max"
                    else states.max(0) @ kernel + bias)
        np.testing.assert_allclose(logits[row], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(logits[2], 0.0)  # a source of padding only


def test_block_gradient_trains_the_head_and_not_the_encoder():
    memory = tf.Variable(np.random.default_rng(1).normal(size=(2, 3, 4)).astype("float32"))
    mask = tf.ones((2, 3), tf.bool)
    for block, expect_memory_gradient in ((False, True), (True, False)):
        head = VocabularySelectionHead(6, block_gradient=block)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(head(memory, mask))
        memory_gradient, kernel_gradient = tape.gradient(
            loss, [memory, head.projection.kernel])
        assert (memory_gradient is not None
                and np.abs(memory_gradient.numpy()).sum() > 0) == expect_memory_gradient
        assert np.abs(kernel_gradient.numpy()).sum() > 0


def test_the_bag_of_words_loss_is_sockeyes():
    rng = np.random.default_rng(2)
    ids = np.array([[5, 6, 6, 3, 0, 0], [7, 3, 0, 0, 0, 0]], dtype="int32")
    bag = bag_of_words(ids, 9).numpy()
    np.testing.assert_array_equal(np.argwhere(bag).tolist(),
                                  [[0, 3], [0, 5], [0, 6], [1, 3], [1, 7]])  # no <pad>
    logits = rng.normal(size=(2, 9)).astype("float32")
    for positive_weight in (1.0, 10.0):
        loss = BagOfWordsLoss(positive_weight)
        expected = sigmoid_terms(logits.astype("float64"), bag, positive_weight)
        np.testing.assert_allclose(float(loss(ids, logits)), expected.mean(), rtol=1e-5)


@pytest.mark.parametrize("bad, message", [
    ({"pooling": "mean"}, r"`pooling` must be one of \('logit_max', 'state_max'\)"),
    ({"vocabulary_size": 0}, r"vocabulary_size"),
])
def test_bad_selection_head_arguments_are_refused_naming_them(bad, message):
    with pytest.raises(ValueError, match=message):
        VocabularySelectionHead(**{"vocabulary_size": 10, **bad})


def test_bad_model_selection_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match=r"Unknown selection head options \['threshold'\]"):
        LSTMSeq2Seq(20, 30, embedding_dim=8, hidden_dim=8, selection={"threshold": 0.3})
    with pytest.raises(ValueError, match=r"VocabularySelectionHead of the target vocabulary "
                                         r"\(30 pieces\)"):
        LSTMSeq2Seq(20, 30, embedding_dim=8, hidden_dim=8,
                    selection=VocabularySelectionHead(31))
    with pytest.raises(ValueError, match=r"BagOfWordsLoss|positive_weight"):
        BagOfWordsLoss(-1.0)


MODELS = {
    "lstm": lambda selection: LSTMSeq2Seq(
        200, 300, embedding_dim=16, hidden_dim=16, head="tied", selection=selection),
    "transformer": lambda selection: TransformerSeq2Seq(
        200, 300, model_dim=16, ffn_dim=32, num_heads=2, encoder_layers=1,
        decoder_layers=1, head="tied", selection=selection),
}


@pytest.mark.parametrize("kind", ["lstm", pytest.param("transformer", marks=pytest.mark.slow)])
def test_every_model_trains_its_selection_head_with_fit(kind):
    """Built after every other weight (those draw the same values without it), trained by
    `model.fit` next to the output layer (the bag loss falls), kept in the config."""
    keras.utils.set_random_seed(4)
    plain = MODELS[kind](None)
    keras.utils.set_random_seed(4)
    model = MODELS[kind]({"pooling": "logit_max"})
    assert len(model.weights) == len(plain.weights) + 2
    for ours, theirs in zip(model.weights, plain.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    rng = np.random.default_rng(5)
    targets = rng.integers(4, 40, size=(32, 6)).astype("int32")  # a small bag to learn
    x = {"source_ids": rng.integers(4, 200, size=(32, 7)).astype("int32"),
         "target_in": np.concatenate([np.full((32, 1), 2, "int32"), targets[:, :-1]], 1)}
    compile_for_translation(model, optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(x, targets, batch_size=16, epochs=8, verbose=0).history
    assert history["selection_loss"][-1] < 0.8 * history["selection_loss"][0]
    probabilities = model.selection_probabilities(x["source_ids"]).numpy()
    assert probabilities.shape == (32, 300)
    # Pieces of the targets' range rank above those never seen.
    assert probabilities[:, 4:40].mean() > 2 * probabilities[:, 40:].mean()
    copy = type(model).from_config(model.get_config())
    assert copy.selection.pooling == "logit_max"
    copy.set_weights(model.get_weights())
    np.testing.assert_allclose(copy.selection_probabilities(x["source_ids"]).numpy(),
                               probabilities, atol=1e-6)


def test_a_model_without_a_selection_head_says_so():
    with pytest.raises(ValueError, match=r"has no vocabulary selection head"):
        MODELS["lstm"](None).selection_probabilities(np.ones((1, 3), "int32"))


def test_the_head_and_the_loss_round_trip_through_their_configs():
    head = VocabularySelectionHead(9, pooling="state_max", block_gradient=True)
    copy = VocabularySelectionHead.from_config(head.get_config())
    assert (copy.vocabulary_size, copy.pooling, copy.block_gradient) == (9, "state_max", True)
    loss = BagOfWordsLoss.from_config(BagOfWordsLoss(positive_weight=3.0, pad_id=1).get_config())
    assert (loss.positive_weight, loss.pad_id) == (3.0, 1)
