"""int8 inference through every decoding path: `Translator(quantize="int8")`,
`Scorer(quantize="int8")` and `export_translator(quantize="int8")` agree with each other,
keep every signature, and leave the float model as it was."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.export.conftest import tiny_model
from tests.export.options import signature_options
from tf_outheads.data.special_tokens import EOS_ID, PAD_ID
from tf_outheads.decoding import Scorer, Translator
from tf_outheads.export import export_translator
from tf_outheads_zoo.transformer import TransformerSeq2Seq


# The Transformer case (~25 s) is in the slow set, for the fast suite's 10-minute budget.
@pytest.fixture(scope="module", params=[
    "lstm-joint", pytest.param("transformer-tied", marks=pytest.mark.slow)])
def joint_model(bible_tokenizer, request):
    """An LSTM with a joint head (int8 head cache only), and a Transformer with a tied
    head (Keras' int8 Dense layers too)."""
    if request.param == "lstm-joint":
        return tiny_model("joint", bible_tokenizer.vocab_size, seed=11)
    keras.utils.set_random_seed(11)
    return TransformerSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                              model_dim=16, ffn_dim=32, num_heads=2, encoder_layers=1,
                              decoder_layers=1, dropout=0.0, attention_dropout=0.0,
                              ffn_dropout=0.0, head="tied")


@pytest.fixture(scope="module")
def quantized_export(joint_model, tokenizer, tmp_path_factory):
    path = export_translator(joint_model, tokenizer, tokenizer,
                             str(tmp_path_factory.mktemp("int8") / "1"), beam_sizes=(1,),
                             quantize="int8")
    return path, tf.saved_model.load(path)


def test_the_translator_the_scorer_and_the_savedmodel_agree_in_int8(
        joint_model, tokenizer, quantized_export, spanish_test_verses):
    float_cache = joint_model.head.inference_cache()
    translator = Translator(joint_model, tokenizer, tokenizer, quantize="int8")
    hypotheses = translator.translate(spanish_test_verses, with_scores=True)
    texts = [text for text, _ in hypotheses]
    # The float model is untouched; the translator decodes a quantized copy.
    assert joint_model.quantization is None and float_cache["output_kernel"].dtype == tf.float32
    assert translator.model is not joint_model and translator.model.quantization == "int8"

    # Forced decoding of the int8 search's pieces under the int8 model: its own scores.
    scorer = Scorer(joint_model, tokenizer, tokenizer, quantize="int8")
    graph = translator.graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(spanish_test_verses))
    ids, search_scores = graph.search(1, source_ids, num_pieces,
                                      translator.model.head.inference_cache())
    sources, outputs, ended = [], [], []
    for row, hypothesis in enumerate(ids.numpy()[:, 0].tolist()):
        sources.append(source_ids[row, :num_pieces[row]].numpy().tolist())
        ended.append(EOS_ID in hypothesis)
        hypothesis = [i for i in hypothesis if i != PAD_ID]
        outputs.append(hypothesis[:hypothesis.index(EOS_ID)] if ended[-1] else hypothesis)
    forced = [sum(r["token_log_probs"][:None if done else -1]) for r, done in
              zip(scorer.score_ids(sources, outputs, per_token=True), ended)]
    np.testing.assert_allclose(forced, search_scores.numpy()[:, 0], rtol=1e-4, atol=2e-3)
    scores = scorer.score(spanish_test_verses, texts)

    path, loaded = quantized_export
    with open(os.path.join(path, "assets.extra", "tf_outheads_export.json")) as f:
        assert json.load(f)["quantize"] == "int8"
    assert loaded.head_cache["output_kernel"].dtype == tf.int8
    assert loaded.head_cache["output_scale"].dtype == tf.float32
    result = loaded.signatures["translate"](sources=tf.constant(spanish_test_verses),
                                            **signature_options())
    assert [t.decode("utf-8") for t in result["translations"].numpy()[:, 0]] == texts
    np.testing.assert_allclose(result["scores"].numpy()[:, 0], [s for _, s in hypotheses],
                               rtol=1e-4, atol=1e-3)
    scored = loaded.signatures["score"](sources=tf.constant(spanish_test_verses),
                                        targets=tf.constant(texts))
    np.testing.assert_allclose(scored["log_prob"].numpy(), [r["log_prob"] for r in scores],
                               rtol=1e-4, atol=1e-3)


def test_a_bad_quantize_is_refused_by_name(joint_model, tokenizer):
    with pytest.raises(ValueError, match="quantize='int4'"):
        Translator(joint_model, tokenizer, tokenizer, quantize="int4")
    with pytest.raises(ValueError, match="quantize='float16'"):
        Scorer(joint_model, tokenizer, tokenizer, quantize="float16")
