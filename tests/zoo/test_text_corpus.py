"""A user's own corpus as plain-text files (`data.train/dev/test`), through a run file."""

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.corpus import text_data, write_corpus_slice, write_text_files
from tf_outheads import data as tfo_data
from tf_outheads_zoo import cli
from tf_outheads_zoo.config import data_set
from tf_outheads_zoo.presets import get_preset, preset_config
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.splits import TrainingData, tokenizer_seed


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """600 train, 30 dev, 30 test verses in the embedded corpus's TSV format."""
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 600, 30, 30)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_text_files_give_the_batches_of_the_same_pairs_in_a_tsv(small_corpus, tmp_path):
    directory = write_text_files(small_corpus, str(tmp_path / "text"))
    tsv = preset_config("lstm-tiny", {"data.corpus": small_corpus, "data.vocab_size": 400})
    text = preset_config("lstm-tiny", {"data.corpus": small_corpus, "data.vocab_size": 400,
                                       "data.train": text_data(directory)["train"]})
    batches = {}
    for name, config in (("tsv", tsv), ("text", text)):
        keras.utils.set_random_seed(config.train.seed)
        data = TrainingData(config.data, seed=tokenizer_seed(config), log=lambda *_: None)
        assert data.streamed == (name == "text")
        tokenizers = tfo_data.build_tokenizers(data.sample.sources, data.sample.targets,
                                               tmp_path / f"spm-{name}", vocab_size=400)
        dataset = data.dataset(*tokenizers, seed=config.train.seed)
        batches[name] = [[t.numpy() for t in tf.nest.flatten(b)] for b in dataset.take(40)]
        batches[name + " pieces"] = tokenizers[0].vocabulary()  # the model bytes hold its path
    assert batches["tsv pieces"] == batches["text pieces"]
    for left, right in zip(batches["tsv"], batches["text"]):
        assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(left, right))


@pytest.mark.slow  # CLI training end to end (issue 37: CI runs it)
def test_a_run_file_of_text_files_trains_evaluates_and_translates(small_corpus, tmp_path,
                                                                  capsys):
    project = tmp_path / "project"
    write_text_files(small_corpus, str(project / "corpora"))
    # Paths relative to the run file, as a user writes them.
    data = text_data("corpora")
    run_file = project / "run.yaml"
    run_file.write_text(
        "preset: lstm-tiny\n"
        f"data: {json.dumps({**data, 'vocab_size': 400})}\n"
        "train: {steps_per_epoch: 3, epochs: 10}\n"
        "decode: {max_length_offset: 3}\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    cli.main(["train", "--config", str(run_file), "--run-dir", str(run_dir), "--max-steps", "6"])
    out = capsys.readouterr().out
    assert "streamed from text files" in out and "[dev] step 3: BLEU" in out
    with open(run_dir / "run.json", encoding="utf-8") as f:
        stored = json.load(f)["data"]
    assert stored["train"]["source"] == str(project / "corpora" / "train.es")  # absolute
    with open(run_dir / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["steps"] == 6 and [s for s, _ in results["dev_bleu_history"]] == [3, 6]
    assert set(results["test"]) == {"bleu[test.en]", "chrf[test.en]",
                                    "bleu[test.en+test.kjv.en]"}
    assert len((run_dir / "test.hyp").read_text(encoding="utf-8").splitlines()) == 30
    # evaluate, translate and export need nothing but the run directory.
    cli.main(["evaluate", "--hypotheses", str(run_dir / "test.hyp"), "--run-dir", str(run_dir),
              "--split", "test"])
    report = capsys.readouterr().out
    assert f"{results['test']['bleu[test.en]']['score']:.2f}" in report
    source = project / "corpora" / "dev.es"
    output = tmp_path / "dev.out"
    cli.main(["translate", "--run-dir", str(run_dir), "--input", str(source),
              "--output", str(output)])
    assert output.read_text(encoding="utf-8").splitlines() == \
        (run_dir / "dev.hyp").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("value, message", [
    ({"source": "a.de"}, r"data\.train needs the paths 'source' and 'target'"),
    ([{"source": "a.de", "target": "a.en", "refs": []}], r"data\.train takes the keys"),
    ("a.de", r"data\.train must be"),
])
def test_a_malformed_training_set_names_the_key(value, message):
    data = dataclasses.replace(preset_config("lstm-tiny").data, train=value)  # unchecked
    with pytest.raises(ConfigError, match=message):
        data_set(data, "train")
    if isinstance(value, str):
        return  # not a mapping: refused by the key's type, as every setting is
    # The schema refuses it when the key is set, before a run writes anything.
    with pytest.raises(ConfigError, match=message):
        get_preset("lstm-tiny", {"data.train": value})


def test_a_malformed_dev_set_is_refused_before_anything_is_written(small_corpus, tmp_path,
                                                                    capsys):
    run_dir = tmp_path / "r"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--preset", "lstm-tiny", "--run-dir", str(run_dir),
                  "--corpus", small_corpus,
                  "--set", "data.dev={'tsv': '" + small_corpus + "', 'split': 3}"])
    assert exit_info.value.code == 2
    assert "data.dev.split must be str" in capsys.readouterr().err
    assert not (run_dir / "run.json").exists()


