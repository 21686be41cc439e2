"""Chains in worker processes, on executors (a process pool, loky, a Dask
cluster, MPI) and in lockstep: the same chains as cores=1, errors, Ctrl-C,
checkpoints."""

import ast
import concurrent.futures
import contextlib
import io
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import kameleon as km
from conftest import CancellingExecutor, interrupt_and_wait
from kameleon import _parallel


def posterior(idata):
    return idata.posterior["x"].values


def gaussian(x):
    return -0.5 * (x[0] * x[0] + 2.0 * x[1] * x[1] + 0.5 * x[2] * x[2])


def gaussian_rows(xs):
    """``gaussian`` of each row, with the same operations in the same order."""
    return -0.5 * (xs[:, 0] * xs[:, 0] + 2.0 * xs[:, 1] * xs[:, 1] + 0.5 * xs[:, 2] * xs[:, 2])


RUN = dict(sampler=km.AM(), draws=200, tune=100, chains=4, seed=11, progress=False)
ENSEMBLE = dict(walkers=8, draws=30, tune=10, seed=11, progress=False)
X0 = np.array([1.0, -0.5, 2.0])


pytestmark = pytest.mark.usefixtures("quiet")


@pytest.fixture(scope="module")
def reference():
    """The chains of ``gaussian`` on one thread."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        return km.sample(gaussian, X0, cores=1, **RUN)


@pytest.fixture(scope="module")
def process_pool():
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        yield pool


def chains_of(idata):
    """The draws, stats and counters of a run's chains, as arrays by name."""
    arrays = {"x": posterior(idata)}
    for name in ("lp", "accepted", "acceptance_probability"):
        arrays[name] = idata.sample_stats[name].values
    for name in ("rejected_non_finite", "accepted_total", "evaluations"):
        arrays[name] = np.asarray(idata.posterior.attrs[name])
    return arrays


def assert_same_arrays(got, expected):
    assert sorted(got) == sorted(expected)
    for name, values in expected.items():
        np.testing.assert_array_equal(got[name], values, err_msg=name)


def assert_same_chains(a, b):
    assert_same_arrays(chains_of(a), chains_of(b))


def test_process_workers_give_the_chains_of_one_thread(reference):
    scale = 2.0  # a closure over a local: pickled by value
    closure = lambda x: -0.5 * (x[0] * x[0] + scale * x[1] * x[1] + 0.5 * x[2] * x[2])  # noqa: E731
    idata = km.sample(closure, X0, cores=2, parallel="process", **RUN)
    assert_same_chains(idata, reference)


def test_chain_tasks_carry_the_density_once_per_worker(reference, submitted_bytes, monkeypatch, tmp_path):
    # every chain's task carried the pickled density: 8 chains of a closure
    # over a 50 MB array sent it 8 times through the pool's pipes
    data = np.ones(125_000)  # 1 MB

    def holding_data(x):
        return gaussian(x) + 0.0 * data[0]

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    idata = km.sample(holding_data, X0, cores=2, parallel="process", **RUN)
    assert_same_chains(idata, reference)
    # the tasks carry the path of a file the workers read, removed after the run
    assert len(submitted_bytes) >= RUN["chains"]
    assert max(submitted_bytes) < 20_000
    assert list(tmp_path.glob("kameleon-density-*")) == []


class FullDisk(io.BytesIO):
    """A temporary file on a full disk: the write fails, or only the flush
    of the buffered write when the file is closed."""

    name = "/nonexistent/kameleon-density-full"

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing

    def write(self, data):
        if self.failing == "write":
            raise OSError(28, "No space left on device")
        return super().write(data)

    def close(self):
        if self.failing == "close":
            raise OSError(28, "No space left on device")
        super().close()


@pytest.mark.parametrize("failing", ["create", "write", "close"])
def test_without_room_for_the_density_file_the_tasks_carry_the_density(monkeypatch, failing):
    def temporary_file(**kwargs):
        if failing == "create":
            raise OSError(28, "No space left on device")
        return FullDisk(failing)

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", temporary_file)
    with km._parallel._density_file(b"pickled") as density:
        assert density == b"pickled"


