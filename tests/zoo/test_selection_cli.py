"""Neural vocabulary selection through the CLI (issue 56): a run trained with a selection
head resumes from its backup like any run, `tf-outheads shortlist --method neural`
prints the dev recall and size per threshold and stores the chosen one, and `translate
--shortlist`, `Translator` and a reloaded SavedModel export decode the same."""

import json
import os
import re

import pytest
import tensorflow as tf

from tests.corpus import write_corpus_slice
from tests.export.options import signature_options
from tf_outheads.decoding import NeuralSelection, Translator
from tf_outheads_zoo import cli
from tf_outheads_zoo.runs import load_run

pytestmark = pytest.mark.slow  # CLI training end to end

SOURCES = ["Y dijo Dios: Sea la luz.", "", "Jehová es mi pastor; nada me faltará.",
           "En el principio creó Dios los cielos y la tierra."]


def train(run_dir, corpus, steps):
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", corpus,
              "--max-steps", str(steps), "--set", "data.vocab_size=400",
              "--set", "train.steps_per_epoch=6", "--set", "decode.max_length_offset=3",
              "--set", "model.selection={'pooling': 'logit_max'}",
              "--set", "train.selection={'weight': 1.0, 'positive_weight': 10.0}"])


def test_a_selection_run_trains_resumes_measures_and_decodes_alike(tmp_path, capsys):
    corpus = write_corpus_slice(tmp_path / "small.tsv", 600, 30, 30)
    run_dir = str(tmp_path / "run")
    train(run_dir, corpus, 12)
    with open(os.path.join(run_dir, "history.csv")) as f:
        header = f.readline().strip().split(",")
    assert "selection_loss" in header and "val_selection_loss" in header
    capsys.readouterr()
    train(run_dir, corpus, 15)
    assert "[backup] resumed from step 12" in capsys.readouterr().out

    cli.main(["shortlist", "--run-dir", run_dir, "--method", "neural", "--recall", "0.6",
              "--bucket", "8"])
    out = capsys.readouterr().out
    rows = re.findall(r"\[shortlist\]   ([\d.e-]+) +([\d.]+)% +(\d+)", out)
    assert len(rows) == 12
    recalls = [float(recall) for _, recall, _ in rows]
    sizes = [int(size) for *_, size in rows]
    assert recalls == sorted(recalls) and sizes == sorted(sizes)  # looser: more, larger
    with open(os.path.join(run_dir, "selection.json")) as f:
        stored = json.load(f)
    assert stored["method"] == "neural" and stored["bucket"] == 8
    chosen = [size for threshold, _, size in rows if float(threshold) == stored["threshold"]]
    assert f"threshold {stored['threshold']:g}:" in out and int(chosen[0]) < 400
    # A selection that keeps most of the vocabulary is pointed out.
    assert ("warning: this threshold keeps" in out) == (int(chosen[0]) > 200)
    cli.main(["shortlist", "--run-dir", run_dir, "--method", "neural", "--recall", "1.0",
              "--bucket", "8"])
    assert re.search(r"warning: this threshold keeps (\d+)% of the pieces",
                     capsys.readouterr().out)
    cli.main(["shortlist", "--run-dir", run_dir, "--method", "neural", "--recall", "0.6",
              "--bucket", "8"])
    capsys.readouterr()

    source_file = tmp_path / "sources.txt"
    source_file.write_text("".join(line + "\n" for line in SOURCES), encoding="utf-8")
    output = tmp_path / "out.txt"
    cli.main(["translate", "--run-dir", run_dir, "--input", str(source_file), "--output",
              str(output), "--shortlist"])
    from_cli = output.read_text(encoding="utf-8").splitlines()
    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    selection = NeuralSelection.load(os.path.join(run_dir, "selection.json"))
    translator = Translator(model, source_tokenizer, target_tokenizer, shortlist=selection,
                            **config.decode.options())
    assert translator.translate(SOURCES) == from_cli

    export_dir = str(tmp_path / "export")
    cli.main(["export", "--run-dir", run_dir, "--output", export_dir, "--shortlist"])
    loaded = tf.saved_model.load(export_dir)
    outputs = loaded.signatures["translate"](sources=tf.constant(SOURCES),
                                             **signature_options())
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()[:, 0]] == from_cli
