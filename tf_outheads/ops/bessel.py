"""Modified Bessel function I_v in log space, and the von Mises–Fisher normalizer.

The vMF loss of Kumar & Tsvetkov (2019) needs

    log C_m(κ) = (m/2 − 1)·log κ − (m/2)·log 2π − log I_{m/2−1}(κ)

for m = 300 (order v = 149) and κ = ‖ê‖ anywhere from ~0 to ~10⁴, and its
derivative, which is a Bessel *ratio*: d/dκ log C_m(κ) = −I_{m/2}(κ)/I_{m/2−1}(κ).
`I_149(κ)` itself under/overflows float64 at both ends of that range (scipy's
`ive(149, κ)` is 0 for κ ≲ 1.5), so everything here is computed in log space,
never as `log(I)`.

Method (one formula for every κ ≥ 0; v ≥ 0 real):

1. **Debye's uniform asymptotic expansion** at an order μ ≥ `DEBYE_MIN_ORDER`
   (DLMF 10.41.3), with s = √(μ² + κ²), p = μ/s:

       log I_μ(κ) = s + μ·log κ − μ·log(μ + s) − ½·log(2πs) + log Σ_k u_k(p)/μ^k.

   It is uniform in κ: one set of terms is accurate from κ = 0 (where it
   reduces to Stirling's series for Γ(μ+1)) to κ → ∞ (Hankel's expansion).
   The polynomials u_k are generated exactly (rational arithmetic) by their
   recurrence (DLMF 10.41.9) at import. The number of terms K is chosen for
   the smallest μ in use from a measured bound on max_{0≤p≤1} |u_{K+1}(p)|,
   so that the first omitted term is below 2⁻⁵⁴ (K = 12 at μ = 25, K = 6 at
   μ = 149, K = 5 at μ = 511).
   Its κ-derivative is analytic too and gives the ratio q_μ = I_{μ+1}/(κ·I_μ):

       q_μ = 1/(μ + s) − 1/(2s²) − (μ/s³)·Σ'(p)/Σ(p).

   κ times the first term alone, κ/(μ + s), is the Amos-type approximation of
   the ratio; the other two terms make it exact to the order of the expansion.
2. **Orders below `DEBYE_MIN_ORDER`** (m < 52): μ = v + n with
   n = ⌈DEBYE_MIN_ORDER − v⌉, then the three-term recurrence run *downwards*,
   which is the stable direction for I (I is the minimal solution as the
   order grows; a relative error in q_{ν+1} is multiplied by κ²·q_ν·q_{ν+1} < 1):

       q_{ν−1} = 1 / (2ν + κ²·q_ν),
       log I_v = log I_μ − Σ_{ν=v}^{μ−1} log(κ·q_ν).

   This is the Perron/Gauss continued fraction for I_{v+1}/I_v with its tail
   replaced by the (accurate) Debye ratio at order μ, so it needs n ≤ 25 steps
   for every κ instead of ~κ steps.
3. **Values for κ ≤ 2** (not the ratio, which 1–2 already give to 1e-15):
   the power series I_v(κ) = (κ/2)^v/Γ(v+1)·Σ_k (κ²/4)^k/(k!·(v+1)_k), 12
   terms (term k ≤ 1/(k!)², so the first omitted one is < 3e-20). Its log
   has the closed-form κ → 0 limit v·log(κ/2) − lgamma(v+1), where 1–2 get
   it from a cancellation of Debye and recurrence terms (~1e-14 absolute):
   this keeps the *relative* accuracy of log I_0(κ) ≈ κ²/4 for tiny κ.

Written with q = I_{ν+1}/(κ·I_ν) instead of the ratio itself, every `log κ` of
the Debye formula, of the recurrence and of the series cancels analytically:

    B_v(κ) := log I_v(κ) − v·log κ
            = s − μ·log(μ + s) − ½·log(2πs) + log Σ − Σ_ν log q_ν
            = −v·log 2 − lgamma(v + 1) + log1p(Σ_{k≥1} …)          (κ ≤ 2),
    log C_m(κ) = −(v + 1)·log 2π − B_v(κ),        v = m/2 − 1,

which is finite at κ = 0, where it is exactly −log(2π^{m/2}/Γ(m/2)) (minus
the log of the sphere's area), with no cancellation of large terms as κ → 0.
Nothing in it divides by κ, so κ = 0 gives the limit, not 0/0.

Precision. Every function except the lower bound computes in float64 and
returns `kappa`'s dtype. log C_m is a difference of terms of ~10³ that
crosses 0 (m = 1024: at κ ≈ 3234); computed in float32 arithmetic it is off
by 3e-4 there (measured), 30× the 1e-5 target, so float32 inputs are widened.
float64 logarithms are most of the time on a CPU (XLA vectorises only the
float32 ones), so for a float32 result the logarithms whose error is not
multiplied by the order (of 2πs, of Debye's Σ, of the κ ≤ 2 series) are
taken in float32 and Debye's series stops at 2⁻⁴⁰; only μ·log(μ + s) and the
recurrence stay float64. That made the float32 op 1.7× faster under XLA
(m = 300, 100k κ forward + backward, 2-core CPU: 3.7 → 2.1 ms) at the same
measured error (≤ 6e-8 value, ≤ 6e-8 gradient, zero crossings included);
`benchmarks/vmf_ops.py` and `benchmarks/vmf.py` time it.
Measured against mpmath (40 digits) for m ∈ {2, 3, 10, 50, 300, 1024} × 1500 κ
log-spaced over [1e-6, 1e5], float64: log C_m within 1.4e-13 and log I_v
within 2.8e-13 relative to max(|ref|, 1) (the largest near their zero
crossings, where the error is absolute: ~10³ × float64 epsilon); the ratio
I_{v+1}/I_v within 1.1e-15 (plain relative error). float32 results are the
float64 ones rounded (≤ 6e-8). `tests/ops/test_bessel.py` checks the brief's
targets (1e-6 / 1e-5 values, 1e-5 / 1e-3 gradients) on m up to 1024.

Gradients are defined with `tf.custom_gradient` from the ratio: only κ is
differentiated (the order is a constant of the loss), second derivatives are
not defined. All ops compile with XLA (`tf.function(jit_compile=True)`).

References:
    Kumar & Tsvetkov 2019, "Von Mises-Fisher loss for training sequence to
    sequence models with continuous outputs", §3 (NLLvMF, the normalizer C_m);
    VIVO report (Boldt et al.), Eq. 1–3.
    DLMF §10.41 (uniform asymptotic expansions), §10.29.1 (recurrences).
    Gautschi 1967, "Computational aspects of three-term recurrence relations"
    (backward recurrence / continued fraction for ratios of the minimal solution).
"""

