"""The diagnostics as a demanding user meets them: agreement with ArviZ on
awkward inputs (short chains, ties, discrete and heavy-tailed draws, odd
lengths, strong autocorrelation) and clear errors on bad ones."""

import warnings

import arviz as az
import numpy as np
import pytest

from kameleon import diagnostics
from test_diagnostics import ar1_chains


def _draws(name):
    rng = np.random.default_rng(sum(map(ord, name)))  # a fixed seed per case
    return {
        "iid 4x1000": lambda: rng.standard_normal((4, 1000)),
        "iid 4x1001 (odd)": lambda: rng.standard_normal((4, 1001)),
        "iid 1x1000": lambda: rng.standard_normal((1, 1000)),
        "iid 4x4": lambda: rng.standard_normal((4, 4)),
        "iid 4x7": lambda: rng.standard_normal((4, 7)),
        "iid 2x5": lambda: rng.standard_normal((2, 5)),
        "iid 4x12": lambda: rng.standard_normal((4, 12)),
        "ar 0.9 4x200": lambda: ar1_chains(4, 200, 0.9, 3),
        "ar 0.99 4x200": lambda: ar1_chains(4, 200, 0.99, 3),
        "ar 0.99 3x51": lambda: ar1_chains(3, 51, 0.99, 4),
        "ar -0.5 4x500": lambda: ar1_chains(4, 500, -0.5, 5),
        "cauchy 4x1000": lambda: rng.standard_cauchy((4, 1000)),
        "one chain shifted": lambda: rng.standard_normal((4, 500)) + np.array([0, 0, 0, 3.0])[:, None],
        "poisson ties": lambda: rng.poisson(2.0, (4, 500)).astype(float),
        "bernoulli 0.5": lambda: rng.binomial(1, 0.5, (4, 500)).astype(float),
        "bernoulli 0.02": lambda: rng.binomial(1, 0.02, (4, 500)).astype(float),
        "integers": lambda: rng.integers(0, 1000, (4, 300)),
        "float32": lambda: rng.standard_normal((4, 300)).astype(np.float32),
    }[name]()


CASES = [
    "iid 4x1000",
    "iid 4x1001 (odd)",
    "iid 1x1000",
    "iid 4x4",
    "iid 4x7",
    "iid 2x5",
    "iid 4x12",
    "ar 0.9 4x200",
    "ar 0.99 4x200",
    "ar 0.99 3x51",
    "ar -0.5 4x500",
    "cauchy 4x1000",
    "one chain shifted",
    "poisson ties",
    "bernoulli 0.5",
    "bernoulli 0.02",
    "integers",
    "float32",
]

# The same estimators on the same draws differ only by summation order (the
# FFT autocovariance here, numpy's there): measured below 1e-12 relative, so
# 1e-9 asserts "the same number" while any difference of method (a ρ̂₀ that
# is not exactly 1, another truncation of the autocorrelation sum, other
# quantiles) shows as at least 1e-4 on these chains.
RTOL = 1e-9


def _arviz(f, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(f(x))


@pytest.mark.parametrize("name", CASES)
def test_ess_and_rhat_equal_arviz_on_awkward_draws(name):
    x = _draws(name)
    xf = np.asarray(x, dtype=np.float64)
    np.testing.assert_allclose(diagnostics.ess_bulk(x), _arviz(lambda a: az.ess(a, method="bulk"), xf), rtol=RTOL)
    np.testing.assert_allclose(
        diagnostics.ess_tail(x), _arviz(lambda a: az.ess(a, method="tail", prob=(0.05, 0.95)), xf), rtol=RTOL
    )
    # ArviZ's "mean" ESS is the same Geyer sum on the split chains
    half = xf.shape[1] // 2
    split = np.concatenate([xf[:, :half], xf[:, xf.shape[1] - half :]])
    if half >= 4:
        np.testing.assert_allclose(diagnostics.ess(split), _arviz(lambda a: az.ess(a, method="mean"), xf), rtol=RTOL)
    if xf.shape[0] >= 2:  # ArviZ gives no R-hat for one chain; ours splits it
        np.testing.assert_allclose(diagnostics.rhat(x), _arviz(lambda a: az.rhat(a, method="rank"), xf), rtol=RTOL)



# ── MMD against a brute-force computation ────────────────────────────────


def _kernels(bandwidth, offset, degree):
    def sq(a, b):
        return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)

    return {
        "gaussian": lambda a, b: np.exp(-sq(a, b) / (2 * bandwidth**2)),
        "laplacian": lambda a, b: np.exp(-np.abs(a[:, None, :] - b[None, :, :]).sum(-1) / bandwidth),
        "polynomial": lambda a, b: (offset + a @ b.T) ** degree,
    }


def _mmd_brute(x, y, k, unbiased):
    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    n, m = len(x), len(y)
    if unbiased:
        return (
            (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
            + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
            - 2 * kxy.mean()
        )
    return kxx.mean() + kyy.mean() - 2 * kxy.mean()


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "polynomial"])
@pytest.mark.parametrize("unbiased", [False, True])
def test_mmd_equals_the_documented_formula(kernel, unbiased):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((30, 3)), rng.standard_normal((20, 3)) + 0.5
    params = dict(bandwidth=0.7, offset=0.2, degree=2)
    k = _kernels(**params)[kernel]
    got = diagnostics.mmd(x, y, kernel=kernel, unbiased=unbiased, **params)
    # compensated sums there, numpy's pairwise sums here: rounding only
    assert got == pytest.approx(_mmd_brute(x, y, k, unbiased), rel=1e-10, abs=1e-13)


