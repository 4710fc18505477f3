"""Translator: order, empty input, truncation, and the once-per-call head cache."""

import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data import SubwordTokenizer
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.decoding.translator import Translator
from tf_outheads_zoo.lstm import LSTMSeq2Seq


@pytest.fixture(scope="module")
def model(bible_tokenizer):
    return LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                       embedding_dim=16, hidden_dim=16, num_layers=1, head="tied")


def test_output_order_matches_input_order(model, bible_tokenizer, bible_slice):
    sources = bible_slice.sources[:7]
    batched = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=3,
                         max_length_offset=2).translate(sources)
    single = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=2)
    one_by_one = [single.translate([s])[0] for s in sources]  # one call per source
    assert len(batched) == 7
    assert batched == one_by_one


def test_search_is_traced_once_for_every_batch_shape(model, bible_tokenizer, bible_slice):
    # Batches differ in size (the last one is short) and in width (length-sorted
    # sources): a retrace per new shape would cost seconds each on a real model.
    translator = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=3,
                            max_length_offset=2)
    sources = bible_slice.sources[:8]
    translator.translate(sources)
    translator.translate(sources[:1])
    (decoder,) = translator._decoders.values()
    assert decoder.experimental_get_tracing_count() == 1


def test_empty_list_gives_empty_list(model, bible_tokenizer):
    assert Translator(model, bible_tokenizer, bible_tokenizer).translate([]) == []


def test_long_source_is_truncated_with_eos(model, bible_tokenizer, bible_slice):
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_source_length=5)
    source_ids, num_pieces, truncated = translator.graph.encode(
        tf.constant([" ".join(bible_slice.sources[:5])]))
    assert source_ids.shape == (1, 5) and source_ids[0, -1] == EOS_ID
    assert num_pieces.numpy().tolist() == [4] and truncated.numpy().tolist() == [True]


def test_output_length_limit_follows_source_length(model, bible_tokenizer):
    translator = Translator(model, bible_tokenizer, bible_tokenizer,
                            max_length_ratio=1.0, max_length_offset=0)
    ids, _ = translator.graph.search(1, np.array([[10, 11, EOS_ID, 0, 0]], "int32"),
                                     np.array([2], "int32"), model.head.inference_cache())
    assert int(np.sum(ids.numpy() != 0)) <= 3


def test_bad_batch_size_is_refused(model, bible_tokenizer):
    with pytest.raises(ValueError, match="batch_size=0"):
        Translator(model, bible_tokenizer, bible_tokenizer, batch_size=0)


def test_joint_output_embedding_is_computed_once_per_translate_call(bible_tokenizer, bible_slice):
    # Pappas et al.'s code recomputed E' = g_out(E) at every decoding step.
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=1,
                        head={"class_name": "joint", "config": {"joint_dim": 24}})
    calls = []
    project = model.head._project_outputs
    model.head._project_outputs = lambda rows: calls.append(tuple(rows.shape)) or project(rows)
    translator = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=2,
                            max_length_offset=3)
    hypotheses = translator.translate(bible_slice.sources[:5])  # 3 batches, many steps
    assert len(hypotheses) == 5
    assert calls == [(bible_tokenizer.vocab_size, 16)]
    # Kept across calls while the weights stay the same ...
    assert translator.translate(bible_slice.sources[5:7]) and len(calls) == 1
    # ... and recomputed once they change, however they were changed.
    table = model.target_embedding.embeddings
    table.assign(table * 1.5)
    translator.translate(bible_slice.sources[:1])
    assert len(calls) == 2
    np.testing.assert_allclose(translator.head_cache()["output_kernel"],
                               np.transpose(model.head.output_weights()), rtol=1e-6)
    # One training forward pass over (batch, time) also projects E once.
    calls.clear()
    model({"source_ids": np.array([[5, 6, EOS_ID]], "int32"),
           "target_in": np.array([[2, 7, 8, 9]], "int32")})
    assert len(calls) == 1