import fractions
import math
import numbers

import numpy as np
import tensorflow as tf

# Debye's expansion is used at orders ≥ this; lower orders are shifted up by
# backward recurrence (at most 25 steps, for v = 0). At 25, K = 12 terms reach
# the tolerance below; 20 would need 14 terms and measured no more accurate.
DEBYE_MIN_ORDER = 25
# Bound on the first omitted term of Debye's series (relative): 2⁻⁵⁴ ≈ 5.6e-17.
_DEBYE_TOLERANCE = 2.0**-54
_MAX_DEBYE_TERMS = 16
# The same bound when the result is rounded to float32 (2⁻²⁴): 2⁻⁴⁰ ≈ 9e-13.
_FLOAT32_DEBYE_TOLERANCE = 2.0**-40
# Values (not gradients) for κ ≤ 2 come from the power series, 12 terms.
_SERIES_MAX_KAPPA = 2.0
_SERIES_NUM_TERMS = 12
_LOG_2PI = math.log(2.0 * math.pi)
_COMPUTE_DTYPE = tf.float64


def _debye_polynomials(num_terms):
    """Coefficients of u_0..u_num_terms (index j: coefficient of t^j), exact.

    u_0 = 1, u_{k+1}(t) = ½t²(1 − t²)·u_k'(t) + ⅛∫_0^t (1 − 5s²)·u_k(s) ds
    (DLMF 10.41.9), in rational arithmetic so no rounding accumulates.
    """
    polynomials = [[fractions.Fraction(1)]]
    for _ in range(num_terms):
        previous = polynomials[-1]
        following = [fractions.Fraction(0)] * (len(previous) + 3)
        for j, coefficient in enumerate(previous):
            # ½t²(1 − t²)·u_k'(t): the t^(j−1) of the derivative, times j.
            if j > 0:
                following[j + 1] += coefficient * j / 2
                following[j + 3] -= coefficient * j / 2
            # ⅛∫(1 − 5s²)·u_k(s) ds.
            following[j + 1] += coefficient / 8 / (j + 1)
            following[j + 3] -= 5 * coefficient / 8 / (j + 3)
        while following and following[-1] == 0:
            following.pop()
        polynomials.append(following)
    return polynomials


