"""Shared checks for layers: `run_layer_test` (keras-hub `tests/test_case.py`).

Every layer of the library, and every head a later issue adds (joint head,
continuous head, ...), goes through the same sequence of checks:

1. config round trip: `from_config(get_config())` gives the same config;
2. build: `layer.build(shape)` creates the expected number of weights;
3. symbolic call: on `keras.Input`s, and `compute_output_shape` when defined;
4. eager call: shape and dtype of the outputs;
5. one `fit` step of a tiny functional `keras.Model` around the layer, which
   must change at least one trainable weight;
6. `.keras` save / `keras.saving.load_model(..., safe_mode=True)`: the same
   outputs;
7. SavedModel: `model.export(path)`, `tf.saved_model.load`, the same outputs.

Inputs are one array (`layer(x)`) or a dict of arrays passed by keyword
(`layer(**inputs)`, e.g. `{"query": ..., "memory": ...}`). Outputs may be one
tensor or a tuple of tensors (then `expected_output_shape` is a tuple of shapes).
"""

import inspect
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf
from keras import ops

_NO_SHAPE = object()


def _is_shape(value):
    return isinstance(value, (tuple, list)) and all(
        dim is None or isinstance(dim, (int, np.integer)) for dim in value
    )


def _flatten_outputs(outputs):
    if isinstance(outputs, (tuple, list)):
        return list(outputs)
    return [outputs]


def _flatten_shapes(expected_output_shape):
    if _is_shape(expected_output_shape):
        return [tuple(expected_output_shape)]
    return [tuple(shape) for shape in expected_output_shape]


def _to_numpy(outputs):
    return [ops.convert_to_numpy(output) for output in _flatten_outputs(outputs)]


def _call(layer, inputs, **kwargs):
    if isinstance(inputs, dict):
        return layer(**inputs, **kwargs)
    return layer(inputs, **kwargs)


def _symbolic_inputs(input_data):
    """`keras.Input`s with the batch dimension left free."""
    def make(name, array):
        array = np.asarray(array)
        return keras.Input(shape=array.shape[1:], dtype=str(array.dtype), name=name)

    if isinstance(input_data, dict):
        return {name: make(name, array) for name, array in input_data.items()}
    return make("inputs", input_data)


def _build(layer, input_data):
    """`layer.build(...)` with the input shape(s), as Keras does on first call."""
    if isinstance(input_data, dict):
        parameters = inspect.signature(layer.build).parameters
        shapes = {
            f"{name}_shape": tuple(np.shape(array))
            for name, array in input_data.items()
            if f"{name}_shape" in parameters
        }
        layer.build(**shapes)
    else:
        layer.build(tuple(np.shape(input_data)))


def _assert_config_equal(first, second, message):
    first = keras.saving.serialize_keras_object(first)
    second = keras.saving.serialize_keras_object(second)
    assert first == second, f"{message}:\n{first}\n!=\n{second}"


def _functional_model(layer_factory, input_data):
    """A tiny `keras.Model` whose only layer is a fresh `layer_factory()`."""
    layer = layer_factory()
    inputs = _symbolic_inputs(input_data)
    outputs = _call(layer, inputs)
    return keras.Model(inputs, outputs), layer


def _random_targets(outputs, seed):
    rng = np.random.default_rng(seed)
    return tuple(
        rng.normal(size=np.shape(output)).astype("float32") for output in outputs
    )


