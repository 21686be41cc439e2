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


def test_a_refused_extend_leaves_the_checkpoint_as_it_was(tmp_path):
    # the checkpoint was lengthened before the other arguments were checked,
    # so the next extend by 10 draws added 20
    kwargs = dict(sampler=km.AM(), tune=50, chains=2, seed=4, progress=False)
    path = tmp_path / "run.ckpt"
    km.sample(gaussian, X0, draws=40, checkpoint=path, **kwargs)
    for bad in (dict(cores=0), dict(parallel="gpu"), dict(checkpoint_every=0), dict(executor="pool"),
                dict(vectorize=True, log_density=km.targets.Banana(2)), dict(prior=[km.priors.Normal(0, 1)])):
        density = bad.pop("log_density", gaussian)
        with pytest.raises((ValueError, TypeError)):
            km.extend(path, density, draws=10, progress=False, **bad)
    extended = km.extend(path, gaussian, draws=10, progress=False)
    assert_same_chains(extended, km.sample(gaussian, X0, draws=50, **kwargs))


def test_extend_of_an_output_keeps_its_parameter_names(tmp_path):
    # the names came back as one variable x unless given again
    kwargs = dict(sampler=km.AM(), tune=20, chains=2, seed=4, progress=False)
    first = km.sample(gaussian, X0, draws=30, checkpoint=tmp_path / "run.ckpt", parameter_names=["a", "b"],
                      **kwargs)
    assert list(first.posterior.attrs["parameter_names"]) == ["a", "b"]
    extended = km.extend(first, gaussian, draws=10, progress=False)
    assert list(extended.posterior.data_vars) == ["a", "b"]
    np.testing.assert_array_equal(extended.posterior["b"].values[:, :30], first.posterior["b"].values)
    # given names win; a path has no names to keep
    renamed = km.extend(extended, gaussian, draws=0, parameter_names=["u", "v"], progress=False)
    assert list(renamed.posterior.data_vars) == ["u", "v"]
    assert list(km.extend(tmp_path / "run.ckpt", gaussian, draws=0, progress=False).posterior.data_vars) == ["x"]


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
    # 100 // 2 = 50 per chain cannot cover the start and 51 steps: refused before any call
    calls.clear()
    with pytest.raises(ValueError, match="does not cover the start and the 51 steps to the first draw"):
        km.sample(counted, x0, sampler=km.RandomWalk(whiten=False), tune=50, chains=2, max_evaluations=100,
                  progress=False, parallel="thread")
    assert calls == []
    with pytest.raises(ValueError, match="less than one evaluation each"):
        km.sample(gaussian, X0, chains=4, max_evaluations=3, progress=False)


# ── an exact evaluation budget for the whitened defaults ────────────────
#
# KAMH() estimates the curvature of log π at each chain's start (a
# finite-difference Hessian: about 2d² + 4d evaluations at d = 10), then
# makes one evaluation per step on a Gaussian (every draw is finite).

D = 10
SD2 = np.arange(1.0, D + 1.0)  # variances 1 … 10


def gaussian10(x):
    return -0.5 * float(np.sum(x * x / SD2))


def starts(chains):
    return np.random.default_rng(12).normal(size=(chains, D))


WHITENED = dict(sampler=km.KAMH(), tune=300, seed=7, progress=False)


def test_an_evaluation_budget_is_exact_for_a_whitened_sampler():
    calls = []

    def counted(x):
        calls.append(1)
        return gaussian10(x)

    # given starts and threads: every call of the density is the sampler's
    cut = km.sample(counted, starts(4), draws=2000, chains=4, parallel="thread", max_evaluations=5000, **WHITENED)
    attrs = cut.posterior.attrs
    assert attrs["stopped_by"] == "max_evaluations"
    assert len(calls) == sum(attrs["evaluations"]) <= 5000
    # one evaluation per step: each chain stops with its share 5000 // 4 spent
    assert attrs["evaluations"] == [1250] * 4
    whole = km.sample(gaussian10, starts(4), draws=2000, chains=4, parallel="thread", **WHITENED)
    assert whole.posterior.attrs["stopped_by"] == "draws"
    # chain k's start cost (its curvature) is what it spent beyond one per
    # step in the whole run; its share then leaves 1250 - cost - tune draws
    cost = np.array(whole.posterior.attrs["evaluations"]) - (300 + 2000)
    assert (cost > 2 * D * D).all()
    n = posterior(cut).shape[1]
    assert n == (1250 - cost - 300).min() > 0
    # the draws are the first n of the run without a budget
    np.testing.assert_array_equal(posterior(cut), posterior(whole)[:, :n])
    for stat in ("lp", "accepted"):
        np.testing.assert_array_equal(cut.sample_stats[stat].values, whole.sample_stats[stat].values[:, :n])


