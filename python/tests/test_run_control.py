"""Run control: extend a finished run, stop at ESS/R-hat targets, at a
wall-time or an evaluation budget."""

import time
import warnings

import numpy as np
import pytest

import kameleon as km
from kameleon import diagnostics


def posterior(idata):
    return idata.posterior["x"].values


def gaussian(x):
    return -0.5 * (x[0] * x[0] + 4.0 * x[1] * x[1])


X0 = np.array([0.5, -0.5])


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        yield


def assert_same_chains(a, b):
    np.testing.assert_array_equal(posterior(a), posterior(b))
    np.testing.assert_array_equal(a.sample_stats["lp"].values, b.sample_stats["lp"].values)
    np.testing.assert_array_equal(a.sample_stats["accepted"].values, b.sample_stats["accepted"].values)


@pytest.mark.parametrize("sampler", [km.AM(), km.KAMH(subsample_size=40)], ids=["AM", "KAMH"])
def test_extend_equals_a_longer_run(tmp_path, sampler):
    kwargs = dict(sampler=sampler, tune=100, chains=2, seed=4, progress=False)
    longer = km.sample(gaussian, X0, draws=250, **kwargs)
    first = km.sample(gaussian, X0, draws=150, checkpoint=tmp_path / "run.ckpt", **kwargs)
    assert first.posterior.attrs["checkpoint"] == str(tmp_path / "run.ckpt")
    extended = km.extend(first, gaussian, draws=100, progress=False)
    assert_same_chains(extended, longer)
    assert extended.posterior.attrs["draws"] == 250
    # again, from the file
    again = km.extend(tmp_path / "run.ckpt", gaussian, draws=50, progress=False)
    assert_same_chains(again, km.sample(gaussian, X0, draws=300, **kwargs))


def test_extend_with_process_workers_equals_a_longer_run(tmp_path):
    kwargs = dict(sampler=km.AM(), tune=100, chains=2, seed=4, progress=False)
    longer = km.sample(gaussian, X0, draws=250, cores=1, **kwargs)
    first = km.sample(gaussian, X0, draws=150, checkpoint=tmp_path / "run.ckpt", cores=2, parallel="process",
                      **kwargs)
    extended = km.extend(first, gaussian, draws=100, cores=2, parallel="process", progress=False)
    assert_same_chains(extended, longer)


def test_extend_needs_a_checkpoint():
    idata = km.sample(gaussian, X0, sampler=km.AM(), draws=20, tune=10, chains=2, seed=1, progress=False)
    with pytest.raises(ValueError, match="continues a run from its checkpoint"):
        km.extend(idata, gaussian, draws=10)


def worst(diagnostic, idata):
    x = posterior(idata)
    return [diagnostic(x[:, :, j]) for j in range(x.shape[2])]


def test_target_ess_and_rhat_stop_at_the_first_round_that_meets_them():
    kwargs = dict(sampler=km.AM(), tune=200, chains=4, seed=8, progress=False)
    idata = km.sample(gaussian, X0, draws=6400, target_ess=400, target_rhat=1.01, **kwargs)
    attrs = idata.posterior.attrs
    n = posterior(idata).shape[1]
    assert attrs["stopped_by"] == "target" and attrs["draws"] == n
    assert n in (100, 200, 400, 800, 1600, 3200, 6400) and n > 100
    assert min(worst(diagnostics.ess_bulk, idata)) >= 400 and max(worst(diagnostics.rhat, idata)) <= 1.01
    # the draws are those of a run of that length; the round before fell short
    assert_same_chains(idata, km.sample(gaussian, X0, draws=n, **kwargs))
    before = km.sample(gaussian, X0, draws=n // 2, **kwargs)
    assert min(worst(diagnostics.ess_bulk, before)) < 400 or max(worst(diagnostics.rhat, before)) > 1.01


def test_targets_not_met_run_to_draws():
    idata = km.sample(gaussian, X0, sampler=km.AM(), draws=300, tune=50, chains=2, seed=8, progress=False,
                      target_ess=10**6)
    assert idata.posterior.attrs["stopped_by"] == "draws" and posterior(idata).shape[1] == 300


def test_an_evaluation_budget_cuts_the_draws():
    calls = []

    def counted(x):
        calls.append(1)
        return gaussian(x)

    x0 = np.tile(X0, (2, 1))  # given starts: no calls to check jittered ones
    idata = km.sample(counted, x0, sampler=km.RandomWalk(whiten=False), draws=1000, tune=50, chains=2, thin=2, seed=3,
                      progress=False, parallel="thread", max_evaluations=503)
    # 503 // 2 - 1 = 250 steps per chain: 50 tuning, then 100 draws of 2 steps
    assert idata.posterior.attrs["stopped_by"] == "max_evaluations"
    assert posterior(idata).shape[1] == 100
    assert len(calls) == sum(idata.posterior.attrs["evaluations"]) == 2 * 251 <= 503
    with pytest.raises(ValueError, match="does not cover one draw per chain"):
        km.sample(gaussian, X0, sampler=km.RandomWalk(whiten=False), tune=50, chains=2, max_evaluations=100, progress=False)


@pytest.mark.parametrize("parallel", ["thread", "process"])
def test_a_wall_time_budget_stops_the_run_with_the_draws_so_far(parallel):
    def slow(x):
        time.sleep(0.001)
        return gaussian(x)

    if parallel == "process":  # start the pool outside the timed run
        km.sample(gaussian, X0, sampler=km.AM(), draws=10, tune=0, chains=2, cores=2, parallel="process",
                  progress=False)
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "interrupted" warning
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(slow, X0, sampler=km.AM(), draws=10**5, tune=0, chains=2, cores=2, parallel=parallel,
                          seed=2, progress=False, max_seconds=0.8)
    took = time.monotonic() - start
    assert idata.posterior.attrs["stopped_by"] == "max_seconds"
    assert 0 < posterior(idata).shape[1] < 10**5
    assert took < 4.0


def test_stop_rules_reject_bad_values():
    for bad in (dict(target_ess=0), dict(target_rhat=1.0), dict(max_seconds=float("nan")), dict(target_ess=True)):
        with pytest.raises(ValueError):
            km.sample(gaussian, X0, progress=False, **bad)
    with pytest.raises(ValueError, match="needs `chains` >= 2"):
        km.sample(gaussian, X0, chains=1, target_rhat=1.01, progress=False)
