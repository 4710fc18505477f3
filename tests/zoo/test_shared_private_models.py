"""Zoo models with shared-private bilingual embeddings (Liu et al. 2019)."""

import keras
import numpy as np
import pytest
from keras import ops

from tf_outheads.data import SubwordTokenizer
from tf_outheads.data import make_training_dataset
from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.layers.shared_private import SharedPrivateEmbedding
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.metrics import parameter_report
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq

SOURCE_VOCAB_SIZE, TARGET_VOCAB_SIZE, DIM = 23, 19, 8


def pairs():
    # 17 pairs (8 lm, 3 wf, 6 ur); source 17..22 and target 17, 18 unpaired.
    rng = np.random.default_rng(0)
    return WordPairs(np.arange(17), rng.permutation(17), np.repeat([0, 1, 2], [8, 3, 6]),
                     SOURCE_VOCAB_SIZE, TARGET_VOCAB_SIZE)


def make_model(head="tied", model_type=LSTMSeq2Seq, **kwargs):
    if model_type is LSTMSeq2Seq:
        config = dict(embedding_dim=DIM, hidden_dim=DIM, num_layers=1, dropout=0.0)
    else:
        config = dict(model_dim=DIM, ffn_dim=16, num_heads=2, encoder_layers=1,
                      decoder_layers=1, dropout=0.0, attention_dropout=0.0, ffn_dropout=0.0)
    config.update(head=head, shared_private={"pairs": pairs(), "sharing_ratios": (0.9, 0.7, 0.5)})
    config.update(kwargs)
    return model_type(SOURCE_VOCAB_SIZE, TARGET_VOCAB_SIZE, **config)


def batch():
    rng = np.random.default_rng(1)
    return {"source_ids": rng.integers(1, SOURCE_VOCAB_SIZE, (3, 5)).astype("int32"),
            "target_in": rng.integers(1, TARGET_VOCAB_SIZE, (3, 4)).astype("int32")}


@pytest.mark.parametrize("model_type", [LSTMSeq2Seq, TransformerSeq2Seq])
def test_the_model_uses_both_sides_and_counts_the_shared_features_once(model_type):
    model = make_model(model_type=model_type)
    assert model.source_embedding is model.shared_private.source
    assert model.target_embedding is model.shared_private.target
    assert model.head.embedding is model.target_embedding
    report = parameter_report(model)
    assert report.groups["embeddings"] == model.shared_private.count_params()
    plain = make_model(model_type=model_type, shared_private=None)
    saved = parameter_report(plain).total - report.total
    assert saved == 8 * 7 + 3 * 6 + 6 * 4 == model.shared_private.parameter_count()["shared"]


@pytest.mark.parametrize("model_type, head", [
    (LSTMSeq2Seq, "softmax"), (LSTMSeq2Seq, "tied"), (LSTMSeq2Seq, "joint"),
    (TransformerSeq2Seq, "tied"), (TransformerSeq2Seq, "joint")])
def test_keras_save_load_and_config_round_trip(model_type, head, tmp_path):
    model = make_model(head, model_type=model_type)
    for weight in model.weights:
        weight.assign(np.random.default_rng(2).normal(size=weight.shape).astype("float32") * 0.3)
    inputs = batch()
    expected = ops.convert_to_numpy(model(inputs))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(loaded(inputs), expected, rtol=1e-6, atol=1e-6)
    assert isinstance(loaded.shared_private, SharedPrivateEmbedding)
    assert len({id(w) for w in loaded.weights}) == len({id(w) for w in model.weights})
    # Still one shared variable: moving it moves both sides' paired rows.
    shared = {w.path.split("/")[-1]: w for w in loaded.shared_private.weights}["shared_lm"]
    source_before = np.asarray(loaded.source_embedding.embeddings)
    target_before = np.asarray(loaded.target_embedding.embeddings)
    shared.assign(shared + 1.0)
    s, t = loaded.shared_private.pairs.source_ids[0], loaded.shared_private.pairs.target_ids[0]
    np.testing.assert_allclose(np.asarray(loaded.source_embedding.embeddings)[s, :7],
                               source_before[s, :7] + 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(loaded.target_embedding.embeddings)[t, :7],
                               target_before[t, :7] + 1.0, rtol=1e-6)

    config = model.get_config()
    revived = model_type.from_config(config)
    assert revived.get_config() == config
    revived.set_weights(model.get_weights())
    np.testing.assert_allclose(revived(inputs), expected, rtol=1e-6, atol=1e-6)


def test_pairs_of_other_vocabularies_are_refused():
    with pytest.raises(ValueError, match=r"does not fit the model.*\(23, 19, 8\)"):
        LSTMSeq2Seq(SOURCE_VOCAB_SIZE + 1, TARGET_VOCAB_SIZE, embedding_dim=DIM,
                    hidden_dim=DIM, num_layers=1, shared_private={"pairs": pairs()})
    with pytest.raises(ValueError, match="source_embedding_dim"):
        make_model(source_embedding_dim=DIM * 2)
    with pytest.raises(ValueError, match="Received keys"):
        make_model(shared_private={"pairs": pairs(), "lambda": 0.5})