def test_an_evaluation_budget_does_not_depend_on_where_the_chains_run():
    import concurrent.futures
    import multiprocessing

    kwargs = dict(draws=2000, chains=4, max_evaluations=5000, **WHITENED)
    threads = km.sample(gaussian10, starts(4), cores=1, parallel="thread", **kwargs)
    processes = km.sample(gaussian10, starts(4), cores=2, parallel="process", **kwargs)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        tasks = km.sample(gaussian10, starts(4), executor=pool, **kwargs)
    # in lockstep, one call for the running chains' proposals
    lockstep = km.sample(lambda x: -0.5 * (x * x / SD2).sum(axis=1), starts(4), vectorize=True, **kwargs)
    for other in (processes, tasks, lockstep):
        assert_same_chains(other, threads)
        assert other.posterior.attrs["evaluations"] == threads.posterior.attrs["evaluations"] == [1250] * 4
        assert other.posterior.attrs["stopped_by"] == "max_evaluations"


def test_a_budget_cut_run_resumes_to_the_same_cut_and_extends_past_it(tmp_path):
    kwargs = dict(chains=2, **WHITENED)
    path = tmp_path / "run.ckpt"
    # process workers write one part per chain, gathered at the end
    cut = km.sample(gaussian10, starts(2), draws=1000, max_evaluations=2000, checkpoint=path, cores=2,
                    parallel="process", **kwargs)
    assert cut.posterior.attrs["stopped_by"] == "max_evaluations"
    # the budget is saved with the chains: resumed, the run stops where it did
    resumed = km.resume(path, gaussian10, progress=False, parallel="thread")
    assert_same_chains(resumed, cut)
    assert resumed.posterior.attrs["evaluations"] == cut.posterior.attrs["evaluations"] == [1000, 1000]
    assert resumed.posterior.attrs["stopped_by"] == "max_evaluations"
    # extend lifts it: the run goes on as the run without a budget
    extended = km.extend(path, gaussian10, draws=100, progress=False, parallel="thread")
    assert extended.posterior.attrs["stopped_by"] == "draws"
    assert_same_chains(extended, km.sample(gaussian10, starts(2), draws=1100, parallel="thread", **kwargs))


def test_rounds_toward_targets_keep_the_budget():
    kwargs = dict(draws=2000, chains=4, parallel="thread", max_evaluations=5000, **WHITENED)
    cut = km.sample(gaussian10, starts(4), **kwargs)
    # the targets are out of reach: the rounds go on until the budget cuts them
    rounds = km.sample(gaussian10, starts(4), target_ess=10**6, **kwargs)
    assert rounds.posterior.attrs["stopped_by"] == "max_evaluations"
    assert_same_chains(rounds, cut)
    assert rounds.posterior.attrs["evaluations"] == cut.posterior.attrs["evaluations"]