def test_density_files_of_killed_runs_are_removed_and_no_others(monkeypatch, tmp_path):
    # a run killed outright (SIGKILL, a batch system's time limit) cannot
    # remove its density file; the next run removes the files whose process
    # is gone
    if not os.path.isdir("/proc"):
        pytest.skip("the removal asks /proc whether a process runs")
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert not os.path.exists(f"/proc/{gone.pid}")
    names = {
        "stale": f"kameleon-density-{gone.pid}-abc.pickle",
        "ours": f"kameleon-density-{os.getpid()}-abc.pickle",
        "running": "kameleon-density-1-abc.pickle",
        "other": f"other-{gone.pid}-abc.pickle",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with km._parallel._density_file(b"pickled") as density:
        assert os.path.dirname(density) == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        names[k] for k in ("ours", "running", "other")
    )


def truncated(x):
    """NaN on one side, −inf on another: rejected proposals, counted."""
    if x[0] > 1.2:
        return float("nan")
    if x[1] < -0.8:
        return -math.inf
    return gaussian(x)


def test_rejections_of_nan_and_minus_inf_are_counted_as_on_one_thread(process_pool):
    one = km.sample(truncated, X0 * 0.5, cores=1, **RUN)
    assert min(one.posterior.attrs["rejected_non_finite"]) > 0
    assert_same_chains(km.sample(truncated, X0 * 0.5, cores=2, parallel="process", **RUN), one)
    assert_same_chains(km.sample(truncated, X0 * 0.5, executor=process_pool, **RUN), one)


def test_pseudo_marginal_in_processes_gives_the_chains_of_one_thread():
    def noisy(x, rng):
        return gaussian(x) + 0.1 * rng.standard_normal()

    kwargs = dict(RUN, sampler=km.RandomWalk(), chains=3)
    one = km.sample(km.PseudoMarginal(noisy), X0, cores=1, **kwargs)
    many = km.sample(km.PseudoMarginal(noisy), X0, cores=2, parallel="process", **kwargs)
    assert_same_chains(one, many)


def test_a_prior_travels_to_the_workers_with_the_likelihood():
    def log_likelihood(x):
        return -0.5 * ((x[0] - 1.0) ** 2 + (x[1] - 0.3) ** 2 / 0.01)

    prior = {"a": km.priors.LogNormal(0.0, 1.0), "b": km.priors.Beta(2.0, 2.0)}
    kwargs = dict(RUN, chains=3, prior=prior)
    one = km.sample(log_likelihood, None, cores=1, **kwargs)
    many = km.sample(log_likelihood, None, cores=2, parallel="process", **kwargs)
    for name in ("a", "b"):
        np.testing.assert_array_equal(one.posterior[name].values, many.posterior[name].values)


def test_a_process_pool_executor_gives_the_chains_of_one_thread(reference, process_pool):
    assert_same_chains(km.sample(gaussian, X0, executor=process_pool, **RUN), reference)