_DEBYE_POLYNOMIALS = _debye_polynomials(_MAX_DEBYE_TERMS)
# float64 coefficient table, row k = u_k, column j = t^j.
_DEBYE_COEFFICIENTS = np.zeros((_MAX_DEBYE_TERMS + 1, 3 * _MAX_DEBYE_TERMS + 1))
for _k, _poly in enumerate(_DEBYE_POLYNOMIALS):
    _DEBYE_COEFFICIENTS[_k, : len(_poly)] = [float(c) for c in _poly]
# max over p ∈ [0, 1] of |u_k(p)| on a fine grid (the maxima are smooth,
# interior or at p = 1); only used to choose the number of terms.
_DEBYE_TERM_BOUNDS = [
    float(np.max(np.abs(np.polyval(row[::-1], np.linspace(0.0, 1.0, 2049)))))
    for row in _DEBYE_COEFFICIENTS
]
del _k, _poly


def _debye_num_terms(min_order, tolerance=None):
    """Smallest K such that the first omitted term, max|u_{K+1}|/μ^{K+1}, is < `tolerance`
    (default 2⁻⁵⁴)."""
    tolerance = _DEBYE_TOLERANCE if tolerance is None else tolerance
    for num_terms in range(1, _MAX_DEBYE_TERMS):
        if _DEBYE_TERM_BOUNDS[num_terms + 1] / min_order ** (num_terms + 1) < tolerance:
            return num_terms
    raise ValueError(
        f"Debye's expansion needs order >= {DEBYE_MIN_ORDER}. Received: min_order={min_order}"
    )


def _is_static_number(value):
    return isinstance(value, numbers.Real) or (isinstance(value, np.ndarray) and value.ndim == 0)


def _as_compute_tensor(kappa):
    """`kappa` as a float tensor (ints become float32) and its float64 copy."""
    kappa = tf.convert_to_tensor(kappa)
    if not kappa.dtype.is_floating:
        kappa = tf.cast(kappa, tf.float32)
    return kappa, tf.cast(kappa, _COMPUTE_DTYPE)


def _order_argument(order):
    """A static order as a Python float (validated), a dynamic one as a float64 tensor."""
    if _is_static_number(order):
        order = float(order)
        if not order >= 0.0:  # also rejects NaN
            raise ValueError(f"`order` must be >= 0. Received: order={order!r}")
        return order
    return tf.cast(tf.convert_to_tensor(order), _COMPUTE_DTYPE)


def _order_from_dim(dim):
    """v = m/2 − 1 from the dimension m (static: validated Python float)."""
    if _is_static_number(dim):
        if not float(dim) >= 2.0:
            raise ValueError(
                f"`dim` must be >= 2 (the sphere S^(m-1) in R^m). Received: dim={dim!r}"
            )
        return float(dim) / 2.0 - 1.0
    return tf.cast(tf.convert_to_tensor(dim), _COMPUTE_DTYPE) / 2.0 - 1.0


