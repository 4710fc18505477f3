"""Vocabulary selection (`tf_outheads.decoding.selection`, issue 56): decoding over a
batch's candidate pieces equals decoding with every other piece's score removed, for
every head; a selection holding every piece equals full decoding."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.decoding import Translator, beam_search, greedy_search
from tf_outheads.decoding.selection import SPECIAL_IDS, Shortlist, build_shortlist
from tf_outheads_zoo.lstm import LSTMSeq2Seq

HEADS = {
    "tied": "tied",
    "softmax": "softmax",
    "joint": {"class_name": "joint", "config": {"joint_dim": 24}},
    "vmf": {"class_name": "continuous", "config": {"output_dim": 16}},
}


def tiny_model(vocabulary_size, head):
    tf.random.set_seed(3)
    model = LSTMSeq2Seq(vocabulary_size, vocabulary_size, embedding_dim=16, hidden_dim=16,
                        num_layers=1, head=HEADS[head], uniform_init=0.5)
    for layer in model.target_vector_layers():
        layer.set_target_vectors(np.random.default_rng(3).normal(size=(vocabulary_size, 16)))
    return model


@pytest.fixture(scope="module")
def corpus_ids(bible_tokenizer, bible_slice):
    sources = bible_tokenizer.tokenize(bible_slice.sources[:800]).to_list()
    targets = bible_tokenizer.tokenize(bible_slice.targets[:800]).to_list()
    return sources, targets


@pytest.fixture(scope="module")
def shortlist(bible_tokenizer, corpus_ids):
    size = bible_tokenizer.vocab_size
    return build_shortlist(*corpus_ids, size, size, top_k=4, frequent=10, bucket=16,
                           source_fingerprint=bible_tokenizer.fingerprint,
                           target_fingerprint=bible_tokenizer.fingerprint)


def flat(rows):
    """`(text, score)` items of `translate`'s rows (an n-best list each, or one item)."""
    return [item for row in rows for item in (row if isinstance(row, list) else [row])]


def masked_step_fn(model, candidates):
    """The reference: the full step's scores with every other piece removed and the rest
    renormalised (log-softmax over the candidates)."""
    step_fn = model.make_step_fn()
    keep = tf.scatter_nd(candidates[:, None], tf.ones_like(candidates),
                         [model.target_vocabulary_size]) > 0

    def step(ids_t, state):
        scores, state = step_fn(ids_t, state)
        scores = tf.where(keep, scores, -1e9)
        return scores - tf.reduce_logsumexp(scores, axis=-1, keepdims=True), state

    return step


@pytest.mark.parametrize("head", [pytest.param(head, marks=() if head in ("tied", "vmf")
                                                else pytest.mark.slow)
                                   for head in sorted(HEADS)])
def test_selected_decoding_is_the_full_decoding_restricted_to_the_candidates(
        head, bible_tokenizer, bible_slice, shortlist):
    model = tiny_model(bible_tokenizer.vocab_size, head)
    translator = Translator(model, bible_tokenizer, bible_tokenizer, shortlist=shortlist,
                            max_length_offset=4)
    graph, cache = translator.graph, model.head.inference_cache()
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[900:906]))
    candidates = shortlist.candidates(source_ids)
    size = int(tf.size(candidates))
    assert size % 16 == 0 and size < bible_tokenizer.vocab_size // 2
    assert candidates.numpy()[:4].tolist() == list(SPECIAL_IDS)  # specials keep their ids
    ids, scores = graph.search(1, source_ids, num_pieces, cache)
    limits = graph.output_limits(num_pieces)
    state = model.initial_decoding_state(source_ids)
    expected = greedy_search(masked_step_fn(model, candidates), state, 6, limits)
    np.testing.assert_array_equal(ids.numpy()[:, 0], expected.ids.numpy())
    np.testing.assert_allclose(scores.numpy()[:, 0], expected.scores.numpy(), atol=1e-4)
    assert set(ids.numpy().ravel()) <= set(candidates.numpy())
    if head == "tied":  # the beam over the candidates too
        ids, _ = graph.search(3, source_ids, num_pieces, cache)
        beam = beam_search(masked_step_fn(model, candidates),
                           model.initial_decoding_state(source_ids), 6, 3, limits)
        np.testing.assert_array_equal(ids.numpy()[:, 0], beam.ids.numpy()[:, 0])


@pytest.mark.parametrize("head, options", [("tied", {"beam_size": 4, "num_hypotheses": 2}),
                                           ("vmf", {})])
def test_a_selection_of_every_piece_decodes_as_the_whole_vocabulary(head, options,
                                                                     bible_tokenizer,
                                                                     bible_slice, corpus_ids):
    size = bible_tokenizer.vocab_size
    everything = build_shortlist(*corpus_ids, size, size, top_k=1, frequent=size)
    model = tiny_model(size, head)
    sources = bible_slice.sources[900:908]
    prefixes = ["And", "", "The", "", "", "", "", ""]
    full = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4, **options)
    selected = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4,
                          shortlist=everything, **options)
    expected = full.translate(sources, with_scores=True, target_prefix=prefixes)
    got = selected.translate(sources, with_scores=True, target_prefix=prefixes)
    assert [t for t, _ in flat(got)] == [t for t, _ in flat(expected)]
    np.testing.assert_allclose([s for _, s in flat(got)], [s for _, s in flat(expected)],
                               atol=1e-4)