def test_a_budget_too_small_for_the_curvature_is_an_error_within_it():
    calls = []

    def counted(x):
        calls.append(1)
        return gaussian10(x)

    # 200 // 2 = 100 per chain; 51 set aside for the steps to the first
    # draw leave 49 for chain 0's start, whose curvature needs about 240
    with pytest.raises(ValueError, match=r"chain 0: the evaluation limit of 100 per chain leaves 49 evaluations "
                                         r"for the start.*raise it"):
        km.sample(counted, starts(2), sampler=km.KAMH(), tune=50, chains=2, seed=1, max_evaluations=200,
                  progress=False, parallel="thread")
    # chain 1 never started
    assert len(calls) == 49
    # the same budget without whitening starts (one evaluation) and runs
    idata = km.sample(gaussian10, starts(2), sampler=km.KAMH(whiten=False), tune=50, chains=2, seed=1,
                      max_evaluations=200, progress=False, parallel="thread")
    assert idata.posterior.attrs["evaluations"] == [100, 100]
    assert posterior(idata).shape[1] == 100 - 1 - 50


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


def test_a_wall_time_budget_advances_every_chain_when_chains_outnumber_threads():
    # on fewer threads than chains the chains take turns of 0.1 s: before,
    # the first chains ran to the budget and the others never started, so
    # the output, cut to the shortest chain, had no draws
    def slow(x):
        time.sleep(0.001)
        return gaussian(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(slow, X0, sampler=km.AM(), draws=10**5, tune=0, chains=3, cores=1, parallel="thread",
                          seed=2, progress=False, max_seconds=0.6)
    assert idata.posterior.attrs["stopped_by"] == "max_seconds"
    # ~0.6 s at ≥ 1 ms a step: at most ~200 steps a chain, of which the
    # shortest chain lags by at most one turn (≤ 100 steps)
    assert 10 < posterior(idata).shape[1] < 300


def test_stop_rules_reject_bad_values():
    for bad in (dict(target_ess=0), dict(target_rhat=1.0), dict(max_seconds=float("nan")), dict(target_ess=True)):
        with pytest.raises(ValueError):
            km.sample(gaussian, X0, progress=False, **bad)
    with pytest.raises(ValueError, match="needs `chains` >= 2"):
        km.sample(gaussian, X0, chains=1, target_rhat=1.01, progress=False)


# ── continuing with another density ───────────────────────────────────────


def wider(x):
    return -0.5 * (x[0] * x[0] + x[1] * x[1])


def test_resume_and_extend_refuse_another_log_density(tmp_path):
    # both continued the run on the new density without a word, so its
    # chains mixed two posteriors
    kwargs = dict(sampler=km.AM(), tune=50, chains=2, seed=4, progress=False)
    path = tmp_path / "run.ckpt"
    km.sample(gaussian, X0, draws=40, checkpoint=path, **kwargs)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="kameleon.extend: this log density is not the checkpointed run's"):
        km.extend(path, wider, draws=10, progress=False)
    with pytest.raises(ValueError, match="kameleon.resume: this log density is not the checkpointed run's"):
        km.resume(path, wider, progress=False)
    assert path.read_bytes() == before
    # the same density written as a vectorised function passes the check
    extended = km.extend(path, lambda xs: -0.5 * (xs[:, 0] ** 2 + 4.0 * xs[:, 1] ** 2), draws=10,
                         vectorize=True, progress=False)
    assert_same_chains(extended, km.sample(gaussian, X0, draws=50, **kwargs))


def test_resume_refuses_a_prior_run_continued_without_its_prior_or_with_another(tmp_path):
    def log_likelihood(x):
        return -0.5 * float(np.sum((np.log(x) - 1.0) ** 2))

    prior = [km.priors.LogNormal(0.0, 1.0), km.priors.Gamma(2.0, 1.0)]
    path = tmp_path / "run.ckpt"
    km.sample(log_likelihood, [1.0, 2.0], prior=prior, sampler=km.AM(), draws=30, tune=20, chains=2, seed=3,
              checkpoint=path, progress=False)
    for other in (None, [km.priors.LogNormal(0.0, 2.0), km.priors.Gamma(2.0, 1.0)]):
        with pytest.raises(ValueError, match="not the checkpointed run's"):
            km.resume(path, log_likelihood, prior=other, progress=False)
    resumed = km.resume(path, log_likelihood, prior=prior, progress=False)
    assert (resumed.posterior["x"].values > 0).all()


def noisy(sd):
    """A pseudo-marginal Gaussian whose estimate has noise of sd ``sd``."""
    return km.PseudoMarginal(lambda x, rng: gaussian(x) + sd * rng.standard_normal())


