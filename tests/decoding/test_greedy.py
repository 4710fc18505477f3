"""Tests for `tf_outheads.decoding.greedy`.

The fake step functions score one token per row with `0` and every other
token with `-1e9` (one-hot x 1e9, keras-hub `beam_sampler_test.py`), so the
expected ids, lengths and scores are known exactly.
"""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import GreedyResult
from tf_outheads.decoding import greedy_search
from tf_outheads.decoding import max_length_from_source

VOCAB_SIZE = 10
NEG = -1e9


def table_step_fn(token_table, token_scores=None):
    """A step function that follows `token_table[row, step]`.

    The step counter travels in the state (`state["step"]`, one per row), so
    the test also checks that the state is threaded through the loop. The
    preferred token gets log-score `token_scores[row, step]` (default 0), all
    others `-1e9`. Steps past the table's end prefer EOS.
    """
    token_table = tf.constant(token_table, tf.int32)
    if token_scores is None:
        token_scores = tf.zeros(token_table.shape, tf.float32)
    token_scores = tf.constant(token_scores, tf.float32)
    width = token_table.shape[1]

    def step_fn(ids_t, state):
        step = state["step"]  # (batch,)
        column = tf.minimum(step, width - 1)
        preferred = tf.gather(token_table, column, batch_dims=1)
        preferred = tf.where(step < width, preferred, EOS_ID)
        value = tf.gather(token_scores, column, batch_dims=1)
        one_hot = tf.one_hot(preferred, VOCAB_SIZE, dtype=tf.float32)
        log_scores = one_hot * value[:, None] + (1.0 - one_hot) * NEG
        new_state = {"step": step + 1, "fed": ids_t}
        return log_scores, new_state

    return step_fn


def initial_state(batch_size):
    return {
        "step": tf.zeros([batch_size], tf.int32),
        "fed": tf.zeros([batch_size], tf.int32),
    }


def test_follows_token_table_exactly():
    table = [[5, 6, 7, EOS_ID], [4, EOS_ID, 9, 9]]
    token_scores = [[-0.5, -0.25, -1.0, -0.125], [-2.0, -0.5, -7.0, -7.0]]
    result = greedy_search(
        table_step_fn(table, token_scores),
        initial_state(2),
        batch_size=2,
        max_length=6,
    )
    assert isinstance(result, GreedyResult)
    assert result.ids.dtype == tf.int32
    assert result.lengths.dtype == tf.int32
    assert result.scores.dtype == tf.float32
    np.testing.assert_array_equal(
        result.ids,
        [[5, 6, 7, EOS_ID, PAD_ID, PAD_ID], [4, EOS_ID, 0, 0, 0, 0]],
    )
    np.testing.assert_array_equal(result.lengths, [4, 2])
    np.testing.assert_allclose(result.scores, [-1.875, -2.5])


def test_rows_stop_independently_after_eos():
    table = [
        [EOS_ID, 5, 5, 5, 5],
        [5, 5, EOS_ID, 5, 5],
        [5, 5, 5, 5, EOS_ID],
    ]
    token_scores = np.full([3, 5], -1.0, np.float32)
    result = greedy_search(
        table_step_fn(table, token_scores),
        initial_state(3),
        batch_size=3,
        max_length=8,
    )
    np.testing.assert_array_equal(
        result.ids,
        [
            [EOS_ID, 0, 0, 0, 0, 0, 0, 0],
            [5, 5, EOS_ID, 0, 0, 0, 0, 0],
            [5, 5, 5, 5, EOS_ID, 0, 0, 0],
        ],
    )
    np.testing.assert_array_equal(result.lengths, [1, 3, 5])
    # The scores stop changing at EOS: one -1 per emitted token.
    np.testing.assert_allclose(result.scores, [-1.0, -3.0, -5.0])