@pytest.fixture(scope="module")
def dask_client():
    """A client of a LocalCluster of 2 worker processes."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        yield client


def test_a_dask_cluster_gives_the_chains_and_walkers_of_one_thread(reference, dask_client):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    # a density that holds its data: every chain task, and the ensemble's
    # first round, carried the pickled bytes in the task graph (8 chains of
    # a 50 MB closure on 2 workers: 16.3 s against 3.0 s for a small one)
    data = np.ones(125_000)  # 1 MB

    def holding_data(x):
        return gaussian(x) + 0.0 * data[0]

    submitted = []

    class Recording(distributed.cfexecutor.ClientExecutor):
        def submit(self, fn, /, *args, **kwargs):
            submitted.append(len(cloudpickle.dumps((fn, args, kwargs))))
            return super().submit(fn, *args, **kwargs)

    # the client itself is not an executor: the error says what is
    with pytest.raises(TypeError, match=r"executor=client\.get_executor\(\)"):
        km.sample(gaussian, X0, executor=dask_client, **RUN)
    idata = km.sample(holding_data, X0, executor=Recording(dask_client), **RUN)
    walkers = km.sample_ensemble(holding_data, X0, executor=Recording(dask_client), **ENSEMBLE)
    assert_same_chains(idata, reference)
    # the ensemble's walkers too, one task per walker of each half sweep
    one = km.sample_ensemble(gaussian, X0, **ENSEMBLE)
    np.testing.assert_array_equal(walkers.posterior["x"].values, one.posterior["x"].values)
    # one task per run holds the density: the others hold a future of it,
    # a few hundred bytes, where the density is 1 MB
    assert len(submitted) >= RUN["chains"] + ENSEMBLE["walkers"]
    assert max(submitted) < 20_000


def gaussian_in_2_ms(x):
    time.sleep(0.002)
    return gaussian(x)


def runs_left_on_the_scheduler(dask_scheduler):
    """The names of the queues, events and variables that kameleon's runs
    left on a Dask scheduler."""
    extensions = dask_scheduler.extensions
    names = [*extensions["queues"].queues, *extensions["events"]._events, *extensions["variables"].variables]
    return [name for name in names if str(name).startswith("kameleon-")]


def test_chains_on_a_dask_cluster_report_progress_and_stop_when_told(dask_client, monkeypatch):
    # a user's executor gave no progress until a chain finished, and its
    # running chains could not be stopped (so `max_seconds` was refused,
    # and Ctrl-C left them running on the cluster): on a Dask client's
    # executor they report and watch a stop flag through the scheduler
    seen = []
    run = _parallel.run

    def recording(tasks, totals, workers, executor, bars, checkpoint):
        def watched(steps):
            seen.append(list(steps))
            return bars is not None and bars(steps)

        return run(tasks, totals, workers, executor, watched, checkpoint)

    monkeypatch.setattr(_parallel, "run", recording)
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "interrupted" warning
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(gaussian_in_2_ms, X0, sampler=km.AM(), draws=10**5, tune=0, chains=2, seed=2,
                          progress=False, max_seconds=1.5, executor=dask_client.get_executor())
    took = time.monotonic() - start
    assert idata.posterior.attrs["stopped_by"] == "max_seconds"
    # ~1.5 s at 2 ms a step: a few hundred steps, where 10**5 take minutes
    kept = posterior(idata).shape[1]
    assert 0 < kept < 2_000
    assert took < 10.0
    # progress came while the chains ran, a report every 0.25 s
    assert any(0 < n < kept for steps in seen for n in steps)
    # and the run's queue, event and variable leave the scheduler (the
    # workers release the queue by a message, which may come after the run)
    deadline = time.monotonic() + 5
    while dask_client.run_on_scheduler(runs_left_on_the_scheduler) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dask_client.run_on_scheduler(runs_left_on_the_scheduler) == []
    # the partial chains are those of a run of that length
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        whole = km.sample(gaussian, X0, sampler=km.AM(), draws=kept, tune=0, chains=2, seed=2, progress=False)
    np.testing.assert_array_equal(posterior(idata), posterior(whole))


def test_ctrl_c_stops_the_chains_on_a_dask_cluster_and_returns_their_draws(dask_client, sigint_raises):
    # Ctrl-C raised at once and left the chains running on the cluster
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.warns(UserWarning, match="sampling was interrupted"):
        idata = km.sample(gaussian_in_2_ms, X0, sampler=km.AM(), draws=10**5, tune=0, chains=2, seed=2,
                          progress=False, executor=dask_client.get_executor())
    timer.join()
    assert 0 < posterior(idata).shape[1] < 2_000
    assert time.monotonic() - start < 10.0
    # nothing of the run is left processing on the cluster
    deadline = time.monotonic() + 5
    while any(dask_client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(dask_client.processing().values())


def test_a_dask_run_survives_losing_every_worker(reference, dask_client):
    # the density's bytes are the result of a task, which Dask computes
    # again when every worker that held it is gone; scattered data would
    # be lost with them, and every chain with a bare CancelledError
    started = list(dask_client.scheduler_info()["workers"])

    def kill_the_workers_once_chains_run():
        # each chain takes 300 steps × 2 ms: kill while they run
        deadline = time.monotonic() + 30
        while not any(dask_client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        with contextlib.suppress(Exception):  # the workers die mid-call
            dask_client.run(os._exit, 1)

    killer = threading.Thread(target=kill_the_workers_once_chains_run)
    killer.start()
    idata = km.sample(gaussian_in_2_ms, X0, executor=dask_client.get_executor(), **RUN)
    killer.join()
    # the nannies started new workers, which ran the chains again
    assert not set(started) & set(dask_client.scheduler_info()["workers"])
    assert_same_chains(idata, reference)


def test_chains_the_executor_cancels_are_named_in_the_error():
    # the run waited for ever on the cancelled chains (`wait` does not
    # count a future cancelled without notice as done); and once it ended,
    # a bare CancelledError said nothing of what happened
    with CancellingExecutor(lambda n, args: args[0].chain == 0) as executor:
        with pytest.raises(RuntimeError, match=r"cancelled the tasks of chains \[1, 2, 3\] before they ended"):
            km.sample(gaussian, X0, executor=executor, **RUN)


def test_a_loky_executor_gives_the_chains_of_one_thread(reference):
    loky = pytest.importorskip("loky")
    executor = loky.get_reusable_executor(max_workers=2)
    try:
        assert_same_chains(km.sample(gaussian, X0, executor=executor, **RUN), reference)
    finally:
        executor.shutdown(wait=True)


MPI_RUN = textwrap.dedent(
    """
    import sys
    import numpy as np
    from mpi4py.futures import MPIPoolExecutor
    import kameleon as km
    from test_parallel import gaussian, X0, RUN, chains_of

    if __name__ == "__main__":
        with MPIPoolExecutor() as pool:
            idata = km.sample(gaussian, X0, executor=pool, **RUN)
        np.savez(sys.argv[1], **chains_of(idata))
    """
)


def mpiexec():
    """The ``mpiexec`` beside this Python (PyPI's ``mpich`` wheel puts it
    there) or on PATH, if mpi4py ≥ 4 is installed; else None."""
    try:
        import mpi4py
    except ImportError:
        return None
    if int(mpi4py.__version__.split(".")[0]) < 4:
        return None
    return shutil.which("mpiexec", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))


@pytest.mark.skipif(mpiexec() is None, reason="needs mpi4py >= 4 and an mpiexec (pip install mpi4py mpich)")
def test_mpi4py_futures_under_mpiexec_gives_the_chains_of_one_thread(reference, tmp_path):
    script = tmp_path / "mpi_run.py"
    script.write_text(MPI_RUN)
    out = tmp_path / "chains.npz"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))
    # rank 0 runs the script, the two other ranks are the pool's workers
    subprocess.run([mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py.futures", str(script), str(out)],
                   env=env, check=True, timeout=120)
    with np.load(out) as got:
        assert_same_arrays(dict(got), chains_of(reference))


def test_lockstep_gives_the_chains_of_per_point_calls(reference):
    calls = []

    def batch(xs):
        calls.append(xs.shape[0])
        return gaussian_rows(xs)

    idata = km.sample(batch, X0, vectorize=True, **RUN)
    assert_same_chains(idata, reference)
    # every step of the four chains is one call (the starts are evaluated one by one)
    assert max(calls) == 4 and calls.count(4) >= RUN["tune"] + RUN["draws"]


def test_lockstep_rejects_a_result_of_the_wrong_shape():
    with pytest.raises(TypeError, match=r"must return 4 floats \(an array of shape \(4,\)\)"):
        km.sample(lambda xs: np.zeros((xs.shape[0], 1)) if xs.shape[0] > 1 else np.zeros(1), X0,
                  vectorize=True, **RUN)


def test_lockstep_rejects_a_pseudo_marginal():
    with pytest.raises(ValueError, match="vectorize=True"):
        km.sample(km.PseudoMarginal(lambda x, rng: 0.0), X0, vectorize=True, **RUN)


# the pid of the process running the tests (worker processes inherit the
# variable); the starting points are checked there
TESTS = int(os.environ.setdefault("KAMELEON_TESTS_PID", str(os.getpid())))


def failing(x):
    if os.getpid() != TESTS and x[0] > 1.5:
        raise ArithmeticError(f"no density at {x[0]:.3f}")
    return gaussian(x)


def test_an_exception_in_a_worker_keeps_its_type_message_and_traceback(process_pool):
    for way in (dict(cores=2, parallel="process"), dict(executor=process_pool)):
        with pytest.raises(ArithmeticError, match="no density at") as caught:
            km.sample(failing, X0, **RUN, **way)
        # the worker's traceback travels as the cause
        assert "in failing" in str(caught.value.__cause__)


def test_an_exception_of_a_class_pickle_cannot_name_comes_back_as_itself(process_pool):
    # a class defined in the main script reaches the workers by value, with
    # the density (cloudpickle), so pickle could not send its exceptions
    # back: the user got a PicklingError. A local class is the same case.
    class SolverError(ArithmeticError):
        pass

    def diverging(x):
        if x[0] > 2.5:
            raise SolverError(f"diverged at {x[0]:.3f}")
        return gaussian(x)

    runs = (
        lambda: km.sample(diverging, X0, **RUN, cores=2, parallel="process"),
        lambda: km.sample(diverging, X0, **RUN, executor=process_pool),
        lambda: km.sample_ensemble(diverging, X0, **ENSEMBLE, cores=2),
    )
    for run in runs:
        with pytest.raises(SolverError, match="diverged at") as caught:
            run()
        assert type(caught.value) is SolverError  # the class itself, not a copy
        assert "in diverging" in str(caught.value.__cause__)


def held_until(release: str):
    """``gaussian``, whose calls at (-1, 0, 0) (chain 0's start below) wait
    for the file ``release``, 20 s at the most in all (a wait that ran out
    is noted in ``release + ".timed-out"``)."""

    def density(x):
        if x[0] == -1.0 and not os.path.exists(release + ".timed-out"):
            deadline = time.monotonic() + 20
            while not os.path.exists(release):
                if time.monotonic() > deadline:
                    open(release + ".timed-out", "w").close()
                    break
                time.sleep(0.01)
        return gaussian(x)

    return density


def test_an_exception_on_an_executor_is_raised_without_waiting_for_the_other_chains(tmp_path, process_pool):
    # the running chains of a user's executor cannot be stopped, and the
    # exception of another chain waited for them to end (hours, on a cluster)
    release = str(tmp_path / "release")
    starts = np.array([[-1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])  # chain 1 starts where `failing` raises
    density = held_until(release)
    with pytest.raises(ArithmeticError, match="no density at"):
        km.sample(lambda x: failing(x) if x[0] != -1.0 else density(x), starts,
                  **{**RUN, "chains": 2}, executor=process_pool)
    open(release, "w").close()
    process_pool.submit(int).result()  # the held chain's worker is free again
    assert not os.path.exists(release + ".timed-out")


def test_an_unpicklable_density_gets_an_error_saying_what_to_do():
    lock = threading.Lock()

    def locked(x):
        with lock:
            return gaussian(x)

    with pytest.raises(TypeError, match="cannot be sent to worker processes.*parallel='thread'"):
        km.sample(locked, X0, cores=2, parallel="process", **RUN)
    # on threads it runs
    km.sample(locked, X0, cores=2, parallel="thread", **RUN)


def test_processes_need_a_python_density():
    with pytest.raises(ValueError, match="Python callables and PseudoMarginal"):
        km.sample(km.targets.Banana(3), X0, cores=2, parallel="process", **RUN)
    with pytest.raises(ValueError, match="`parallel` must be"):
        km.sample(gaussian, X0, parallel="gpu", **RUN)


@pytest.fixture
def chosen_modes(monkeypatch):
    """The list of where each run's chains were sent ("thread", "process"
    or "executor"), as the default rule decided."""
    from kameleon import _sample

    chosen = []
    real = _sample._mode

    def spy(*args):
        chosen.append(real(*args))
        return chosen[-1]

    monkeypatch.setattr(_sample, "_mode", spy)
    return chosen


def test_the_default_rule_picks_processes_for_expensive_densities_only(chosen_modes, monkeypatch):
    from kameleon import _sample

    km.sample(gaussian, X0, cores=2, **RUN)  # ~1 µs per call
    monkeypatch.setattr(_sample, "_PROCESS_WORTH_SECONDS", 1e-6)
    km.sample(gaussian, X0, cores=2, **RUN)
    km.sample(gaussian, X0, cores=1, **RUN)  # one core: nothing to share
    km.sample(km.targets.Banana(3), X0, cores=2, **RUN)  # Rust threads run in parallel
    assert chosen_modes == ["thread", "process", "thread", "thread"]


def test_the_default_rule_does_not_count_a_slow_first_call(chosen_modes):
    # a first call that compiles or imports (a JIT-compiled density), or that
    # the machine's other work stalled: timed alone it would price the run
    # at a minute and start a pool for a density of microseconds
    calls = []

    def warming_up(x):
        if not calls:
            time.sleep(0.05)
        calls.append(1)
        return gaussian(x)

    km.sample(warming_up, X0, cores=2, **RUN)
    assert chosen_modes == ["thread"]


SLOW_RUN = textwrap.dedent(
    """
    import os, signal, sys, time, warnings
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import multiprocessing
    import arviz
    import kameleon as km

    def slow(x):
        # tell the test that this worker is sampling
        open(os.path.join(sys.argv[1], str(os.getpid())), "a").close()
        time.sleep(0.002)
        return -0.5 * float(x @ x)

    if __name__ == "__main__":
        print("ready", flush=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = km.sample(slow, [0.0, 0.0], sampler=km.RandomWalk(), draws=10**6, tune=0, chains=4,
                              cores=4, parallel="process", seed=1, progress=False)
        n = idata.posterior["x"].shape[1]
        warned = any("interrupted" in str(w.message) for w in caught)
        print("draws", n, "warned", warned, "children", len(multiprocessing.active_children()), flush=True)
    """
)


def descendants(pid):
    """The pids of the processes whose parent is ``pid``, and theirs."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_slow_run(tmp_path) -> subprocess.Popen:
    """``SLOW_RUN`` in a subprocess, once its four workers sample (their
    start-up is not what the tests time)."""
    script = tmp_path / "slow_run.py"
    script.write_text(SLOW_RUN)
    started = tmp_path / "started"
    started.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(started)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        sampling = lambda: set(os.listdir(started)) - {str(proc.pid)}  # noqa: E731 (the parent checks the starts)
        while len(sampling()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sampling()) == 4
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def test_a_program_that_ignores_sigint_goes_on_ignoring_it_during_a_run():
    # a program started by nohup, or in the background of a script, ignores
    # SIGINT: the runs' own handler replaced that, so Ctrl-C on the script
    # stopped the runs of a program meant to go on
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with km._parallel.sigint_sets(threading.Event()) as interrupt:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert not interrupt.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        # where SIGINT is handled, the runs' handler sets the event instead
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with km._parallel.sigint_sets(threading.Event()) as interrupt:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert interrupt.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_sigint_stops_four_workers_returns_partial_draws_and_leaves_no_process(tmp_path):
    proc = start_slow_run(tmp_path)
    time.sleep(0.5)
    workers = descendants(proc.pid)
    assert len(workers) >= 5  # the forkserver (or spawn's tracker) too
    returncode, out, took = interrupt_and_wait(proc)
    assert returncode == 0, out
    words = out.split()
    assert words[0] == "draws" and 0 < int(words[1]) < 10**6
    assert words[3] == "True" and words[5] == "0"
    assert took < 5.0
    time.sleep(0.5)
    assert [pid for pid in workers if alive(pid)] == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_workers_end_when_the_parent_is_killed(tmp_path):
    # a parent killed outright (SIGKILL, the OOM killer) runs no clean-up:
    # its workers kept running their chains, then waited for tasks for ever
    proc = start_slow_run(tmp_path)
    workers = []
    try:
        workers = descendants(proc.pid)
        assert len(workers) >= 5  # the forkserver (or spawn's tracker) too
        proc.kill()
        proc.wait()  # not communicate(): the workers hold its stdout open
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in workers if alive(pid)] == []
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


