"""sample_ensemble(): agreement with emcee, output format, reproducibility, errors.

Standard errors. The walkers interact, so they are not independent chains.
The ensemble is one Markov chain on (R^d)^W; the ensemble average
f_t = (1/W) sum_k f(X_{t,k}) after sweep t is a function of its state, so
after burn-in (f_t) is a stationary series with mean E_pi f whose time
average obeys the Markov chain CLT, with a variance that includes the
correlation between walkers (within a sweep) and between sweeps. We estimate
it by batch means: B = 50 batches of consecutive sweeps, each much longer
than the autocorrelation time, have nearly iid normal means, so
se = sd(batch means) / sqrt(B). Two independent runs (ours and emcee's)
estimate the same E_pi f (or the same stationary acceptance probability), so
their difference has standard error sqrt(se_ours^2 + se_emcee^2); we require
|difference| <= 5 of those (about 1e-5 per check for a t with 49 degrees of
freedom, and the runs are seeded, so the test is deterministic).
"""

import math
import warnings

import emcee
import numpy as np
import pytest

import kameleon as km
from kameleon import targets

from conftest import banana_log_density

BATCHES = 50
Z_TOL = 5.0

MEAN = np.array([1.0, -1.0, 0.5])
COV = np.array([[2.0, 1.2, 0.3], [1.2, 1.5, -0.4], [0.3, -0.4, 0.8]])
PREC = np.linalg.inv(COV)


def gaussian_logp(x):
    d = x - MEAN
    return -0.5 * float(d @ PREC @ d)


def batch_mean_and_se(series):
    """The mean of a per-sweep series and its batch-means standard error."""
    n = len(series) // BATCHES * BATCHES
    means = np.asarray(series[:n]).reshape(BATCHES, -1).mean(axis=1)
    return means.mean(), means.std(ddof=1) / math.sqrt(BATCHES)


def summaries(chain, accepted):
    """{name: (estimate, se)} from chain (sweeps, walkers, d) and accepted
    (sweeps, walkers): each coordinate's mean and variance (the average of
    (x_i - mu_i)^2 with the exact mean) and the acceptance fraction, each
    from its ensemble-average series."""
    out = {}
    for i in range(chain.shape[2]):
        out[f"mean {i}"] = batch_mean_and_se(chain[:, :, i].mean(axis=1))
        out[f"var {i}"] = batch_mean_and_se(((chain[:, :, i] - MEAN[i]) ** 2).mean(axis=1))
    out["acceptance"] = batch_mean_and_se(accepted.mean(axis=1))
    return out


def ours_as_sweeps(idata):
    chain = np.swapaxes(idata.posterior["x"].values, 0, 1)
    accepted = np.swapaxes(idata.sample_stats["accepted"].values, 0, 1)
    return chain, accepted


def test_moments_and_acceptance_agree_with_emcee():
    walkers, sweeps, tune, a = 12, 20_000, 1_000, 2.0
    ours = km.sample_ensemble(
        gaussian_logp, MEAN, walkers=walkers, draws=sweeps, tune=tune, a=a, seed=2024
    )
    chain, accepted = ours_as_sweeps(ours)

    rng = np.random.default_rng(2024)
    p0 = MEAN + 1e-3 * rng.standard_normal((walkers, 3))
    sampler = emcee.EnsembleSampler(walkers, 3, gaussian_logp, moves=emcee.moves.StretchMove(a=a))
    sampler.random_state = np.random.RandomState(2024).get_state()
    sampler.run_mcmc(p0, tune + sweeps, progress=False)
    # one row before the kept ones, so every kept sweep's acceptance is seen:
    # a walker moved iff its position changed (a continuous target repeats a
    # proposal with probability 0)
    theirs = sampler.get_chain(discard=tune - 1)
    their_accepted = np.any(theirs[1:] != theirs[:-1], axis=2)
    theirs = theirs[1:]
    assert theirs.shape == chain.shape

    ours_stats = summaries(chain, accepted)
    their_stats = summaries(theirs, their_accepted)
    exact = {**{f"mean {i}": MEAN[i] for i in range(3)}, **{f"var {i}": COV[i, i] for i in range(3)}}
    worst = (0.0, "")
    for name, (value, se) in ours_stats.items():
        other, other_se = their_stats[name]
        z = abs(value - other) / math.sqrt(se**2 + other_se**2)
        print(f"{name}: ours {value:.4f} ± {se:.4f}, emcee {other:.4f} ± {other_se:.4f}, z {z:.2f}")
        assert z <= Z_TOL, f"{name}: ours {value} ± {se}, emcee {other} ± {other_se}"
        worst = max(worst, (z, name))
        if name in exact:
            z_exact = abs(value - exact[name]) / se
            assert z_exact <= Z_TOL, f"{name}: ours {value} ± {se}, exact {exact[name]}"
    print(f"worst z against emcee: {worst[0]:.2f} ({worst[1]})")
    # the per-walker fractions over all sweeps agree with the kept flags' story
    fractions = np.array(ours.posterior.attrs["accepted_total"]) / (tune + sweeps)
    assert abs(fractions.mean() - ours_stats["acceptance"][0]) < 0.02