def shifted(theta, rng):
    return theta + rng.standard_normal(2)


# a noisy run's estimator and another one it must not be resumed with
OTHER_ESTIMATORS = {
    "pseudo-marginal": (lambda: noisy(0.1), lambda: noisy(0.2)),
    "abc-epsilon": (lambda: km.ABC(shifted, [0.0, 0.0], 0.5, 5), lambda: km.ABC(shifted, [0.0, 0.0], 0.6, 5)),
    "abc-observed": (lambda: km.ABC(shifted, [0.0, 0.0], 0.5, 5), lambda: km.ABC(shifted, [0.1, 0.0], 0.5, 5)),
    "abc-synthetic": (lambda: km.ABC(shifted, [0.0, 0.0], 0.5, 5),
                      lambda: km.SyntheticLikelihood(shifted, [0.0, 0.0], 5)),
    "synthetic-pseudo-marginal": (lambda: km.SyntheticLikelihood(shifted, [0.0, 0.0], 5), lambda: noisy(0.1)),
}


@pytest.mark.parametrize("pair", OTHER_ESTIMATORS)
def test_resume_and_extend_refuse_another_estimator_of_a_noisy_run(tmp_path, pair):
    # both continued the run with the other estimator without a word: the
    # checkpoint kept no record of the estimator
    run, other = OTHER_ESTIMATORS[pair]
    path = tmp_path / "run.ckpt"
    kwargs = dict(sampler=km.AM(), tune=10, chains=2, seed=2, progress=False)
    km.sample(run(), X0, draws=20, checkpoint=path, **kwargs)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"kameleon.resume: this log density is not the checkpointed run's: at "
                       r"a point of the run its estimate with numpy.random.default_rng\(0\) is"):
        km.resume(path, other(), progress=False)
    with pytest.raises(ValueError, match="kameleon.extend: this log density is not the checkpointed run's"):
        km.extend(path, other(), draws=10, progress=False)
    assert path.read_bytes() == before
    # the same estimator (a new object) passes, and recording it changed no
    # chain: the extended run is the longer run made without a checkpoint
    extended = km.extend(path, run(), draws=10, progress=False)
    longer = km.sample(run(), X0, draws=30, **kwargs)
    assert_same_chains(extended, longer)
    assert extended.posterior.attrs["evaluations"] == longer.posterior.attrs["evaluations"]


def test_a_run_of_a_noisy_built_in_target_refuses_another_one(tmp_path):
    from kameleon import targets

    path = tmp_path / "run.ckpt"
    x0 = np.zeros(9)
    km.sample(targets.Glass(n_importance=20), x0, sampler=km.AM(), draws=5, tune=0, chains=2, seed=2,
              checkpoint=path, progress=False)
    with pytest.raises(ValueError, match="this log density is not the checkpointed run's: at a point of the run"):
        km.resume(path, targets.Glass(n_importance=30), progress=False)
    km.resume(path, targets.Glass(n_importance=20), progress=False)


def test_a_noisy_run_with_bounds_refuses_other_bounds(tmp_path):
    path = tmp_path / "run.ckpt"
    estimator = km.ABC(shifted, [0.0, 0.0], 0.5, 5)
    km.sample(estimator, X0, bounds=[(-3.0, 3.0)] * 2, sampler=km.AM(), draws=10, tune=0, chains=2, seed=2,
              checkpoint=path, progress=False)
    with pytest.raises(ValueError, match="this log density is not the checkpointed run's: at a point of the run"):
        km.resume(path, estimator, bounds=[(-4.0, 3.0)] * 2, progress=False)
    km.resume(path, estimator, bounds=[(-3.0, 3.0)] * 2, progress=False)