@pytest.mark.slow  # training
@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed")
@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_training_with_aligned_pairs_lowers_the_loss_and_moves_shared_features(
        bible_slice, bible_tokenizer):
    pytest.importorskip("eflomal")
    from tf_outheads.data.word_pairs import word_pairs_from_tokenizers

    tokenizer = SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)
    # Pairs from 800 verses (on 400, eflomal's links give "Y" → "God" more
    # weight than "And", and "Y" comes first by frequency); training on 400.
    word_pairs = word_pairs_from_tokenizers(bible_slice.sources[:800], bible_slice.targets[:800],
                                            tokenizer, tokenizer)
    sources, targets = bible_slice.sources[:400], bible_slice.targets[:400]
    dataset = make_training_dataset(sources, targets, tokenizer, tokenizer,
                                    batch_tokens=512, max_length=32, seed=0)
    vocabulary_size = tokenizer.vocab_size
    model = LSTMSeq2Seq(vocabulary_size, vocabulary_size, embedding_dim=32, hidden_dim=32,
                        num_layers=1, dropout=0.0, head="tied",
                        shared_private={"pairs": word_pairs})
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=MaskedSequenceCrossEntropy(),
                  jit_compile=False)
    god = tokenizer.piece_to_id("▁God")
    dios = tokenizer.piece_to_id("▁Dios")
    assert model.shared_private.shared_features(dios) == (god, 29)  # lm: round(0.9 · 32)
    before_target = np.asarray(model.target_embedding.embeddings)[god]
    history = model.fit(dataset, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.85 * losses[0], losses
    source = np.asarray(model.source_embedding.embeddings)[dios]
    target = np.asarray(model.target_embedding.embeddings)[god]
    np.testing.assert_array_equal(source[:29], target[:29])
    assert not np.allclose(target[:29], before_target[:29])
    assert not np.allclose(source[29:], target[29:])


@pytest.mark.slow  # eflomal + training
def test_auto_pairs_are_built_once_per_tokenizer_and_plotted(bible_slice, bible_tokenizer,
                                                              tmp_path):
    pytest.importorskip("eflomal")
    from tf_outheads_zoo.run_pairs import resolve_pairs, write_pair_figure

    train = bible_slice.select(range(800))
    messages = []
    from tf_outheads_zoo.presets import preset_config

    config = preset_config("lstm-tiny", {"model.embedding_dim": 16, "model.shared_private": {
        "pairs": "auto", "threshold": 0.05, "sharing_ratios": [0.9, 0.7, 0.5]}}).model
    resolved = resolve_pairs(config, train, bible_tokenizer, bible_tokenizer, str(tmp_path),
                             log=messages.append)
    path = resolved.shared_private["pairs"]
    assert path == str(tmp_path / "word_pairs.tsv")
    assert resolved.shared_private["sharing_ratios"] == [0.9, 0.7, 0.5]
    assert "threshold" not in resolved.shared_private
    assert config.shared_private["pairs"] == "auto"  # the settings are not modified
    assert any("WordPairs: lm" in m for m in messages)
    messages.clear()
    assert resolve_pairs(config, train, bible_tokenizer, bible_tokenizer, str(tmp_path),
                         log=messages.append) == resolved
    assert messages == [f"Word pairs: reusing {path}"]
    # Other verses, as many: the fingerprint covers the texts, so they are paired anew.
    messages.clear()
    resolve_pairs(config, bible_slice.select(range(800, 1600)), bible_tokenizer,
                  bible_tokenizer, str(tmp_path), log=messages.append)
    assert any("WordPairs: lm" in m for m in messages), messages
    resolve_pairs(config, train, bible_tokenizer, bible_tokenizer, str(tmp_path))  # back

    vocabulary_size = bible_tokenizer.vocab_size
    model = LSTMSeq2Seq(vocabulary_size, vocabulary_size, embedding_dim=16, hidden_dim=16,
                        num_layers=1, shared_private=resolved.shared_private)
    figure = write_pair_figure(model, path, str(tmp_path / "pca.svg"), count=20)
    svg = open(figure, encoding="utf-8").read()
    assert svg.count("<circle") == 40 and svg.count('stroke="#ccc"') == 20
    assert ">Dios</text>" in svg and ">God</text>" in svg


@pytest.mark.parametrize("ratios", [(0.9, 0.7, 0.5), (1.0, 1.0, 1.0)])
def test_transformer_cached_decoding_equals_the_full_pass(ratios):
    model = make_model("tied", model_type=TransformerSeq2Seq,
                       shared_private={"pairs": pairs(), "sharing_ratios": ratios})
    for weight in model.weights:
        weight.assign(np.random.default_rng(3).normal(size=weight.shape).astype("float32") * 0.3)
    inputs = batch()
    log_probs = ops.convert_to_numpy(ops.log_softmax(model(inputs), axis=-1))
    step_fn = model.make_step_fn()
    state = model.initial_decoding_state(inputs["source_ids"], max_length=4)
    for t in range(4):
        scores, state = step_fn(inputs["target_in"][:, t], state)
        np.testing.assert_allclose(ops.convert_to_numpy(scores), log_probs[:, t],
                                   rtol=1e-4, atol=1e-5)


def test_three_way_tying_is_one_table_for_source_target_and_output():
    vocabulary_size = 20
    model = TransformerSeq2Seq(
        vocabulary_size, vocabulary_size, model_dim=DIM, ffn_dim=16, num_heads=2,
        encoder_layers=1, decoder_layers=1, head="tied",
        shared_private={"pairs": WordPairs.identity(vocabulary_size),
                        "sharing_ratios": (1.0, 1.0, 1.0)})
    np.testing.assert_array_equal(np.asarray(model.source_embedding.embeddings),
                                  np.asarray(model.head.output_weights()))
    assert parameter_report(model).groups["embeddings"] == vocabulary_size * DIM
