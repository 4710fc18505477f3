"""Neural vocabulary selection at inference (`tf_outheads.decoding.NeuralSelection`):
the candidates are the pieces the model's selection head predicts above the threshold
(with the specials and the prefix), decoding over them equals full decoding restricted
to them for every head, and a threshold that keeps every piece decodes as the whole
vocabulary (Python, a reloaded SavedModel)."""

import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.test_selection import (HEADS, check_saved_model_agrees, flat,
                                           masked_step_fn)
from tf_outheads import NeuralSelection
from tf_outheads.decoding import Translator, greedy_search
from tf_outheads.decoding.selection import SPECIAL_IDS
from tf_outheads_zoo.lstm import LSTMSeq2Seq


def nvs_model(vocabulary_size, head):
    tf.random.set_seed(3)
    model = LSTMSeq2Seq(vocabulary_size, vocabulary_size, embedding_dim=16, hidden_dim=16,
                        num_layers=1, head=HEADS[head], uniform_init=0.5, selection=True)
    for layer in model.target_vector_layers():
        layer.set_target_vectors(np.random.default_rng(3).normal(size=(vocabulary_size, 16)))
    # Untrained, every piece sits near σ(0) = 0.5: spread them so a threshold selects.
    kernel = model.selection.projection.kernel
    kernel.assign(np.random.default_rng(4).normal(0.0, 2.0, kernel.shape).astype("float32"))
    bias = model.selection.projection.bias
    bias.assign(np.random.default_rng(5).normal(-4.0, 2.0, bias.shape).astype("float32"))
    return model


def test_the_candidates_are_the_pieces_above_the_threshold_bucketed():
    probabilities = tf.constant([[0.9, 0.1, 0.2, 0.05, 0.7, 0.3, 0.95, 0.01, 0.6, 0.02],
                                 [0.1, 0.1, 0.1, 0.05, 0.1, 0.1, 0.1, 0.8, 0.1, 0.58]])
    selection = NeuralSelection(threshold=0.5, bucket=4)
    candidates = selection.candidates(None, probabilities=probabilities).numpy().tolist()
    # Above 0.5 for some source: 4, 6, 7, 8, 9, with the specials 0-3: 9 pieces, padded
    # to 12, which the 10 pieces there are cannot fill.
    assert candidates == list(range(10))
    selection = NeuralSelection(threshold=0.65, bucket=2)
    assert selection.candidates(None, probabilities=probabilities).numpy().tolist() == [
        0, 1, 2, 3, 4, 6, 7, 8]  # 7 chosen (0.7, 0.95, 0.8) → 8 with 8 (0.6)
    with_prefix = selection.candidates(None, tf.constant([[5]]), probabilities=probabilities)
    assert 5 in with_prefix.numpy().tolist()


@pytest.mark.parametrize("head", [pytest.param(head, marks=() if head in ("tied", "vmf")
                                                else pytest.mark.slow)
                                   for head in sorted(HEADS)])
def test_selected_decoding_is_the_full_decoding_restricted_to_the_candidates(
        head, bible_tokenizer, bible_slice):
    model = nvs_model(bible_tokenizer.vocab_size, head)
    selection = NeuralSelection(threshold=0.5, bucket=16)
    translator = Translator(model, bible_tokenizer, bible_tokenizer, shortlist=selection,
                            max_length_offset=4)
    graph, cache = translator.graph, model.head.inference_cache()
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[900:906]))
    probabilities = model.selection_probabilities(source_ids)
    candidates = selection.candidates(source_ids, probabilities=probabilities)
    size = int(tf.size(candidates))
    assert size % 16 == 0 and 16 < size < bible_tokenizer.vocab_size // 2
    assert candidates.numpy()[:4].tolist() == list(SPECIAL_IDS)
    ids, scores = graph.search(1, source_ids, num_pieces, cache)
    expected = greedy_search(masked_step_fn(model, candidates),
                             model.initial_decoding_state(source_ids), 6,
                             graph.output_limits(num_pieces))
    np.testing.assert_array_equal(ids.numpy()[:, 0], expected.ids.numpy())
    np.testing.assert_allclose(scores.numpy()[:, 0], expected.scores.numpy(), atol=1e-4)


@pytest.mark.parametrize("head, options", [("tied", {"beam_size": 4, "num_hypotheses": 2}),
                                           ("vmf", {})])
def test_a_threshold_below_every_probability_decodes_as_the_whole_vocabulary(
        head, options, bible_tokenizer, bible_slice):
    model = nvs_model(bible_tokenizer.vocab_size, head)
    sources = bible_slice.sources[900:906]
    prefixes = ["And", "", "The", "", "", ""]
    full = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4, **options)
    selected = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4,
                          shortlist=NeuralSelection(threshold=1e-30), **options)
    expected = full.translate(sources, with_scores=True, target_prefix=prefixes)
    got = selected.translate(sources, with_scores=True, target_prefix=prefixes)
    assert [t for t, _ in flat(got)] == [t for t, _ in flat(expected)]
    np.testing.assert_allclose([s for _, s in flat(got)], [s for _, s in flat(expected)],
                               atol=1e-4)


