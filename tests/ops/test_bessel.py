"""tf_outheads.ops.bessel against mpmath's arbitrary-precision Bessel functions.

Error measures used throughout:

- values (log I_v, log C_m, which cross 0): |y − ref| / max(|ref|, 1), i.e. the
  relative error where |ref| ≥ 1 and the absolute error where the value is
  near 0 (a relative error there would ask for digits the inputs don't have);
- ratios and gradients (never 0 for κ > 0): plain relative error |g − ref| / |ref|.

The grid: every m of `DIMS` (order v = m/2 − 1, 0 to 511) × `NUM_KAPPAS`
κ log-spaced over [1e-6, 1e5]. The κ are float32 numbers, so float32 and
float64 are compared with the same references, computed once per module
(40 digits).
"""

import mpmath
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.ops import bessel_iv_ratio
from tf_outheads.ops import log_bessel_iv
from tf_outheads.ops import log_vmf_normalizer
from tf_outheads.ops import log_vmf_normalizer_lower_bound

DIMS = (2, 3, 10, 50, 100, 300, 512, 1024)
NUM_KAPPAS = 23
# float32-representable, so the same references serve both dtypes.
KAPPAS = np.logspace(-6, 5, NUM_KAPPAS).astype(np.float32).astype(np.float64)
DTYPES = (tf.float32, tf.float64)
# Targets: value (max(|ref|, 1) denominator) and gradient (relative).
VALUE_TOLERANCE = {tf.float32: 1e-5, tf.float64: 1e-6}
GRADIENT_TOLERANCE = {tf.float32: 1e-3, tf.float64: 1e-5}

DTYPE_IDS = [dtype.name for dtype in DTYPES]
DIM_IDS = [f"m={m}" for m in DIMS]


@pytest.fixture(scope="module")
def reference():
    """dict m → dict of float64 arrays over `KAPPAS`: log I_v, log C_m, I_{v+1}/I_v."""
    tables = {}
    with mpmath.workdps(40):
        for m in DIMS:
            order = mpmath.mpf(m) / 2 - 1
            log_iv, log_c, ratio = [], [], []
            for kappa in KAPPAS:
                kappa = mpmath.mpf(float(kappa))
                iv = mpmath.besseli(order, kappa)
                log_iv.append(mpmath.log(iv))
                log_2pi = mpmath.log(2 * mpmath.pi)
                log_c.append(order * mpmath.log(kappa) - (order + 1) * log_2pi - log_iv[-1])
                ratio.append(mpmath.besseli(order + 1, kappa) / iv)
            tables[m] = {
                "log_iv": np.array([float(x) for x in log_iv]),
                "log_c": np.array([float(x) for x in log_c]),
                "ratio": np.array([float(x) for x in ratio]),
            }
    return tables


def value_error(value, expected):
    return np.abs(value - expected) / np.maximum(np.abs(expected), 1.0)


def relative_error(value, expected):
    return np.abs(value - expected) / np.abs(expected)


def value_and_gradient(function, kappa):
    with tf.GradientTape() as tape:
        tape.watch(kappa)
        value = function(kappa)
    return value.numpy().astype(np.float64), tape.gradient(value, kappa).numpy().astype(np.float64)


def assert_finite(name, array):
    bad = ~np.isfinite(array)
    assert not bad.any(), f"{name} is not finite at kappa={KAPPAS[bad]}"