def _broadcast(order, kappa):
    """Broadcasts a tensor order against kappa (a static order needs nothing)."""
    if isinstance(order, float):
        return order, kappa
    shape = tf.broadcast_dynamic_shape(tf.shape(order), tf.shape(kappa))
    return tf.broadcast_to(order, shape), tf.broadcast_to(kappa, shape)


def _debye_series(order, kappa_squared, num_terms):
    """Σ(p) − 1 and Σ'(p) of Debye's series Σ(p) = Σ_k u_k(p)/μ^k, and s, p.

    `order` (μ) is a Python float or a float64 tensor; the coefficients of p^j,
    a_j = Σ_k c_kj μ^(−k), are numbers in the first case (computed once here).
    """
    inverse_order = 1.0 / order
    if isinstance(order, float):
        powers = inverse_order ** np.arange(num_terms + 1)
        coefficients = list(powers @ _DEBYE_COEFFICIENTS[: num_terms + 1, : 3 * num_terms + 1])
    else:
        powers = [tf.ones_like(inverse_order)]
        for _ in range(num_terms):
            powers.append(powers[-1] * inverse_order)
        coefficients = []
        for j in range(3 * num_terms + 1):
            a_j = 0.0
            for k in range(num_terms + 1):
                if _DEBYE_COEFFICIENTS[k, j] != 0.0:
                    a_j = a_j + _DEBYE_COEFFICIENTS[k, j] * powers[k]
            coefficients.append(a_j)
    s = tf.sqrt(order * order + kappa_squared)
    p = order / s
    # Horner for Σ − 1 (a_0 = 1 is left out, so log1p keeps the digits of a
    # small correction) and for its derivative Σ'.
    series = tf.zeros_like(p) + coefficients[-1]
    derivative = tf.zeros_like(p)
    for a_j in coefficients[-2:0:-1]:
        derivative = derivative * p + series
        series = series * p + a_j
    derivative = derivative * p + series
    series = series * p
    return series, derivative, s, p


def _float32_log(function):
    """`function` (a log) evaluated in float32 on a float64 tensor, result float64."""
    return lambda x: tf.cast(function(tf.cast(x, tf.float32)), tf.float64)


