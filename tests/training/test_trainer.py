"""tf_outheads.training.fit: resume after SIGKILL, damaged backups, NaN losses,
gradient accumulation, checkpoint averaging, strategy selection."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads import compile_for_translation, training
from tf_outheads.training import BackupManager, CheckpointError, NonFiniteLossError
from tf_outheads_zoo.lstm import LSTMSeq2Seq

HERE = os.path.dirname(os.path.abspath(__file__))
VOCABULARY = 40


def _batch(rows, source_length, target_length, seed):
    rng = np.random.default_rng(seed)
    source = rng.integers(4, VOCABULARY, (rows, source_length)).astype("int32")
    target_in = rng.integers(4, VOCABULARY, (rows, target_length)).astype("int32")
    target_out = np.roll(target_in, -1, axis=1)
    target_out[:, -1] = 2  # </s>
    target_out[0, -2:] = 0  # padding in the first row
    return {"source_ids": source, "target_in": target_in}, target_out


def _dataset(batches, repeat=True):
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    return dataset.repeat() if repeat else dataset


def _model(learning_rate=1e-2, clipnorm=5.0):
    keras.utils.set_random_seed(3)
    model = LSTMSeq2Seq(VOCABULARY, VOCABULARY, embedding_dim=8, hidden_dim=8, num_layers=1,
                        dropout=0.0, head="tied")
    compile_for_translation(model, learning_rate=learning_rate, clipnorm=clipnorm)
    return model


def _weights(model):
    return [variable.numpy() for variable in model.trainable_variables]


BATCHES = [_batch(4, 6, 5, seed) for seed in range(4)]


@pytest.mark.slow  # two training processes, one killed with SIGKILL
def test_killed_run_resumes_with_same_weights_and_batches(tmp_path):
    # An uninterrupted run and a run killed with SIGKILL mid-epoch (after step
    # 7, its last backup at step 6) then started again: with deterministic ops
    # the same final weights; the steps after the restart repeat exactly the
    # batches the killed run had not backed up, in the same order.
    script = os.path.join(HERE, "resume_script.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    reference.mkdir(), interrupted.mkdir()
    subprocess.run([sys.executable, script, str(reference)], env=env, check=True,
                   capture_output=True, timeout=600)
    process = subprocess.Popen([sys.executable, script, str(interrupted), "--sleep", "0.5"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = interrupted / "steps.jsonl"
    deadline = time.time() + 600
    while not (log.exists() and len(log.read_text().splitlines()) >= 7):
        assert process.poll() is None and time.time() < deadline, "the run ended too early"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_steps = len(log.read_text().splitlines())
    assert killed_steps < 10 and not (interrupted / "final.npz").exists()
    resumed = subprocess.run([sys.executable, script, str(interrupted)], env=env, check=True,
                             capture_output=True, text=True, timeout=600)
    assert "[backup] resumed from step 6 (epoch 2, batch 1)" in resumed.stdout

    def steps(path):
        return [json.loads(line) for line in path.read_text().splitlines()]

    expected = steps(reference / "steps.jsonl")
    logged = steps(log)
    assert [row["step"] for row in expected] == list(range(1, 11))
    # Killed run: steps 1..k; resumed run: steps 7..10 (7..k replayed, none lost).
    assert [row["step"] for row in logged] == list(range(1, killed_steps + 1)) + list(
        range(7, 11))
    last = {row["step"]: row for row in logged}
    assert [last[step]["fingerprint"] for step in range(1, 11)] == [
        row["fingerprint"] for row in expected]
    with np.load(reference / "final.npz") as a, np.load(interrupted / "final.npz") as b:
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.slow  # ~12 s: in the slow set, for the fast suite's 10-minute budget
def test_backup_restores_step_and_optimizer_state(tmp_path):
    model = _model()
    training.fit(model, _dataset(BATCHES), epochs=1, steps_per_epoch=3, verbose=0,
                 backup_dir=tmp_path)
    again = _model()
    history = training.fit(again, _dataset(BATCHES), epochs=2, steps_per_epoch=3, verbose=0,
                           backup_dir=tmp_path)
    assert len(history.history["loss"]) == 1  # only epoch 2 ran
    assert int(again.optimizer.iterations.numpy()) == 6
    continued = _model()
    training.fit(continued, _dataset(BATCHES), epochs=2, steps_per_epoch=3, verbose=0)
    for a, b in zip(_weights(again), _weights(continued)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def _one_backup(tmp_path):
    training.fit(_model(), _dataset(BATCHES), epochs=1, steps_per_epoch=2, verbose=0,
                 backup_dir=tmp_path)
    (step, path), = BackupManager(tmp_path).checkpoints()
    data_file = next(name for name in os.listdir(path) if ".data-" in name)
    return path, os.path.join(path, data_file)


def test_truncated_backup_file_gives_clear_error(tmp_path):
    path, data_file = _one_backup(tmp_path)
    with open(data_file, "r+b") as f:
        f.truncate(os.path.getsize(data_file) // 2)
    with pytest.raises(CheckpointError, match=r"variables\.data-.*truncated.*bytes"):
        training.fit(_model(), _dataset(BATCHES), epochs=2, steps_per_epoch=2, verbose=0,
                     backup_dir=tmp_path)


def test_corrupted_backup_file_gives_clear_error(tmp_path):
    path, data_file = _one_backup(tmp_path)
    with open(data_file, "r+b") as f:
        f.seek(10)
        byte = f.read(1)
        f.seek(10)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CheckpointError, match=r"variables\.data-.*corrupted"):
        training.fit(_model(), _dataset(BATCHES), epochs=2, steps_per_epoch=2, verbose=0,
                     backup_dir=tmp_path)


def test_damaged_newest_backup_names_the_previous_one(tmp_path):
    training.fit(_model(), _dataset(BATCHES), epochs=2, steps_per_epoch=2, verbose=0,
                 backup_dir=tmp_path)
    (_, older), (_, newest) = BackupManager(tmp_path).checkpoints()
    os.remove(os.path.join(newest, "variables.index"))
    with pytest.raises(CheckpointError) as error:
        BackupManager(tmp_path).latest()
    assert "variables.index: missing" in str(error.value)
    assert f"The previous backup is {older}" in str(error.value)


def test_backup_of_another_model_is_refused(tmp_path):
    training.fit(_model(), _dataset(BATCHES), epochs=1, steps_per_epoch=2, verbose=0,
                 backup_dir=tmp_path)
    keras.utils.set_random_seed(3)
    other = LSTMSeq2Seq(VOCABULARY, VOCABULARY, embedding_dim=12, hidden_dim=8, num_layers=1,
                        dropout=0.0, head="tied")
    compile_for_translation(other)
    with pytest.raises(CheckpointError, match="cannot be restored|other variables"):
        training.fit(other, _dataset(BATCHES), epochs=2, steps_per_epoch=2, verbose=0,
                     backup_dir=tmp_path)


def test_save_interrupted_midway_leaves_previous_backups(tmp_path):
    manager = BackupManager(tmp_path, keep=2)
    variable = tf.Variable([1.0, 2.0])
    checkpoint = tf.train.Checkpoint(v=variable)
    manager.save(checkpoint, 1, {"epoch": 0})

    class Killed(Exception):
        pass

    class DiesWhileWriting:
        def write(self, prefix):
            checkpoint.write(prefix)
            raise Killed()  # after the files, before the manifest and the rename

    with pytest.raises(Killed):
        manager.save(DiesWhileWriting(), 2, {"epoch": 0})
    assert [step for step, _ in manager.checkpoints()] == [1]
    variable.assign([0.0, 0.0])
    assert manager.restore(checkpoint)["step"] == 1
    np.testing.assert_array_equal(variable.numpy(), [1.0, 2.0])


def test_nonfinite_loss_raises_naming_the_step(tmp_path):
    # Sentence weights: the third batch's loss is NaN.
    weights = [np.ones(4, "float32")] * 2 + [np.full(4, np.nan, "float32")]
    batches = [(*BATCHES[i], weights[i]) for i in range(3)]
    model = _model()
    with pytest.raises(NonFiniteLossError, match=r"nan at step 3 \(epoch 1, batch 3\)"):
        training.fit(model, _dataset(batches), epochs=1, steps_per_epoch=3, verbose=0)
    assert all(np.isfinite(w).all() for w in _weights(model))  # the update was not applied
    assert int(model.optimizer.iterations.numpy()) == 2


def test_nonfinite_skip_skips_only_that_batch():
    weights = [np.ones(4, "float32"), np.full(4, np.nan, "float32"), np.ones(4, "float32")]
    poisoned = [(*BATCHES[i], weights[i]) for i in range(3)]
    clean = [(*BATCHES[i], weights[i]) for i in (0, 2)]
    model = _model()
    trainer = training.Trainer(model, nonfinite="skip")
    with pytest.warns(RuntimeWarning, match="at step 2 .*skipped"):
        trainer.fit(_dataset(poisoned, repeat=False), epochs=1, verbose=0)
    assert trainer.skipped_steps == [2]
    reference = _model()
    training.fit(reference, _dataset(clean, repeat=False), epochs=1, verbose=0)
    for a, b in zip(_weights(model), _weights(reference)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_gradient_accumulation_equals_one_concatenated_batch():
    # Two batches of different lengths and token counts, accumulated, give the
    # update of one batch holding both (per-token mean over the 2 batches).
    first, second = _batch(3, 6, 5, 10), _batch(6, 4, 4, 11)  # 13 and 22 tokens

    def pad(array, length):
        return np.pad(array, ((0, 0), (0, length - array.shape[1])))

    lengths = {"source_ids": 6, "target_in": 5}
    joined = ({key: np.concatenate([pad(first[0][key], n), pad(second[0][key], n)])
               for key, n in lengths.items()},
              np.concatenate([pad(first[1], 5), pad(second[1], 5)]))
    accumulated = _model(clipnorm=0.1)
    training.fit(accumulated, _dataset([first, second]), epochs=1, steps_per_epoch=3,
                 accumulation_steps=2, verbose=0)
    large = _model(clipnorm=0.1)
    training.fit(large, _dataset([joined]), epochs=1, steps_per_epoch=3, verbose=0)
    assert int(accumulated.optimizer.iterations.numpy()) == 3
    for a, b in zip(_weights(accumulated), _weights(large)):
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_finite_dataset_epochs_and_validation_loss():
    model = _model()
    history = training.fit(model, _dataset(BATCHES, repeat=False), epochs=3, verbose=0,
                           validation_data=_dataset(BATCHES[:2], repeat=False))
    assert int(model.optimizer.iterations.numpy()) == 12
    assert len(history.history["val_loss"]) == 3
    assert history.history["val_loss"][-1] < history.history["val_loss"][0]


def test_finite_dataset_of_unknown_length_wraps_around_longer_epochs():
    """A filtered dataset has no known length; epochs longer than it read it again."""
    dataset = _dataset(BATCHES, repeat=False).filter(lambda features, labels: True)
    assert int(dataset.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)
    model = _model()
    training.fit(model, dataset, epochs=2, steps_per_epoch=5, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 10


def test_average_checkpoints_is_the_mean_of_the_backups(tmp_path):
    model = _model()
    training.fit(model, _dataset(BATCHES), epochs=3, steps_per_epoch=1, verbose=0,
                 backup_dir=tmp_path, keep_backups=3)
    paths = BackupManager(tmp_path).last(5)
    assert len(paths) == 3
    snapshots = []
    for path in paths:
        tf.train.Checkpoint(model_variables=[v.value for v in model.variables]).read(
            os.path.join(path, "variables")).expect_partial()
        snapshots.append(_weights(model))
    training.average_checkpoints(model, paths[-2:])
    for averaged, a, b in zip(_weights(model), snapshots[-2], snapshots[-1]):
        np.testing.assert_allclose(averaged, (a + b) / 2, atol=1e-7)
    assert not np.allclose(snapshots[-2][0], snapshots[-1][0])


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains(policy):
    training.set_precision(policy)
    try:
        model = _model(learning_rate=3e-2)
        history = training.fit(model, _dataset(BATCHES[:1]), epochs=4, steps_per_epoch=3,
                               verbose=0)
        is_loss_scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    finally:
        training.set_precision("float32")
    losses = history.history["loss"]
    assert is_loss_scaled == (policy == "mixed_float16")
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert all(v.dtype == "float32" for v in model.trainable_variables)


def test_make_strategy_arguments(monkeypatch):
    assert training.make_strategy("default") is tf.distribute.get_strategy()
    with pytest.raises(ValueError, match="strategy='mirrored'"):
        training.make_strategy("default", num_gpus=2)
    with pytest.raises(ValueError, match="num_gpus.*larger than the 0 GPU"):
        training.make_strategy("mirrored", num_gpus=1)
    with pytest.raises(ValueError, match="must be one of"):
        training.make_strategy("horovod")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG environment variable, which is not set"):
        training.make_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        training.make_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]},
                                                "task": {"type": "worker", "index": 3}}))
    with pytest.raises(ValueError, match="task index 3"):
        training.make_strategy("multi_worker")
    with pytest.raises(ValueError, match="precision"):
        training.set_precision("float16")


def test_uncompiled_model_and_bad_arguments_are_refused():
    model = LSTMSeq2Seq(VOCABULARY, VOCABULARY, embedding_dim=8, hidden_dim=8, num_layers=1)
    with pytest.raises(ValueError, match="Compile the model"):
        training.fit(model, _dataset(BATCHES))
    with pytest.raises(ValueError, match="nonfinite"):
        training.Trainer(_model(), nonfinite="ignore")
    with pytest.raises(ValueError, match="steps_per_epoch` is required"):
        training.fit(_model(), _dataset(BATCHES), verbose=0)
    with pytest.raises(ValueError, match="accumulation_steps"):
        training.fit(_model(), _dataset(BATCHES), steps_per_epoch=1, accumulation_steps=0)


def test_training_fit_is_the_function_and_no_module_shadows_it():
    import importlib

    assert callable(training.fit) and training.fit.__module__ == "tf_outheads.training.trainer"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tf_outheads.training.fit")


class _SignalAt(keras.callbacks.Callback):
    """Sends this process SIGTERM at the end of one step (a scheduler's preemption)."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if logs["step"] == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.slow  # ~10 s each: in the slow set, for the fast suite's 10-minute budget
@pytest.mark.parametrize("signal_step", [5, 6])
def test_sigterm_backs_up_the_step_and_resumes_like_an_uninterrupted_run(tmp_path, signal_step):
    # Backups every 4 steps; SIGTERM after step 5 (mid-epoch 2) or step 6 (epoch 2's
    # last step, before its end was logged): the trainer writes a backup of that
    # step and raises, the handler is removed again; the resumed run ends epoch 2
    # (training its step 6 if not done) and ends with the weights and the epoch
    # losses of a run never interrupted (the resumed epoch's loss counts the
    # steps before the signal too; no epoch's row is missing).
    previous = signal.getsignal(signal.SIGTERM)
    model = _model()
    with pytest.raises(training.TrainingPreempted,
                       match=f"after step {signal_step}; backup .*ckpt") as caught:
        training.fit(model, _dataset(BATCHES), epochs=3, steps_per_epoch=3, verbose=0,
                     backup_dir=tmp_path, backup_every_n_steps=4,
                     callbacks=[_SignalAt(signal_step)])
    assert caught.value.step == signal_step
    assert signal.getsignal(signal.SIGTERM) is previous
    assert [step for step, _ in BackupManager(tmp_path).checkpoints()][-1] == signal_step
    resumed = _model()
    history = training.fit(resumed, _dataset(BATCHES), epochs=3, steps_per_epoch=3, verbose=0,
                           backup_dir=tmp_path, backup_every_n_steps=4)
    assert int(resumed.optimizer.iterations.numpy()) == 9
    assert history.epoch == [1, 2]
    reference = _model()
    expected = training.fit(reference, _dataset(BATCHES), epochs=3, steps_per_epoch=3,
                            verbose=0)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"][1:], rtol=1e-5)
    for a, b in zip(_weights(resumed), _weights(reference)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def _poisoned(nan_steps, steps):
    weights = [np.full(4, np.nan if i in nan_steps else 1.0, "float32") for i in range(steps)]
    return [(*BATCHES[i % len(BATCHES)], weights[i]) for i in range(steps)]


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_nonfinite_skip_fails_the_run_above_its_share_of_steps():
    # 11 bad batches of 30: more than the 10 always allowed and 5 % of the steps.
    bad = set(range(1, 30, 2))
    trainer = training.Trainer(_model(), nonfinite="skip")
    with pytest.warns(RuntimeWarning), pytest.raises(
            NonFiniteLossError, match=r"11 of 22 steps were skipped .*not learning"):
        trainer.fit(_dataset(_poisoned(bad, 30), repeat=False), epochs=1, verbose=0)
    # Ten are allowed whatever the share.
    trainer = training.Trainer(_model(), nonfinite="skip")
    with pytest.warns(RuntimeWarning):
        trainer.fit(_dataset(_poisoned(set(range(10)), 12), repeat=False), epochs=1, verbose=0)
    assert len(trainer.skipped_steps) == 10


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_a_finite_but_exploded_loss_counts_as_nonfinite():
    # Sentence weights of 1e20 make a finite loss of ~1e21: diverged, not applied.
    weights = [np.ones(4, "float32"), np.full(4, 1e20, "float32")]
    batches = [(*BATCHES[i], weights[i]) for i in range(2)]
    model = _model()
    with pytest.raises(NonFiniteLossError, match=r"above max_loss=1e\+06 \(diverged\) at step 2"):
        training.fit(model, _dataset(batches), epochs=1, steps_per_epoch=2, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 1
    unlimited = _model()
    training.fit(unlimited, _dataset(batches), epochs=1, steps_per_epoch=2, verbose=0,
                 max_loss=None)
    assert int(unlimited.optimizer.iterations.numpy()) == 2