def test_train_files_of_different_lengths_stop_before_training(small_corpus, tmp_path, capsys):
    source, target = tmp_path / "t.es", tmp_path / "t.en"
    source.write_text("uno\ndos\ntres\n", encoding="utf-8")
    target.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--preset", "lstm-tiny", "--run-dir", str(tmp_path / "r"),
                  "--corpus", small_corpus,
                  "--set", f"data.train={json.dumps({'source': str(source), 'target': str(target)})}"])
    assert exit_info.value.code != 0
    assert f"{source} has 3 lines but {target} has 2 lines" in capsys.readouterr().err


def test_a_tsv_set_in_the_run_file_is_that_tsv_split(small_corpus, tmp_path):
    from tf_outheads_zoo.splits import read_split

    default = preset_config("lstm-tiny", {"data.corpus": small_corpus,
                                          "data.strip_target_suffixes": []}).data
    # The corpus's own dev split, named as a TSV set with other columns.
    named = dataclasses.replace(
        default, corpus="/nowhere.tsv",
        dev={"tsv": small_corpus, "split": "dev", "source": "es", "target": "en_kjv",
             "references": ["en_web"]})
    assert data_set(named, "dev") == {"kind": "tsv", "path": small_corpus, "split": "dev",
                                      "source": "es", "target": "en_kjv",
                                      "references": ["en_web"]}
    corpus, reference = read_split(named, "dev"), read_split(default, "dev")
    assert corpus.sources == reference.sources and corpus.target_name == "en_kjv"
    assert corpus.references["en_web"] == reference.targets
    assert corpus.targets == reference.references["en_kjv"] != reference.targets
    with pytest.raises(ConfigError, match=r"data\.dev\.split must be str"):
        data_set(dataclasses.replace(default, dev={"tsv": small_corpus, "split": 3}), "dev")


def test_a_tsv_and_its_text_files_give_the_same_tokenizer_sample(small_corpus, tmp_path):
    directory = write_text_files(small_corpus, str(tmp_path / "text"))
    samples = []
    for train in (None, text_data(directory)["train"]):
        config = preset_config("lstm-tiny", {"data.corpus": small_corpus, "data.train": train,
                                             "data.tokenizer_sample": 100})
        samples.append(TrainingData(config.data, seed=7, log=lambda *_: None).sample)
    tsv, text = samples
    assert len(tsv) == len(text) == 100 and tsv.sources == text.sources
    assert tsv.targets == text.targets
    other = preset_config("lstm-tiny", {"data.corpus": small_corpus,
                                        "data.tokenizer_sample": 100})
    assert TrainingData(other.data, seed=8, log=lambda *_: None).sample.sources != tsv.sources
