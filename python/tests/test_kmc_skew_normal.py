"""The KMC paper's ABC skew-normal posterior from Python: km.ABC on a numpy
simulator against the built-in Rust target, and the HABC baseline."""

import math
import os
import signal
import time

import numpy as np
import pytest

import kameleon as km
from kameleon import priors

pytestmark = pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")

SETUP = km.simulators.kmc_skew_normal_setup()
ALPHA = SETUP["alpha"]
D = ALPHA.size
# SN(θ, I, α) = θ + δ|z₀| + w, w ~ N(0, I − δδᵀ) drawn as u − βδ(δᵀu), u ~ N(0, I)
DELTA = ALPHA / math.sqrt(1.0 + ALPHA @ ALPHA)
BETA = 1.0 / (1.0 + math.sqrt(1.0 - DELTA @ DELTA))


def skew_normal_summaries(theta, n, rng):
    """``n`` summaries at θ, each the mean of ``n_samples`` draws of
    SN(θ, I, α): shape (n, d)."""
    m = SETUP["n_samples"]
    z0 = np.abs(rng.standard_normal((n, m, 1)))
    u = rng.standard_normal((n, m, D))
    draws = theta + DELTA * z0 + u - BETA * DELTA * (u @ DELTA)[..., None]
    return draws.mean(axis=1)


def test_the_setup_is_the_papers():
    assert D == 10 and (ALPHA == 10.0).all()
    assert SETUP["epsilon"] == 0.55 and SETUP["n_samples"] == 10 and SETUP["n_pseudo"] == 10
    assert SETUP["prior_variance"] == 25.0
    # one simulation at θ = 10·1: each coordinate of a mean of 10 draws has
    # sd below 1/√10, so 2 is over 6 sd from its expectation θ + √(2/π)δ
    assert np.abs(SETUP["observed"] - (10.0 + math.sqrt(2 / math.pi) * DELTA)).max() < 2.0


def test_the_numpy_simulator_has_the_skew_normal_moments():
    # the summary's mean is θ + √(2/π)δ and its covariance (I − (2/π)δδᵀ)/m;
    # 5 standard errors of the mean of 20 000 summaries per coordinate
    m = SETUP["n_samples"]
    s = skew_normal_summaries(np.zeros(D), 20_000, np.random.default_rng(0))
    expected_cov = (np.eye(D) - 2 / math.pi * np.outer(DELTA, DELTA)) / m
    se = np.sqrt(np.diag(expected_cov) / s.shape[0])
    assert (np.abs(s.mean(axis=0) - math.sqrt(2 / math.pi) * DELTA) < 5 * se).all()
    # sample covariance entries: sd about (σᵢσⱼ)/√n, so 0.004 ≈ 5 of them
    assert np.abs(np.cov(s.T) - expected_cov).max() < 0.004


def test_python_abc_agrees_with_the_builtin_target():
    """Both runs target the same ε-posterior: km.ABC's kernel differs from
    the Rust target's only by its normalising constant. The random-walk
    sampler mixes best here (AM's ESS was below 10 in runs this long); the
    Rust run is long because it is cheap, so the comparison's Monte Carlo
    error is mostly the Python run's."""
    abc = km.ABC(skew_normal_summaries, SETUP["observed"], SETUP["epsilon"], SETUP["n_pseudo"], batched=True)
    prior = [priors.Normal(0.0, math.sqrt(SETUP["prior_variance"]))] * D
    x0 = SETUP["observed"] - math.sqrt(2 / math.pi) * DELTA
    common = dict(sampler=km.RandomWalk(), chains=4, progress=False)
    python = km.sample(abc, x0, prior=prior, draws=3000, tune=1000, seed=1, **common)
    rust = km.sample(km.targets.AbcSkewNormal(), x0, draws=20_000, tune=2000, seed=2, **common)
    a = python.posterior["x"].values
    b = rust.posterior["x"].values
    for j in range(D):
        ea, eb = km.diagnostics.ess(a[..., j]), km.diagnostics.ess(b[..., j])
        assert ea > 150 and eb > 1000, (j, ea, eb)
        va, vb = a[..., j].var(), b[..., j].var()
        # the difference of two independent means has standard error
        # √(va/ESSa + vb/ESSb); 4 of them: ~6e-5 false alarms per check
        se = math.sqrt(va / ea + vb / eb)
        assert abs(a[..., j].mean() - b[..., j].mean()) < 4 * se, (j, a[..., j].mean(), b[..., j].mean(), se)
        # the sample sd's relative standard error is ½√((κ − 1)/ESS), κ ≈ 3
        # for this near-Gaussian posterior: ½√(2/ESS) per run; 4 of the
        # combined error
        rel = 0.5 * math.sqrt(2 / ea + 2 / eb)
        assert abs(math.sqrt(va / vb) - 1) < 4 * rel, (j, math.sqrt(va), math.sqrt(vb), rel)



