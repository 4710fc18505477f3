"""BleuCallback writes val_bleu that later callbacks see; time and step limits stop fit."""

import csv
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.training.callbacks import (BleuCallback, EarlyStopping, StepLimit, TimeLimit,
                                            stopped_by)
from tf_outheads.training.translation import compile_for_translation, translation_callbacks
from tf_outheads_zoo.lstm import LSTMSeq2Seq


def _model_and_data(tokenizer):
    model = LSTMSeq2Seq(tokenizer.vocab_size, tokenizer.vocab_size, embedding_dim=16,
                        hidden_dim=16, num_layers=1, head="tied", dropout=0.0)
    compile_for_translation(model, learning_rate=1e-3)
    x = {"source_ids": np.array([[10, 11, 3]], "int32"), "target_in": np.array([[2, 12, 13]], "int32")}
    y = np.array([[12, 13, 3]], "int32")
    return model, tf.data.Dataset.from_tensors((x, y)).repeat()


class _Seen(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs))


def test_bleu_callback_logs_val_bleu_for_later_callbacks(bible_tokenizer, bible_slice, tmp_path):
    model, dataset = _model_and_data(bible_tokenizer)
    bleu = BleuCallback(bible_slice.sources[:4], bible_slice.targets[:4], bible_tokenizer,
                        bible_tokenizer, output_dir=str(tmp_path), verbose=0, max_length_offset=2)
    seen = _Seen()
    model.fit(dataset, steps_per_epoch=2, epochs=2, callbacks=[bleu, seen], verbose=0)
    assert [len(s) for s in seen.logs] and all("val_bleu" in s for s in seen.logs)
    assert len(bleu.history) == 2 and bleu.history[-1][0] == 4
    lines = (tmp_path / "bleu.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["step"] == 4
    assert len((tmp_path / "dev.hyp").read_text(encoding="utf-8").splitlines()) == 4


def test_bleu_every_n_steps(bible_tokenizer, bible_slice):
    model, dataset = _model_and_data(bible_tokenizer)
    bleu = BleuCallback(bible_slice.sources[:2], bible_slice.targets[:2], bible_tokenizer,
                        bible_tokenizer, every_n_steps=2, verbose=0, max_length_offset=2)
    model.fit(dataset, steps_per_epoch=3, epochs=2, callbacks=[bleu], verbose=0)
    # every 2 steps (2, 4, 6); epoch ends at 3 (new eval) and 6 (reuses step 6's)
    assert [step for step, _ in bleu.history] == [2, 3, 4, 6]


def test_step_limit_stops_after_total_steps(bible_tokenizer):
    model, dataset = _model_and_data(bible_tokenizer)
    model.fit(dataset, steps_per_epoch=4, epochs=5, callbacks=[StepLimit(6)], verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 6


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_stopped_by_names_the_budget_that_ended_fit(bible_tokenizer):
    model, dataset = _model_and_data(bible_tokenizer)
    for callbacks, epochs, expected in (
            ([TimeLimit(), StepLimit(5)], 3, "max_steps"),
            ([TimeLimit(), StepLimit(50)], 3, "epochs"),  # 3 epochs × 2 steps end it first
            ([TimeLimit(minutes=1e-6), StepLimit(50)], 3, "max_minutes"),
            # The loss falls, so "max" mode never sees an improvement after epoch 1.
            ([EarlyStopping(monitor="loss", mode="max", patience=1), StepLimit(50)], 5,
             "early_stopping")):
        model.fit(dataset, steps_per_epoch=2, epochs=epochs, callbacks=callbacks, verbose=0)
        assert stopped_by(callbacks) == expected


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_time_limit_stops_training(bible_tokenizer):
    model, dataset = _model_and_data(bible_tokenizer)
    limit = TimeLimit(minutes=1e-6)
    model.fit(dataset, steps_per_epoch=5, epochs=3, callbacks=[limit], verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 1


class _Clock(keras.callbacks.Callback):
    """time.time() for the callbacks module: 10 s pass with every trained batch."""

    def __init__(self):
        super().__init__()
        self.now = 1000.0

    def time(self):
        return self.now

    def on_train_batch_end(self, batch, logs=None):
        self.now += 10.0


@pytest.mark.slow  # two trainings with backups: 42 s in CI's fast suite (issue 37's budget)
def test_clock_without_budget_counts_the_seconds_of_every_resume(
        bible_tokenizer, tmp_path, monkeypatch):
    from tf_outheads import training
    from tf_outheads.training import callbacks as callbacks_module

    clock = _Clock()
    monkeypatch.setattr(callbacks_module, "time", clock)
    model, dataset = _model_and_data(bible_tokenizer)
    first = TimeLimit()  # no budget: a clock that never stops training
    training.fit(model, dataset, epochs=1, steps_per_epoch=3, callbacks=[clock, first],
                 verbose=0, backup_dir=str(tmp_path))
    assert int(model.optimizer.iterations.numpy()) == 3
    assert first.elapsed() == 30.0
    clock.now += 500.0  # time between the processes is not training
    assert first.elapsed() == 30.0
    assert first.budget_text() is None  # no budget: nothing for the progress bar
    # A new process resumes from the backup: its clock starts from the first one's seconds.
    model, dataset = _model_and_data(bible_tokenizer)
    second = TimeLimit()
    training.fit(model, dataset, epochs=2, steps_per_epoch=3, callbacks=[clock, second],
                 verbose=0, backup_dir=str(tmp_path))
    assert int(model.optimizer.iterations.numpy()) == 6
    assert second.elapsed() == 60.0


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_standard_callbacks_write_checkpoint_and_logs(bible_tokenizer, bible_slice, tmp_path):
    model, dataset = _model_and_data(bible_tokenizer)
    callbacks, bleu = translation_callbacks(
        str(tmp_path), bible_slice.sources[:2], bible_slice.targets[:2], bible_tokenizer,
        bible_tokenizer, patience=3, max_steps=4, decode_options={"max_length_offset": 2})
    model.fit(dataset, steps_per_epoch=2, epochs=5, callbacks=callbacks, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 4
    assert os.path.exists(tmp_path / "checkpoints" / "best.weights.h5")
    assert os.listdir(tmp_path / "logs")
    assert "val_bleu" in (tmp_path / "history.csv").read_text().splitlines()[0]


def test_best_weights_saves_improvements_atomically(bible_tokenizer, tmp_path, monkeypatch):
    from tf_outheads.training.callbacks import BestWeights

    model, _ = _model_and_data(bible_tokenizer)
    model.build({"source_ids": (None, None), "target_in": (None, None)})
    path = tmp_path / "best.weights.h5"
    best = BestWeights(str(path), monitor="val_bleu", mode="max")
    best.set_model(model)
    best.on_epoch_end(0, {"val_bleu": 1.0})
    saved = path.read_bytes()
    best.on_epoch_end(1, {"val_bleu": 0.5})  # worse: not written
    assert path.read_bytes() == saved and best.best == 1.0

    def dies_midway(filepath):  # a write that fails after a partial file
        with open(filepath, "wb") as f:
            f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "save_weights", dies_midway)
    try:
        best.on_epoch_end(2, {"val_bleu": 2.0})
    except KeyboardInterrupt:
        pass
    assert path.read_bytes() == saved  # the previous best is intact
    assert os.listdir(tmp_path) == ["best.weights.h5"]  # no temporary file left
    monkeypatch.undo()
    not_chief = BestWeights(str(tmp_path / "other.weights.h5"), chief=False)
    not_chief.set_model(model)
    not_chief.on_epoch_end(0, {"val_bleu": 3.0})
    assert not (tmp_path / "other.weights.h5").exists()


def test_epoch_history_keeps_one_row_per_epoch_across_resumes(tmp_path):
    from tf_outheads.training.callbacks import EpochHistory

    path = tmp_path / "history.csv"

    def rows():
        with open(path, newline="") as f:
            return list(csv.reader(f))

    history = EpochHistory(str(path))
    for epoch in range(3):
        history.on_epoch_end(epoch, {"loss": 5.0 - epoch, "val_bleu": float(epoch)})
    assert rows() == [["epoch", "loss", "val_bleu"], ["0", "5.0", "0.0"], ["1", "4.0", "1.0"],
                      ["2", "3.0", "2.0"]]
    # A run resumed from a backup of epoch 2 trains epoch 2 again (here without dev BLEU):
    # its row replaces the first one, nothing is duplicated, a missing key is NA.
    resumed = EpochHistory(str(path))
    resumed.on_epoch_end(1, {"loss": 3.5})
    assert rows() == [["epoch", "loss", "val_bleu"], ["0", "5.0", "0.0"], ["1", "3.5", "NA"]]
    # A new run in the same directory starts the file again.
    EpochHistory(str(path)).on_epoch_end(0, {"loss": 9.0, "val_bleu": 0.5})
    assert rows() == [["epoch", "loss", "val_bleu"], ["0", "9.0", "0.5"]]
