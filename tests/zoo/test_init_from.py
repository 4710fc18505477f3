"""`train --init-from RUN`: a new run starts from a trained run's model, with the same
vocabulary, on other data; its record; refusals; the optimizer kept on request."""

import json
import os

import keras
import numpy as np
import pytest

from tests.corpus import write_corpus_slice
from tf_outheads.training import strategy as tfo_strategy
from tf_outheads.training.translation import compile_for_translation
from tf_outheads_zoo import cli
from tf_outheads_zoo import train as zoo_train
from tf_outheads_zoo.components import training_loss
from tf_outheads_zoo.runs import load_run, stored_run
from tf_outheads_zoo.schema import ConfigError

TINY = ["--set", "data.vocab_size=300", "--set", "train.steps_per_epoch=2",
        "--set", "decode.max_length_offset=3"]
HEADS = {
    "tied": [],
    "joint": ["--set", "model.head={'class_name': 'joint', 'config': {'joint_dim': 32}}"],
    "shared-private": [
        "--set", "model.head={'class_name': 'joint', 'config': {'joint_dim': 32}}",
        "--set", "model.shared_private={'pairs': 'auto', 'threshold': 0.05, "
                 "'sharing_ratios': [0.9, 0.7, 0.5]}"],
    "vmf": ["--set", "data.joint_vocabulary=False",
            "--set", "data.target_vectors={'dim': 16, 'epochs': 1}",
            "--set", "model.head={'class_name': 'continuous', 'config': {'output_dim': 16}}",
            "--set", "train.loss={'class_name': 'vmf', 'config': {'norm_penalty': 0.02, "
                     "'dot_scale': 0.1}}", "--set", "train.label_smoothing=0.0"],
}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """The parent's data (the first 300 train verses) and the child's (the first 600:
    other data, the same dev and test verses)."""
    directory = tmp_path_factory.mktemp("corpora")
    return (write_corpus_slice(directory / "parent.tsv", 300, 24, 10),
            write_corpus_slice(directory / "child.tsv", 600, 24, 10))


def _train(run_dir, corpus, *arguments):
    cli.main(["train", "--run-dir", str(run_dir), "--corpus", corpus, *TINY, *arguments])
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def _dev_loss(parent_dir, child_dir):
    """The parent's final model's loss on the child's dev batches (the child's own
    pipeline), compiled with the child's loss."""
    config = stored_run(str(child_dir))[1]
    strategy = tfo_strategy.make_strategy("default")
    keras.utils.set_random_seed(config.train.seed)
    data = zoo_train._prepare_data(config, str(child_dir), strategy,
                                   lambda build: build(), log=lambda *_: None)
    model, *_ = load_run(str(parent_dir))
    compile_for_translation(model, optimizer="adam", **training_loss(config.train))
    return model.evaluate(data.dev_dataset, verbose=0, return_dict=True)["loss"]


def _check_child(parent_dir, child_dir, parent_results, child_results):
    record = json.loads((child_dir / "init_from.json").read_text(encoding="utf-8"))
    assert record["run_dir"] == str(parent_dir) and record["steps"] == parent_results["steps"]
    assert child_results["init_from"] == record
    # The child starts where its parent ended: the same dev loss, to float precision.
    assert record["dev_loss_at_start"] == pytest.approx(_dev_loss(parent_dir, child_dir),
                                                        rel=1e-5)
    # It trained on from there, in the parent's pieces.
    assert child_results["steps"] == 3
    for name in ("tokenizer.json", "init_model.keras"):
        assert (child_dir / name).exists(), name
    assert (child_dir / "tokenizer.json").read_text() == (parent_dir / "tokenizer.json").read_text()


@pytest.mark.slow  # two CLI trainings, 39 s: the fast suite's 10-minute budget (issue 55)
def test_a_tied_run_starts_from_its_parents_model(corpora, tmp_path):
    parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
    parent = _train(parent_dir, corpora[0], "--preset", "lstm-tiny", "--max-steps", "4")
    child = _train(child_dir, corpora[1], "--init-from", str(parent_dir), "--max-steps", "3")
    _check_child(parent_dir, child_dir, parent, child)
    assert json.loads((child_dir / "run.json").read_text())["preset"] == "lstm-tiny"
    # A resumed child keeps its record and its copies: its parent may have moved.
    parent_dir.rename(tmp_path / "moved")
    again = _train(child_dir, corpora[1], "--max-steps", "4")
    assert again["steps"] == 4 and again["init_from"] == child["init_from"]


