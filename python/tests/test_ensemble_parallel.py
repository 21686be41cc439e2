"""sample_ensemble with the walkers evaluated together: one vectorised call
per half sweep, worker processes, an executor; the same walkers as
per-point calls."""

import concurrent.futures
import multiprocessing
import os
import warnings

import cloudpickle
import numpy as np
import pytest

import kameleon as km
from conftest import CancellingExecutor, self_interrupting


def log_density(x):
    return -0.5 * (x[0] * x[0] + 4.0 * x[1] * x[1] + x[2] * x[2])


def log_density_rows(xs):
    return -0.5 * (xs[:, 0] * xs[:, 0] + 4.0 * xs[:, 1] * xs[:, 1] + xs[:, 2] * xs[:, 2])


RUN = dict(walkers=10, draws=150, tune=50, seed=3, progress=False)


pytestmark = pytest.mark.usefixtures("quiet")


@pytest.fixture(scope="module")
def reference():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        return km.sample_ensemble(log_density, np.ones(3), **RUN)


def assert_same_walkers(a, b):
    np.testing.assert_array_equal(a.posterior["x"].values, b.posterior["x"].values)
    np.testing.assert_array_equal(a.sample_stats["lp"].values, b.sample_stats["lp"].values)
    assert a.posterior.attrs["evaluations"] == b.posterior.attrs["evaluations"]
    assert a.posterior.attrs["accepted_total"] == b.posterior.attrs["accepted_total"]


def test_vectorize_calls_once_per_half_sweep_with_the_same_walkers(reference):
    sizes = []

    def rows(xs):
        sizes.append(xs.shape[0])
        return log_density_rows(xs)

    assert_same_walkers(km.sample_ensemble(rows, np.ones(3), vectorize=True, **RUN), reference)
    # the starts in one call, then two halves of 5 walkers per sweep
    assert sizes == [10] + [5] * (2 * (RUN["draws"] + RUN["tune"]))


def test_walkers_on_worker_processes_and_an_executor_are_the_same(reference):
    assert_same_walkers(km.sample_ensemble(log_density, np.ones(3), cores=2, **RUN), reference)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        assert_same_walkers(km.sample_ensemble(log_density, np.ones(3), executor=pool, **RUN), reference)


def holding_data(megabytes: float):
    """``log_density`` as a closure that holds ``megabytes`` of data (as a
    density holds its dataset), with the size of its pickled form."""
    data = np.ones(int(megabytes * 1e6 / 8))

    def density(x):
        return log_density(x) + 0.0 * data[0]

    return density, len(cloudpickle.dumps(density))


def test_the_density_travels_once_per_worker_not_with_every_half_sweep(reference, submitted_bytes):
    # every half sweep's tasks carried the pickled density: 400 half sweeps
    # of a closure over a 50 MB array took 56 s where the density took 0.24
    density, size = holding_data(1.0)
    assert_same_walkers(km.sample_ensemble(density, np.ones(3), cores=2, **RUN), reference)
    # one task per worker per evaluation; only the first round (the starts)
    # and a worker that lacks the density (at most the 2 workers) carry it
    evaluations = 1 + 2 * (RUN["draws"] + RUN["tune"])
    assert len(submitted_bytes) >= 2 * evaluations
    assert sum(submitted_bytes) < 4 * size + 2 * evaluations * 2_000


def test_evaluations_the_executor_cancels_end_the_run_with_an_error_that_says_so():
    # a bare CancelledError said nothing of what happened; here the
    # executor runs the starts' evaluations and cancels every later task
    with CancellingExecutor(lambda n, args: n <= RUN["walkers"]) as executor:
        with pytest.raises(RuntimeError, match="the executor cancelled an evaluation of the walkers"):
            km.sample_ensemble(log_density, np.ones(3), executor=executor, **RUN)