def test_a_selection_is_saved_loaded_and_refused_where_it_cannot_work(bible_tokenizer,
                                                                      tmp_path):
    path = NeuralSelection(0.3, bucket=8).save(tmp_path / "selection.json")
    assert NeuralSelection.load(path) == NeuralSelection(0.3, bucket=8)
    (tmp_path / "bad.json").write_text('{"method": "lexical"}')
    with pytest.raises(ValueError, match=r"bad.json: not a selection"):
        NeuralSelection.load(tmp_path / "bad.json")
    for threshold in (0.0, 1.0, "0.5"):
        with pytest.raises(ValueError, match=r"`threshold` must be a number in \(0, 1\)"):
            NeuralSelection(threshold)
    plain = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=8, hidden_dim=8, head="tied")
    with pytest.raises(ValueError, match=r"needs a model trained with a selection head.*"
                                         r"tf-outheads shortlist --method lexical"):
        Translator(plain, bible_tokenizer, bible_tokenizer, shortlist=NeuralSelection())


@pytest.mark.slow  # a SavedModel export and reload
def test_a_reloaded_saved_model_decodes_over_the_same_candidates(bible_tokenizer, bible_slice,
                                                                 tmp_path):
    check_saved_model_agrees(nvs_model(bible_tokenizer.vocab_size, "joint"),
                             NeuralSelection(threshold=0.5, bucket=16), bible_tokenizer,
                             bible_slice.sources[900:906] + [""], str(tmp_path / "1"))


def test_the_recall_table_of_tf_outheads_shortlist_grows_with_looser_thresholds(
        bible_tokenizer, bible_slice):
    """`tf-outheads shortlist --method neural`'s table (`neural_selection_recall`): per
    threshold, the share of the reference pieces among their batch's candidates and the
    candidates' mean count; a looser threshold selects a superset, so both grow, and a
    threshold below every probability selects the whole vocabulary."""
    from tf_outheads_zoo.shortlists import THRESHOLDS, neural_selection_recall

    model = nvs_model(bible_tokenizer.vocab_size, "tied")
    sources, targets = bible_slice.sources[:40], bible_slice.targets[:40]
    table = neural_selection_recall(model, bible_tokenizer, bible_tokenizer, sources,
                                    targets, bucket=8, batch_size=16)
    assert list(table) == list(THRESHOLDS)
    recalls = [table[t]["recall"] for t in THRESHOLDS]
    sizes = [table[t]["candidates"] for t in THRESHOLDS]
    assert recalls == sorted(recalls) and sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert {(r["batches"], r["vocabulary"]) for r in table.values()} == {
        (3, bible_tokenizer.vocab_size)}
    everything = neural_selection_recall(model, bible_tokenizer, bible_tokenizer, sources,
                                         targets, thresholds=(1e-30,), bucket=8,
                                         batch_size=16)[1e-30]
    assert everything["recall"] == 1.0
    assert everything["candidates"] == bible_tokenizer.vocab_size


def test_a_source_without_a_piece_adds_no_candidate(bible_tokenizer, bible_slice):
    """A request keeps its empty sources as rows (decoded as nothing); the Translator
    leaves them out of its batches. Either way the other rows decode over the same
    candidates, though the empty row's own selection would add a piece."""
    model = nvs_model(bible_tokenizer.vocab_size, "tied")
    graph = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4).graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[900:903] + [""]))
    assert num_pieces.numpy().tolist()[3] == 0
    # A threshold between the empty row's probability of a piece and the others' (the
    # piece the empty row scores highest above them), and no bucket padding.
    probabilities = model.selection_probabilities(source_ids).numpy()
    gap = probabilities[3] - probabilities[:3].max(axis=0)
    piece = int(gap.argmax())
    assert gap[piece] > 0
    selection = NeuralSelection(threshold=float(probabilities[3, piece] - gap[piece] / 2),
                                bucket=1)
    everyone = selection.candidates(None, probabilities=probabilities).numpy().tolist()
    others = selection.candidates(None, probabilities=probabilities[:3]).numpy().tolist()
    assert piece in everyone and piece not in others  # the empty row would add it

    graph = Translator(model, bible_tokenizer, bible_tokenizer, shortlist=selection,
                       max_length_offset=4).graph
    cache = model.head.inference_cache()
    ids, scores = graph.search(1, source_ids, num_pieces, cache)
    expected_ids, expected_scores = graph.search(1, source_ids[:3], num_pieces[:3], cache)
    np.testing.assert_array_equal(ids.numpy()[:3], expected_ids.numpy())
    np.testing.assert_allclose(scores.numpy()[:3], expected_scores.numpy(), atol=1e-5)
    assert scores.numpy()[3].tolist() == [0.0]
