"""Sampling in the greedy loop: the right distribution, the cuts, seeds that do not
depend on the batch."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.decoding import greedy_search
from tf_outheads.decoding.sampling import Sampling, filtered_scores, row_seeds, sample_words

PROBS = np.array([0.05, 0.1, 0.5, 0.2, 0.15], np.float32)  # EOS (3) is piece 3


def _draws(sampling_kwargs, rows=4000):
    log_scores = tf.math.log(tf.tile(PROBS[tf.newaxis], [rows, 1]))
    sampling = Sampling(seeds=row_seeds(11, tf.range(rows)), **sampling_kwargs)
    words = sample_words(log_scores, tf.constant(0), sampling).numpy()
    return np.bincount(words, minlength=len(PROBS)) / rows


def _expected(probs, temperature=1.0, keep=None):
    p = probs ** (1.0 / temperature)
    if keep is not None:
        p = np.where(np.isin(np.arange(len(p)), keep), p, 0.0)
    return p / p.sum()


@pytest.mark.parametrize("kwargs, keep", [
    ({}, None),
    ({"temperature": 0.5}, None),
    ({"temperature": 2.0}, None),
    ({"topk": 2}, [2, 3]),
    ({"topp": 0.75}, [2, 3, 4]),  # 0.5 + 0.2 < 0.75: the third piece is needed
    ({"topp": 0.65}, [2, 3]),  # 0.5 + 0.2 reaches it
    ({"topk": 1}, [2]),
    ({"topk": 3, "topp": 0.6, "temperature": 1.0}, [2, 3]),
])
def test_draws_follow_the_cut_and_scaled_distribution(kwargs, keep):
    frequencies = _draws(kwargs)
    expected = _expected(PROBS, kwargs.get("temperature", 1.0), keep)
    # 4000 draws: a standard error of at most 0.008 per piece.
    np.testing.assert_allclose(frequencies, expected, atol=0.03)
    if keep is not None:
        assert frequencies[[i for i in range(5) if i not in keep]].sum() == 0


def test_per_row_options_apply_to_their_own_row():
    log_scores = tf.math.log(tf.constant(np.stack([PROBS, PROBS]), tf.float32))
    sampling = Sampling(seeds=row_seeds(3, [0, 1]), topk=tf.constant([1, 0]),
                        topp=tf.constant([1.0, 0.5]), temperature=tf.constant([1.0, 3.0]))
    scores = filtered_scores(log_scores, sampling).numpy()
    assert np.isfinite(scores[0]).tolist() == [False, False, True, False, False]
    # The nucleus is cut from the scaled distribution (T = 3: the top piece holds 0.29).
    assert np.isfinite(scores[1]).tolist() == [False, False, True, True, False]
    np.testing.assert_allclose(scores[1, 2], np.log(0.5) / 3.0, rtol=1e-6)
    enabled = Sampling(seeds=row_seeds(3, [0, 1]), enabled=tf.constant([False, True]),
                       temperature=50.0)
    draws = [sample_words(log_scores, tf.constant(step), enabled).numpy() for step in
             range(200)]
    assert all(d[0] == 2 for d in draws)  # not sampling: the arg-max
    assert len({int(d[1]) for d in draws}) == 5  # nearly uniform at T = 50


def test_a_seed_gives_a_sample_whatever_the_batch():
    vocab = 6

    def step_fn(ids_t, state):
        # A distribution that depends on the previous piece, so samples diverge.
        logits = tf.one_hot((ids_t + 1) % vocab, vocab, on_value=1.0, off_value=0.0)
        return tf.nn.log_softmax(logits + state["bias"]), state

    def run(indices, compact):
        batch = len(indices)
        state = {"bias": tf.zeros([batch, vocab])}
        sampling = Sampling(seeds=row_seeds(2024, indices))
        return greedy_search(step_fn, state, batch, 12, compact=compact,
                             sampling=sampling)

    together = run(list(range(8)), compact=True)
    alone = [run([i], compact=False) for i in (5, 0, 7)]
    for i, result in zip((5, 0, 7), alone):
        np.testing.assert_array_equal(result.ids[0], together.ids[i])
        np.testing.assert_allclose(result.scores[0], together.scores[i], rtol=1e-6)
    # The score is the model's: the unscaled log-probability of the drawn pieces.
    ids = together.ids.numpy()
    assert len({tuple(row) for row in ids}) > 1  # different rows, different samples
    again = run(list(range(8)), compact=False)
    np.testing.assert_array_equal(again.ids, together.ids)
    other = greedy_search(step_fn, {"bias": tf.zeros([8, vocab])}, 8, 12,
                          sampling=Sampling(seeds=row_seeds(2025, list(range(8)))))
    assert not np.array_equal(other.ids, together.ids)


def test_row_seeds_mix_the_seed_and_the_index():
    seeds = row_seeds(tf.constant([0, 1, 2**40, 2**40 + 1], tf.int64), [0, 0, 0, 0]).numpy()
    assert len(set(seeds.tolist())) == 4  # the high word counts too
    assert row_seeds(5, [3]).numpy()[0] == row_seeds(tf.constant([5], tf.int64), [3]).numpy()[0]
    assert row_seeds(5, [3]).numpy()[0] != row_seeds(5, [4]).numpy()[0]