def test_output_format_and_attributes():
    idata = km.sample_ensemble(gaussian_logp, MEAN, walkers=10, draws=50, tune=20, a=2.5, seed=5)
    assert idata.posterior["x"].shape == (10, 50, 3)
    assert idata.sample_stats["lp"].shape == (10, 50)
    assert idata.sample_stats["accepted"].dtype == bool
    attrs = idata.posterior.attrs
    assert attrs["inference_library"] == "kameleon"
    assert attrs["seed"] == "5"
    assert attrs["a"] == 2.5
    assert attrs["walkers"] == 10
    assert attrs["evaluations"] == 10 * (50 + 20 + 1)
    # the stored log densities are the target's at the stored states
    x = idata.posterior["x"].values
    lp = idata.sample_stats["lp"].values
    np.testing.assert_allclose(lp[3, 7], gaussian_logp(x[3, 7]), rtol=1e-12)
    named = km.sample_ensemble(gaussian_logp, MEAN, walkers=10, draws=20, tune=0, seed=5,
                               parameter_names=["a", "b", "c"])
    assert set(named.posterior.data_vars) == {"a", "b", "c"}


def test_default_walkers_and_explicit_start():
    idata = km.sample_ensemble(gaussian_logp, MEAN, draws=40, tune=0, seed=1)
    assert idata.posterior["x"].shape[0] == 32  # max(2 d, 32)
    start = MEAN + np.random.default_rng(0).standard_normal((7, 3))
    idata = km.sample_ensemble(gaussian_logp, start, draws=10, tune=0, seed=1)
    assert idata.posterior["x"].shape[0] == 7


def test_same_seed_same_result_and_python_equals_rust():
    kwargs = dict(walkers=8, draws=200, tune=50, seed=77)
    f = banana_log_density(0.1, 4.0)
    first = km.sample_ensemble(f, [0.1, 0.2, 0.3], **kwargs)
    second = km.sample_ensemble(f, [0.1, 0.2, 0.3], **kwargs)
    np.testing.assert_array_equal(first.posterior["x"].values, second.posterior["x"].values)
    np.testing.assert_array_equal(first.sample_stats["lp"].values, second.sample_stats["lp"].values)
    # the built-in banana does the same arithmetic: the same chain bit for bit
    rust = km.sample_ensemble(targets.Banana(3, 0.1, 4.0), [0.1, 0.2, 0.3], **kwargs)
    np.testing.assert_array_equal(first.posterior["x"].values, rust.posterior["x"].values)
    other = km.sample_ensemble(f, [0.1, 0.2, 0.3], **{**kwargs, "seed": 78})
    assert not np.array_equal(first.posterior["x"].values, other.posterior["x"].values)


def test_an_exception_in_the_density_propagates():
    calls = []

    def broken_density(x):
        calls.append(1)
        if len(calls) > 100:
            raise ZeroDivisionError("model blew up")
        return -0.5 * float(x @ x)

    with pytest.raises(ZeroDivisionError, match="model blew up") as info:
        km.sample_ensemble(broken_density, [0.0, 0.0], walkers=8, draws=1000, tune=0, seed=1)
    assert any(entry.name == "broken_density" for entry in info.traceback)
    assert len(calls) == 101  # the run stops at the first error


def test_pseudo_marginal_estimates_are_not_recomputed():
    calls = []

    def noisy(x, rng):
        calls.append(1)
        return -0.5 * float(x @ x) + 0.3 * rng.standard_normal() - 0.045

    idata = km.sample_ensemble(km.PseudoMarginal(noisy), [0.0, 0.0], walkers=6, draws=100, tune=10, seed=3)
    assert len(calls) == 6 * (100 + 10 + 1)
    lp = idata.sample_stats["lp"].values
    accepted = idata.sample_stats["accepted"].values
    # a walker whose move was rejected keeps its stored estimate
    kept = ~accepted[:, 1:]
    np.testing.assert_array_equal(lp[:, 1:][kept], lp[:, :-1][kept])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(a=1.0), "`a`"),
        (dict(a=float("nan")), "`a`"),
        (dict(walkers=1), "`walkers`"),
        (dict(walkers=3), "walkers cannot span"),
        (dict(draws=-1), "`draws`"),
        (dict(seed=-1), "`seed`"),
    ],
)
def test_invalid_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        km.sample_ensemble(gaussian_logp, MEAN, **{"draws": 5, "tune": 0, **kwargs})


def test_bad_starts_raise_value_error():
    with pytest.raises(ValueError, match="rows"):
        km.sample_ensemble(gaussian_logp, np.zeros((5, 3)), walkers=6, draws=5)
    with pytest.raises(ValueError, match="affine subspace"):
        km.sample_ensemble(gaussian_logp, np.tile(MEAN, (8, 1)), draws=5)
    with pytest.raises(ValueError, match="support"):
        km.sample_ensemble(lambda x: -math.inf, MEAN, walkers=8, draws=5)


def test_fewer_than_two_d_walkers_warn_and_enough_do_not():
    """d + 1 … 2d − 1 walkers span the space (fewer are refused) but mix
    poorly; the run says so, with what to use, in a warning and its attrs."""
    with pytest.warns(km.SamplingWarning, match=r"5 walkers for 3 parameters: with fewer than 2d = 6"):
        idata = km.sample_ensemble(gaussian_logp, MEAN, walkers=5, draws=20, tune=0, seed=1, progress=False)
    assert any("Use at least 6 walkers" in line for line in idata.posterior.attrs["warnings"])
    idata = km.sample_ensemble(gaussian_logp, MEAN, walkers=6, draws=20, tune=0, seed=1, progress=False)
    assert not any("walkers for" in line for line in idata.posterior.attrs["warnings"])


def test_a_short_run_of_many_walkers_gives_no_arviz_shape_warning():
    # ArviZ warns that arrays with more chains than draws were passed the
    # wrong way round, which read like a bug of ours in every short run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = km.sample_ensemble(lambda x: -0.5 * float(x @ x), np.zeros(2), draws=5, tune=5, seed=1,
                                   progress=False)
    assert idata.posterior["x"].shape == (32, 5, 2)
    assert not [w for w in caught if "More chains" in str(w.message)]
