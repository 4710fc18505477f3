"""Vocabulary selection for every head, end to end (issue 56): a run of each head, and
of each model or training variant that changes what decoding reads (shared-private
embeddings, a ReWE head beside the softmax, sampled-softmax training, the Transformer),
trained with a selection head, decodes the same sentences over its lexical shortlist and
over its neural selection alike through `tf-outheads translate --shortlist`,
`Translator(shortlist=...)` and a reloaded SavedModel export; and the selections change
the outputs, so the agreement is not that of full decoding."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tests.corpus import write_corpus_slice
from tests.export.options import signature_options
from tf_outheads.decoding import NeuralSelection, Shortlist, Translator
from tf_outheads_zoo import cli
from tf_outheads_zoo.runs import load_run
from tf_outheads_zoo.shortlists import load_run_shortlist

pytestmark = pytest.mark.slow  # five CLI trainings, ten exports

SOURCES = ["Y dijo Dios: Sea la luz.", "", "Jehová es mi pastor; nada me faltará.",
           "En el principio creó Dios los cielos y la tierra.",
           "Bienaventurados los mansos, porque ellos recibirán la tierra por heredad."]
SELECTION = ["--set", "model.selection={'pooling': 'logit_max'}",
             "--set", "train.selection={'weight': 1.0, 'positive_weight': 10.0}"]
VECTORS = ["--set", "data.target_vectors={'dim': 12, 'epochs': 1, 'path': None}"]
JOINT = ["--set", "model.head={'class_name': 'joint', 'config': {'joint_dim': 32}}"]
CASES = {
    "softmax-rewe-sampled": ["--preset", "lstm-tiny", "--set", "model.head=softmax",
                             *VECTORS, "--set", "model.rewe={'hidden_dim': 8, "
                             "'embedding_dim': 12, 'targets': 'pretrained'}",
                             "--set", "train.rewe={'weight': 1.0, 'distance': 'cosine'}",
                             "--set", "train.sampled_softmax={'fraction': 0.5, "
                             "'mode': 'batch'}"],
    "tied-shared-private": ["--preset", "lstm-tiny", "--set", "model.shared_private="
                            "{'pairs': 'auto', 'threshold': 0.05, "
                            "'sharing_ratios': [0.9, 0.7, 0.5]}"],
    "joint": ["--preset", "lstm-tiny", *JOINT],
    "vmf": ["--preset", "lstm-tiny", "--set", "data.joint_vocabulary=False", *VECTORS,
            "--set", "model.head={'class_name': 'continuous', 'config': {'output_dim': 12}}",
            "--set", "train.loss={'class_name': 'vmf', 'config': {'norm_penalty': 0.02, "
                     "'dot_scale': 0.1}}", "--set", "train.label_smoothing=0.0"],
    "transformer-joint": ["--preset", "transformer-cpu", *JOINT, "--set", "model.model_dim=32",
                          "--set", "model.ffn_dim=64", "--set", "model.num_heads=2",
                          "--set", "model.encoder_layers=1", "--set", "model.decoder_layers=1",
                          "--set", "train.learning_rate_schedule=None",
                          "--set", "train.learning_rate=0.003",
                          "--set", "train.max_minutes=None"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 600, 30, 30)


def translate_cli(run_dir, tmp_path, *flags):
    """`[(text, score)]` of `tf-outheads translate --with-scores` (`i ||| text ||| score`)."""
    source_file = tmp_path / "sources.txt"
    source_file.write_text("".join(line + "\n" for line in SOURCES), encoding="utf-8")
    output = tmp_path / "out.txt"
    cli.main(["translate", "--run-dir", run_dir, "--input", str(source_file),
              "--output", str(output), "--with-scores", *flags])
    rows = [line.split(" ||| ") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [int(index) for index, _, _ in rows] == list(range(len(SOURCES)))
    return [(text, float(score)) for _, text, score in rows]


def assert_same(got, expected, origin):
    assert [text for text, _ in got] == [text for text, _ in expected], origin
    np.testing.assert_allclose([score for _, score in got], [score for _, score in expected],
                               atol=1e-4, err_msg=origin)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_head_decodes_alike_over_a_selection_in_python_the_cli_and_a_savedmodel(
        case, corpus, tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    cli.main(["train", *CASES[case], "--run-dir", run_dir, "--corpus", corpus,
              "--max-steps", "8", "--set", "data.vocab_size=300",
              "--set", "train.steps_per_epoch=4", "--set", "decode.max_length_offset=3",
              *SELECTION])
    # Lexical: one translation per source piece and no frequent pieces, so that the
    # candidates are few; neural: the threshold for 60% of the dev reference pieces.
    cli.main(["shortlist", "--run-dir", run_dir, "--aligner", "co-occurrence",
              "--top-k", "1", "--frequent", "0", "--bucket", "8"])
    cli.main(["shortlist", "--run-dir", run_dir, "--method", "neural", "--recall", "0.6",
              "--bucket", "8"])
    capsys.readouterr()
    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    # One batch everywhere: a batch's candidates are the union over its sources.
    assert config.decode.batch_size >= len(SOURCES)
    full = translate_cli(run_dir, tmp_path)
    for name, kind in (("shortlist.npz", Shortlist), ("selection.json", NeuralSelection)):
        path = os.path.join(run_dir, name)
        selection = load_run_shortlist(run_dir, path)
        assert isinstance(selection, kind)
        from_cli = translate_cli(run_dir, tmp_path, "--shortlist", path)
        translator = Translator(model, source_tokenizer, target_tokenizer,
                                shortlist=selection, **config.decode.options())
        assert_same(translator.translate(SOURCES, with_scores=True), from_cli, name)
        export_dir = str(tmp_path / f"export-{name}")
        cli.main(["export", "--run-dir", run_dir, "--output", export_dir,
                  "--shortlist", path])
        outputs = tf.saved_model.load(export_dir).signatures["translate"](
            sources=tf.constant(SOURCES), **signature_options())
        exported = [(text.decode("utf-8"), float(score)) for text, score in
                    zip(outputs["translations"].numpy()[:, 0], outputs["scores"].numpy()[:, 0])]
        assert_same(exported, from_cli, f"{name}, reloaded SavedModel")
        # Decoding over the candidates only: renormalised scores, if not other texts.
        assert any(abs(score - full_score) > 1e-3 for (_, score), (_, full_score)
                   in zip(from_cli, full) if score), name