KILLED_RUN = textwrap.dedent(
    """
    import sys, time, warnings
    import kameleon as km
    from test_parallel import slow_gaussian, CHECKPOINTED

    if __name__ == "__main__":
        km.sample(slow_gaussian, [1.0, -0.5, 2.0], checkpoint=sys.argv[1], checkpoint_every=0.2,
                  cores=2, parallel="process", **CHECKPOINTED)
    """
)

CHECKPOINTED = dict(sampler=km.AM(), draws=1500, tune=500, chains=2, seed=3, progress=False)


def slow_gaussian(x):
    time.sleep(0.0005)
    return gaussian(x)


def test_checkpoint_kill_resume_with_process_workers_equals_an_uninterrupted_run(tmp_path):
    whole = km.sample(gaussian, X0, cores=1, **CHECKPOINTED)
    path = tmp_path / "run.ckpt"
    script = tmp_path / "killed_run.py"
    script.write_text(KILLED_RUN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(script), str(path)], env=env, start_new_session=True)
    parts = [f"{path}.chain{k}-of-2" for k in range(2)]
    deadline = time.monotonic() + 30
    while not all(os.path.exists(p) for p in parts) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert all(os.path.exists(p) for p in parts), "the workers wrote no checkpoint within 30 s"
    header = km._core.checkpoint_header(parts[0])
    assert header["steps_done"][0] < 2000, "the run ended before it was killed"
    resumed = km.resume(path, gaussian, cores=2, parallel="process", progress=False)
    assert_same_chains(resumed, whole)
    assert not any(os.path.exists(p) for p in parts)
    # the gathered checkpoint resumes in this process too (nothing left to do)
    assert_same_chains(km.resume(path, gaussian, cores=1, progress=False), whole)


