"""`tf_outheads.export.to_ctranslate2` and `CTranslate2Translator` (issue 57).

The models are tiny Transformers on the ~1000-piece Bible tokenizer with random
weights, their biases and layer-norm parameters moved off their initial values so
that every weight the export copies matters. Exactness is checked where CTranslate2
reports it: the log-probability of every target piece under forced decoding
(`score_batch`) against the model's own `log_softmax`, then the greedy outputs on
Bible verses against `Translator`'s. Skipped, with the reason, where CTranslate2 is
not installed (`pip install 'tf_outheads[ctranslate2]'`).
"""

import json
import os

import keras
import numpy as np
import pytest

from tf_outheads import data
from tf_outheads.decoding import Translator
from tf_outheads.export import CTranslate2Translator, to_ctranslate2
from tf_outheads.export.ctranslate2 import METADATA_FILE
from tf_outheads.layers import HEADS, ContinuousOutputHead
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="CTranslate2 is an optional extra: pip install "
                          "'tf_outheads[ctranslate2]'")

DIM = 32
# Every registered head, as a spec; the heads CTranslate2 cannot run are refused.
HEAD_SPECS = {
    "softmax": "softmax",
    "tied": "tied",
    "tied-projected": {"class_name": "tied", "config": {"projection": True}},
    "joint-linear": {"class_name": "joint", "config": {"activation": "linear",
                                                       "joint_dim": 48}},
    "continuous": {"class_name": "continuous", "config": {"output_dim": 24}},
    "continuous-linear-hidden": {"class_name": "continuous", "config": {
        "output_dim": 24, "hidden_units": 40, "activation": "linear"}},
    "continuous-cosine": {"class_name": "continuous", "config": {"output_dim": 24,
                                                                 "scoring": "cosine"}},
}
REFUSED = {
    "joint": ("joint", "nonlinearity 'tanh'"),
    "continuous-tanh-hidden": ({"class_name": "continuous", "config": {
        "output_dim": 24, "hidden_units": 40}}, "hidden layer .*nonlinearity 'tanh'"),
}


def transformer(vocabulary_size, head, norm="post", seed=3, **kwargs):
    keras.utils.set_random_seed(seed)
    model = TransformerSeq2Seq(vocabulary_size, vocabulary_size, model_dim=DIM, ffn_dim=64,
                               num_heads=4, encoder_layers=2, decoder_layers=2, dropout=0.0,
                               attention_dropout=0.0, ffn_dropout=0.0, norm=norm, head=head,
                               **kwargs)
    rng = np.random.default_rng(seed)
    for layer in model.target_vector_layers():
        layer.set_target_vectors(rng.normal(size=(vocabulary_size, layer.output_dim)))
    for weight in model.weights:
        name = weight.path.rsplit("/", 1)[-1]
        if name in ("bias", "beta", "gamma"):  # zeros and ones as built: move them
            weight.assign(weight.numpy() + rng.normal(0, 0.3, weight.shape).astype("float32"))
    return model


@pytest.fixture(scope="module")
def tokenizer(bible_tokenizer):
    return data.SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)


@pytest.fixture(scope="module")
def verses(bible_corpus_path):
    corpus = data.read_tsv(bible_corpus_path, split="test")
    return corpus.sources[:12], corpus.targets[:12]


def forced_log_probs(model, tokenizer, sources, targets):
    """The model's score (`head.scores`: a log-probability, but for cosine scoring) of
    each target piece and EOS, per pair."""
    source_ids = [list(row) + [3] for row in tokenizer.tokenize(sources).to_list()]
    target_ids = tokenizer.tokenize(targets).to_list()
    out = []
    for source, target in zip(source_ids, target_ids):
        hidden = model.teacher_forced(np.array([source], "int32"),
                                      np.array([[2] + target], "int32"))
        log_probs = keras.ops.convert_to_numpy(model.head.scores(hidden[0]))  # the search's
        out.append(log_probs[np.arange(len(target) + 1), target + [3]])
    return out


def ctranslate2_log_probs(model_dir, tokenizer, sources, targets):
    translator = ctranslate2.Translator(model_dir, device="cpu")
    results = translator.score_batch(tokenizer.pieces(sources), tokenizer.pieces(targets))
    return [np.array(result.log_probs) for result in results]


def assert_same_log_probs(model, tokenizer, model_dir, verses, count=3):
    sources, targets = verses[0][:count], verses[1][:count]
    for ours, theirs in zip(forced_log_probs(model, tokenizer, sources, targets),
                            ctranslate2_log_probs(model_dir, tokenizer, sources, targets)):
        np.testing.assert_allclose(theirs, ours, atol=2e-4)


