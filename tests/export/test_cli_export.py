"""`tf-outheads export` on a tiny trained run; what the export leaves of the model."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests.corpus import write_corpus_slice
from tests.export.conftest import SIZE
from tf_outheads.decoding import Translator
from tf_outheads.export import TranslatorModule, export_translator
from tf_outheads_zoo import cli
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.runs import load_run


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """`tf-outheads train` of lstm-tiny for 2 steps on 300 verses."""
    corpus = write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 300, 8, 8)
    run_dir = str(tmp_path_factory.mktemp("run"))
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", str(corpus),
              "--max-steps", "2", "--set", "data.vocab_size=300",
              "--set", "train.steps_per_epoch=2", "--set", "decode.max_length_offset=3"])
    return run_dir


@pytest.mark.slow  # CLI train + export end to end
def test_export_command_writes_a_saved_model_that_translates_like_the_run(trained_run,
                                                                          tmp_path, capsys):
    output = str(tmp_path / "translator" / "1")
    cli.main(["export", "--run-dir", trained_run, "--output", output, "--beam-sizes", "1,2",
              "--num-hypotheses", "1", "--max-request-sources", "4",
              "--max-request-pieces", "500"])
    out = capsys.readouterr().out
    assert "SavedModel written to" in out
    assert "(signatures serving_default, translate, score;" in out
    with open(os.path.join(output, "assets.extra", "tf_outheads_export.json")) as f:
        config = json.load(f)
    # The run's decode settings are the signature's defaults.
    assert config["max_length_offset"] == 3 and config["beam_sizes"] == [1, 2]
    assert config["max_request_sources"] == 4 and config["max_request_pieces"] == 500

    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    sources = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra.",
               "", "Jehová es mi pastor; nada me faltará."]
    expected = Translator(model, source_tokenizer, target_tokenizer,
                          **config.decode.options()).translate(sources[:2] + sources[3:])
    loaded = tf.saved_model.load(output)
    outputs = loaded.signatures["serving_default"](sources=tf.constant(sources))
    texts = [text.decode("utf-8") for text in outputs["translations"].numpy()[:, 0]]
    assert texts == expected[:2] + [""] + expected[2:]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"it holds 5 sources; this export translates at most 4 per"):
        loaded.signatures["serving_default"](sources=tf.constant(sources + ["Amén."]))


@pytest.mark.slow  # CLI train + export end to end (issue 37: CI runs it)
def test_export_leaves_the_keras_file_loadable(trained_run, tmp_path):
    model, source_tokenizer, target_tokenizer, _ = load_run(trained_run)
    before = [weight.numpy() for weight in model.weights]
    export_translator(model, source_tokenizer, target_tokenizer, str(tmp_path / "saved"),
                      beam_sizes=(1,))
    path = str(tmp_path / "again.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    for weight, value in zip(reloaded.weights, before):
        np.testing.assert_array_equal(weight.numpy(), value)
    source = ["Y dijo Dios: Sea la luz."]
    assert (Translator(reloaded, source_tokenizer, target_tokenizer).translate(source)
            == Translator(model, source_tokenizer, target_tokenizer).translate(source))


@pytest.mark.slow  # ~12 s: in the slow set, for the fast suite's 10-minute budget
def test_a_rewe_head_stays_out_of_the_export(bible_tokenizer, tmp_path):
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=SIZE, hidden_dim=SIZE, num_layers=1, head="tied",
                        rewe=True)
    assert model.rewe is not None and model.rewe.weights
    module = TranslatorModule(model, bible_tokenizer, bible_tokenizer, beam_sizes=(1,))
    used = {id(variable) for variable in module.track_used_variables()}
    rewe = {id(weight.value) for weight in model.rewe.weights}
    rest = {id(weight.value) for weight in model.weights} - rewe
    assert not used & rewe
    assert used & rest
    path = str(tmp_path / "saved")
    tf.saved_model.save(module, path, signatures=module.signatures())
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as stream:
        saved_model.ParseFromString(stream.read())
    graph = saved_model.meta_graphs[0].graph_def
    names = [node.name for node in graph.node]
    names += [node.name for function in graph.library.function for node in function.node_def]
    assert any("decoder" in name for name in names)
    assert not any("rewe" in name.lower() for name in names)


@pytest.mark.slow  # CLI train + export end to end
def test_export_and_translate_take_quantize_int8(trained_run, tmp_path):
    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    sources = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra."]
    expected = Translator(model, source_tokenizer, target_tokenizer, quantize="int8",
                          **config.decode.options()).translate(sources)
    source_file, output_file = tmp_path / "src.txt", tmp_path / "out.txt"
    source_file.write_text("\n".join(sources) + "\n", encoding="utf-8")
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source_file),
              "--output", str(output_file), "--quantize", "int8"])
    assert output_file.read_text(encoding="utf-8").splitlines() == expected

    output = str(tmp_path / "int8" / "1")
    cli.main(["export", "--run-dir", trained_run, "--output", output, "--beam-sizes", "1",
              "--quantize", "int8"])
    with open(os.path.join(output, "assets.extra", "tf_outheads_export.json")) as f:
        assert json.load(f)["quantize"] == "int8"
    loaded = tf.saved_model.load(output)
    assert loaded.head_cache["output_kernel"].dtype == tf.int8
    outputs = loaded.signatures["serving_default"](sources=tf.constant(sources))
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()[:, 0]] == expected
    with pytest.raises(SystemExit):  # argparse: int8 is the one choice
        cli.main(["export", "--run-dir", trained_run, "--output", output, "--quantize", "int4"])