def test_max_length_without_eos_stops_the_row():
    table = [[5, 6, 7, 8, 9, EOS_ID]]
    result = greedy_search(
        table_step_fn(table), initial_state(1), batch_size=1, max_length=3
    )
    np.testing.assert_array_equal(result.ids, [[5, 6, 7]])
    np.testing.assert_array_equal(result.lengths, [3])


def test_per_row_max_length_tensor():
    table = [[5] * 6 + [EOS_ID], [6] * 6 + [EOS_ID], [7, EOS_ID] + [7] * 5]
    token_scores = np.full([3, 7], -1.0, np.float32)
    result = greedy_search(
        table_step_fn(table, token_scores),
        initial_state(3),
        batch_size=3,
        max_length=tf.constant([2, 4, 5], tf.int32),
    )
    # Width is max(max_length); no EOS is appended to a row that hits its
    # own limit.
    np.testing.assert_array_equal(
        result.ids,
        [[5, 5, 0, 0, 0], [6, 6, 6, 6, 0], [7, EOS_ID, 0, 0, 0]],
    )
    np.testing.assert_array_equal(result.lengths, [2, 4, 2])
    np.testing.assert_allclose(result.scores, [-2.0, -4.0, -2.0])


def test_min_length_masks_early_eos():
    # EOS scores 0 and token 8 is the runner-up at -1 at every step, so
    # masking EOS picks 8.
    def step_fn(ids_t, state):
        eos = tf.one_hot(EOS_ID, VOCAB_SIZE)
        runner_up = tf.one_hot(8, VOCAB_SIZE)
        row = (eos + runner_up - 1.0) * 1e9 - runner_up
        log_scores = tf.tile(row[None, :], [tf.shape(ids_t)[0], 1])
        return log_scores, state

    result = greedy_search(
        step_fn, (), batch_size=2, max_length=6, min_length=3
    )
    np.testing.assert_array_equal(
        result.ids, [[8, 8, 8, EOS_ID, 0, 0], [8, 8, 8, EOS_ID, 0, 0]]
    )
    np.testing.assert_array_equal(result.lengths, [4, 4])
    np.testing.assert_allclose(result.scores, [-3.0, -3.0])


def test_state_is_threaded_and_finished_rows_are_fed_pad():
    fed_log = []

    def step_fn(ids_t, state):
        fed_log.append(ids_t.numpy().tolist())
        counter = state[0]  # (2,)
        # Row 0 emits 5 then EOS; row 1 emits 6 three times then EOS.
        preferred = tf.stack(
            [
                tf.where(counter[0] >= 1, EOS_ID, 5),
                tf.where(counter[1] >= 3, EOS_ID, 6),
            ]
        )
        log_scores = (tf.one_hot(preferred, VOCAB_SIZE) - 1.0) * 1e9
        return log_scores, (counter + 1, state[1])

    memory = tf.reshape(tf.range(6, dtype=tf.float32), [2, 3])
    result = greedy_search(
        step_fn,
        (tf.zeros([2], tf.int32), memory),
        batch_size=2,
        max_length=10,
    )
    np.testing.assert_array_equal(result.lengths, [2, 4])
    # BOS first; each row then gets its previous token, and PAD once it
    # has finished (row 0 emitted EOS at step 1).
    assert fed_log == [
        [BOS_ID, BOS_ID],
        [5, 6],
        [PAD_ID, 6],
        [PAD_ID, 6],
    ]


def test_loop_ends_when_all_rows_finished():
    calls = []

    def step_fn(ids_t, state):
        calls.append(1)
        return (tf.one_hot([EOS_ID, EOS_ID], VOCAB_SIZE) - 1.0) * 1e9, state

    result = greedy_search(step_fn, {}, batch_size=2, max_length=50)
    assert len(calls) == 1
    assert result.ids.shape == (2, 50)
    np.testing.assert_array_equal(result.lengths, [1, 1])