# The fast suite keeps one head of each kind of fold; the others run in the slow set.
FAST_HEADS = {"tied", "joint-linear", "continuous-cosine"}


@pytest.mark.parametrize("head, norm", [
    pytest.param(head, "post", marks=() if head in FAST_HEADS else pytest.mark.slow)
    for head in sorted(HEAD_SPECS)] + [("softmax", "pre"), pytest.param(
        "tied", "pre", marks=pytest.mark.slow)])
def test_an_exported_head_scores_every_piece_as_the_model(head, norm, tokenizer, verses,
                                                          tmp_path):
    model = transformer(tokenizer.vocab_size, HEAD_SPECS[head], norm)
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    sources = verses[0]
    with open(os.path.join(output, METADATA_FILE)) as f:
        metadata = json.load(f)
    exact = head != "continuous-cosine"
    assert metadata["exact_scores"] is exact and metadata["quantization"] == "float32"
    if exact:  # the same distribution at every step
        assert_same_log_probs(model, tokenizer, output, verses, count=4)
    # The same greedy translations, raw strings in and out, whatever the scores mean.
    expected = Translator(model, tokenizer, tokenizer, max_length_offset=5).translate(sources)
    engine = CTranslate2Translator(output, max_length_offset=5)
    assert engine.translate(sources) == expected
    assert len(set(expected)) > 6  # source-dependent outputs, not one string


def test_a_rewe_trained_model_is_exported_without_its_auxiliary_head(tokenizer, verses,
                                                                     tmp_path):
    model = transformer(tokenizer.vocab_size, "tied", rewe={"hidden_dim": 8})
    assert model.rewe is not None
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    assert_same_log_probs(model, tokenizer, output, verses)


def test_shared_private_embeddings_are_exported_assembled(tokenizer, verses, tmp_path):
    from tf_outheads.data.word_pair_table import WordPairs

    size = tokenizer.vocab_size
    rng = np.random.default_rng(0)
    pairs = WordPairs(np.arange(4, 600), rng.permutation(np.arange(4, 600)),
                      rng.integers(0, 3, 596), size, size)
    model = transformer(size, "tied", shared_private={"pairs": pairs,
                                                      "sharing_ratios": (0.9, 0.7, 0.5)})
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    assert_same_log_probs(model, tokenizer, output, verses)


def test_beam_n_best_and_scores_match_the_translator(tokenizer, verses, tmp_path):
    model = transformer(tokenizer.vocab_size, "tied")
    bias = model.head.bias.numpy()
    bias[3] += 2.75  # EOS: some beams end (the empty output first), others meet their limit
    model.head.bias.assign(bias)
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output, decode={"beam_size": 4})
    sources = verses[0][:6]
    options = dict(beam_size=4, num_hypotheses=3, max_length_offset=5)
    expected = Translator(model, tokenizer, tokenizer, **options).translate(
        sources, with_scores=True)
    got = CTranslate2Translator(output, **options).translate(sources, with_scores=True)
    assert [[text for text, _ in row] for row in got] == [
        [text for text, _ in row] for row in expected]
    lengths = {len(text.split()) for row in expected for text, _ in row}
    assert 0 in lengths and max(lengths) > 50  # both kinds of ends were tested
    np.testing.assert_allclose([[s for _, s in row] for row in got],
                               [[s for _, s in row] for row in expected], atol=1e-3)
    # The export's recorded beam is the engine's default.
    assert CTranslate2Translator(output).options.beam_size == 4


def test_prefixes_and_sampling_on_the_engine(tokenizer, verses, tmp_path):
    model = transformer(tokenizer.vocab_size, "softmax")
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    sources = verses[0][:4]
    prefixes = ["The words", "", "And", "I will"]
    options = dict(max_length_offset=5)
    expected = Translator(model, tokenizer, tokenizer, **options).translate(
        sources, with_scores=True, target_prefix=prefixes)
    got = CTranslate2Translator(output, **options).translate(
        sources, with_scores=True, target_prefix=prefixes)
    assert [text for text, _ in got] == [text for text, _ in expected]
    assert got[0][0].startswith("The words") and got[3][0].startswith("I will")
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-3)
    # Sampling: CTranslate2's own generator, reproducible by seed.
    engine = CTranslate2Translator(output, sampling_topk=0, sampling_temperature=2.0, **options)
    first, again = engine.translate(sources, seed=5), engine.translate(sources, seed=5)
    assert first == again != engine.translate(sources, seed=6)
    assert first != CTranslate2Translator(output, **options).translate(sources)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_head_that_is_not_linear_is_refused_naming_why_and_nothing_is_written(
        name, tokenizer, tmp_path):
    spec, message = REFUSED[name]
    model = transformer(tokenizer.vocab_size, spec)
    output = tmp_path / "ct2"
    with pytest.raises(ValueError, match=f"Cannot export to CTranslate2: .*{message}"):
        to_ctranslate2(model, tokenizer, tokenizer, str(output))
    assert not output.exists() and os.listdir(tmp_path) == []