def test_prefix_pieces_are_candidates_and_are_forced(bible_tokenizer, bible_slice, shortlist):
    model = tiny_model(bible_tokenizer.vocab_size, "tied")
    prefix = "Unto Jerusalem"
    pieces = bible_tokenizer.tokenize(prefix).numpy().tolist()
    source_ids = tf.constant([[5, 6, EOS_ID]])
    without = set(shortlist.candidates(source_ids).numpy())
    assert not set(pieces) <= without  # the test needs pieces the shortlist would not give
    with_prefix = set(shortlist.candidates(source_ids, tf.constant([pieces])).numpy())
    assert set(pieces) <= with_prefix
    translator = Translator(model, bible_tokenizer, bible_tokenizer, shortlist=shortlist)
    assert translator.translate(bible_slice.sources[:1], target_prefix=[prefix])[0].startswith(
        prefix)


def test_a_shortlist_is_saved_loaded_and_checked_against_the_tokenizers(
        bible_tokenizer, shortlist, corpus_ids, tmp_path):
    path = shortlist.save(tmp_path / "shortlist.npz")
    loaded = Shortlist.load(path)
    np.testing.assert_array_equal(loaded.translations, shortlist.translations)
    assert loaded.bucket == 16 and loaded.target_fingerprint == bible_tokenizer.fingerprint
    loaded.check_tokenizers(bible_tokenizer, bible_tokenizer)
    other = build_shortlist(*corpus_ids, 1000, 1000, target_fingerprint="sha256:0000")
    model = tiny_model(bible_tokenizer.vocab_size, "tied")
    with pytest.raises(ValueError, match=r"built for another target vocabulary \(1000 pieces, "
                                         r"sha256:0000\)"):
        Translator(model, bible_tokenizer, bible_tokenizer, shortlist=other)
    (tmp_path / "bad.npz").write_bytes(b"not a shortlist")
    with pytest.raises(ValueError, match=r"bad.npz: not a shortlist"):
        Shortlist.load(tmp_path / "bad.npz")


@pytest.mark.parametrize("kwargs, message", [
    ({"top_k": 0}, r"`top_k` must be an int >= 1. Received: top_k=0"),
    ({"frequent": -1}, r"`frequent` must be an int >= 0"),
    ({"bucket": 0}, r"`bucket` must be a positive int"),
    ({"links": [[(9, 0)]]}, r"Links of sentence 0: link 9-0 is outside the sentence"),
])
def test_bad_shortlist_arguments_are_refused_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_shortlist([[4, 5]], [[6]], 10, 10, **kwargs)


def check_saved_model_agrees(model, selection, tokenizer, sources, export_dir):
    """Exports `model` with `selection`; its reloaded `translate` signature gives the
    Translator's selected outputs (which differ from full decoding) and their scores at
    widths 1 and 3. An empty source among `sources` adds no candidate in either (the
    Translator leaves it out of its batches, a request keeps it)."""
    from tests.export.options import signature_options
    from tf_outheads.export import export_translator

    path = export_translator(model, tokenizer, tokenizer, export_dir, beam_sizes=(1, 3),
                             max_length_offset=4, shortlist=selection)
    loaded = tf.saved_model.load(path)
    for width in (1, 3):
        expected = Translator(model, tokenizer, tokenizer, max_length_offset=4,
                              beam_size=width, shortlist=selection).translate(
                                  sources, with_scores=True)
        full = Translator(model, tokenizer, tokenizer, max_length_offset=4,
                          beam_size=width).translate(sources, with_scores=True)
        assert [t for t, _ in expected] != [t for t, _ in full]  # selection changes them
        outputs = loaded.signatures["translate"](sources=tf.constant(sources),
                                                 **signature_options(beam_size=width))
        assert [t.decode("utf-8") for t in outputs["translations"].numpy()[:, 0]] == [
            t for t, _ in expected]
        np.testing.assert_allclose(outputs["scores"].numpy()[:, 0], [s for _, s in expected],
                                   atol=1e-4)


@pytest.mark.slow  # two SavedModel exports and reloads
@pytest.mark.parametrize("head", ["joint", "vmf"])
def test_a_reloaded_saved_model_decodes_over_the_same_candidates(head, bible_tokenizer,
                                                                 bible_slice, shortlist,
                                                                 tmp_path):
    check_saved_model_agrees(tiny_model(bible_tokenizer.vocab_size, head), shortlist,
                             bible_tokenizer, bible_slice.sources[900:906] + [""],
                             str(tmp_path / "1"))