def _log_bessel_reduced(order, kappa, float32_result=False):
    """B_v(κ) = log I_v(κ) − v·log κ and q_v(κ) = I_{v+1}(κ)/(κ·I_v(κ)), float64.

    `order`: Python float ≥ 0 or a float64 tensor broadcast like `kappa`.

    With `float32_result` (the caller rounds to float32), the logarithms whose
    error is not multiplied by the order (of `2πs`, of Σ and of the κ ≤ 2
    series, each O(1)–O(10)) are taken in float32, and Debye's series stops
    at 2⁻⁴⁰: float64 logarithms are most of the op's time on a CPU (XLA's
    float32 log is vectorised), and these add < 1e-6 absolute error, well
    inside float32's rounding of values of ~10²–10³. `μ·log(μ + s)` and the
    recurrence stay float64 (their errors are multiplied by up to 10³).
    """
    log = _float32_log(tf.math.log) if float32_result else tf.math.log
    log1p = _float32_log(tf.math.log1p) if float32_result else tf.math.log1p
    tolerance = _FLOAT32_DEBYE_TOLERANCE if float32_result else None
    kappa_squared = kappa * kappa
    if isinstance(order, float):
        num_steps = max(0, math.ceil(DEBYE_MIN_ORDER - order))
        debye_order = order + num_steps
        num_terms = _debye_num_terms(debye_order, tolerance)
    else:
        num_steps = math.ceil(DEBYE_MIN_ORDER)
        # Orders ≥ DEBYE_MIN_ORDER take no step; the others n = ⌈25 − v⌉.
        steps_needed = tf.maximum(tf.math.ceil(DEBYE_MIN_ORDER - order), 0.0)
        debye_order = order + steps_needed
        num_terms = _debye_num_terms(DEBYE_MIN_ORDER, tolerance)

    series, derivative, s, p = _debye_series(debye_order, kappa_squared, num_terms)
    # log I_μ(κ) − μ·log κ (DLMF 10.41.3 with η written out).
    reduced = s - debye_order * tf.math.log(debye_order + s) - 0.5 * log(2.0 * math.pi * s)
    reduced += log1p(series)
    # q_μ = (d/dκ log I_μ − μ/κ)/κ, from the derivative of the same expansion.
    # (dp/dκ)/κ = −p³/μ².
    p_over_order = p / debye_order
    ratio = 1.0 / (debye_order + s) - 0.5 / (s * s) - p_over_order * p_over_order * p * (
        derivative / (1.0 + series)
    )

    # Backward recurrence from μ down to v: q_{ν−1} = 1/(2ν + κ²·q_ν),
    # log I_{ν−1} − (ν−1)·log κ = log I_ν − ν·log κ − log q_{ν−1}.
    for step in range(num_steps, 0, -1):
        new_ratio = 1.0 / (2.0 * (order + step) + kappa_squared * ratio)
        if isinstance(order, float):
            ratio = new_ratio
            reduced -= tf.math.log(ratio)
        else:
            active = step <= steps_needed
            ratio = tf.where(active, new_ratio, ratio)
            reduced -= tf.where(active, tf.math.log(new_ratio), 0.0)

    # κ ≤ 2: the power series I_v(κ) = (κ/2)^v/Γ(v+1)·Σ_k (κ²/4)^k/(k!·(v+1)_k),
    # whose log has the closed-form limit −v·log 2 − lgamma(v+1) at κ = 0 instead
    # of the cancellation of the Debye terms (≈1e-14 absolute): log I_0(κ) ≈ κ²/4
    # keeps its relative accuracy. Term k is ≤ 1/(k!)², so 12 terms are < 3e-20.
    series_region = kappa_squared <= _SERIES_MAX_KAPPA**2
    quarter_square = tf.where(series_region, 0.25 * kappa_squared, 0.0)
    term = tf.ones_like(quarter_square)
    series_sum = tf.zeros_like(quarter_square)
    for k in range(1, _SERIES_NUM_TERMS + 1):
        term = term * quarter_square / (k * (order + k))
        series_sum += term
    if isinstance(order, float):
        log_leading = -order * math.log(2.0) - math.lgamma(order + 1.0)
    else:
        log_leading = -order * math.log(2.0) - tf.math.lgamma(order + 1.0)
    reduced = tf.where(series_region, log_leading + log1p(series_sum), reduced)
    return reduced, ratio


def log_bessel_iv(order, kappa):
    """log I_v(κ), the modified Bessel function of the first kind, in log space.

    Measured error against mpmath ≤ 3e-13 relative to max(|log I_v|, 1) in
    float64 for orders 0 ≤ v ≤ 511 and 1e-6 ≤ κ ≤ 1e5 (the method holds for
    any v ≥ 0 and κ up to ~1e150), including κ → 0, where log I_v(κ) →
    v·log(κ/2) − lgamma(v + 1), and κ ≫ v, where I_v overflows float64. See
    the module docstring for the method (Debye's uniform expansion, backward
    recurrence, power series for κ ≤ 2).

    Differentiable in `kappa` (custom gradient, d/dκ log I_v(κ) =
    I_{v+1}(κ)/I_v(κ) + v/κ, the `v/κ` term dropped for v = 0); `order` is not
    differentiated.

    Args:
        order: float ≥ 0 or float tensor broadcastable to `kappa`. The order v.
            A Python number selects the cheapest expansion for that order; a
            tensor is assumed ≥ 0 (not checked).
        kappa: float tensor, κ ≥ 0. Its dtype is the result's dtype; the
            computation runs in float64.

    Returns:
        tensor of `kappa`'s dtype, shape `broadcast(order, kappa)`:
        log I_v(κ); `-inf` at κ = 0 for v > 0 (and 0 for v = 0).

    Raises:
        ValueError: if a static `order` is negative or NaN.

    Example:
    ```python
    import tensorflow as tf
    from tf_outheads.ops import log_bessel_iv
    log_bessel_iv(149.0, tf.constant([1e-3, 150.0, 1e4]))
    # ≈ [-1732.544, 77.209, 9993.366]
    ```

    References:
        DLMF 10.41.3 (Debye), 10.29.1 (recurrence); Kumar & Tsvetkov 2019 §3.
    """
    order = _order_argument(order)
    kappa, kappa64 = _as_compute_tensor(kappa)
    order, kappa64 = _broadcast(order, kappa64)
    return _log_bessel_iv(order, kappa64, kappa.dtype)