@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_beam_size_one_is_greedy_and_wider_beams_decode(
        model, bible_tokenizer, bible_slice):
    sources = bible_slice.sources[:6]
    greedy = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=4,
                        max_length_offset=3)
    assert Translator(model, bible_tokenizer, bible_tokenizer, batch_size=4, beam_size=1,
                      max_length_offset=3).translate(sources) == greedy.translate(sources)
    beam = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=4, beam_size=4,
                      max_length_offset=3)
    hypotheses = beam.translate(sources)
    assert len(hypotheses) == 6 and all(isinstance(h, str) for h in hypotheses)
    # Its score is the best hypothesis's log-probability (α = 0): finite, ≤ 0.
    source_ids, num_pieces, _ = beam.graph.encode(tf.constant(sources))
    texts, beam_scores, _ = beam.graph.decode(source_ids, num_pieces, model.head.inference_cache())
    assert [text.decode("utf-8") for text in texts.numpy()[:, 0]] == hypotheses
    assert np.all(np.isfinite(beam_scores.numpy())) and np.all(beam_scores.numpy() <= 0)


def test_beam_search_with_a_continuous_head(bible_tokenizer, bible_slice):
    continuous = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                             embedding_dim=16, hidden_dim=16, num_layers=1,
                             head={"class_name": "continuous",
                                   "config": {"output_dim": 8, "scoring": "cosine"}})
    vectors = np.random.default_rng(0).normal(size=(bible_tokenizer.vocab_size, 8))
    continuous.head.set_target_vectors(vectors)
    assert continuous.head.max_step_score == 1.0
    hypotheses = Translator(continuous, bible_tokenizer, bible_tokenizer, beam_size=3,
                            max_length_offset=2).translate(bible_slice.sources[:3])
    assert len(hypotheses) == 3


def test_bad_beam_size_is_refused(model, bible_tokenizer):
    with pytest.raises(ValueError, match="beam_size=0"):
        Translator(model, bible_tokenizer, bible_tokenizer, beam_size=0)


def test_sources_without_a_piece_translate_to_empty_strings(model, bible_tokenizer, bible_slice):
    # As the exported signature does: no piece, nothing to translate.
    sources = ["", bible_slice.sources[0], "   \t ", bible_slice.sources[1]]
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=2)
    outputs = translator.translate(sources)
    assert outputs[0] == "" and outputs[2] == ""
    assert outputs[1] == translator.translate([sources[1]])[0]
    assert outputs[3] == translator.translate([sources[3]])[0]
    assert translator.translate(["", " "]) == ["", ""]


NO_PIECE_SOURCES = ["", " ", "\t\n  ", "\u200b", "\u200b\ufeff\u200b", "\x01\x02\x7f",
                    b"\xff", b"\xc3", b"\xff\xfe\xfd", "\udcff", "\u3000\u00a0"]


@pytest.mark.parametrize("beam_size", [1, 4], ids=["greedy", "beam"])
def test_sources_of_no_piece_translate_to_empty_strings(model, bible_tokenizer, bible_slice,
                                                        beam_size):
    # Empty, blank, zero-width, control characters, invalid bytes (in bytes or as
    # a lone surrogate): no piece, "" (invalid bytes are read as U+FFFD, which the
    # tokenizer drops, as in the exported signature).
    translator = Translator(model, bible_tokenizer, bible_tokenizer, beam_size=beam_size,
                            max_length_offset=2)
    assert translator.translate(NO_PIECE_SOURCES) == [""] * len(NO_PIECE_SOURCES)
    assert translator.translate([""] * 512) == [""] * 512
    # A source with pieces among them is translated as it is alone (the model of this
    # module may well translate it to "" too: it is barely trained).
    mixed = translator.translate([b"\xff", bible_slice.sources[0], "\u200b"])
    assert mixed[0] == mixed[2] == "" and mixed[1] == translator.translate(
        [bible_slice.sources[0]])[0]


def test_invalid_bytes_inside_a_source_read_as_the_replacement_character(
        model, bible_tokenizer):
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=2)
    assert (translator.translate([b"Dios \xff es amor"])
            == translator.translate(["Dios \ufffd es amor"]))


