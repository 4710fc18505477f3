"""Sampled softmax under tf.distribute.MirroredStrategy (2 logical CPU devices)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from tf_outheads import SampledSoftmaxLoss, compile_for_translation
    from tf_outheads.ops import candidate_sampling
    from tf_outheads_zoo.lstm import LSTMSeq2Seq

    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(0)
    source = rng.integers(4, 50, (16, 7)).astype("int32")
    target_in = rng.integers(4, 60, (16, 6)).astype("int32")
    target_out = np.roll(target_in, -1, 1)
    target_out[:, -1] = 0
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = LSTMSeq2Seq(50, 60, embedding_dim=16, hidden_dim=16, num_layers=1,
                            dropout=0.0, head={"class_name": "joint", "config": {"joint_dim": 24}})
        compile_for_translation(model, learning_rate=1e-2,
                                loss=SampledSoftmaxLoss(fraction=0.3, seed=5))
    before = model.evaluate({"source_ids": source, "target_in": target_in}, target_out,
                            batch_size=16, verbose=0)
    history = model.fit({"source_ids": source, "target_in": target_in}, target_out,
                        batch_size=16, epochs=5, verbose=0)
    after = model.evaluate({"source_ids": source, "target_in": target_in}, target_out,
                           batch_size=16, verbose=0)
    # Replicas draw different negatives: their seeds differ.
    seeds = [candidate_sampling.step_seed(5, 0, replica).numpy().tolist() for replica in (0, 1)]
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "before": before,
                      "after": after, "loss": history.history["loss"], "seeds": seeds}))
''')


def test_mirrored_strategy_trains_with_sampled_softmax():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    assert all(map(lambda value: value == value and abs(value) < 1e6, report["loss"]))
    assert report["after"] < report["before"]
    assert report["seeds"][0] != report["seeds"][1]