def test_an_exact_run_and_a_noisy_run_refuse_each_others_kind_of_density(tmp_path):
    # a noisy run resumed with an exact density was refused only because
    # its stored estimate differed; an exact run resumed with a noisy one
    # went on silently
    kwargs = dict(sampler=km.AM(), draws=20, tune=10, chains=2, seed=2, progress=False)
    exact, estimated = tmp_path / "exact.ckpt", tmp_path / "noisy.ckpt"
    km.sample(gaussian, X0, checkpoint=exact, **kwargs)
    km.sample(noisy(0.1), X0, checkpoint=estimated, **kwargs)
    with pytest.raises(ValueError, match="kameleon.resume: this log density is not the checkpointed run's: the "
                       "run's log density was exact and this one is a noisy estimate"):
        km.resume(exact, noisy(0.1), progress=False)
    with pytest.raises(ValueError, match="kameleon.resume: this log density is not the checkpointed run's: the "
                       "run's log density was a noisy estimate and this one is exact"):
        km.resume(estimated, gaussian, progress=False)


def test_an_estimator_that_draws_from_elsewhere_than_its_rng_is_refused_on_resume(tmp_path):
    # resume needs the estimate at the recorded point to come back: one
    # drawn from numpy's global generator does not
    outside = km.PseudoMarginal(lambda x, rng: gaussian(x) + 0.1 * np.random.standard_normal())
    path = tmp_path / "run.ckpt"
    km.sample(outside, X0, sampler=km.AM(), draws=10, tune=0, chains=2, seed=2, checkpoint=path, progress=False)
    with pytest.raises(ValueError, match="must draw all its randomness from the `rng` it is given"):
        km.resume(path, outside, progress=False)


def test_a_noisy_run_on_worker_processes_records_its_estimator(tmp_path):
    kwargs = dict(sampler=km.AM(), tune=10, chains=2, cores=2, seed=2, progress=False)
    path = tmp_path / "run.ckpt"
    km.sample(noisy(0.1), X0, draws=20, checkpoint=path, parallel="process", **kwargs)
    with pytest.raises(ValueError, match="this log density is not the checkpointed run's: at a point of the run"):
        km.extend(path, noisy(0.2), draws=10, parallel="process", progress=False)
    extended = km.extend(path, noisy(0.1), draws=10, parallel="process", progress=False)
    assert_same_chains(extended, km.sample(noisy(0.1), X0, draws=30, parallel="thread", **kwargs))
    # the workers' parts, gathered, keep the record
    with pytest.raises(ValueError, match="this log density is not the checkpointed run's: at a point of the run"):
        km.resume(path, noisy(0.2), progress=False)


def test_resume_ensemble_refuses_another_log_density(tmp_path):
    path = tmp_path / "ensemble.ckpt"
    kwargs = dict(walkers=8, draws=20, tune=0, seed=1, progress=False)
    km.sample_ensemble(gaussian, X0, checkpoint=path, **kwargs)
    with pytest.raises(ValueError, match="kameleon.resume_ensemble: this log density is not the checkpointed run's"):
        km.resume_ensemble(path, wider, progress=False)
    resumed = km.resume_ensemble(path, lambda xs: -0.5 * (xs[:, 0] ** 2 + 4.0 * xs[:, 1] ** 2), vectorize=True,
                                 progress=False)
    np.testing.assert_array_equal(posterior(resumed), posterior(km.sample_ensemble(gaussian, X0, **kwargs)))


def test_resume_ensemble_refuses_another_estimator_of_a_noisy_run(tmp_path):
    path = tmp_path / "ensemble.ckpt"
    kwargs = dict(walkers=8, tune=0, seed=1, progress=False)
    km.sample_ensemble(noisy(0.1), X0, draws=20, checkpoint=path, **kwargs)
    with pytest.raises(ValueError, match="kameleon.resume_ensemble: this log density is not the checkpointed run's: "
                       "at a point of the run"):
        km.resume_ensemble(path, noisy(0.2), progress=False)
    with pytest.raises(ValueError, match="the run's log density was a noisy estimate and this one is exact"):
        km.resume_ensemble(path, gaussian, progress=False)
    resumed = km.resume_ensemble(path, noisy(0.1), progress=False)
    np.testing.assert_array_equal(posterior(resumed), posterior(km.sample_ensemble(noisy(0.1), X0, draws=20, **kwargs)))