def run_layer_test(
    layer_factory,
    input_data,
    expected_output_shape,
    *,
    expected_output_dtype="float32",
    expected_num_trainable_weights=None,
    expected_num_non_trainable_weights=None,
    fit_loss=None,
    fit_targets=None,
    run_training=True,
    run_keras_saving=True,
    run_saved_model=True,
    atol=1e-6,
    rtol=1e-6,
):
    """Runs a layer through the library's standard checks (see module docstring).

    Args:
        layer_factory: callable with no argument returning a new, unbuilt
            layer; called once per check so that no check sees another's
            weights. A head that reuses an embedding creates the embedding in
            the factory too.
        input_data: numpy array, or dict of numpy arrays passed by keyword.
        expected_output_shape: shape of the (single) output, or a tuple of
            shapes when the layer returns a tuple. The batch dimension is the
            one of `input_data`.
        expected_output_dtype: dtype of every output. Defaults to `"float32"`.
        expected_num_trainable_weights: int or `None` (not checked).
        expected_num_non_trainable_weights: int or `None` (not checked).
        fit_loss: loss for the `fit` step: a Keras loss (or a list of them,
            one per output). Defaults to `"mse"` on every output.
        fit_targets: targets of the `fit` step (one array or a tuple per
            output). Defaults to seeded random normal arrays of the output
            shapes, so that the gradient is not zero.
        run_training: bool. Run the `fit` step. Defaults to `True`.
        run_keras_saving: bool. Run the `.keras` round trip. Defaults to `True`.
        run_saved_model: bool. Run the SavedModel round trip. Defaults to `True`.
        atol, rtol: tolerances of the output comparisons after reloading.

    Returns:
        The eagerly-called layer (built), for further checks by the caller.
    """
    expected_shapes = _flatten_shapes(expected_output_shape)
    batch_size = np.shape(
        next(iter(input_data.values())) if isinstance(input_data, dict) else input_data
    )[0]

    # 1. Config round trip.
    layer = layer_factory()
    config = layer.get_config()
    revived = type(layer).from_config(config)
    _assert_config_equal(config, revived.get_config(), "from_config(get_config()) changed the config")
    assert type(revived) is type(layer)

    # 2. Build.
    _build(layer, input_data)
    assert layer.built, f"{layer.name} is not built after build()"
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights, (
            f"expected {expected_num_trainable_weights} trainable weights, got "
            f"{[w.path for w in layer.trainable_weights]}"
        )
    if expected_num_non_trainable_weights is not None:
        assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights, (
            f"expected {expected_num_non_trainable_weights} non-trainable weights, got "
            f"{[w.path for w in layer.non_trainable_weights]}"
        )

    # 3. Symbolic call (batch dimension free) and compute_output_shape.
    symbolic = _flatten_outputs(_call(layer_factory(), _symbolic_inputs(input_data)))
    assert len(symbolic) == len(expected_shapes), (
        f"expected {len(expected_shapes)} outputs, got {len(symbolic)} symbolic ones"
    )
    for output, shape in zip(symbolic, expected_shapes):
        assert isinstance(output, keras.KerasTensor), type(output)
        assert tuple(output.shape) == (None,) + shape[1:], (output.shape, shape)
        assert output.dtype == expected_output_dtype, (output.dtype, expected_output_dtype)
    if not isinstance(input_data, dict):
        try:
            computed = layer.compute_output_shape((None,) + tuple(np.shape(input_data))[1:])
        except NotImplementedError:
            computed = _NO_SHAPE
        if computed is not _NO_SHAPE:
            computed = _flatten_shapes(computed)
            assert [tuple(shape) for shape in computed] == [
                (None,) + shape[1:] for shape in expected_shapes
            ], (computed, expected_shapes)

    # 4. Eager call on the built layer.
    outputs = _flatten_outputs(_call(layer, input_data))
    assert len(outputs) == len(expected_shapes)
    for output, shape in zip(outputs, expected_shapes):
        assert tuple(output.shape) == shape, (tuple(output.shape), shape)
        assert shape[0] == batch_size
        assert keras.backend.standardize_dtype(output.dtype) == expected_output_dtype
        assert np.all(np.isfinite(ops.convert_to_numpy(output))), "non-finite outputs"

    # 5. One fit step must change a trainable weight.
    if run_training:
        model, fitted = _functional_model(layer_factory, input_data)
        assert fitted.trainable_weights, f"{fitted.name} has no trainable weights to fit"
        before = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        targets = fit_targets
        if targets is None:
            targets = _random_targets(outputs, seed=0)
        if len(expected_shapes) == 1 and isinstance(targets, tuple):
            targets = targets[0]
        loss = fit_loss if fit_loss is not None else (
            "mse" if len(expected_shapes) == 1 else ["mse"] * len(expected_shapes)
        )
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
        history = model.fit(input_data, targets, batch_size=batch_size, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0]), history.history
        after = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        assert any(not np.array_equal(b, a) for b, a in zip(before, after)), (
            "one fit step changed no trainable weight"
        )

    if not (run_keras_saving or run_saved_model):
        return layer

    model, _ = _functional_model(layer_factory, input_data)
    reference = _to_numpy(model(input_data))
    with tempfile.TemporaryDirectory() as directory:
        # 6. `.keras` round trip, safe mode (no lambdas, registered classes).
        if run_keras_saving:
            path = os.path.join(directory, "model.keras")
            model.save(path)
            loaded = keras.saving.load_model(path, safe_mode=True)
            reloaded = _to_numpy(loaded(input_data))
            assert len(reloaded) == len(reference)
            for got, want in zip(reloaded, reference):
                np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)
            assert len(loaded.weights) == len(model.weights)

        # 7. SavedModel round trip through the `serve` endpoint.
        if run_saved_model:
            path = os.path.join(directory, "saved_model")
            model.export(path, format="tf_saved_model", verbose=False)
            restored = tf.saved_model.load(path)
            if isinstance(input_data, dict):
                served = restored.serve({k: tf.constant(v) for k, v in input_data.items()})
            else:
                served = restored.serve(tf.constant(input_data))
            served = [np.asarray(output) for output in _flatten_outputs(served)]
            assert len(served) == len(reference)
            for got, want in zip(served, reference):
                np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)
    return layer


def step_loss(loss, y_true, head, head_output=None, hidden=None, sample_weight=None,
              training=True, step=0):
    """`(sum, tokens)` of `loss` on `head` as a model's step reduces it
    (`tf_outheads.losses.Objective`): the head's output is `head_output`, or
    `head(hidden)`."""
    from tf_outheads.losses.objective import Objective, StepOutputs

    outputs = StepOutputs(hidden, head, step=step, training=training, head_output=head_output)
    total, tokens = Objective(loss, None, {"logits": head})(y_true, outputs, sample_weight)
    return float(total), float(tokens)


def lstm_layer_case(seed=0, batch=2, steps=3, input_dim=5, units=4, scale=None):
    """A built `keras.layers.LSTM(units, return_sequences=True)` and inputs for it:
    `(layer, inputs (batch, steps, input_dim), hidden, cell)`, the initial states
    `(batch, units)` drawn from N(0, 1); `scale` redraws every weight from N(0, scale²)
    (non-zero biases)."""
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(batch, steps, input_dim)).astype("float32")
    hidden, cell = (rng.normal(size=(batch, units)).astype("float32") for _ in range(2))
    layer = keras.layers.LSTM(units, return_sequences=True)
    layer.build(inputs.shape)
    if scale is not None:
        for weight in layer.weights:
            weight.assign(rng.normal(size=weight.shape).astype("float32") * scale)
    return layer, inputs, hidden, cell
