"""sample(): output format, reproducibility, errors, pseudo-marginal, compiled path."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import arviz as az
import numpy as np
import pytest

import kameleon as km
from kameleon import targets

from conftest import banana_log_density, interrupt_and_wait, self_interrupting


def posterior(idata):
    return idata.posterior["x"].values


def test_output_has_posterior_stats_and_attributes(gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    idata = km.sample(logp, mean, sampler=km.AM(), draws=300, tune=200, chains=3, seed=5, progress=False)
    assert posterior(idata).shape == (3, 300, 2)
    stats = idata.sample_stats
    assert stats["lp"].shape == (3, 300)
    assert stats["accepted"].dtype == bool
    p = stats["acceptance_probability"].values
    assert ((0 <= p) & (p <= 1)).all()
    # the stored log density is the density of the stored state
    x = posterior(idata)
    assert stats["lp"].values[1, 17] == logp(x[1, 17])
    attrs = idata.posterior.attrs
    assert attrs["inference_library"] == "kameleon"
    assert attrs["seed"] == "5" and attrs["draws"] == 300 and attrs["tune"] == 200 and attrs["thin"] == 1
    assert '"kind": "AM"' in attrs["sampler"]
    assert len(attrs["rejected_non_finite"]) == 3


def test_parameter_names_give_one_variable_each(gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    idata = km.sample(logp, mean, sampler=km.RandomWalk(), draws=50, tune=0, chains=2, seed=1,
                      progress=False, parameter_names=["a", "b"])
    assert set(idata.posterior.data_vars) == {"a", "b"}
    assert idata.posterior["a"].shape == (2, 50)


def test_seed_is_drawn_and_recorded_when_not_given(gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    a = km.sample(logp, mean, sampler=km.RandomWalk(), draws=20, tune=0, chains=1, progress=False)
    seed = int(a.posterior.attrs["seed"])
    b = km.sample(logp, mean, sampler=km.RandomWalk(), draws=20, tune=0, chains=1, seed=seed, progress=False)
    np.testing.assert_array_equal(posterior(a), posterior(b))


@pytest.mark.parametrize(
    "sampler",
    [
        km.RandomWalk(learned=True),
        km.AM(scale="learned"),
        km.KAMH(subsample_size=50),
        km.FKAMH(features=32, feature_map="fastfood", kernel=km.Gaussian(2.0)),
        km.CKAM(cycle_length=100, kernel=km.Matern(nu=4.0, bandwidth=2.0)),
    ],
    ids=["RandomWalk", "AM", "KAMH", "FKAMH-fastfood", "CKAM"],
)
def test_python_callable_and_rust_target_give_identical_chains(sampler):
    # The callable repeats the Rust banana's arithmetic operation for
    # operation, so the two chains must agree bit for bit.
    b, v = 0.1, 4.0
    kwargs = dict(sampler=sampler, draws=300, tune=300, chains=2, seed=42, progress=False)
    python = km.sample(banana_log_density(b, v), [0.1, 0.2, 0.3], **kwargs)
    rust = km.sample(targets.Banana(3, b, v), [0.1, 0.2, 0.3], **kwargs)
    np.testing.assert_array_equal(posterior(python), posterior(rust))
    np.testing.assert_array_equal(python.sample_stats["lp"].values, rust.sample_stats["lp"].values)


def test_chains_do_not_depend_on_the_number_of_cores():
    kwargs = dict(sampler=km.KAMH(subsample_size=50), draws=300, tune=300, chains=3, seed=7, progress=False)
    one = km.sample(targets.Banana(2, 0.1, 4.0), [0.0, 0.0], cores=1, **kwargs)
    two = km.sample(targets.Banana(2, 0.1, 4.0), [0.0, 0.0], cores=2, **kwargs)
    np.testing.assert_array_equal(posterior(one), posterior(two))
    f = banana_log_density(0.1, 4.0)
    py_two = km.sample(f, [0.0, 0.0], cores=2, **kwargs)
    np.testing.assert_array_equal(posterior(one), posterior(py_two))


def test_per_chain_starting_points_and_thinning(gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    x0 = np.array([[0.0, 0.0], [5.0, 5.0]])
    full = km.sample(logp, x0, sampler=km.RandomWalk(), draws=100, tune=10, chains=2, seed=9, progress=False)
    thinned = km.sample(logp, x0, sampler=km.RandomWalk(), draws=50, tune=10, chains=2, seed=9, thin=2, progress=False)
    np.testing.assert_array_equal(posterior(full)[:, 1::2], posterior(thinned))


def test_an_exception_in_the_density_is_reraised_with_its_traceback():
    calls = []

    def broken_density(x):
        calls.append(1)
        if len(calls) > 50:
            raise ZeroDivisionError("model blew up")
        return -0.5 * float(x @ x)

    with pytest.raises(ZeroDivisionError, match="model blew up") as info:
        km.sample(broken_density, [0.0, 0.0], sampler=km.RandomWalk(), draws=1000, tune=0, chains=2, seed=1,
                  progress=False)
    assert any(entry.name == "broken_density" for entry in info.traceback)
    # the first error stops every chain: at most the other chain's call in
    # flight when it was raised still runs
    assert 51 <= len(calls) <= 52


def test_a_non_float_return_raises_type_error_naming_the_function():
    def returns_a_string(x):
        return "oops"

    with pytest.raises(TypeError, match="returns_a_string"):
        km.sample(returns_a_string, [0.0], sampler=km.RandomWalk(), draws=10, tune=0, chains=1, progress=False)


def test_numpy_scalars_and_0d_arrays_are_accepted():
    idata = km.sample(lambda x: np.array(-0.5 * x @ x), [0.0], sampler=km.RandomWalk(), draws=10, tune=0,
                      chains=1, seed=1, progress=False)
    assert posterior(idata).shape == (1, 10, 1)


def test_nan_is_a_counted_rejection():
    def half_nan(x):
        return math.nan if x[0] > 0 else -0.5 * float(x @ x)

    idata = km.sample(half_nan, [-1.0], sampler=km.RandomWalk(), draws=500, tune=0, chains=1, seed=2, progress=False)
    x = posterior(idata)
    assert (x <= 0).all()
    assert idata.posterior.attrs["rejected_non_finite"][0] > 50


def test_a_start_outside_the_support_is_a_clear_error():
    with pytest.raises(ValueError, match="chain 0.*support"):
        km.sample(lambda x: -math.inf, [0.0], sampler=km.RandomWalk(), draws=10, tune=0, chains=1, progress=False)


def test_bad_x0_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="x0"):
        km.sample(lambda x: 0.0, np.zeros((3, 2)), chains=2, progress=False)


def test_pseudo_marginal_calls_once_per_step_and_is_unbiased():
    # log-normal noise with the −σ²/2 correction: exp(estimate) is unbiased
    # for the N(0, 1) density, so the chain targets N(0, 1) exactly.
    sigma = 0.5
    calls = []

    def noisy(x, rng):
        calls.append(1)
        return -0.5 * float(x[0] * x[0]) + sigma * rng.standard_normal() - 0.5 * sigma**2

    chains, draws, tune = 4, 3000, 500
    # one start per chain: no extra calls to check jittered starts (and
    # threads named: the default rule would time one call at a given start)
    idata = km.sample(km.PseudoMarginal(noisy), np.zeros((chains, 1)), sampler=km.RandomWalk(scale=2.0),
                      draws=draws, tune=tune, chains=chains, seed=4, progress=False, parallel="thread")
    assert len(calls) == chains * (draws + tune + 1)
    x = posterior(idata)[:, :, 0]
    ess_mean = km.diagnostics.ess(x)
    ess_sq = km.diagnostics.ess(x**2)
    # 5 Monte Carlo standard errors (see test_samplers.check_moments)
    assert abs(x.mean()) < 5 * x.std() / math.sqrt(ess_mean)
    assert abs((x**2).mean() - 1.0) < 5 * (x**2).std() / math.sqrt(ess_sq)
    # reproducible: the Generator is seeded from the chain's own stream
    again = km.sample(km.PseudoMarginal(noisy), [0.0], sampler=km.RandomWalk(scale=2.0), draws=200, tune=0,
                      chains=2, seed=4, progress=False)
    again2 = km.sample(km.PseudoMarginal(noisy), [0.0], sampler=km.RandomWalk(scale=2.0), draws=200, tune=0,
                       chains=2, seed=4, cores=1, progress=False)
    np.testing.assert_array_equal(posterior(again), posterior(again2))


def test_builtin_targets_expose_density_gradient_and_iid_draws():
    banana = targets.Banana(2, 0.1, 4.0)
    x = np.array([0.3, -0.2])
    assert banana.log_density(x) == banana_log_density(0.1, 4.0)(x)
    eps = 1e-6
    g = banana.grad_log_density(x)
    fd = [(banana.log_density(x + eps * e) - banana.log_density(x - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    draws = banana.sample_iid(20000, seed=1)
    assert draws.shape == (20000, 2)
    # Var x₁ = v = 4: the sample variance has sd ≈ v·√(2/n) ≈ 0.04
    assert abs(draws[:, 0].var() - 4.0) < 5 * 4.0 * math.sqrt(2 / 20000)
    for t in [targets.Flower(), targets.Ring(), targets.CkamBimodal(), targets.CkamFiveComponents(),
              targets.GridMixture(2, [-1.0, 1.0], 0.5)]:
        assert math.isfinite(t.log_density(t.sample_iid(1, seed=0)[0]))
    abc = targets.AbcSkewNormal()
    assert not abc.is_exact
    assert abc.log_density(np.zeros(abc.dim), seed=1) == abc.log_density(np.zeros(abc.dim), seed=1)
    with pytest.raises(ValueError, match="dim"):
        targets.Banana(1)


def test_arviz_summary_and_netcdf_round_trip(tmp_path, gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    idata = km.sample(logp, mean, sampler=km.AM(), draws=200, tune=100, chains=2, seed=3, progress=False)
    summary = az.summary(idata)
    assert list(summary.index) == ["x[0]", "x[1]"]
    path = tmp_path / "run.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    np.testing.assert_array_equal(back.posterior["x"].values, posterior(idata))
    np.testing.assert_array_equal(back.sample_stats["accepted"].values, idata.sample_stats["accepted"].values)
    assert back.posterior.attrs["seed"] == "3"


def test_progress_bars_run(capsys, gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    km.sample(logp, mean, sampler=km.RandomWalk(), draws=200, tune=0, chains=2, seed=3, progress=True)
    err = capsys.readouterr().err
    assert "chain 0" in err and "chain 1" in err and "200/200" in err




def test_compiled_function_matches_the_python_callable():
    nb = pytest.importorskip("numba")
    b, v = 0.1, 4.0
    ln_v = math.log(v)
    LN_2PI = 1.8378770664093455

    @nb.cfunc("float64(CPointer(float64), int64)")
    def logp(x, d):
        y0 = x[0]
        r = x[1] - b * (y0 * y0 - v)
        s = -0.0
        for i in range(2, d):
            s += x[i] * x[i]
        n = y0 * y0 / v + r * r + s
        return -0.5 * (d * LN_2PI + ln_v + n)

    kwargs = dict(sampler=km.AM(scale="learned"), draws=300, tune=300, chains=2, seed=8, progress=False)
    compiled = km.sample(km.Compiled(logp.address, 3, owner=logp), [0.1, 0.2, 0.3], **kwargs)
    python = km.sample(banana_log_density(b, v), [0.1, 0.2, 0.3], **kwargs)
    np.testing.assert_array_equal(posterior(compiled), posterior(python))


SLOW_RUN = textwrap.dedent(
    """
    import signal, sys, time, warnings
    # a process started in the background of a non-interactive shell (as CI
    # runners do) inherits SIGINT ignored; Ctrl-C must raise here
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import arviz  # imported up front: its first import alone takes seconds
    import kameleon as km

    def slow(x):
        time.sleep(0.001)
        return -0.5 * float(x @ x)

    print("ready", flush=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = km.sample(slow, [0.0, 0.0], sampler=km.RandomWalk(), draws=10**6, tune=0, chains=2,
                          seed=1, progress=False, checkpoint=sys.argv[1], checkpoint_every=1000.0)
    n = idata.posterior["x"].shape[1]
    print("draws", n, "warned", any("interrupted" in str(w.message) for w in caught), flush=True)
    """
)


def interrupt_slow_run(checkpoint):
    proc = subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(checkpoint)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    return interrupt_and_wait(proc)


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this process even if it was started
    with SIGINT ignored (a background job of a non-interactive shell)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_sigint_returns_partial_draws_with_a_warning(tmp_path):
    code, out, took = interrupt_slow_run(tmp_path / "run.ckpt")
    assert code == 0, out
    words = out.split()
    assert words[0] == "draws" and 0 < int(words[1]) < 10**6
    assert words[3] == "True"
    # the process stops and exits (ArviZ conversion included) within seconds
    assert took < 5.0


def test_ctrl_c_inside_the_progress_bars_returns_partial_draws(tmp_path, gaussian_2d, monkeypatch):
    # Python delivers Ctrl-C as a KeyboardInterrupt in whatever Python code
    # runs, here the progress display the polling thread calls: that is the
    # same stop as one the polling thread sees, with the draws so far
    mean, _, logp, _ = gaussian_2d
    calls = []

    def interrupted_display(self, steps):
        calls.append(steps)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(km._sample._Progress, "__call__", interrupted_display)
    slow = lambda x: (time.sleep(0.001), logp(x))[1]  # noqa: E731 (a density of 1 ms a call)
    kwargs = dict(sampler=km.AM(), draws=2000, tune=200, chains=2, seed=12, parallel="thread")
    try:
        with pytest.warns(UserWarning, match="interrupted"):
            partial = km.sample(slow, mean, checkpoint=tmp_path / "run.ckpt", **kwargs)
    except KeyboardInterrupt:  # not let through: it would end the test session
        pytest.fail("the KeyboardInterrupt raised in the progress display escaped km.sample")
    assert 0 < posterior(partial).shape[1] < 2000
    resumed = km.resume(tmp_path / "run.ckpt", logp, progress=False)
    whole = km.sample(logp, mean, progress=False, **kwargs)
    np.testing.assert_array_equal(posterior(resumed), posterior(whole))


def test_checkpoint_resume_equals_an_uninterrupted_run(tmp_path, gaussian_2d, sigint_raises):
    mean, _, logp, _ = gaussian_2d
    path = tmp_path / "run.ckpt"
    kwargs = dict(sampler=km.KAMH(subsample_size=50), draws=400, tune=200, chains=2, seed=12, progress=False)
    whole = km.sample(logp, mean, **kwargs)
    # stop part-way: a slow density (1 ms per call, 1.2 s for the whole
    # run) that sends Ctrl-C to its own process at its 300th call
    interrupting = self_interrupting(logp, at_call=300, sleep=0.001)
    # on threads: the density signals its own process (the default rule
    # could choose worker processes for a density this slow)
    with pytest.warns(UserWarning, match="interrupted"):
        partial = km.sample(interrupting, mean, checkpoint=path, checkpoint_every=1000.0, parallel="thread",
                            **kwargs)
    assert posterior(partial).shape[1] < 400
    resumed = km.resume(path, logp, progress=False)
    np.testing.assert_array_equal(posterior(resumed), posterior(whole))
    np.testing.assert_array_equal(resumed.sample_stats["lp"].values, whole.sample_stats["lp"].values)
    # resuming a finished run changes nothing
    again = km.resume(path, logp, progress=False)
    np.testing.assert_array_equal(posterior(again), posterior(whole))


def test_resume_rejects_a_damaged_checkpoint(tmp_path, gaussian_2d):
    # the file carries a checksum: a flipped byte anywhere, a cut or trailing
    # bytes are refused with the file's name instead of resuming silently
    mean, _, logp, _ = gaussian_2d
    path = tmp_path / "run.ckpt"
    km.sample(logp, mean, sampler=km.AM(), draws=50, tune=50, chains=2, seed=3,
              progress=False, checkpoint=path)
    good = path.read_bytes()
    for damaged in (
        good[:40] + bytes([good[40] ^ 0x01]) + good[41:],
        good[:-1] + bytes([good[-1] ^ 0x80]),
        good[: len(good) // 2],
        good + b"\0",
    ):
        path.write_bytes(damaged)
        with pytest.raises(ValueError, match="run.ckpt"):
            km.resume(path, logp, progress=False)


def test_resume_rejects_a_file_that_is_not_a_checkpoint(tmp_path):
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="bad.ckpt"):
        km.resume(bad, lambda x: 0.0)
    # a missing file is the FileNotFoundError a user catches (it was a bare
    # OSError), for every way of continuing a run
    missing = tmp_path / "missing.ckpt"
    for resume in (km.resume, km.resume_ensemble, lambda path, f: km.extend(path, f, draws=1)):
        with pytest.raises(FileNotFoundError, match="missing.ckpt"):
            resume(missing, lambda x: 0.0)


def test_a_checkpoint_that_cannot_be_saved_is_refused_before_the_run(tmp_path):
    # it used to fail only at the first save (after `checkpoint_every`
    # seconds, or at the end of the run), losing the draws made so far
    calls = []

    def counted(x):
        calls.append(1)
        return -0.5 * float(x @ x)

    missing = tmp_path / "no-such-folder" / "run.ckpt"
    with pytest.raises(FileNotFoundError, match="no-such-folder"):
        km.sample(counted, np.zeros(2), draws=10, tune=10, chains=2, progress=False, checkpoint=missing)
    with pytest.raises(FileNotFoundError, match="no-such-folder"):
        km.sample_ensemble(counted, np.zeros(2), draws=10, tune=10, progress=False, checkpoint=missing)
    with pytest.raises(IsADirectoryError, match="a folder"):
        km.sample(counted, np.zeros(2), draws=10, tune=10, chains=2, progress=False, checkpoint=tmp_path)
    assert calls == []


def test_continuing_a_run_checks_the_dimension_of_a_compiled_function(tmp_path):
    # resume, extend and resume_ensemble handed a compiled function of
    # another dimension the checkpoint's points, which it read past the end
    nb = pytest.importorskip("numba")

    @nb.cfunc("float64(CPointer(float64), int64)")
    def normal(x, d):
        s = 0.0
        for i in range(d):
            s += x[i] * x[i]
        return -0.5 * s

    two, three = km.Compiled(normal.address, 2, owner=normal), km.Compiled(normal.address, 3, owner=normal)
    path, ens_path = tmp_path / "run.ckpt", tmp_path / "ens.ckpt"
    km.sample(two, np.zeros(2), sampler=km.AM(), draws=10, tune=10, chains=2, seed=1, progress=False, checkpoint=path)
    km.sample_ensemble(two, np.zeros(2), walkers=8, draws=10, tune=5, seed=1, progress=False, checkpoint=ens_path)
    with pytest.raises(ValueError, match="checkpointed run has dimension 2 but the compiled function has dimension 3"):
        km.extend(path, three, draws=10, progress=False)
    with pytest.raises(ValueError, match="checkpointed run has dimension 2 but the compiled function has dimension 3"):
        km.resume(path, three, progress=False)
    with pytest.raises(ValueError, match="checkpointed run has dimension 2 but the compiled function has dimension 3"):
        km.resume_ensemble(ens_path, three, progress=False)
    with pytest.raises(ValueError, match="checkpointed run has dimension 2 but the target has dimension 3"):
        km.resume(path, km.targets.Banana(3), progress=False)


@pytest.mark.parametrize(
    "names", [["a"], ["a", "a"], ["", "b"], ["a", "c/d"]], ids=["too-few", "repeated", "empty", "slash"]
)
def test_bad_parameter_names_are_refused_before_the_run(tmp_path, quiet, names):
    # too few names failed only after the run, throwing its draws away; a
    # repeated name silently kept one of its parameters only; an empty name
    # or one with a '/' ran, and then the output could not be saved
    # (to_netcdf refuses both)
    calls = []

    def counted(x):
        calls.append(1)
        return -0.5 * float(x @ x)

    run = dict(draws=10, tune=10, progress=False)
    path = tmp_path / "run.ckpt"
    km.sample(counted, np.zeros(2), sampler=km.AM(), chains=2, seed=1, checkpoint=path, **run)
    calls.clear()
    with pytest.raises(ValueError, match="parameter_names"):
        km.sample(counted, np.zeros(2), sampler=km.AM(), chains=2, seed=1, parameter_names=names, **run)
    with pytest.raises(ValueError, match="parameter_names"):
        km.sample_ensemble(counted, np.zeros(2), walkers=8, seed=1, parameter_names=names, **run)
    with pytest.raises(ValueError, match="parameter_names"):
        km.extend(path, counted, draws=10, progress=False, parameter_names=names)
    assert calls == []