def test_mmd_of_one_dimensional_samples_treats_each_value_as_a_draw():
    """1-d arrays are n scalar draws, not one draw of dimension n."""
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(50), rng.standard_normal(40) + 3.0
    expected = _mmd_brute(x[:, None], y[:, None], _kernels(1.0, 1.0, 3)["gaussian"], False)
    assert diagnostics.mmd(x, y) == pytest.approx(expected, rel=1e-10)
    assert diagnostics.mmd(x, y[:, None]) == pytest.approx(expected, rel=1e-10)


def test_mmd_polynomial_of_high_degree_is_finite_and_exact():
    """The multinomial coefficients of degree 200 overflow factorials (200!
    is past the largest double) though the kernel values do not."""
    rng = np.random.default_rng(7)
    x, y = 0.1 * rng.standard_normal((10, 2)), 0.1 * rng.standard_normal((12, 2))
    for degree in (30, 200):
        k = _kernels(1.0, 1.0, degree)["polynomial"]
        for unbiased in (False, True):
            got = diagnostics.mmd(x, y, kernel="polynomial", offset=1.0, degree=degree, unbiased=unbiased)
            # the kernel values are ~1 with differences ~degree·0.01: the
            # three sums cancel to about 1e-2 of their size
            assert got == pytest.approx(_mmd_brute(x, y, k, unbiased), rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("degree", [2.5, "3", True, 0])
def test_mmd_refuses_a_degree_that_is_not_an_integer(degree):
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="degree"):
        diagnostics.mmd(x, x + 1, kernel="polynomial", degree=degree)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("bandwidth", [0.0, -1.0, float("inf"), float("nan")])
def test_mmd_refuses_a_bandwidth_naming_it(kernel, bandwidth):
    # the refusal named the kernel's `length_scale`, which mmd does not take
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="`bandwidth` must be finite and > 0"):
        diagnostics.mmd(x, x + 1, kernel=kernel, bandwidth=bandwidth)


def test_mmd_refuses_samples_of_more_than_two_dimensions():
    x = np.zeros((3, 2, 2))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        diagnostics.mmd(x, x)


# ── bad draws ────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "function, name", [("ess_bulk", "ess_bulk"), ("ess_tail", "ess_tail"), ("ess", "ess_multi_chain"), ("rhat", "rhat_rank")]
)
def test_errors_name_the_diagnostic_that_was_called(function, name):
    """The Rust function behind the one called, not an inner step such as
    the chain splitting."""
    f = getattr(diagnostics, function)
    with pytest.raises(ValueError, match=rf"{name}\b.*at least 4.*got 3"):
        f(np.zeros((2, 3)))
    bad = np.random.default_rng(0).standard_normal((2, 10))
    bad[1, 4] = np.nan
    with pytest.raises(ValueError, match=rf"non-finite value in {name}\b"):
        f(bad)
    with pytest.raises(ValueError, match=rf"empty input: {name}\b"):
        f(np.zeros((0, 10)))


@pytest.mark.parametrize("name", ["ess_bulk", "ess_tail", "ess", "rhat"])
def test_complex_draws_are_refused(name):
    """numpy would drop the imaginary parts with only a ComplexWarning."""
    x = np.random.default_rng(0).standard_normal((2, 10)) + 1j
    with pytest.raises(TypeError, match="draws"):
        getattr(diagnostics, name)(x)


@pytest.mark.parametrize("values", [[0.0, 1.0, 2.0], [0.1, 0.7, 0.3], [5.0, -3.0], [1e-3, 2e-3, 3e-3, 4e-3]])
@pytest.mark.parametrize("n", [37, 100, 1000])
def test_chains_stuck_at_different_points_have_infinite_r_hat(values, n):
    """No variance within the chains, some between them: R-hat is +inf, not
    a rounding residue of 1e14-1e15 (nor, for other values, an error)."""
    x = np.repeat(np.array(values)[:, None], n, axis=1)
    assert diagnostics.rhat(x) == np.inf
    with pytest.raises(ValueError, match="zero variance"):
        diagnostics.rhat(np.full((3, n), values[0]))


def test_r_hat_of_binary_draws_split_half_and_half():
    """|x − median| is the same for every draw, so the scale R-hat is
    undefined and the location R-hat stands alone (ArviZ's value)."""
    rng = np.random.default_rng(9)
    x = rng.permutation(np.repeat([0.0, 1.0], 400)).reshape(4, 200)
    expected = _arviz(lambda a: az.rhat(a, method="rank"), x)
    assert np.isfinite(expected)
    np.testing.assert_allclose(diagnostics.rhat(x), expected, rtol=RTOL)


def test_draws_with_a_bool_beside_numbers_are_a_type_error_as_a_bool_array_is():
    # numpy made the True a 1.0 draw, with no complaint
    draws = [[0.1, 0.5, -0.3, 1.2], [0.2, True, 0.4, -0.8]]
    with pytest.raises(TypeError, match=r"`draws` is a list holding booleans \(e.g. True\)"):
        diagnostics.ess_bulk(draws)
    with pytest.raises(TypeError, match=r"`y` is a list holding booleans"):
        diagnostics.mmd([0.1, 0.2, 0.3], [0.1, np.bool_(False), 0.3])


@pytest.mark.parametrize("setting, named", [
    (dict(bandwidth="1"), "`bandwidth` must be a real number"),
    (dict(bandwidth=True), "`bandwidth` must be a real number"),
    (dict(offset="1", kernel="polynomial"), "`offset` must be a real number"),
    (dict(unbiased="no"), "`unbiased` must be True or False"),
])
def test_mmd_settings_of_the_wrong_type_are_refused(setting, named):
    # float() parsed "1" and read True as 1; "no" was true, the U-statistic
    x, y = np.zeros((5, 2)), np.ones((5, 2))
    with pytest.raises(ValueError, match=named):
        diagnostics.mmd(x, y, **setting)
