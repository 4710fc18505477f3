"""The Keras internals tf_outheads uses (`tf_outheads.compat`) still work.

If one of these fails after a Keras upgrade, the named piece moved or changed:
fix `tf_outheads/compat.py`, the only module that touches it.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import lstm_layer_case
from tf_outheads import compat


def test_set_keras_mask_is_read_by_loss_reduction():
    # Loss.__call__ divides by the unmasked entries under "sum_over_batch_size".
    class Masked(keras.losses.Loss):
        def call(self, y_true, y_pred):
            values = keras.ops.convert_to_tensor(y_pred)
            compat.set_keras_mask(values, keras.ops.not_equal(y_true, 0))
            return values

    value = Masked()(np.array([[1, 1, 0, 0]]), np.array([[2.0, 4.0, 100.0, 100.0]]))
    assert float(value) == pytest.approx(3.0)


def test_symbolic_build_builds_layers_and_compiled_metrics():
    model = keras.Sequential([keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    x, y = np.zeros((2, 4), "float32"), np.zeros((2, 3), "float32")
    assert not model.built
    compat.symbolic_build(model, (x, y))
    assert model.built and len(model.weights) == 2
    assert "mae" in model.get_metrics_result()  # the compiled metrics were built too


def test_loss_tracker_and_compiled_metrics():
    model = keras.Sequential([keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss="mse")
    assert compat.loss_tracker(model).name == "loss"
    assert compat.loss_tracker(model) in model.metrics
    assert not compat.has_compiled_metrics(model)
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    assert compat.has_compiled_metrics(model)


def test_in_xla_context_sees_jit_compiled_tracing_only():
    from tf_outheads.compat import in_xla_context

    seen = []

    def record(x):
        seen.append(in_xla_context())
        return x + 1

    tf.function(record, jit_compile=True)(tf.constant(1.0))
    tf.function(record)(tf.constant(1.0))
    # A plain tf.function that calls a jit-compiled one: only the inner traces under XLA.
    tf.function(lambda x: tf.function(record, jit_compile=True)(x) + record(x))(tf.constant(2.0))
    record(tf.constant(1.0))  # eager
    assert seen == [True, False, True, False, False]


def test_cudnn_lstm_is_keras_own_path_or_none_without_a_gpu():
    layer, inputs, hidden, cell = lstm_layer_case()
    weights = layer.cell
    outputs = compat.cudnn_lstm(inputs, hidden, cell, weights.kernel, weights.recurrent_kernel,
                                weights.bias)
    if not tf.config.list_logical_devices("GPU"):
        assert outputs is None
    else:
        np.testing.assert_allclose(outputs, layer(inputs, initial_state=[hidden, cell]),
                                   rtol=1e-4, atol=1e-5)


def test_quantizing_dense_layers_collects_garbage_once(monkeypatch):
    """Keras collects once per deleted kernel (if this stops, `one_garbage_collection`
    is no longer needed); inside the block the layers quantize the same, one collection."""
    import gc

    calls = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *args: calls.append(args) or real())
    layers = [keras.layers.Dense(4) for _ in range(3)]
    for layer in layers:
        layer.build((None, 4))
    layers[0].quantize("int8")
    assert len(calls) >= 1
    calls.clear()
    with compat.one_garbage_collection():
        for layer in layers[1:]:
            layer.quantize("int8")
        assert calls == []
    assert len(calls) == 1
    assert all(layer.quantization_mode == "int8" for layer in layers)


def test_no_other_module_reaches_into_keras_internals():
    found = subprocess.run(
        ["git", "grep", "-n", r"keras\.src\|_symbolic_build\|_aggregate_additional_loss"
         r"\|_loss_tracker\|_compile_metrics\|_distribute_strategy",
         "--", "tf_outheads", "tf_outheads_zoo"],
        capture_output=True, text=True, cwd=__file__.rsplit("/tests/", 1)[0])
    if found.returncode not in (0, 1):  # 1: no match
        pytest.skip(f"not a git checkout: {found.stderr.strip()}")
    offenders = [line for line in found.stdout.splitlines()
                 if not line.startswith("tf_outheads/compat.py:")]
    assert offenders == [], "\n".join(offenders)


FIT_ON_TWO_REPLICAS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import numpy as np
from tf_outheads import compile_for_translation
from tf_outheads_zoo.lstm import LSTMSeq2Seq
rng = np.random.default_rng(0)
x = {"source_ids": rng.integers(4, 50, (9, 7)).astype("int32"),
     "target_in": rng.integers(4, 63, (9, 6)).astype("int32")}
y = np.roll(x["target_in"], -1, 1)
y[:, -1] = 0
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = LSTMSeq2Seq(50, 63, embedding_dim=8, hidden_dim=8, num_layers=1)
    compile_for_translation(model)
batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(9).repeat()
model.fit(batches, epochs=1, steps_per_epoch=1, verbose=0)  # 9 sentences: 5 + 4
print("trained", int(model.optimizer.iterations.numpy()))
"""


@pytest.mark.slow  # a subprocess with two logical devices
def test_fit_under_mirrored_strategy_with_uneven_replica_shares():
    # FirstReplicaBuild: without it Keras 3.15 fails before the first step (AddN).
    result = subprocess.run([sys.executable, "-c", FIT_ON_TWO_REPLICAS], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "trained 1"
