"""The Rust diagnostics agree with ArviZ's estimators; load_results reads xtask chains."""

import warnings

import arviz as az
import numpy as np
import pytest

import kameleon as km
from kameleon import diagnostics


def ar1_chains(chains=4, n=2000, rho=0.7, seed=0):
    rng = np.random.default_rng(seed)
    x = np.empty((chains, n))
    x[:, 0] = rng.standard_normal(chains)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(chains)
    return x


# The same estimators on the same draws (rank normalisation, splitting, the
# quantiles of the tail ESS and every step of the autocorrelation sum), so
# only summation order differs: measured below 1e-13 relative. 1e-10
# catches any change of method, which moves these values by 1e-4 or more.
RTOL_RHAT = 1e-10
RTOL_ESS = 1e-10


@pytest.mark.parametrize("seed", [0, 1])
def test_ess_and_rhat_agree_with_arviz(seed):
    x = ar1_chains(seed=seed)
    np.testing.assert_allclose(diagnostics.ess_bulk(x), az.ess(x, method="bulk"), rtol=RTOL_ESS)
    # the 5% and 95% quantiles, named: ArviZ 1.3's array path has no default
    np.testing.assert_allclose(
        diagnostics.ess_tail(x), az.ess(x, method="tail", prob=(0.05, 0.95)), rtol=RTOL_ESS
    )
    # ArviZ's "mean" ESS is Geyer's estimator on the split chains;
    # diagnostics.ess does not split, so it is given the halves
    half = x.shape[1] // 2
    split = np.concatenate([x[:, :half], x[:, half:]])
    np.testing.assert_allclose(diagnostics.ess(split), az.ess(x, method="mean"), rtol=RTOL_ESS)
    np.testing.assert_allclose(diagnostics.rhat(x), az.rhat(x, method="rank"), rtol=RTOL_RHAT)


def test_three_dimensional_draws_give_one_value_per_dimension():
    x = np.stack([ar1_chains(seed=2), ar1_chains(seed=3)], axis=-1)
    ess = diagnostics.ess_bulk(x)
    assert ess.shape == (2,)
    np.testing.assert_allclose(ess[1], diagnostics.ess_bulk(x[:, :, 1]))


def test_mmd_is_zero_for_equal_samples_and_grows_with_a_shift():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 2))
    assert diagnostics.mmd(x, x) == pytest.approx(0.0, abs=1e-12)
    near = diagnostics.mmd(x, rng.standard_normal((200, 2)))
    far = diagnostics.mmd(x, rng.standard_normal((200, 2)) + 2.0)
    assert far > 10 * near
    # the V-statistic with the Gaussian kernel, computed directly
    y = x[:50] + 1.0
    k = lambda a, b: np.exp(-((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / 2.0)
    direct = k(x[:50], x[:50]).mean() + k(y, y).mean() - 2 * k(x[:50], y).mean()
    assert diagnostics.mmd(x[:50], y) == pytest.approx(direct, rel=1e-10)
    with pytest.raises(ValueError, match="kernel"):
        diagnostics.mmd(x, x, kernel="cosine")


def test_load_results_reads_the_cells_without_a_setting(tmp_path):
    # xtask writes a cell without a setting as chains/<target>/<sampler>/<chain>.npy,
    # beside the setting directories of the same sampler
    sampler = tmp_path / "chains" / "banana" / "AM-LS"
    (sampler / "code").mkdir(parents=True)
    for k in range(2):
        np.save(sampler / f"{k}.npy", np.full((4, 3), float(k)))
    np.save(sampler / "code" / "0.npy", np.full((5, 3), 7.0))
    results = km.load_results(tmp_path)
    assert sorted(results) == [("banana", "AM-LS", ""), ("banana", "AM-LS", "code")]
    x = results[("banana", "AM-LS", "")].posterior["x"].values
    assert x.shape == (2, 4, 3)
    np.testing.assert_array_equal(x[1], 1.0)
    assert results[("banana", "AM-LS", "code")].posterior["x"].shape == (1, 5, 3)


def test_load_results_reads_xtask_chains(tmp_path):
    base = tmp_path / "chains" / "banana" / "KAMH" / "n=1000"
    base.mkdir(parents=True)
    rng = np.random.default_rng(0)
    chains = [rng.standard_normal((n, 3)) for n in (100, 90, 100)]
    for k, c in enumerate(chains):
        np.save(base / f"{k}.npy", c.astype("<f8"))
    with pytest.warns(UserWarning, match="truncated to 90"):
        results = km.load_results(tmp_path)
    idata = results[("banana", "KAMH", "n=1000")]
    x = idata.posterior["x"].values
    assert x.shape == (3, 90, 3)
    np.testing.assert_array_equal(x[2], chains[2][:90])