def test_a_source_that_is_not_a_string_is_refused(model, bible_tokenizer):
    with pytest.raises(ValueError, match="item 1 of type int"):
        Translator(model, bible_tokenizer, bible_tokenizer).translate(["a", 3])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"length_penalty": float("nan")}, "length_penalty=nan"),
        ({"length_penalty": float("inf")}, "length_penalty=inf"),
        ({"length_penalty": float("-inf")}, "length_penalty=-inf"),
        ({"length_penalty": -0.5}, "length_penalty=-0.5"),
        ({"length_penalty": 11.0}, r"in \[0, 10\]. Received: length_penalty=11.0"),
        ({"length_penalty": "0.6"}, "length_penalty='0.6'"),
        ({"beam_size": 2.0}, "beam_size=2.0"),
        ({"beam_size": True}, "beam_size=True"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"max_length_ratio": float("nan")}, "max_length_ratio=nan"),
        ({"max_length_ratio": 0}, "max_length_ratio=0"),
        ({"max_length_offset": -1}, "max_length_offset=-1"),
        ({"max_source_length": 1}, "max_source_length=1"),
    ],
    ids=lambda value: str(value) if isinstance(value, str) else None,
)
def test_options_out_of_range_are_refused_by_name(model, bible_tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        Translator(model, bible_tokenizer, bible_tokenizer, **{"beam_size": 4, **kwargs})


def test_truncated_sources_are_counted_and_logged(model, bible_tokenizer, bible_slice, caplog):
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_source_length=5,
                            max_length_offset=1)
    assert translator.truncated_count == 0 and translator.truncated_indices == []
    long_source = " ".join(bible_slice.sources[:3])
    with caplog.at_level(logging.WARNING, logger="tf_outheads"):
        outputs = translator.translate([long_source, "y", "", long_source])
    assert len(outputs) == 4
    assert translator.truncated_indices == [0, 3] and translator.truncated_count == 2
    assert "2 of 4 sources were longer than 4 subword pieces and were cut" in caplog.text
    # Each call counts its own sources.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tf_outheads"):
        translator.translate(["y"])
    assert translator.truncated_count == 0 and "were cut" not in caplog.text


# -- last: tf.random.set_seed frees SentencePiece resources (those of the session's tokenizer too)

def test_a_translator_survives_seeding_after_it_was_traced(model, bible_tokenizer, bible_slice):
    # Separate tokenizers: the target one is read only inside the traced batch function,
    # so the graph, not an eager call, meets its freed resource.
    source = SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)
    target = SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)
    translator = Translator(model, source, target, beam_size=2, max_length_offset=2)
    sources = bible_slice.sources[:3]
    expected = translator.translate(sources)
    tf.random.set_seed(1)
    assert translator.translate(sources) == expected