def _log_bessel_iv(order, kappa64, dtype):
    @tf.custom_gradient
    def value_and_gradient(kappa64):
        reduced, ratio = _log_bessel_reduced(order, kappa64, float32_result=dtype != tf.float64)
        value = tf.math.xlogy(order + tf.zeros_like(kappa64), kappa64) + reduced

        def gradient(upstream):
            # d/dκ log I_v = I_{v+1}/I_v + v/κ; xdivy gives 0 for v = 0 (even at κ = 0).
            slope = kappa64 * ratio + tf.math.xdivy(order + tf.zeros_like(kappa64), kappa64)
            return tf.cast(upstream, _COMPUTE_DTYPE) * slope

        return value, gradient

    # The custom gradient runs in float64; the cast around it carries the
    # upstream gradient from and to `dtype`.
    return tf.cast(value_and_gradient(kappa64), dtype)


def bessel_iv_ratio(order, kappa):
    """The Bessel ratio I_{v+1}(κ)/I_v(κ), without forming either function.

    It is the derivative of the vMF log-normalizer, d/dκ log C_m(κ) =
    −I_{m/2}(κ)/I_{m/2−1}(κ), and of log I_v(κ) minus `v/κ`. Computed from the
    κ-derivative of Debye's uniform expansion at an order ≥ 25 followed by the
    backward recurrence (Perron/Gauss continued fraction) down to v; see the
    module docstring. Relative error ≤ 1.1e-15 against mpmath (float64) for
    0 ≤ v ≤ 511, 1e-6 ≤ κ ≤ 1e5. Tends to κ/(2(v + 1)) as κ → 0 (exactly 0
    at κ = 0) and to 1 − (2v + 1)/(2κ) as κ → ∞. Gradients of this function
    are plain autodiff through the expansion (not a custom gradient).

    Args:
        order: float ≥ 0 or float tensor broadcastable to `kappa`. The order v.
        kappa: float tensor, κ ≥ 0; its dtype is the result's dtype.

    Returns:
        tensor of `kappa`'s dtype in [0, 1), shape `broadcast(order, kappa)`.

    Raises:
        ValueError: if a static `order` is negative or NaN.

    Example:
    ```python
    import tensorflow as tf
    from tf_outheads.ops import bessel_iv_ratio
    bessel_iv_ratio(149.0, tf.constant([1.0, 150.0, 1e4]))  # ≈ [0.00333, 0.4145, 0.9852]
    ```

    References:
        DLMF 10.41.3, 10.29.1; Gautschi 1967 (continued fractions for ratios).
    """
    order = _order_argument(order)
    kappa, kappa64 = _as_compute_tensor(kappa)
    order, kappa64 = _broadcast(order, kappa64)
    _, ratio = _log_bessel_reduced(order, kappa64)
    return tf.cast(kappa64 * ratio, kappa.dtype)