def assert_within(name, errors, tolerance):
    worst = int(np.argmax(errors))
    assert errors[worst] <= tolerance, (
        f"{name}: error {errors[worst]:.2e} > {tolerance:.0e} at kappa={KAPPAS[worst]:.3g}"
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
def test_log_vmf_normalizer_matches_mpmath(reference, dim, dtype):
    kappa = tf.constant(KAPPAS, dtype)
    value, gradient = value_and_gradient(lambda k: log_vmf_normalizer(k, dim), kappa)
    assert_finite("log C_m", value)
    assert_finite("d/dκ log C_m", gradient)
    assert_within("log C_m", value_error(value, reference[dim]["log_c"]), VALUE_TOLERANCE[dtype])
    # d/dκ log C_m(κ) = −I_{m/2}(κ)/I_{m/2−1}(κ).
    assert_within(
        "d/dκ log C_m",
        relative_error(gradient, -reference[dim]["ratio"]),
        GRADIENT_TOLERANCE[dtype],
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
def test_log_bessel_iv_matches_mpmath(reference, dim, dtype):
    order = dim / 2 - 1
    kappa = tf.constant(KAPPAS, dtype)
    value, gradient = value_and_gradient(lambda k: log_bessel_iv(order, k), kappa)
    assert_finite("log I_v", value)
    assert_finite("d/dκ log I_v", gradient)
    assert_within("log I_v", value_error(value, reference[dim]["log_iv"]), VALUE_TOLERANCE[dtype])
    # d/dκ log I_v(κ) = I_{v+1}(κ)/I_v(κ) + v/κ.
    expected_gradient = reference[dim]["ratio"] + order / KAPPAS
    assert_within(
        "d/dκ log I_v", relative_error(gradient, expected_gradient), GRADIENT_TOLERANCE[dtype]
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
def test_bessel_iv_ratio_matches_mpmath(reference, dim, dtype):
    ratio = bessel_iv_ratio(dim / 2 - 1, tf.constant(KAPPAS, dtype))
    assert ratio.dtype == dtype
    ratio = ratio.numpy().astype(np.float64)
    assert_finite("I_{v+1}/I_v", ratio)
    assert_within(
        "I_{v+1}/I_v", relative_error(ratio, reference[dim]["ratio"]), GRADIENT_TOLERANCE[dtype]
    )


def test_tensor_dim_broadcasts_and_matches_mpmath(reference):
    # A tensor order takes the masked recurrence path; (8, 1) × (n,) → (8, n).
    dims = tf.constant(DIMS, tf.int32)[:, None]
    kappa = tf.constant(KAPPAS, tf.float64)
    value, gradient = value_and_gradient(lambda k: log_vmf_normalizer(k, dims), kappa)
    assert value.shape == (len(DIMS), NUM_KAPPAS)
    # The gradient w.r.t. the (n,) κ sums over the broadcast dims.
    expected_gradient = -sum(reference[m]["ratio"] for m in DIMS)
    assert_within("summed gradient", relative_error(gradient, expected_gradient), 1e-5)
    ratio = bessel_iv_ratio(tf.cast(dims, tf.float64) / 2 - 1, kappa).numpy()
    for row, m in enumerate(DIMS):
        assert_within(f"log C_m, m={m}", value_error(value[row], reference[m]["log_c"]), 1e-6)
        assert_within(f"ratio, m={m}", relative_error(ratio[row], reference[m]["ratio"]), 1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
def test_log_vmf_normalizer_at_zero_is_minus_log_sphere_area(dim, dtype):
    kappa = tf.zeros([1], dtype)
    value, gradient = value_and_gradient(lambda k: log_vmf_normalizer(k, dim), kappa)
    with mpmath.workdps(30):
        half = mpmath.mpf(dim) / 2
        expected = float(-mpmath.log(2 * mpmath.pi**half / mpmath.gamma(half)))
    np.testing.assert_allclose(value, [expected], rtol=1e-7 if dtype == tf.float32 else 1e-13)
    np.testing.assert_array_equal(gradient, [0.0])


def test_log_bessel_iv_at_zero():
    kappa = tf.zeros([2], tf.float64)
    orders = tf.constant([0.0, 149.0], tf.float64)
    value, gradient = value_and_gradient(lambda k: log_bessel_iv(orders, k), kappa)
    # I_0(0) = 1 with d/dκ log I_0 = I_1/I_0 = 0; I_v(0) = 0 for v > 0.
    np.testing.assert_array_equal(value, [0.0, -np.inf])
    np.testing.assert_array_equal(gradient, [0.0, np.inf])
    np.testing.assert_array_equal(bessel_iv_ratio(orders, kappa).numpy(), [0.0, 0.0])


def test_small_kappa_limit_of_log_bessel_iv():
    # Far below the grid, where log I_v(κ) = v·log(κ/2) − lgamma(v + 1) + κ²/(4(v+1)) + …:
    # the relative accuracy holds even for log I_0(κ) ≈ κ²/4 = 2.5e-61.
    kappa = 1e-30
    for order in (0.0, 0.5, 149.0, 511.0):
        with mpmath.workdps(100):  # I_0(1e-30) − 1 needs 61 digits
            expected = float(mpmath.log(mpmath.besseli(order, mpmath.mpf(kappa))))
        value = log_bessel_iv(order, tf.constant([kappa], tf.float64)).numpy()
        np.testing.assert_allclose(value, [expected], rtol=1e-14)


@pytest.mark.parametrize(
    "dim, kappa",
    [(3, 0.5), (10, 7.0), (300, 1.0), (300, 150.0), (1024, 3000.0)],
    ids=["m=3-k=0.5", "m=10-k=7", "m=300-k=1", "m=300-k=150", "m=1024-k=3000"],
)
def test_gradient_matches_finite_differences(dim, kappa):
    kappa = tf.constant([kappa], tf.float64)
    for function in (
        lambda k: log_vmf_normalizer(k, dim),
        lambda k: log_bessel_iv(dim / 2 - 1, k),
    ):
        theoretical, numerical = tf.test.compute_gradient(function, [kappa], delta=2.0**-14)
        np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6)


@pytest.mark.parametrize("order_kind", ["static", pytest.param("tensor", marks=pytest.mark.slow)])
def test_xla_matches_eager(order_kind):
    kappa = tf.constant(KAPPAS, tf.float64)
    if order_kind == "static":
        dim, order = 300, 149.0
    else:
        dim = tf.constant([2, 3, 10, 50, 300, 1024] * 4)[:NUM_KAPPAS]
        order = tf.cast(dim, tf.float64) / 2 - 1

    def values_and_gradients(kappa):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(kappa)
            log_c = log_vmf_normalizer(kappa, dim)
            log_iv = log_bessel_iv(order, kappa)
        return (
            log_c,
            log_iv,
            bessel_iv_ratio(order, kappa),
            tape.gradient(log_c, kappa),
            tape.gradient(log_iv, kappa),
        )

    eager = values_and_gradients(kappa)
    compiled = tf.function(values_and_gradients, jit_compile=True)(kappa)
    names = ["log C_m", "log I_v", "ratio", "d/dκ log C_m", "d/dκ log I_v"]
    for name, expected, value in zip(names, eager, compiled):
        np.testing.assert_allclose(value.numpy(), expected.numpy(), rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
def test_lower_bound_gradient_overestimates_ratio_by_at_most_one_over_v(reference, dim, dtype):
    kappa = tf.constant(KAPPAS, dtype)
    value, gradient = value_and_gradient(lambda k: log_vmf_normalizer_lower_bound(k, dim), kappa)
    assert_finite("lower bound", value)
    assert_finite("lower bound gradient", gradient)
    # Same sign as −I_{v+1}/I_v and never smaller in magnitude...
    excess = gradient / -reference[dim]["ratio"] - 1.0
    slack = 1e-5 if dtype == tf.float32 else 1e-12
    too_small = excess < -slack
    assert not too_small.any(), f"smaller than the exact gradient at kappa={KAPPAS[too_small]}"
    # ...and at most 1/v larger (the κ → 0 limit (v+1)/v); for v < 1 unbounded.
    order = dim / 2 - 1
    if order >= 1:
        assert excess.max() <= 1.0 / order + slack, f"excess {excess.max():.3g} > 1/v = {1 / order:.3g}"


@pytest.mark.parametrize("dim", DIMS[1:], ids=DIM_IDS[1:])
def test_lower_bound_bounds_log_normalizer_up_to_its_value_at_zero(reference, dim):
    # log C_m(κ) − log C_m(0) ≥ f(κ) − f(0): f + constant is a lower bound, tight
    # at 0 (m ≥ 3; for m = 2, f(0) = +∞).
    kappa = tf.constant(np.concatenate([[0.0], KAPPAS]), tf.float64)
    bound = log_vmf_normalizer_lower_bound(kappa, dim).numpy()
    with mpmath.workdps(30):
        half = mpmath.mpf(dim) / 2
        log_c_at_zero = float(-mpmath.log(2 * mpmath.pi**half / mpmath.gamma(half)))
    gap = (reference[dim]["log_c"] - log_c_at_zero) - (bound[1:] - bound[0])
    assert (gap >= -1e-9 * np.maximum(np.abs(reference[dim]["log_c"]), 1.0)).all()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: log_vmf_normalizer(tf.ones([2]), 1), "dim=1"),
        (lambda: log_vmf_normalizer_lower_bound(tf.ones([2]), 0), "dim=0"),
        (lambda: log_bessel_iv(-0.5, tf.ones([2])), "order=-0.5"),
        (lambda: bessel_iv_ratio(float("nan"), tf.ones([2])), "order=nan"),
    ],
    ids=["dim-1", "lower-bound-dim-0", "negative-order", "nan-order"],
)
def test_invalid_static_arguments_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_dtype_follows_kappa():
    for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
        kappa = tf.constant([0.5, 50.0], dtype)
        assert log_vmf_normalizer(kappa, 300).dtype == dtype
        assert log_bessel_iv(3.0, kappa).dtype == dtype
        assert bessel_iv_ratio(3.0, kappa).dtype == dtype
        assert log_vmf_normalizer_lower_bound(kappa, 300).dtype == dtype


@pytest.mark.parametrize("dim", [300, 1024])
def test_float32_log_normalizer_near_its_zero_crossing(dim):
    # log C_m crosses 0 where its terms of ~10³ cancel (m = 1024: κ ≈ 3234). The
    # float32 result takes some logarithms in float32 (for speed); their error
    # must stay far below the 1e-5 absolute target there.
    grid = tf.constant(np.linspace(1.0, 5000.0, 20001), tf.float64)
    values = log_vmf_normalizer(grid, dim).numpy()
    crossing = int(np.argmin(np.abs(values)))
    kappas = np.float32(grid.numpy()[crossing]) + np.arange(-8, 9, dtype=np.float32) * 0.25
    with mpmath.workdps(40):
        order = mpmath.mpf(dim) / 2 - 1
        expected = np.array([float(
            order * mpmath.log(mpmath.mpf(float(k))) - (order + 1) * mpmath.log(2 * mpmath.pi)
            - mpmath.log(mpmath.besseli(order, mpmath.mpf(float(k))))) for k in kappas])
    assert np.min(np.abs(expected)) < 0.5  # the references straddle the crossing
    got = log_vmf_normalizer(tf.constant(kappas), dim).numpy().astype(np.float64)
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1.0)) < 1e-6