def test_resume_refuses_a_run_whose_chains_did_not_all_save(tmp_path):
    path = tmp_path / "run.ckpt"
    (tmp_path / "run.ckpt.chain1-of-2").write_bytes(b"")
    with pytest.raises(ValueError, match=r"stopped before chains \[0\] had saved a checkpoint"):
        km.resume(path, gaussian, progress=False)


def test_a_new_run_replaces_the_chain_checkpoints_of_an_old_one(tmp_path):
    path = tmp_path / "run.ckpt"
    (tmp_path / "run.ckpt.chain2-of-3").write_bytes(b"left by a killed run")
    idata = km.sample(gaussian, X0, cores=2, parallel="process", checkpoint=path, **dict(RUN, chains=2))
    assert sorted(os.listdir(tmp_path)) == ["run.ckpt"]
    assert_same_chains(km.resume(path, gaussian, progress=False), idata)


def test_a_relative_checkpoint_goes_where_the_run_was_called(tmp_path, monkeypatch):
    # the pool's workers keep the folder they started in: after a chdir, a
    # relative checkpoint's chain parts went there, and no checkpoint was
    # gathered where the attrs said it was
    run = dict(RUN, chains=2)
    (tmp_path / "first").mkdir()
    (tmp_path / "then").mkdir()
    km._parallel.shutdown_pool()
    monkeypatch.chdir(tmp_path / "first")
    km.sample(gaussian, X0, cores=2, parallel="process", **run)
    monkeypatch.chdir(tmp_path / "then")
    idata = km.sample(gaussian, X0, cores=2, parallel="process", checkpoint="run.ckpt", **run)
    assert os.listdir(tmp_path / "first") == []
    assert os.listdir(tmp_path / "then") == ["run.ckpt"]
    monkeypatch.chdir(tmp_path)
    assert idata.posterior.attrs["checkpoint"] == str(tmp_path / "then" / "run.ckpt")
    assert_same_chains(km.extend(idata, gaussian, draws=0, progress=False), idata)