def test_workers_that_keep_nothing_are_sent_the_density_again(reference, submitted_bytes):
    # an executor that starts a process for every task (as a batch system
    # does): every task sent without the density asks for it, and is sent
    # again with it
    density, size = holding_data(0.1)
    # the server kameleon's own pool forks its workers from, with the
    # package imported: a process per task starts in milliseconds
    context = multiprocessing.get_context("forkserver")
    short = dict(RUN, draws=1, tune=0)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context, max_tasks_per_child=1) as pool:
        got = km.sample_ensemble(density, np.ones(3), executor=pool, cores=2, **short)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        assert_same_walkers(got, km.sample_ensemble(log_density, np.ones(3), **short))
    evaluations = 1 + 2 * (short["draws"] + short["tune"])
    carrying = [n for n in submitted_bytes if n > size]
    assert len(carrying) == 2 * evaluations
    assert len(submitted_bytes) == 2 * evaluations + 2 * (evaluations - 1)


def failing(x):
    if x[1] > 0.05:
        raise FloatingPointError(f"bad point {x[1]:.3f}")
    return log_density(x)


def test_an_exception_in_a_worker_surfaces_with_its_traceback():
    with pytest.raises(FloatingPointError, match="bad point") as caught:
        km.sample_ensemble(failing, np.zeros(3), cores=2, **RUN)
    assert "in failing" in str(caught.value.__cause__)


TESTS = int(os.environ.setdefault("KAMELEON_TESTS_PID", str(os.getpid())))


def dying(x):
    if os.getpid() != TESTS and x[1] > 0.05:
        os._exit(3)  # a worker killed, e.g. by the out-of-memory killer
    return log_density(x)


def test_a_worker_that_dies_does_not_break_later_runs(reference):
    # the pool shared with kameleon.sample stayed broken, so every later run
    # on as many worker processes raised BrokenProcessPool
    with pytest.raises(concurrent.futures.process.BrokenProcessPool, match="a worker process died"):
        km.sample_ensemble(dying, np.zeros(3), cores=2, **RUN)
    with pytest.raises(concurrent.futures.process.BrokenProcessPool, match="a worker process died"):
        km.sample(dying, [0.0, 1.0, 0.0], sampler=km.RandomWalk(), chains=2, cores=2, parallel="process",
                  draws=10, tune=10, seed=1, progress=False)
    assert_same_walkers(km.sample_ensemble(log_density, np.ones(3), cores=2, **RUN), reference)


def test_walkers_together_need_a_plain_callable():
    with pytest.raises(ValueError, match="need a Python callable"):
        km.sample_ensemble(km.PseudoMarginal(lambda x, rng: 0.0), np.ones(3), vectorize=True, **RUN)
    with pytest.raises(ValueError, match="leave `cores`/`executor` unset"):
        km.sample_ensemble(log_density_rows, np.ones(3), vectorize=True, cores=2, **RUN)


@pytest.mark.parametrize("vectorize", [False, True], ids=["per-point", "vectorized"])
def test_checkpoint_interrupt_resume_equals_an_uninterrupted_run(tmp_path, reference, sigint_raises, vectorize):
    path = tmp_path / "ensemble.ckpt"
    interrupting = self_interrupting(log_density, at_call=700, sleep=0.0002)
    with pytest.warns(UserWarning, match="interrupted"):
        partial = km.sample_ensemble(interrupting, np.ones(3), checkpoint=path, **RUN)
    assert partial.posterior["x"].shape[1] < RUN["draws"]
    header = km._core.ensemble_checkpoint_header(path)
    assert 700 <= header["evaluations"] < 10 * (1 + RUN["draws"] + RUN["tune"])
    # the saved part is replayed without evaluating the density
    counted = []

    def counting_rows(xs):
        counted.append(len(xs))
        return log_density_rows(xs)

    def counting(x):
        counted.append(1)
        return log_density(x)

    resumed = km.resume_ensemble(path, counting_rows if vectorize else counting, vectorize=vectorize,
                                 progress=False)
    assert_same_walkers(resumed, reference)
    # and one call checks the density against the run's first recorded value
    assert sum(counted) == reference.posterior.attrs["evaluations"] - header["evaluations"] + 1
    # a finished run replays whole, with no evaluation but that check
    counted.clear()
    assert_same_walkers(km.resume_ensemble(path, counting, progress=False), reference)
    assert counted == [1]