@pytest.mark.parametrize(
    "jit_compile", [False, True], ids=["tf_function", "jit_compile"]
)
@pytest.mark.parametrize(
    "per_row_limit", [False, True], ids=["int_limit", "tensor_limit"]
)
def test_compiled_matches_eager(jit_compile, per_row_limit):
    table = [[5, 6, EOS_ID, 9], [4, 4, 4, EOS_ID], [7, 7, 7, 7]]
    token_scores = [[-1.0, -2.0, -3.0, -4.0]] * 3
    step_fn = table_step_fn(table, token_scores)
    if per_row_limit:
        max_length = tf.constant([5, 5, 3], tf.int32)
    else:
        max_length = 5

    def decode(max_length):
        return greedy_search(
            step_fn,
            initial_state(3),
            batch_size=3,
            max_length=max_length,
            min_length=1,
        )

    expected = decode(max_length)
    if per_row_limit:
        compiled = tf.function(decode, jit_compile=jit_compile)
        result = compiled(max_length)
    else:
        compiled = tf.function(
            lambda: decode(max_length), jit_compile=jit_compile
        )
        result = compiled()
    for name in ("ids", "lengths", "scores"):
        np.testing.assert_array_equal(
            getattr(result, name), getattr(expected, name)
        )
    np.testing.assert_array_equal(
        expected.lengths, [3, 4, 3] if per_row_limit else [3, 4, 5]
    )


@pytest.mark.parametrize(
    "jit_compile", [False, True], ids=["tf_function", "jit_compile"]
)
def test_symbolic_batch_size_and_limits_from_source(jit_compile):
    step_fn = table_step_fn([[5, 5, 5, EOS_ID], [5, EOS_ID, 5, 5]])

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int32)],
        jit_compile=jit_compile,
    )
    def decode(source_lengths):
        batch_size = tf.shape(source_lengths)[0]
        state = {
            "step": tf.zeros([batch_size], tf.int32),
            "fed": tf.zeros([batch_size], tf.int32),
        }
        max_length = max_length_from_source(source_lengths, offset=0)
        return greedy_search(step_fn, state, batch_size, max_length)

    # Limits ceil(1.5 * [1, 4]) = [2, 6]: row 0 is cut before its EOS.
    result = decode(tf.constant([1, 4], tf.int32))
    np.testing.assert_array_equal(
        result.ids, [[5, 5, 0, 0, 0, 0], [5, EOS_ID, 0, 0, 0, 0]]
    )
    np.testing.assert_array_equal(result.lengths, [2, 2])


@pytest.mark.parametrize(
    "jit_compile", [False, True], ids=["tf_function", "jit_compile"]
)
@pytest.mark.parametrize("batch", [1, 3, 512], ids=["one", "three", "512"])
def test_zero_limit_for_every_row_of_a_symbolic_batch(jit_compile, batch):
    # Sources without a subword piece: every limit is 0, the batch size is
    # only known at run time (the exported signature's groups). Nothing is
    # decoded; stacking the empty TensorArray used to fail with "Tried to
    # stack elements of an empty list with non-fully-defined element_shape".
    step_fn = table_step_fn([[5, EOS_ID], [5, EOS_ID]])  # never called with 0 steps

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int32)],
        jit_compile=jit_compile,
    )
    def decode(max_length):
        batch_size = tf.shape(max_length)[0]
        state = {
            "step": tf.zeros([batch_size], tf.int32),
            "fed": tf.zeros([batch_size], tf.int32),
        }
        return greedy_search(step_fn, state, batch_size, max_length)

    result = decode(tf.zeros([batch], tf.int32))
    assert result.ids.shape == (batch, 0) and result.ids.dtype == tf.int32
    np.testing.assert_array_equal(result.lengths, np.zeros(batch))
    np.testing.assert_array_equal(result.scores, np.zeros(batch))
    # The same function still decodes a batch with a positive limit.
    result = decode(tf.constant([0, 3], tf.int32))
    np.testing.assert_array_equal(result.ids, [[0, 0, 0], [5, EOS_ID, 0]])