def test_a_process_pool_that_forks_is_refused():
    # a forked worker inherits this process's sampler threads' locks but not
    # the threads: a run on it after any earlier run here could hang for ever
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(ValueError, match="forkserver"):
            km.sample(gaussian, X0, executor=pool, **RUN)
        with pytest.raises(ValueError, match="forkserver"):
            km.sample_ensemble(gaussian, X0, executor=pool, draws=10, tune=10, progress=False, seed=1)


class _ElsewhereExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs tasks on threads, then removes the chain checkpoints they wrote,
    as an executor whose workers have their own file system leaves none
    where the caller looks."""

    def submit(self, fn, /, *args, **kwargs):
        def run_elsewhere():
            result = fn(*args, **kwargs)
            os.remove(args[0].part)
            return result

        return super().submit(run_elsewhere)


def test_checkpoints_written_where_the_caller_cannot_see_them_are_reported(tmp_path):
    # the draws come back through the futures, but the checkpoint the
    # caller asked for was never written: that must not pass in silence
    path = tmp_path / "run.ckpt"
    with _ElsewhereExecutor(2) as executor:
        with pytest.warns(RuntimeWarning, match="were not found on this machine"):
            idata = km.sample(gaussian, X0, executor=executor, checkpoint=path, **RUN)
    assert posterior(idata).shape == (4, 200, 3)
    assert not path.exists()


@pytest.mark.parametrize("given", ["file", "stdin"])
def test_a_script_without_a_main_guard_runs_its_chains_on_threads(tmp_path, given):
    # worker processes run the main script again as they start: a run made
    # at its top level would start once more in every worker, which cannot
    # start processes, and the pool broke with a message about crashes; a
    # program read from standard input (`python - < run.py`) has no file for
    # the workers to read, and each of them died at its start
    program = textwrap.dedent("""
        import time, warnings
        import numpy as np, kameleon as km
        calls = []
        def f(x):
            if len(calls) < 10:
                time.sleep(0.01)  # the calls that price the run: processes are worth it
            calls.append(1)
            return -0.5 * float(x @ x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = km.sample(f, np.zeros(2), sampler=km.AM(), tune=100, draws=100, chains=2, cores=2, seed=1,
                              progress=False)
        print([str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)])
        print("draws", idata.posterior.sizes["draw"])
        try:
            km.sample(f, np.zeros(2), sampler=km.AM(), tune=10, draws=10, chains=2, cores=2, seed=1,
                      progress=False, parallel="process")
        except RuntimeError as err:
            print(err)
    """)
    if given == "file":
        script = tmp_path / "script.py"
        script.write_text(program)
        command, stdin, where = [sys.executable, str(script)], None, ("line 12 of", "line 17 of")
    else:
        command, stdin, where = [sys.executable, "-"], program, ("read from standard input",) * 2
    out = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120, check=True, cwd=tmp_path)
    threads, refused = out.stdout.splitlines()[0], out.stdout.splitlines()[2]
    assert "the chains run on threads" in threads and where[0] in threads and 'if __name__ == "__main__":' in threads
    assert "draws 100" in out.stdout
    assert "cannot start worker processes" in refused and where[1] in refused


@pytest.mark.parametrize(
    "test, guard",
    [('__name__ == "__main__"', True), ("'__main__' == __name__", True), ('__name__ != "__main__"', False),
     ('__file__ == "__main__"', False), ("__name__", False),
     # false in a worker whatever DEBUG is, or not
     ('__name__ == "__main__" and not DEBUG', True), ('DEBUG and __name__ == "__main__"', True),
     ('__name__ == "__main__" or DEBUG', False)],
)
def test_the_main_guard_is_recognised(test, guard):
    assert km._parallel._is_main_guard(ast.parse(test, mode="eval").body) is guard


@pytest.mark.parametrize(
    "program, line, guarded",
    [
        ("if __name__ == '__main__':\n    run()\n", 2, True),
        ("run()\n", 1, False),
        # the else branch is what a worker runs
        ("if __name__ == '__main__':\n    pass\nelse:\n    run()\n", 4, False),
        # guards inside the blocks that run at import count
        ("try:\n    if __name__ == '__main__':\n        run()\nexcept ImportError:\n    pass\n", 3, True),
        ("try:\n    pass\nexcept ImportError:\n    if __name__ == '__main__':\n        run()\n", 5, True),
        ("with lock:\n    if __name__ == '__main__':\n        run()\n", 3, True),
        # a guard inside a function says nothing of the module-level call
        ("def main():\n    if __name__ == '__main__':\n        run()\nmain()\n", 4, False),
    ],
)
def test_a_run_is_guarded_where_no_worker_runs_its_line(program, line, guarded):
    assert km._parallel._is_guarded(ast.parse(program), line) is guarded


def test_runs_on_worker_processes_from_two_threads_take_turns():
    # they shared the pool's stop event: a run whose time budget ran out
    # stopped the other one too, which came back short, marked interrupted
    def slow(x):
        time.sleep(0.0005)
        return gaussian(x)

    results = {}

    def run(name, draws, **limits):
        results[name] = km.sample(slow, X0, sampler=km.AM(), draws=draws, tune=50, chains=2, cores=2, seed=3,
                                  parallel="process", progress=False, **limits)

    # the whole run takes about a second; the budget runs out within it
    whole = threading.Thread(target=run, args=("whole", 1500))
    budget = threading.Thread(target=run, args=("budget", 1500), kwargs=dict(max_seconds=0.3))
    whole.start()
    time.sleep(0.2)
    budget.start()
    for thread in (whole, budget):
        thread.join(timeout=120)
    assert results["budget"].posterior.attrs["stopped_by"] == "max_seconds"
    assert results["whole"].posterior.attrs["stopped_by"] == "draws"
    assert results["whole"].posterior["x"].shape[:2] == (2, 1500)