@pytest.mark.slow  # three heads, a parent and a child each: ~1 min
@pytest.mark.parametrize("head", ["joint", "shared-private", "vmf"])
def test_every_head_starts_from_its_parents_model(corpora, tmp_path, head):
    if head == "shared-private":
        pytest.importorskip("eflomal")
    parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
    parent = _train(parent_dir, corpora[0], "--preset", "lstm-tiny", "--max-steps", "4",
                    *HEADS[head])
    child = _train(child_dir, corpora[1], "--init-from", str(parent_dir), "--max-steps", "3")
    _check_child(parent_dir, child_dir, parent, child)
    if head == "shared-private":  # the parent's pairs, not pairs of the child's data
        assert ((child_dir / "word_pairs.tsv").read_text()
                == (parent_dir / "word_pairs.tsv").read_text())
    if head == "vmf":  # the parent's table, not vectors trained on the child's data
        model, *_ = load_run(str(child_dir))
        parent_model, *_ = load_run(str(parent_dir))
        np.testing.assert_array_equal(model.head.target_vectors(),
                                      parent_model.head.target_vectors())


@pytest.mark.slow  # two CLI trainings (~13 s)
def test_a_child_of_another_architecture_is_refused_naming_the_keys(corpora, tmp_path,
                                                                    capsys):
    parent_dir = tmp_path / "parent"
    _train(parent_dir, corpora[0], "--preset", "lstm-tiny", "--max-steps", "1")
    child_dir = tmp_path / "child"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["train", "--run-dir", str(child_dir), "--corpus", corpora[1], *TINY,
                  "--init-from", str(parent_dir), "--set", "model.hidden_dim=32",
                  "--set", "data.vocab_size=400"])
    assert ("differs from its parent's in model.hidden_dim, data.vocab_size (model.hidden_dim: "
            "64 in the parent, 32 here") in capsys.readouterr().err
    assert not child_dir.exists()
    with pytest.raises(SystemExit):
        cli.main(["train", "--run-dir", str(child_dir), "--init-from", str(tmp_path / "none")])
    assert "none': not a trained run directory" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="model.hidden_dim"):  # the library call, too
        zoo_train.run_training("lstm-tiny", str(child_dir), {
            "train.init_from": str(parent_dir), "model.hidden_dim": 32,
            "data.corpus": corpora[1], "data.vocab_size": 300})
    assert not child_dir.exists()


def test_a_run_file_without_a_preset_starts_from_its_parents_settings(tmp_path):
    from tf_outheads_zoo.presets import get_preset
    from tf_outheads_zoo.stored import read_run_config

    parent_dir = tmp_path / "runs" / "parent"
    parent_dir.mkdir(parents=True)
    stored = get_preset("lstm-tiny", {"model.hidden_dim": 48, "train.update_vocab": "merge",
                                      "train.init_from": "/elsewhere/grandparent"})
    (parent_dir / "preset.json").write_text(json.dumps({"name": "lstm-tiny", **stored}))
    run_file = tmp_path / "adapt.yaml"
    run_file.write_text("train: {init_from: runs/parent, max_steps: 50}\n")
    name, config = read_run_config(str(run_file))
    preset = config.to_dict()
    assert name == "lstm-tiny" and preset["model"]["hidden_dim"] == 48
    # Its own parent, relative to the run file; not the parent's parent or its update.
    assert preset["train"]["init_from"] == str(parent_dir)
    assert preset["train"]["update_vocab"] is None and preset["train"]["max_steps"] == 50


def test_init_from_on_the_command_line_with_a_run_file_without_a_preset(tmp_path):
    # `train --init-from R --config domain.yaml`: the file changes the data only, and
    # the run takes R's settings (README), not the defaults R's would be refused against.
    from tf_outheads_zoo.presets import get_preset
    from tf_outheads_zoo.stored import read_run_config

    parent_dir = tmp_path / "parent"
    parent_dir.mkdir()
    stored = get_preset("lstm-tiny", {"model.hidden_dim": 48})
    (parent_dir / "run.json").write_text(json.dumps({"preset": "lstm-tiny", **stored}))
    run_file = tmp_path / "domain.yaml"
    run_file.write_text("data: {max_length: 80}\ntrain: {max_steps: 50}\n")
    name, config = read_run_config(str(run_file), {"train.init_from": str(parent_dir)})
    preset = config.to_dict()
    assert name == "lstm-tiny" and preset["model"]["hidden_dim"] == 48
    assert preset["data"]["max_length"] == 80 and preset["train"]["init_from"] == str(parent_dir)


@pytest.mark.slow  # a parent and a child: ~20 s
def test_init_optimizer_goes_on_from_the_parents_step(corpora, tmp_path):
    parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
    _train(parent_dir, corpora[0], "--preset", "lstm-tiny", "--max-steps", "4",
           "--set", "train.backup_every_n_steps=2")
    child = _train(child_dir, corpora[1], "--init-from", str(parent_dir), "--init-optimizer",
                   "--max-steps", "6", "--set", "train.epochs=5")
    # One step count: the parent's 4, then the child's steps 5 and 6.
    assert child["steps"] == 6
    rows = (child_dir / "loss_curves.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == [5, 6]