def test_max_length_from_source():
    limits = max_length_from_source([0, 4, 5, 40], ratio=1.5, offset=10, cap=50)
    assert limits.dtype == tf.int32
    np.testing.assert_array_equal(limits, [10, 16, 18, 50])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_length": -1}, "max_length=-1"),
        ({"max_length": 3, "min_length": -2}, "min_length=-2"),
    ],
    ids=["negative_max_length", "negative_min_length"],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        greedy_search(table_step_fn([[EOS_ID]]), initial_state(1), 1, **kwargs)


# -- compact=True: finished sentences leave the computed batch ----------------------------
def state_table_step_fn(rows_seen):
    """Like `table_step_fn`, but each row's table and scores travel in the state, so
    the function takes any batch size (what `compact=True` needs); `rows_seen` (a
    variable) counts the rows it is called on."""

    def step_fn(ids_t, state):
        rows_seen.assign_add(tf.shape(ids_t)[0])
        table, scores, step = state["table"], state["scores"], state["step"]
        width = table.shape[1]
        column = tf.minimum(step, width - 1)
        preferred = tf.where(step < width, tf.gather(table, column, batch_dims=1), EOS_ID)
        value = tf.gather(scores, column, batch_dims=1)
        one_hot = tf.one_hot(preferred, VOCAB_SIZE, dtype=tf.float32)
        log_scores = one_hot * value[:, None] + (1.0 - one_hot) * NEG
        return log_scores, dict(state, step=step + 1, fed=ids_t)

    return step_fn


@pytest.mark.parametrize("min_length", [0, 2])
@pytest.mark.parametrize("in_function", [False, True])
def test_compacting_search_gives_the_same_results_on_fewer_rows(min_length, in_function):
    rng = np.random.default_rng(min_length)
    batch, width = 12, 9
    table = rng.integers(4, VOCAB_SIZE, size=(batch, width)).astype("int32")
    ends = rng.integers(0, width, size=batch)  # EOS at different steps
    table[np.arange(batch), ends] = EOS_ID
    state = {"table": tf.constant(table),
             "scores": tf.constant(-rng.random((batch, width)).astype("float32")),
             "step": tf.zeros([batch], tf.int32), "fed": tf.zeros([batch], tf.int32)}
    limits = tf.constant(rng.integers(0, width + 2, size=batch).astype("int32"))  # 0s too
    results, rows = {}, {}
    for compact in (False, True):
        seen = tf.Variable(0)

        def search(compact=compact, seen=seen):
            return greedy_search(state_table_step_fn(seen), state, batch, limits,
                                 min_length=min_length, compact=compact)

        results[compact] = tf.function(search)() if in_function else search()
        rows[compact] = int(seen.numpy())
    for name in ("ids", "lengths", "scores"):
        np.testing.assert_array_equal(getattr(results[True], name),
                                      getattr(results[False], name), err_msg=name)
    assert rows[True] < rows[False]


def test_compact_is_off_under_xla_with_none():
    table = [[5, 6, EOS_ID, 4], [4, EOS_ID, 9, 9], [EOS_ID, 9, 9, 9], [7, 7, 7, 7]]
    state = {"table": tf.constant(table), "scores": tf.zeros((4, 4)),
             "step": tf.zeros([4], tf.int32), "fed": tf.zeros([4], tf.int32)}
    seen = tf.Variable(0)
    xla = tf.function(lambda: greedy_search(state_table_step_fn(seen), state, 4, 6,
                                            compact=None), jit_compile=True)()
    whole, compacted = tf.Variable(0), tf.Variable(0)
    plain = greedy_search(state_table_step_fn(whole), state, 4, 6, compact=False)
    greedy_search(state_table_step_fn(compacted), state, 4, 6, compact=True)
    np.testing.assert_array_equal(xla.ids, plain.ids)
    assert int(seen.numpy()) == int(whole.numpy()) == 4 * 5  # every row, all 5 steps
    assert int(compacted.numpy()) < 4 * 5
