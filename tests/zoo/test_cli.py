"""End to end through the CLI on a small real slice of the Bible corpus."""

import gzip
import json
import os

import pytest

from zoo import cli
from zoo.presets import EMBEDDED_CORPUS, get_preset


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """A TSV in the embedded corpus's format: 600 train, 30 dev, 30 test verses."""
    keep = {"train": 600, "dev": 30, "test": 30}
    rows = []
    with gzip.open(EMBEDDED_CORPUS, "rt", encoding="utf-8") as f:
        header = next(f)
        for line in f:
            split = line.split("\t")[1]
            if keep[split] > 0:
                keep[split] -= 1
                rows.append(line)
    path = tmp_path_factory.mktemp("corpus") / "small.tsv"
    path.write_text(header + "".join(rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def trained_run(small_corpus, tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("run"))
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "12", "--set", "data.vocab_size=400",
              "--set", "train.steps_per_epoch=6", "--set", "decode.max_length_offset=3"])
    return run_dir


def test_train_writes_translations_and_results(trained_run):
    with open(os.path.join(trained_run, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 12
    assert set(results["test"]) == {"bleu[en_web]", "chrf[en_web]", "bleu[en_web+en_kjv]"}
    assert "nrefs:2" in results["test"]["bleu[en_web+en_kjv]"]["signature"]
    for split in ("dev", "test"):
        with open(os.path.join(trained_run, f"{split}.hyp"), encoding="utf-8") as f:
            assert len(f.read().splitlines()) == 30
    for name in ("model.keras", "tokenizer.json", "preset.json", "history.csv", "bleu.jsonl"):
        assert os.path.exists(os.path.join(trained_run, name)), name
    assert results["parameters"]["output_layer"] == 400  # tied: only the bias


def test_translate_command_keeps_line_count_and_order(trained_run, tmp_path, capsys):
    source = tmp_path / "src.txt"
    source.write_text("Y dijo Dios.\n\nEn el principio.\n", encoding="utf-8")
    output = tmp_path / "hyp.txt"
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
              "--output", str(output)])
    assert len(output.read_text(encoding="utf-8").splitlines()) == 3


def test_evaluate_reports_bleu_chrf_and_parameters(trained_run, small_corpus, tmp_path, capsys):
    report = tmp_path / "scores.json"
    cli.main(["evaluate", "--hypotheses", os.path.join(trained_run, "test.hyp"),
              "--corpus", small_corpus, "--split", "test", "--run-dir", trained_run,
              "--json", str(report)])
    printed = capsys.readouterr().out
    assert "bleu[en_web+en_kjv]" in printed and "output_layer" in printed
    scores = json.loads(report.read_text())
    assert scores["parameters"]["embeddings"] > 0


def test_evaluate_refuses_mismatched_line_counts(small_corpus, tmp_path):
    hypotheses = tmp_path / "short.hyp"
    hypotheses.write_text("one line only\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"short\.hyp.*30 .*1 |short\.hyp.*1 .*30"):
        cli.main(["evaluate", "--hypotheses", str(hypotheses), "--corpus", small_corpus,
                  "--split", "test"])


def test_override_of_unknown_setting_names_it():
    with pytest.raises(ValueError, match="model.hidden_size"):
        get_preset("lstm-cpu", {"model.hidden_size": 3})


def test_set_parses_python_literals_and_bare_strings():
    overrides = cli._parse_overrides(["model.head=softmax", "train.max_steps=5",
                                      "train.max_minutes=None"])
    assert overrides == {"model.head": "softmax", "train.max_steps": 5, "train.max_minutes": None}


def test_evaluate_scores_against_the_stripped_references(small_corpus, tmp_path, capsys):
    from zoo.presets import get_preset
    from zoo.train import read_split

    data_config = dict(get_preset("lstm-cpu")["data"], corpus=small_corpus)
    references = read_split(data_config, "test").targets
    hypotheses = tmp_path / "oracle.hyp"
    hypotheses.write_text("\n".join(references) + "\n", encoding="utf-8")
    report = tmp_path / "scores.json"
    arguments = ["evaluate", "--hypotheses", str(hypotheses), "--corpus", small_corpus,
                 "--split", "test", "--json", str(report)]
    cli.main(arguments)
    assert json.loads(report.read_text())["bleu[en_web]"]["score"] == pytest.approx(100.0)
    cli.main(arguments + ["--keep-boilerplate"])
    # 1 of these 30 verses (Amos) carries the heading; its n-grams are now missing
    assert json.loads(report.read_text())["bleu[en_web]"]["score"] < 99.9


@pytest.mark.parametrize("loss", [
    "{'class_name': 'vmf', 'config': {'norm_penalty': 0.02, 'dot_scale': 0.1}}",
    "{'class_name': 'cosine', 'config': {}}",
], ids=["vmf", "cosine"])
def test_continuous_head_trains_with_vectors_of_its_own_tokenizer(small_corpus, tmp_path, loss):
    import keras
    import numpy as np

    from tf_outheads import ContinuousOutputHead
    from tf_outheads.data import load_tokenizers, load_word_vectors

    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "4", "--set", "data.vocab_size=300",
              "--set", "data.joint_vocabulary=False", "--set", "train.label_smoothing=0.0",
              "--set", "data.target_vectors={'dim': 12, 'epochs': 1, 'path': None}",
              "--set", "model.head={'class_name': 'continuous', 'config': {'output_dim': 12}}",
              "--set", f"train.loss={loss}",
              "--set", "train.steps_per_epoch=2", "--set", "decode.max_length_offset=3"])
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 4
    # The vectors are per piece of the run's own target tokenizer.
    words, vectors = load_word_vectors(os.path.join(run_dir, "target_vectors.vec"))
    _, target_tokenizer = load_tokenizers(run_dir)
    assert vectors.shape[1] == 12
    assert all(target_tokenizer.piece_to_id(w) != 1 for w in words[:50])  # not UNK
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"), safe_mode=True)
    assert isinstance(model.head, ContinuousOutputHead)
    table = model.head.target_vectors().numpy()
    row = target_tokenizer.piece_to_id(words[0])
    np.testing.assert_allclose(table[row], vectors[0] / np.linalg.norm(vectors[0]), rtol=1e-5)
    # Output layer: d_h·m + m trainable, and the frozen |V|·m table.
    assert results["parameters"]["output_layer"] == 64 * 12 + 12 + target_tokenizer.vocab_size * 12