def test_scores_and_n_best_lists_come_from_the_search(model, bible_tokenizer, bible_slice):
    sources = bible_slice.sources[:5] + [""]
    greedy = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=3)
    plain = greedy.translate(sources)
    scored = greedy.translate(sources, with_scores=True)
    assert [text for text, _ in scored] == plain
    assert all(np.isfinite(score) and score < 0 for _, score in scored[:5])
    assert scored[5] == ("", 0.0)  # no piece: nothing decoded
    beam = Translator(model, bible_tokenizer, bible_tokenizer, beam_size=4, max_length_offset=3)
    best = beam.translate(sources)
    n_best = beam.translate(sources, num_hypotheses=3, with_scores=True)
    assert [len(row) for row in n_best] == [3] * 6
    for row, first in zip(n_best[:5], best[:5]):
        assert row[0][0] == first  # the best of the n is the 1-best
        scores = [score for _, score in row]
        assert scores == sorted(scores, reverse=True) and np.all(np.isfinite(scores))
        assert len({text for text, _ in row}) > 1 or row[0][0] == ""
    assert n_best[5] == [("", 0.0), ("", float("-inf")), ("", float("-inf"))]
    # Texts only, n-best: lists of strings; the translator's own default n.
    assert beam.translate(sources[:2], num_hypotheses=2)[0] == [t for t, _ in n_best[0][:2]]
    two = Translator(model, bible_tokenizer, bible_tokenizer, beam_size=4, num_hypotheses=2,
                     max_length_offset=3)
    assert two.translate(sources[:2]) == beam.translate(sources[:2], num_hypotheses=2)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_hypotheses": 3}, "`num_hypotheses` must be at most `beam_size` (2)"),
    ({"num_hypotheses": 0}, "num_hypotheses"),
])
def test_an_n_best_larger_than_the_beam_is_refused(model, bible_tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Translator(model, bible_tokenizer, bible_tokenizer, beam_size=2, **kwargs)
    translator = Translator(model, bible_tokenizer, bible_tokenizer, beam_size=2)
    with pytest.raises(ValueError, match=re.escape(message)):
        translator.translate(["Dios"], **kwargs)


def test_seeded_samples_are_reproducible_and_do_not_depend_on_the_batch(
        bible_tokenizer, bible_slice):
    # Its own seeded weights: a sample is independent of its batch up to the float
    # rounding of the batch's shape (as greedy search is), which an untrained model's
    # chaotic loops can amplify into a flipped near-tie; these weights do not.
    import keras

    keras.utils.set_random_seed(11)
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=1, head="tied")
    sources = bible_slice.sources[:6]

    def sample(batch_size, seed=3, **options):
        return Translator(model, bible_tokenizer, bible_tokenizer, batch_size=batch_size,
                          max_length_offset=4, seed=seed, sampling_temperature=2.0,
                          **options).translate(sources, with_scores=True)

    first = sample(4)
    alone = sample(1)
    assert [text for text, _ in alone] == [text for text, _ in first]
    assert [score for _, score in alone] == pytest.approx([score for _, score in first],
                                                          abs=1e-4)
    assert [text for text, _ in sample(4, seed=4)] != [text for text, _ in first]
    greedy = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=4,
                        max_length_offset=4).translate(sources)
    assert [text for text, _ in first] != greedy
    # k = 1 is the arg-max, whatever the temperature.
    assert [text for text, _ in sample(4, sampling_topk=1)] == greedy


def test_a_call_s_seed_is_kept_and_can_be_given(model, bible_tokenizer, bible_slice):
    sources = bible_slice.sources[:3]
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4,
                            sampling_topp=0.95)
    first = translator.translate(sources)
    seed = translator.last_seed
    assert isinstance(seed, int)
    translator.translate(sources)
    assert translator.last_seed != seed  # a fresh seed per call without one
    assert translator.translate(sources, seed=seed) == first
    plain = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4)
    plain.translate(sources, seed=5)
    assert plain.last_seed is None  # no sampling, no seed


@pytest.mark.parametrize("options, message", [
    ({"sampling_topk": -1}, r"`sampling_topk` must be an int >= 0 .*Received: sampling_topk=-1"),
    ({"sampling_topk": 2.5}, r"`sampling_topk` must be an int >= 0"),
    ({"sampling_topp": 0.0}, r"`sampling_topp` must be a number in \(0, 1\]\. Received: "
                             r"sampling_topp=0\.0"),
    ({"sampling_topp": 1.01}, r"`sampling_topp` must be a number in \(0, 1\]"),
    ({"sampling_temperature": 0}, r"`sampling_temperature` must be a finite number > 0"),
    ({"sampling_temperature": float("inf")}, r"`sampling_temperature` must be a finite"),
    ({"sampling_temperature": float("nan")}, r"`sampling_temperature` must be a finite"),
    ({"sampling_topk": 5, "beam_size": 4}, r"Sampling draws one piece at a time: it needs "
                                           r"`beam_size=1`\. Received: beam_size=4"),
    ({"sampling_topk": 5, "seed": -3}, r"`seed` must be an int >= 0\. Received: seed=-3"),
])
def test_bad_sampling_options_are_refused_by_name(model, bible_tokenizer, options, message):
    with pytest.raises(ValueError, match=message):
        Translator(model, bible_tokenizer, bible_tokenizer, **options)


def test_a_head_without_a_distribution_refuses_to_sample(bible_tokenizer):
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=1,
                        head={"class_name": "continuous",
                              "config": {"output_dim": 8, "scoring": "cosine"}})
    with pytest.raises(ValueError, match=r"Sampling needs a distribution over the vocabulary, "
                                         r"and this model's head ContinuousOutputHead "
                                         r"\(scoring='cosine'\)"):
        Translator(model, bible_tokenizer, bible_tokenizer, sampling_topk=10)