# ── HABC, the biased baseline ────────────────────────────────────────────


def test_habc_runs_on_the_builtin_simulator_and_says_it_is_biased():
    idata = km.HABC.kmc_paper().sample(SETUP["observed"], draws=30, tune=10, chains=2, seed=1)
    x = idata.posterior["x"].values
    assert x.shape == (2, 30, D) and np.isfinite(x).all()
    assert "biased" in idata.posterior.attrs["sampler"]
    assert idata.posterior.attrs["accepted_total"] == [40, 40]
    assert np.isfinite(idata.sample_stats["lp"].values).all()
    # the ABC posterior's mass is within a few units of the observation
    # (posterior sd about 0.6 per coordinate); a diverging chain would not be
    assert np.abs(x.mean(axis=(0, 1)) - SETUP["observed"]).max() < 3.0
    again = km.HABC.kmc_paper().sample(SETUP["observed"], draws=30, tune=10, chains=2, seed=1)
    np.testing.assert_array_equal(again.posterior["x"].values, x)


def gaussian_summary(theta, rng):
    return theta + rng.standard_normal(theta.shape)


def test_habc_on_a_python_simulator_lands_near_the_posterior():
    """s ~ N(θ, I): the synthetic likelihood is about N(s_obs; θ, (1 + ε²)I),
    so with the flat-ish prior N(0, 100² I) the posterior is about
    N(s_obs, τ²I), τ² = 1 + ε². HABC is biased, so, as in the Rust crate's
    test of the same model, the check allows 0.25τ of bias on top of 5
    Monte Carlo standard errors, and the sd must lie in [τ/2, 2τ]."""
    observed = np.array([1.0, -0.5])
    habc = km.HABC(
        gaussian_summary, observed, n_simulations=10, epsilon=0.5, prior_sd=100.0,
        step_size=(0.2, 0.4), steps=5, friction=0.5, perturbation=0.5,
    )
    idata = habc.sample([-3.0, 3.0], draws=600, tune=100, chains=1, seed=11, parameter_names=["a", "b"])
    tau = math.sqrt(1 + 0.5**2)
    for j, name in enumerate(["a", "b"]):
        x = idata.posterior[name].values
        se = x.std() / math.sqrt(km.diagnostics.ess(x))
        assert abs(x.mean() - observed[j]) < 5 * se + 0.25 * tau, (name, x.mean(), se)
        assert 0.5 * tau < x.std() < 2 * tau, (name, x.std())


@pytest.mark.parametrize("builtin", [True, False])
def test_habc_shows_progress_by_default_and_not_when_asked(capsys, builtin):
    """One bar per chain, on by default as in km.sample, for the built-in
    simulator (run without the GIL) and a Python one; progress=False writes
    nothing, and the bars do not change the chains."""
    if builtin:
        habc, x0 = km.HABC.kmc_paper(), SETUP["observed"]
    else:
        habc, x0 = km.HABC(gaussian_summary, [1.0, -0.5], steps=3), [0.0, 0.0]
    run = dict(draws=6, tune=2, thin=2, chains=2, seed=4)
    capsys.readouterr()
    quiet = habc.sample(x0, progress=False, **run)
    out, err = capsys.readouterr()
    assert (out, err) == ("", "")
    shown = habc.sample(x0, **run)
    err = capsys.readouterr().err
    # each chain takes tune + draws × thin = 14 steps
    assert "chain 0" in err and "chain 1" in err and err.count("14/14") >= 2, err
    np.testing.assert_array_equal(shown.posterior["x"].values, quiet.posterior["x"].values)