def log_vmf_normalizer(kappa, dim):
    """log C_m(κ), the log-normalizer of the von Mises–Fisher density on S^(m−1).

    Formula:
    ```
    log C_m(κ) = (m/2 − 1)·log κ − (m/2)·log(2π) − log I_{m/2−1}(κ)
    d/dκ log C_m(κ) = −I_{m/2}(κ) / I_{m/2−1}(κ)
    ```

    The `log κ` terms are cancelled analytically (module docstring), so the
    value is exact and finite at κ = 0, where it is minus the log of the area
    of the unit sphere, −log(2π^{m/2}/Γ(m/2)), and the gradient there is 0.
    The gradient is a `tf.custom_gradient` from `bessel_iv_ratio` (κ only;
    `dim` is not differentiated). Accuracy against mpmath for m ∈ [2, 1024],
    κ ∈ [1e-6, 1e5], float64: value within 1.4e-13 relative to
    max(|log C_m|, 1), gradient within 1.1e-15 relative; float32 results are
    the float64 ones rounded.

    Args:
        kappa: float tensor, κ ≥ 0 (in NLLvMF, the norm of the predicted
            vector). Its dtype is the result's dtype; computed in float64.
        dim: int ≥ 2 or a numeric tensor broadcastable to `kappa`. The
            dimension m of the embeddings (the sphere is S^(m−1) ⊂ R^m).

    Returns:
        tensor of `kappa`'s dtype, shape `broadcast(kappa, dim)`.

    Raises:
        ValueError: if a static `dim` is below 2.

    Example:
    ```python
    import tensorflow as tf
    from tf_outheads.ops import log_vmf_normalizer
    kappa = tf.constant([0.0, 10.0, 300.0])
    with tf.GradientTape() as tape:
        tape.watch(kappa)
        log_c = log_vmf_normalizer(kappa, dim=300)  # ≈ [427.607, 427.440, 314.300]
    tape.gradient(log_c, kappa)  # −I_150/I_149 ≈ [0, -0.0333, -0.6185]
    ```

    References:
        VIVO report (Boldt et al.), Eq. 2; Kumar & Tsvetkov 2019, §3.
    """
    order = _order_from_dim(dim)
    kappa, kappa64 = _as_compute_tensor(kappa)
    order, kappa64 = _broadcast(order, kappa64)
    return _log_vmf_normalizer(order, kappa64, kappa.dtype)


def _log_vmf_normalizer(order, kappa64, dtype):
    @tf.custom_gradient
    def value_and_gradient(kappa64):
        reduced, ratio = _log_bessel_reduced(order, kappa64, float32_result=dtype != tf.float64)
        value = -(order + 1.0) * _LOG_2PI - reduced

        def gradient(upstream):
            return -tf.cast(upstream, _COMPUTE_DTYPE) * (kappa64 * ratio)

        return value, gradient

    return tf.cast(value_and_gradient(kappa64), dtype)


