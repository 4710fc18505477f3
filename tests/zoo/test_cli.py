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