def test_every_registered_head_is_exported_or_refused_here():
    specs = list(HEAD_SPECS.values()) + [spec for spec, _ in REFUSED.values()]
    names = {spec if isinstance(spec, str) else spec["class_name"] for spec in specs}
    assert names == set(HEADS), "a new head: add it to HEAD_SPECS or REFUSED"
    assert issubclass(HEADS["continuous"], ContinuousOutputHead)


def test_an_lstm_model_is_refused_naming_the_missing_rnn_decoder(tokenizer, tmp_path):
    model = LSTMSeq2Seq(tokenizer.vocab_size, tokenizer.vocab_size, embedding_dim=16,
                        hidden_dim=16, num_layers=1, head="tied")
    with pytest.raises(ValueError, match=r"LSTMSeq2Seq has no CTranslate2 form: .*no RNN "
                                         r"decoder \(OpenNMT/CTranslate2 #796\)"):
        to_ctranslate2(model, tokenizer, tokenizer, str(tmp_path / "ct2"))
    assert os.listdir(tmp_path) == []


def test_bad_arguments_are_refused_before_anything_is_written(tokenizer, tmp_path):
    model = transformer(tokenizer.vocab_size, "tied")
    with pytest.raises(ValueError, match=r"`quantization` must be None or one of .*"
                                         r"Received: quantization='int4'"):
        to_ctranslate2(model, tokenizer, tokenizer, str(tmp_path / "a"), quantization="int4")
    other = data.SubwordTokenizer.from_bytes(tokenizer.model_proto)
    small = transformer(300, "tied")
    with pytest.raises(ValueError, match=r"The source tokenizer has \d+ pieces and the model's "
                                         r"source vocabulary 300"):
        to_ctranslate2(small, other, other, str(tmp_path / "b"))
    with pytest.raises(ValueError, match=r"`max_positions` must be a positive int"):
        to_ctranslate2(model, tokenizer, tokenizer, str(tmp_path / "c"), max_positions=0)
    assert os.listdir(tmp_path) == []
    occupied = tmp_path / "notes"
    occupied.mkdir()
    (occupied / "todo.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"holds no CTranslate2 model \(model.bin"):
        to_ctranslate2(model, tokenizer, tokenizer, str(occupied))
    assert os.listdir(occupied) == ["todo.txt"]


def test_an_export_is_replaced_whole_and_int8_stays_close(tokenizer, verses, tmp_path):
    model = transformer(tokenizer.vocab_size, "tied")
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    size_float = os.path.getsize(os.path.join(output, "model.bin"))
    to_ctranslate2(model, tokenizer, tokenizer, output, quantization="int8")  # replaces it
    with open(os.path.join(output, METADATA_FILE)) as f:
        assert json.load(f)["quantization"] == "int8"
    assert os.path.getsize(os.path.join(output, "model.bin")) < 0.5 * size_float
    sources, targets = verses
    ours = forced_log_probs(model, tokenizer, sources[:3], targets[:3])
    theirs = ctranslate2_log_probs(output, tokenizer, sources[:3], targets[:3])
    for a, b in zip(ours, theirs):
        assert np.abs(a - b).mean() < 0.1  # int8 rounding, not another model
    with open(os.path.join(output, "source.spm.model"), "rb") as f:
        assert f.read() == tokenizer.model_proto


def test_the_engine_refuses_what_ctranslate2_does_not_do_naming_it(tokenizer, tmp_path):
    model = transformer(tokenizer.vocab_size, {"class_name": "continuous", "config": {
        "output_dim": 24, "scoring": "cosine"}})
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    with pytest.raises(ValueError, match=r"does not take `block_repeats` \(CTranslate2 blocks "
                                         r"repeated n-grams.*Received: block_repeats=True"):
        CTranslate2Translator(output, block_repeats=True)
    with pytest.raises(ValueError, match=r"does not take `length_penalty` .*GNMT"):
        CTranslate2Translator(output).translate(["Amén."], length_penalty=0.6)
    with pytest.raises(ValueError, match=r"decodes greedily only. Received: beam_size=4"):
        CTranslate2Translator(output, beam_size=4)
    with pytest.raises(FileNotFoundError, match=r"not a CTranslate2 export of tf_outheads"):
        CTranslate2Translator(str(tmp_path))


def test_sources_are_cut_and_outputs_limited_as_the_translator_does(tokenizer, verses,
                                                                    tmp_path):
    model = transformer(tokenizer.vocab_size, "softmax")
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    sources = list(verses[0][:8]) + [""]
    options = dict(max_source_length=6, max_length_ratio=0.5, max_length_offset=1)
    translator = Translator(model, tokenizer, tokenizer, **options)
    engine = CTranslate2Translator(output, **options)
    assert engine.translate(sources) == translator.translate(sources)
    assert engine.truncated_indices == translator.truncated_indices != []
    assert engine.translate([""], with_scores=True) == [("", 0.0)]


def test_output_limits_round_as_the_graph_does(tokenizer, verses, tmp_path):
    # ratio × (24 pieces + EOS) = 1.2 × 25 is 30 in float64 but 30.000001 in float32 (the
    # graph's arithmetic, whose 1.2 rounds up): the graph's limit is 31. The engine must
    # stop where the Translator stops, so an untrained model's outputs (no EOS) agree.
    model = transformer(tokenizer.vocab_size, "softmax")
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    sources = [s for s in verses[0] if len(tokenizer.pieces([s])[0]) >= 24][:3]
    assert sources
    options = dict(max_source_length=25, max_length_ratio=1.2, max_length_offset=0)
    translator = Translator(model, tokenizer, tokenizer, **options)
    expected = translator.translate(sources)
    assert max(len(pieces) for pieces in tokenizer.pieces(expected)) == 31
    assert CTranslate2Translator(output, **options).translate(sources) == expected


class _CallCounter:
    """A CTranslate2 translator that counts its `translate_batch` calls."""

    def __init__(self, translator):
        self.translator, self.calls, self.pairs = translator, 0, []

    def translate_batch(self, sources, **kwargs):
        self.calls += 1
        results = self.translator.translate_batch(sources, **kwargs)
        # (source pieces, output pieces) of each row, before any cut.
        self.pairs += [(len(s), len(r.hypotheses[0])) for s, r in zip(sources, results)]
        return results

    def score_batch(self, *args, **kwargs):
        return self.translator.score_batch(*args, **kwargs)


def test_greedy_decodes_whole_batches_and_cuts_each_output_at_its_own_limit(
        tokenizer, verses, tmp_path):
    # EOS made likelier: some outputs end early, the others run to their limits, which
    # differ from source to source. Greedy decodes them in one call at the longest
    # limit; the outputs and scores must still be those of the Translator.
    model = transformer(tokenizer.vocab_size, "tied")
    bias = model.head.bias.numpy()
    bias[3] += 3.7  # (3.6: no output ends early here; 3.9: all do)
    model.head.bias.assign(bias)
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    sources = list(verses[0][:8])
    prefixes = ["And", "", "", "The", "", "", "", ""]
    options = dict(max_length_ratio=0.5, max_length_offset=2, batch_size=8)
    translator = Translator(model, tokenizer, tokenizer, **options)
    assert len({len(pieces) for pieces in tokenizer.pieces(sources)}) > 3  # several limits
    for target_prefix in (None, prefixes):
        engine = CTranslate2Translator(output, **options)
        engine.translator = _CallCounter(engine.translator)
        expected = translator.translate(sources, with_scores=True, target_prefix=target_prefix)
        got = engine.translate(sources, with_scores=True, target_prefix=target_prefix)
        assert engine.translator.calls == 1
        assert [text for text, _ in got] == [text for text, _ in expected]
        ended = [length < np.ceil(0.5 * (pieces + 1)) + 2
                 for pieces, length in engine.translator.pairs]
        assert any(ended) and not all(ended)  # early ends and cut outputs both
        np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-3)
    # A beam still splits the batch where the limit changes.
    engine = CTranslate2Translator(output, **options, beam_size=2)
    engine.translator = _CallCounter(engine.translator)
    engine.translate(sources)
    assert engine.translator.calls > 3


def test_a_prefix_longer_than_its_output_limit_is_refused_as_the_translator_does(
        tokenizer, verses, tmp_path):
    model = transformer(tokenizer.vocab_size, "softmax")
    output = str(tmp_path / "ct2")
    to_ctranslate2(model, tokenizer, tokenizer, output)
    options = dict(max_length_ratio=0.5, max_length_offset=0)
    prefixes = ["", "And it came to pass in those days that the words were many"]
    sources = ["Amén.", "Amén."]
    message = r"`target_prefix` 1 has \d+ target pieces, more than its source's output limit"
    with pytest.raises(ValueError, match=message):
        Translator(model, tokenizer, tokenizer, **options).translate(
            sources, target_prefix=prefixes)
    with pytest.raises(ValueError, match=message):
        CTranslate2Translator(output, **options).translate(sources, target_prefix=prefixes)