def log_vmf_normalizer_lower_bound(kappa, dim):
    """Kumar & Tsvetkov's closed-form stand-in for log C_m(κ), up to a constant.

    Formula (v = m/2 − 1, s = √((v+1)² + κ²)):
    ```
    log C_m(κ) ≈ −s + (v − 1)·log(v − 1 + s)      (+ a constant in κ)
    d/dκ       = −κ / (v − 1 + s)                 (≈ −I_{v+1}(κ)/I_v(κ))
    ```

    This is *not* an approximation of the value of log C_m: it is a
    pseudo-loss whose gradient approximates the true one. Its derivative is
    an upper bound of the Bessel ratio, κ/(v − 1 + s) ≥ I_{v+1}/I_v, so
    integrating from 0 gives, for m ≥ 3, `log C_m(κ) ≥ f(κ) + [log C_m(0) −
    f(0)]` (f is this function): a lower bound once that constant is added,
    tight at κ = 0. The constant is left out, as in the paper and its code,
    since it has no gradient.

    Measured against the exact derivative (mpmath, m ∈ {2, 3, 10, 50, 100,
    300, 512, 1024}, κ ∈ [1e-6, 1e5], checked in `tests/ops/test_bessel.py`):
    the gradient has the right sign and is never smaller in magnitude than
    the exact one. For v ≥ 1 its relative excess is at most 1/v, reached as
    κ → 0 (+0.67 % for m = 300, +0.20 % for m = 1024), and falls with κ
    (m = 300: +0.56 % at κ = 100, +0.13 % at 1000, +0.015 % at 10⁴). For m = 2
    and 3 (v < 1) it is a poor approximation (×4e6 and ×3 the exact gradient
    at κ = 1e-3), and for m = 2 the value diverges to +∞ as κ → 0.
    Distance to the exact value, m = 300: f(κ) − log C_m(κ) = +265.56 at κ = 0
    (the missing constant); with that constant removed, −0.001 at κ = 10,
    −0.097 at 100, −1.57 at 1000, −4.66 at 10⁴, and growing like 1.5·log κ
    once κ ≫ v² (the two ratios differ by ~1.5/κ there).

    Unlike `log_vmf_normalizer` this is computed in `kappa`'s own dtype (it is
    elementary; an approximation does not need float64), or in float32 for
    float16/bfloat16 inputs, whose range (v+1)² overflows. The term v − 1 + s
    is evaluated as (4v + κ²)/(s − v + 1) when v < 1, where it would cancel.

    The VIVO report prints this as Eq. 3 as "log C_m(κ) ≥ √((m/2)² + κ²) −
    (m/2)·log(m/2 − 2 + √((m/2)² + κ²))": the coefficient of the log is m/2
    there instead of v − 1 = m/2 − 2, and the sign is that of −log C_m. The
    authors' code (`logcmkappox` in Sachin19/seq2seq-con) has v − 1 and adds
    `+logcmkappox(m, κ)` to the loss in place of `−log C_m(κ)`; its derivative
    is the ratio bound above. This function follows the code and the
    derivation, with the sign of log C_m, so it can replace
    `log_vmf_normalizer` in a loss as is.

    Args:
        kappa: float tensor, κ ≥ 0 (κ > 0 for m = 2).
        dim: int ≥ 2 or a numeric tensor broadcastable to `kappa`. The
            dimension m.

    Returns:
        tensor of `kappa`'s dtype, shape `broadcast(kappa, dim)`.

    Raises:
        ValueError: if a static `dim` is below 2.

    Example:
    ```python
    import tensorflow as tf
    from tf_outheads.ops import log_vmf_normalizer_lower_bound
    log_vmf_normalizer_lower_bound(tf.constant([1.0, 100.0]), dim=300)
    # ≈ [693.168, 677.214]; log_vmf_normalizer gives ≈ [427.605, 411.748]
    ```

    References:
        Kumar & Tsvetkov 2019, §3 (the approximation of log C_m);
        VIVO report (Boldt et al.), Eq. 3.
    """
    order = _order_from_dim(dim)
    kappa = tf.convert_to_tensor(kappa)
    if not kappa.dtype.is_floating:
        kappa = tf.cast(kappa, tf.float32)
    compute_dtype = kappa.dtype if kappa.dtype in (tf.float32, tf.float64) else tf.float32
    kappa_compute = tf.cast(kappa, compute_dtype)
    order = tf.cast(order, compute_dtype)
    s = tf.sqrt((order + 1.0) ** 2 + kappa_compute * kappa_compute)
    # v − 1 + s without cancellation for v < 1 (s ≥ v + 1 > 1 − v); the other
    # branch only sees safe arguments, so neither branch's gradient is NaN.
    direct = tf.where(order >= 1.0, order - 1.0 + s, tf.ones_like(s))
    rationalized = (4.0 * order + kappa_compute * kappa_compute) / (s - order + 1.0)
    shifted = tf.where(order >= 1.0, direct, rationalized)
    return tf.cast(-s + (order - 1.0) * tf.math.log(shifted), kappa.dtype)
