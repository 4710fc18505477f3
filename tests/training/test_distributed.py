"""The trainer under tf.distribute: 2 logical CPUs and 2 worker processes on localhost.

Each case runs in subprocesses: logical devices and TF_CONFIG must be set
before TensorFlow starts, and a multi-worker job needs one process per worker.
"""

import collections
import json
import os
import subprocess
import sys

import numpy as np

import pytest

from tests.workers import run_workers

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
ENV.pop("TF_CONFIG", None)


def _run(args, env=ENV, timeout=600):
    result = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


def _weights(path):
    with np.load(path) as arrays:
        count = sum(name.startswith("arr_") for name in arrays.files)
        return [arrays[f"arr_{index}"] for index in range(count)]


def test_mirrored_two_devices_match_one_device(tmp_path):
    # Same global batches, split sentence-wise over 2 replicas; a clipnorm of
    # 0.05 clips every step, so the gradients must be summed before clipping.
    # Tolerance 1e-4 on weights of magnitude ~1: float32 sums in another order,
    # 4 Adam steps (which divide by sqrt(v) and so amplify tiny differences).
    output = tmp_path / "report.json"
    _run([os.path.join(HERE, "mirrored_script.py"), str(tmp_path), str(output), "--keras-fit"])
    report = json.loads(output.read_text())
    assert report["replicas"] == 2
    assert report["max_abs_difference"] < 1e-4, report
    assert report["max_abs_weight"] > 0.5  # the weights are not all ~0
    assert report["single_sentence_max_abs_difference"] < 1e-4, report
    one, two = report["loss"]
    assert one[0] == pytest.approx(two[0], rel=1e-5)
    # Keras' model.fit clips each replica's gradient before the sum: not the
    # same training as one device (which is why the trainer sums first).
    assert report["keras_fit_max_abs_difference"] > 10 * report["max_abs_difference"], report


def test_multi_worker_two_processes_end_with_identical_weights(tmp_path):
    script = os.path.join(HERE, "multi_worker_script.py")
    run_workers(lambda index: [sys.executable, script, str(tmp_path),
                               str(tmp_path / f"worker{index}.npz")], env=ENV)
    _run([script, str(tmp_path), str(tmp_path / "single.npz")])  # one device, same data
    first, second = _weights(tmp_path / "worker0.npz"), _weights(tmp_path / "worker1.npz")
    single = _weights(tmp_path / "single.npz")
    for name in ("worker0.npz", "worker1.npz"):
        with np.load(tmp_path / name) as arrays:
            assert int(arrays["replicas"]) == 2
            # Worker 1 alone asked to stop after step 3: both stopped there.
            assert int(arrays["steps"]) == 3
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    # And the two workers trained like one device on the same global batches.
    assert max(float(np.abs(a - b).max()) for a, b in zip(first, single)) < 1e-4
    # Only the chief wrote the backup.
    assert sorted(os.listdir(tmp_path / "backup")) == ["ckpt-000000003"]


def test_workers_reading_shards_see_the_corpus_once_and_resume_their_own_position(tmp_path):
    from tf_outheads import data
    from tf_outheads_zoo.presets import EMBEDDED_CORPUS

    corpus = data.read_tsv(EMBEDDED_CORPUS, split="train").select(range(400))
    with open(tmp_path / "train.es", "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in corpus.sources))
    with open(tmp_path / "train.en", "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in corpus.targets))
    script = os.path.join(HERE, "sharded_worker_script.py")
    run_workers(lambda index: [sys.executable, script, str(tmp_path),
                               str(tmp_path / f"worker{index}.npz")], env=ENV)
    outputs = [np.load(tmp_path / f"worker{index}.npz") for index in (0, 1)]
    records = [json.loads(str(output["record"])) for output in outputs]
    # One epoch: the two shards are disjoint and together the whole corpus.
    first, second = (collections.Counter(r["epoch"]) for r in records)
    whole = collections.Counter(records[0]["whole"])
    assert len(records[0]["whole"]) == 400 and not (set(first) & set(second) - {
        row for row, count in whole.items() if count > 1})
    assert first + second == whole
    assert abs(sum(first.values()) - sum(second.values())) <= 1
    count = int(outputs[0]["count"])
    weights = [[output[f"arr_{i}"] for i in range(2 * count)] for output in outputs]
    for record in records:
        assert record["reference_steps"] == record["resumed_steps"] == 4
    # Both workers end with the same weights, and a run resumed from its backup (each
    # worker from its own data position) ends where the uninterrupted one does.
    for a, b in zip(weights[0], weights[1]):
        np.testing.assert_array_equal(a, b)
    reference, resumed = weights[0][:count], weights[0][count:]
    assert max(float(np.abs(a - b).max()) for a, b in zip(reference, resumed)) < 1e-5
    assert max(float(np.abs(a).max()) for a in reference) > 0.05
    assert sorted(os.listdir(tmp_path / "backup-resumed" / "iterators")) == ["worker-0",
                                                                             "worker-1"]