def test_habc_stops_on_ctrl_c(sigint_raises):
    """SIGINT (sent by the simulator at its 100th call, from the worker
    thread that runs the chains) stops a run of a million steps within
    seconds with KeyboardInterrupt."""
    calls = []

    def interrupting(theta, rng):
        calls.append(1)
        if len(calls) == 100:
            os.kill(os.getpid(), signal.SIGINT)
        return gaussian_summary(theta, rng)

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        km.HABC(interrupting, [0.0], steps=3).sample([0.0], draws=10**6, tune=0, chains=1, seed=0, progress=False)
    assert time.monotonic() - started < 10.0
    assert len(calls) < 10**5


def test_habc_batched_simulator_is_called_one_simulation_at_a_time():
    calls = []

    def batched(theta, n, rng):
        calls.append(n)
        return theta + rng.standard_normal((n, theta.size))

    km.HABC(batched, [0.0], batched=True, steps=2).sample([0.0], draws=3, tune=0, chains=1, seed=0)
    assert set(calls) == {1}


@pytest.mark.parametrize(
    "simulator, error, match",
    [
        (lambda theta, rng: np.zeros(3), ValueError, "shape"),
        (lambda theta, rng: "summaries", TypeError, "expected a real-valued float array"),
        (lambda theta, rng: 1 / 0, ZeroDivisionError, "division"),
    ],
)
def test_habc_simulator_errors_stop_the_run(simulator, error, match):
    habc = km.HABC(simulator, [0.0, 0.0], steps=3)
    with pytest.raises(error, match=match) as info:
        habc.sample([0.0, 0.0], draws=50, tune=0, chains=2, seed=0)
    if error is ZeroDivisionError:  # the simulator's own exception says where
        assert any("raised by the simulator at theta" in note for note in info.value.__notes__)


def test_habc_nan_summaries_reject_the_trajectory():
    def sometimes_nan(theta, rng):
        s = theta + rng.standard_normal(theta.shape)
        return s if theta[0] < 0.5 else np.full(theta.shape, np.nan)

    habc = km.HABC(sometimes_nan, [0.0], prior_sd=10.0, step_size=(0.2, 0.4), steps=5, friction=0.5, perturbation=0.5)
    idata = habc.sample([0.0], draws=200, tune=0, chains=1, seed=3)
    assert idata.posterior.attrs["rejected_non_finite"][0] > 0
    # a kept trajectory evaluated the simulator at θ ± 0.5 (the SPSA
    # perturbation) at each of its points, all below 0.5: it ends at θ < 0
    # (or the chain is still at its start, 0)
    assert (idata.posterior["x"].values <= 0.0).all()


def test_habc_refuses_bad_settings():
    with pytest.raises(ValueError, match="observed"):
        km.HABC(None, [1.0])
    with pytest.raises(ValueError, match="n_simulations"):
        km.HABC(gaussian_summary, [1.0], n_simulations=1)
    with pytest.raises(ValueError, match="step_size"):
        km.HABC(gaussian_summary, [1.0], step_size=(0.2, 0.1))
    with pytest.raises(ValueError, match="friction"):
        km.HABC(gaussian_summary, [1.0], friction=-1.0)
    with pytest.raises(ValueError, match="epsilon"):
        km.HABC(gaussian_summary, [1.0], epsilon=0.0)
    with pytest.raises(ValueError, match="10 parameters"):
        km.HABC.kmc_paper().sample([0.0, 0.0], draws=1, tune=0, chains=1)
    with pytest.raises(ValueError, match="x0"):
        km.HABC(gaussian_summary, [1.0]).sample(np.zeros((3, 1)), chains=2)
