"""Chains of :func:`kameleon.sample` in worker processes or on any
``concurrent.futures`` executor.

Each chain is one task. The parent pickles the log density once (with
cloudpickle, so lambdas and closures travel); a worker unpickles it once
and keeps it, then runs its chain through the same extension call as the
in-process path, as chain ``k`` of the seed, so the chain is bit-identical
to the one ``cores=1`` gives. The parent gathers the chains in order. The
density's bytes travel once per worker, not with every task, so a density
that holds a large dataset costs no more per task than a small one: on the
pool started here, chain tasks carry the path of a file that holds them
for the run; the ensemble's evaluations, on any executor, carry them in
their first round only and again for a worker that lacks them
(:class:`MissingDensity`); on a Dask client's executor, one task per run
holds the bytes (:func:`on_cluster`), which the chains fetch by name
(:class:`ClusterDensity`) and the ensemble's tasks receive as a future.
On other executors, chain tasks carry the bytes.

On the worker pool this module starts itself (``parallel="process"``), the
workers also report their progress and watch a stop flag, through a queue
and an event handed to them when they start: Ctrl-C or an exception in one
chain stops every chain, and the partial chains come back. On a Dask
client's executor the chains do the same through a Dask ``Queue`` and
``Event`` named for the run (:class:`_ClusterChannel`). Any other
:class:`concurrent.futures.Executor` gives no such channel: progress then
counts finished chains, and its running tasks cannot be stopped.
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import hashlib
import math
import multiprocessing
import os
import queue
import re
import signal
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from . import _core

__all__: list[str] = []

# How often the parent wakes to draw progress and notice Ctrl-C.
_POLL = 0.1


def _start_method() -> str:
    """A start method safe with the Rust threads of the parent: a fork would
    copy their locks in whatever state they are. forkserver where it exists
    (its server is started fresh, then forks cheaply), else spawn."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def check_executor(executor) -> None:
    """``TypeError`` unless ``executor`` is a
    :class:`concurrent.futures.Executor`; ``ValueError`` for a
    ``ProcessPoolExecutor`` that forks its workers (the default start
    method on Linux before Python 3.14): a fork copies the locks of this
    process's sampler threads in whatever state they are, and a worker
    that needs one of them waits for ever."""
    if not isinstance(executor, concurrent.futures.Executor):
        hint = ""
        if callable(getattr(executor, "get_executor", None)):
            hint = f": pass the {type(executor).__name__}'s executor, `executor=client.get_executor()`"
        raise TypeError(f"`executor` must be a concurrent.futures.Executor, got {type(executor).__name__}{hint}")
    if isinstance(executor, concurrent.futures.ProcessPoolExecutor):
        context = getattr(executor, "_mp_context", None)
        if context is not None and context.get_start_method() == "fork":
            raise ValueError(
                "`executor` is a ProcessPoolExecutor that forks its workers, which can hang once this process "
                "has run a sampler (a fork copies its threads' locks, not the threads): make it with "
                "mp_context=multiprocessing.get_context('forkserver') (or 'spawn')"
            )


def pickle_density(function: Callable, gradient: Callable | None) -> tuple[str, bytes]:
    """``(key, bytes)``: the log density (and gradient) pickled by
    cloudpickle, and a key under which a worker keeps it unpickled. A
    density that cannot be pickled is a ``TypeError`` saying what to do."""
    import cloudpickle

    try:
        blob = cloudpickle.dumps((function, gradient))
    except Exception as err:  # cloudpickle raises many kinds of error
        raise TypeError(
            f"the log density cannot be sent to worker processes: pickling it failed with "
            f"{type(err).__name__}: {err}. Objects it holds (an open file, a lock, a C handle, a "
            "live solver) must be picklable: create them inside the function, or in a module-level "
            "function the workers can import; or run the chains in this process with "
            "parallel='thread'"
        ) from err
    return hashlib.sha256(blob).hexdigest(), blob


# ── in the worker ────────────────────────────────────────────────────────

# (progress queue, stop event) in the workers of a pool started here
_channel: tuple[Any, Any] | None = None
# key → (function, gradient), unpickled once per worker process, oldest first
_densities: dict[str, tuple[Callable, Callable | None]] = {}
_KEPT_DENSITIES = 4


def _init_worker(queue, stop, parent_alive) -> None:
    """Runs in each worker of a pool started here: Ctrl-C in a terminal
    reaches the whole process group, but only the parent decides (it sets
    the stop event), so the workers ignore SIGINT. ``parent_alive`` is the
    reading end of a pipe whose only writing end the parent holds: it
    reaches its end when the parent dies, however it dies (a SIGKILL runs
    no clean-up), and the worker then exits instead of finishing its chain
    and waiting for tasks for ever."""
    global _channel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _channel = (queue, stop)
    threading.Thread(target=_exit_with_parent, args=(parent_alive,), daemon=True).start()


def _exit_with_parent(parent_alive) -> None:
    """Waits for the end of ``parent_alive`` (nothing is ever sent), then
    ends this worker at once."""
    try:
        parent_alive.recv_bytes()
    except (EOFError, OSError):
        pass
    os._exit(1)


@dataclass(frozen=True)
class ChainTask:
    """Chain ``chain`` of a run, started at ``x0`` with ``density_record``,
    what its checkpoint records of the log density (see
    ``kameleon._sample._density_record``), or, with ``resume``, continued
    from its checkpoint ``part``, which holds its evaluation limit and
    record; at most ``evaluation_limit`` log-density evaluations."""

    key: str
    density: bytes | str | ClusterDensity
    kind: str
    settings: str
    x0: list[float] | None
    seed: int
    draws: int
    tune: int
    thin: int
    chain: int
    run_id: str
    part: str | None
    checkpoint_every: float
    resume: bool
    evaluation_limit: int | None
    density_record: Any
    # the names of the run's Dask Queue and Event (:class:`_ClusterChannel`)
    cluster_channel: tuple[str, str] | None = None


class MissingDensity(Exception):
    """Raised in a worker given only a density's key for a density it does
    not hold (a worker that joined late, or that an executor started for the
    task): the parent sends the task again with the density."""


@dataclass(frozen=True)
class ClusterDensity:
    """A run's pickled density on a Dask cluster, held by a task
    (:func:`on_cluster`) whose future the Dask ``Variable`` ``name`` holds
    for the run. Chain tasks carry the name, not the future: Dask runs a
    task on the worker that holds its inputs, so a future among the
    arguments queued every chain on one worker until the others stole
    them (a second chain of two started 0.1–1.5 s late)."""

    name: str

    def read(self) -> bytes:
        """The pickled density, fetched by the worker running this task."""
        import distributed

        # the thread leaves the worker's pool while it waits, so that the
        # task can run here if it must be computed again (every worker that
        # held its result was lost)
        with distributed.worker_client() as client:
            return distributed.Variable(self.name, client=client).get().result()


def _density_of(key: str, source: bytes | str | ClusterDensity | None) -> tuple[Callable, Callable | None]:
    """The (function, gradient) pickled under ``key``, unpickled once per
    worker process from ``source``: the pickled bytes, the path of a file
    holding them, where they are on a Dask cluster, or None where the
    worker is expected to hold it already (:class:`MissingDensity`
    otherwise)."""
    if key not in _densities:
        import pickle

        if source is None:
            raise MissingDensity(key)
        if isinstance(source, str):
            with open(source, "rb") as file:
                source = file.read()
        elif isinstance(source, ClusterDensity):
            source = source.read()
        if len(_densities) >= _KEPT_DENSITIES:
            # a long-lived pool serves many runs: keep the latest densities only
            _densities.pop(next(iter(_densities)))
        _densities[key] = pickle.loads(source)
    return _densities[key]


class _CarriedError(Exception):
    """An exception raised in a worker that pickle cannot send back, carried
    as cloudpickle's bytes and raised in the parent as itself
    (:func:`explained`). Its class is typically one defined in the main
    script: the worker got it by value, with the density, through
    cloudpickle, so pickle finds no such class by name there; cloudpickle
    sends it back to the very class the parent holds."""

    def __init__(self, payload: bytes, description: str) -> None:
        super().__init__(description)
        self.payload = payload

    def __reduce__(self):
        return type(self), (self.payload, self.args[0])


@contextlib.contextmanager
def _sendable_errors():
    """Re-raises an exception that pickle cannot send to the parent as a
    :class:`_CarriedError` (from the original, so the worker's traceback
    text still shows where it was raised)."""
    try:
        yield
    except Exception as error:
        import pickle

        import cloudpickle

        try:
            pickle.dumps(error)
        except Exception:
            try:
                carried = _CarriedError(cloudpickle.dumps(error), f"{type(error).__qualname__}: {error}")
            except Exception:
                raise error from None
            raise carried from error
        raise


def run_chain(task: ChainTask) -> tuple[dict, bool, int | None]:
    """Runs one chain in a worker: ``(chain dict, interrupted, steps done)``
    (the steps as last reported to the parent, None without a channel)."""
    with _sendable_errors():
        return _run_chain(task)


def _run_chain(task: ChainTask) -> tuple[dict, bool, int | None]:
    function, gradient = _density_of(task.key, task.density)
    if task.cluster_channel is None:
        return _chain(task, function, gradient, _channel)
    import distributed

    queue, stop = distributed.Queue(task.cluster_channel[0]), distributed.Event(task.cluster_channel[1])
    try:
        # each report is a round trip to the scheduler: fewer of them, and
        # one that fails (the scheduler out of reach) does not end the chain
        return _chain(task, function, gradient, (queue, stop), every=_CLUSTER_REPORT, lenient=True)
    finally:
        with contextlib.suppress(Exception):
            queue.close()  # this worker's reference to the run's queue


def _chain(
    task: ChainTask, function, gradient, channel, every: float = 0.0, lenient: bool = False
) -> tuple[dict, bool, int | None]:
    """Runs the chain of ``task``, reporting its steps to ``channel`` (a
    queue and a stop event, or None) at most every ``every`` seconds; with
    ``lenient``, a report that raises is left out and the chain goes on."""
    progress = None
    steps = [None]
    if channel is not None:
        queue, stop = channel
        last = [-math.inf, False]  # the time of the last report, and its stop flag

        def progress(counts: list[int]) -> bool:
            steps[0] = int(counts[0])
            now = time.monotonic()
            if now - last[0] >= every:
                last[0] = now
                try:
                    queue.put((task.run_id, task.chain, steps[0]))
                    last[1] = stop.is_set()
                except Exception:
                    if not lenient:
                        raise
            return last[1]

    if task.resume:
        result = _core.resume(task.part, task.kind, function, gradient, 1, progress, task.checkpoint_every)
    else:
        result = _core.sample(
            task.settings,
            task.kind,
            function,
            gradient,
            np.array([task.x0], dtype=np.float64),
            task.seed,
            task.draws,
            task.tune,
            task.thin,
            1,
            progress,
            task.part,
            task.checkpoint_every,
            [task.chain],
            task.evaluation_limit,
            task.density_record,
        )
    return result["chains"][0], bool(result["interrupted"]), steps[0]


def evaluate_rows(key: str, density: bytes | None, rows: np.ndarray) -> list[float]:
    """The log density of each row of ``rows``, in a worker, as floats (a
    value that is not a real float is the extension's ``TypeError``);
    ``density`` as for :func:`_density_of`."""
    with _sendable_errors():
        function, _ = _density_of(key, density)
        return [_core.log_density_value(function, function(np.array(row, dtype=np.float64))) for row in rows]


# ── in the parent ────────────────────────────────────────────────────────


def outside_stacklevel() -> int:
    """The ``stacklevel`` at which a warning raised by the caller of this
    function names the first frame outside this package: the user's line."""
    package = os.path.dirname(os.path.abspath(__file__))
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package:
        level += 1
        frame = frame.f_back
    return level


def main_script_obstacle() -> str | None:
    """Why worker processes cannot start from this main program, with what
    to do about it, or None if they can. Worker processes started by
    forkserver or spawn run the main script again as they start (nothing
    for a notebook, the REPL or ``python -c``), so:

    - a main program read from standard input (``python - < run.py``), or
      whose file is gone, cannot start them: each worker fails to read it;
    - a top-level statement of the script that is not under
      ``if __name__ == "__main__":`` runs again in every worker, with the
      run it makes, which cannot start processes of its own."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None:
        return None
    if not os.path.isfile(path):
        return (
            f"worker processes run the main program again as they start, and theirs cannot read it ({path!r}: "
            "read from standard input, or its file is gone). Save it to a file, with the code that samples under "
            '`if __name__ == "__main__":`, to run the chains in processes'
        )
    frame = sys._getframe()
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        with open(path, encoding="utf-8") as source:
            tree = ast.parse(source.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    if _is_guarded(tree, line):
        return None
    return (
        f"worker processes run the main script again as they start, and line {line} of {path!r}, which "
        'makes this run, is not under `if __name__ == "__main__":`. Put the code that samples under that '
        "guard to run the chains in processes"
    )


def _is_guarded(tree: ast.Module, line: int) -> bool:
    """Whether the module-level statement at ``line`` of the script ``tree``
    sits in the body of a main guard (see :func:`_main_guards`)."""
    return any(node.body[0].lineno <= line <= node.body[-1].end_lineno for node in _main_guards(tree.body))


def _main_guards(statements: list[ast.stmt]):
    """The ``if`` statements that run at import among ``statements`` (at
    module level, or in the blocks of module-level ``if``, ``with``,
    ``try`` and loops; not in functions or classes) whose body a worker,
    where ``__name__`` is ``"__mp_main__"``, does not run: those whose test
    is ``__name__ == "__main__"`` or an ``and`` of it with other conditions."""
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        guard = isinstance(node, ast.If) and _is_main_guard(node.test)
        if guard:
            yield node
        for field, value in ast.iter_fields(node):
            if not isinstance(value, list) or (guard and field == "body"):
                continue
            for item in value:
                # an except clause or a match case holds statements of its own
                inner = [item] if isinstance(item, ast.stmt) else getattr(item, "body", [])
                yield from _main_guards([s for s in inner if isinstance(s, ast.stmt)])


def _is_main_guard(test: ast.expr) -> bool:
    """Whether ``test`` is false in a worker: ``__name__ == "__main__"``
    (either way round), or an ``and`` with it among its operands."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_guard(value) for value in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {ast.dump(test.left), ast.dump(test.comparators[0])}
    return sides == {ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))}


class _Pool:
    """The process pool started here (one at a time, reused by later runs
    with as many workers), with its progress queue and stop event. A run
    holds ``lock`` while it uses the pool: runs made at once from several
    threads of a program take turns, as they would share the stop event
    (one run's budget or error stopped the others, which came back empty)
    and one could replace the pool under another."""

    current: _Pool | None = None
    lock = threading.Lock()

    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context(_start_method())
        if context.get_start_method() == "forkserver":
            # the server imports the package once; each worker forked from
            # it then starts at once (no effect once the server runs)
            context.set_forkserver_preload(["kameleon._parallel"])
        self.workers = workers
        self.queue = context.Queue()
        self.stop = context.Event()
        # the workers are started by the forkserver (or spawned), so the
        # writing end stays in this process only
        parent_alive, self.alive = context.Pipe(duplex=False)
        self.executor = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker, initargs=(self.queue, self.stop, parent_alive)
        )

    @classmethod
    def get(cls, workers: int) -> _Pool:
        """The pool of ``workers`` processes: the current one, or a new one
        if it has another size or is broken (a worker died). The caller
        holds ``lock``."""
        pool = cls.current
        if pool is None or pool.workers != workers or pool.broken():
            # workers about to start run the main script again: it must let them
            obstacle = main_script_obstacle()
            if obstacle is not None:
                raise RuntimeError(
                    f"cannot start worker processes: {obstacle}, or run on threads "
                    '(`parallel="thread"` in km.sample, `cores=1` in km.sample_ensemble)'
                )
            if pool is not None:
                pool.close()
            pool = cls.current = cls(workers)
        pool.stop.clear()
        return pool

    def broken(self) -> bool:
        """Whether a worker died, so the pool runs no more tasks: it then
        refuses a task at once (this no-op task otherwise costs nothing
        to wait for, as nobody waits)."""
        try:
            self.executor.submit(int)
        except BrokenProcessPool:
            return True
        return False

    def close(self) -> None:
        """Ends the worker processes (waiting for them)."""
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.alive.close()
        self.queue.close()
        self.queue.join_thread()
        if _Pool.current is self:
            _Pool.current = None


@contextlib.contextmanager
def sigint_sets(event: threading.Event):
    """While inside, SIGINT (Ctrl-C) sets ``event`` instead of raising
    ``KeyboardInterrupt`` anywhere in the waiting code (which could leave a
    future's lock held); only in the main thread, where handlers live, and
    not where SIGINT is ignored (a program started by ``nohup`` or in the
    background of a script), which it stays."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        yield event
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: event.set())
    try:
        yield event
    finally:
        signal.signal(signal.SIGINT, previous)


def shutdown_pool() -> None:
    """Ends the worker processes of the pool started by :func:`run`, if any
    (once the run using it, if any, has ended)."""
    with _Pool.lock:
        if _Pool.current is not None:
            _Pool.current.close()


def part_path(checkpoint: str, chain: int, chains: int) -> str:
    """Where a worker checkpoints chain ``chain`` of the ``chains`` of the
    run checkpointed at ``checkpoint``."""
    return f"{checkpoint}.chain{chain}-of-{chains}"


def _parts(checkpoint: str) -> dict[int, tuple[int, str]]:
    """The per-chain checkpoints of ``checkpoint`` on disk: chain →
    (number of chains, path)."""
    folder, name = os.path.split(os.path.abspath(checkpoint))
    pattern = re.compile(re.escape(name) + r"\.chain(\d+)-of-(\d+)")
    found = {}
    for entry in os.listdir(folder):
        match = pattern.fullmatch(entry)
        if match:
            found[int(match[1])] = (int(match[2]), os.path.join(folder, entry))
    return found


def remove_parts(checkpoint: str) -> None:
    """Removes the per-chain checkpoints of an earlier run at ``checkpoint``
    (a new run there replaces it, as the file itself is replaced)."""
    for _, path in _parts(checkpoint).values():
        os.remove(path)


def gather_parts(checkpoint: str) -> bool:
    """Gathers the per-chain checkpoints ``PATH.chainK-of-N`` written by
    process workers into ``checkpoint`` and removes them; False if there
    are none. A run stopped before every chain had saved one cannot be
    continued: ``ValueError``."""
    found = {k: n for k, (n, _) in _parts(checkpoint).items()}
    if not found:
        return False
    chains = max(found.values())
    if set(found.values()) != {chains}:
        raise ValueError(
            f"the chain checkpoints {checkpoint!r}.chainK-of-N belong to runs of different numbers of chains: "
            "remove those of the other run"
        )
    missing = [k for k in range(chains) if k not in found]
    if missing:
        raise ValueError(
            f"the run checkpointed at {checkpoint!r} was stopped before chains {missing} had saved a "
            "checkpoint: it cannot be continued (a shorter `checkpoint_every` saves sooner)"
        )
    parts = [part_path(checkpoint, k, chains) for k in range(chains)]
    _core.regroup_checkpoints(parts, checkpoint)
    for part in parts:
        os.remove(part)
    return True


def explained(error: BaseException) -> BaseException:
    """What a worker's exception ``error`` is to the user: the exception a
    :class:`_CarriedError` carries (with the worker's traceback as its
    cause), for a ``BrokenProcessPool`` (whose own message names no cause)
    one that says what happened and what to look for, else ``error``."""
    if isinstance(error, _CarriedError):
        import cloudpickle

        carried = cloudpickle.loads(error.payload)
        carried.__cause__ = error.__cause__
        return carried
    if not isinstance(error, BrokenProcessPool):
        return error
    broken = BrokenProcessPool(
        "a worker process died while running the log density (killed by a signal, e.g. by the out-of-memory "
        "killer, or a crash in native code the density calls), so its pool runs no more tasks; if memory is "
        f"short, run fewer chains or cores at once ({error})"
    )
    broken.__cause__ = error.__cause__
    return broken


def split_checkpoint(checkpoint: str, chains: int) -> list[str]:
    """Writes each chain of ``checkpoint`` to its own part file (for process
    workers to resume) and returns their paths."""
    parts = [part_path(checkpoint, k, chains) for k in range(chains)]
    for k, part in enumerate(parts):
        _core.regroup_checkpoints([checkpoint], part, [k])
    return parts


def run(
    tasks: Sequence[ChainTask],
    totals: Sequence[int],
    workers: int,
    executor: concurrent.futures.Executor | None,
    bars,
    checkpoint: str | None,
) -> dict:
    """Runs ``tasks`` (one per chain, in chain order; ``totals`` their
    steps) on ``executor`` or on the pool of ``workers`` processes started
    here, and returns the extension's result dict of the chains in order.
    ``bars`` (or None) is called with the steps done per chain about every
    0.1 s; a truthy return value stops every chain, as Ctrl-C does (the
    partial chains come back, marked interrupted), but keeps the pool. The
    first exception of a chain is raised once the other chains have
    stopped, or at once on an ``executor`` whose running tasks cannot be
    stopped (any but a Dask client's)."""
    if executor is not None:
        client = dask_client(executor)
        if client is None:
            return _run_tasks(tasks, totals, None, executor, bars, checkpoint)
        import distributed

        channel = _ClusterChannel(client, tasks[0].run_id)
        density = distributed.Variable(f"kameleon-{tasks[0].run_id}-density", client=client)
        try:
            density.set(on_cluster(client, tasks[0].density))
            tasks = [
                replace(task, density=ClusterDensity(density.name), cluster_channel=channel.names) for task in tasks
            ]
            return _run_tasks(tasks, totals, None, executor, bars, checkpoint, channel)
        finally:
            channel.close()
            with contextlib.suppress(Exception):  # a client closed meanwhile
                density.delete()
    with _Pool.lock:
        pool = _Pool.get(workers)
        with _density_file(tasks[0].density) as density:
            tasks = [replace(task, density=density) for task in tasks]
            return _run_tasks(tasks, totals, pool, None, bars, checkpoint, channel=_PoolChannel(pool))


def dask_client(executor: concurrent.futures.Executor | None) -> Any | None:
    """The ``dask.distributed`` client whose executor ``executor`` is
    (``client.get_executor()``), or None."""
    cfexecutor = sys.modules.get("distributed.cfexecutor")
    if cfexecutor is None or not isinstance(executor, cfexecutor.ClientExecutor):
        return None
    return getattr(executor, "_client", None)


# How often a chain on a Dask cluster reports its progress and reads the
# stop flag, in seconds: each is a round trip to the scheduler.
_CLUSTER_REPORT = 0.25


class _PoolChannel:
    """The parent's side of the reports and stop flag of the chains on the
    pool started here."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool

    def drain(self) -> list:
        reports = []
        while True:
            try:
                reports.append(self.pool.queue.get_nowait())
            except queue.Empty:
                return reports

    def stop(self) -> None:
        self.pool.stop.set()


class _ClusterChannel:
    """The reports and stop flag of a run's chains on a Dask cluster: a
    Dask ``Queue`` the chains put their progress in and an ``Event`` they
    watch, named for the run (``names``), which the chains open by name."""

    def __init__(self, client, run_id: str) -> None:
        import distributed

        self.names = (f"kameleon-{run_id}-progress", f"kameleon-{run_id}-stop")
        self.queue = distributed.Queue(self.names[0], client=client)
        self.event = distributed.Event(self.names[1], client=client)

    def drain(self) -> list:
        return [tuple(report) for report in self.queue.get(batch=True)]

    def stop(self) -> None:
        self.event.set()

    def close(self) -> None:
        """Releases the queue and the event on the scheduler."""
        for release in (self.queue.close, self.event.clear):
            with contextlib.suppress(Exception):  # a client closed meanwhile
                release()


def held(density: bytes) -> bytes:
    """The task of a Dask cluster that holds a run's pickled density
    (:func:`on_cluster`)."""
    return density


def on_cluster(client, density: bytes) -> Any:
    """A future of the pickled density ``density`` on the cluster of the
    ``dask.distributed`` ``client``, for the ensemble's tasks to pass in
    its place and the chains to fetch (:class:`ClusterDensity`): one task
    holds the bytes, each worker fetches its result once however many
    tasks it runs, and the other tasks stay small. Unlike scattered
    data, the task is computed again if every worker that held its result
    is lost, so a cluster whose workers are all replaced (a batch system's
    time limit) still finishes the run."""
    with warnings.catch_warnings():
        # Dask's advice for a large graph is what this is: one task holds it
        warnings.filterwarnings("ignore", message="Sending large graph")
        return client.submit(held, density, pure=False)


# The temporary files of the pickled densities: PREFIX + pid + "-" + random + SUFFIX.
_DENSITY_FILE_PREFIX, _DENSITY_FILE_SUFFIX = "kameleon-density-", ".pickle"


@contextlib.contextmanager
def _density_file(density: bytes):
    """While inside, the path of a temporary file holding ``density`` (the
    pickled log density), which the pool's workers read once each instead of
    receiving it with every task; removed on leaving, when every task has
    ended. If the file cannot be written (no room), ``density`` itself.
    The files left by processes that were killed during a run are removed
    first."""
    _remove_stale_density_files(tempfile.gettempdir())
    try:
        file = tempfile.NamedTemporaryFile(
            prefix=f"{_DENSITY_FILE_PREFIX}{os.getpid()}-", suffix=_DENSITY_FILE_SUFFIX, delete=False
        )
    except OSError:
        yield density
        return
    try:
        try:
            with file:  # a full disk may refuse the write or the flush at close
                file.write(density)
        except OSError:
            yield density
        else:
            yield file.name
    finally:
        with contextlib.suppress(OSError):
            os.remove(file.name)


def _remove_stale_density_files(directory: str) -> None:
    """Removes the density files in ``directory`` of processes that no
    longer run (killed, say by a batch system's time limit, before they
    could remove them). Where there is no ``/proc`` to ask, none."""
    if not os.path.isdir("/proc"):
        return
    try:
        entries = os.scandir(directory)
    except OSError:
        return
    with entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(_DENSITY_FILE_PREFIX) and name.endswith(_DENSITY_FILE_SUFFIX)):
                continue
            pid = name[len(_DENSITY_FILE_PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                with contextlib.suppress(OSError):
                    os.remove(entry.path)


def _run_tasks(
    tasks: Sequence[ChainTask],
    totals: Sequence[int],
    pool: _Pool | None,
    executor: concurrent.futures.Executor | None,
    bars,
    checkpoint: str | None,
    channel: _PoolChannel | _ClusterChannel | None = None,
) -> dict:
    """:func:`run` on ``pool`` (held by this thread) or ``executor``; the
    chains report to ``channel`` where there is one."""
    futures = [(executor or pool.executor).submit(run_chain, task) for task in tasks]
    index = {task.chain: i for i, task in enumerate(tasks)}
    steps = [0] * len(tasks)
    interrupted = False
    error: BaseException | None = None

    def stop() -> None:
        # the chains see the stop flag within a report and return their
        # partial chains (queued chains then stop at once); without a
        # channel, an executor can only drop the chains not yet started
        if channel is not None:
            channel.stop()
        else:
            for future in futures:
                future.cancel()

    def report() -> None:
        nonlocal interrupted
        for run_id, chain, n in [] if channel is None else channel.drain():
            if run_id == tasks[0].run_id:
                steps[index[chain]] = max(steps[index[chain]], n)
        if channel is None:
            # no channel: a chain counts once it has finished
            for i, future in enumerate(futures):
                if future.done() and not future.cancelled() and future.exception() is None:
                    steps[i] = totals[i]
        if bars is not None and bars(steps) and pending and not interrupted:
            interrupted = True
            stop()

    pending = set(futures)
    with sigint_sets(threading.Event()) as interrupt:
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=_POLL)
            # `wait` never counts a future cancelled without notice as done,
            # as an executor shut down with `cancel_futures=True` leaves them
            pending = {future for future in pending if not future.cancelled()}
            if error is None:
                failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
                if failed:
                    error = explained(failed[0].exception())
                    stop()
                    if channel is None:
                        # the executor cannot stop its running tasks:
                        # raise now rather than when they end
                        raise error
            if interrupt.is_set() and not interrupted:
                interrupted = True
                stop()
                if channel is None:
                    # the executor cannot be told to stop its running tasks
                    raise KeyboardInterrupt
            report()
    # the last reports travel with the results (the queue may bring them later)
    for i, future in enumerate(futures):
        if not future.cancelled() and future.exception() is None and future.result()[2] is not None:
            steps[i] = max(steps[i], future.result()[2])
    report()
    if checkpoint is not None and not gather_parts(checkpoint) and any(steps):
        # every chain saves its part at least when it ends: none here means
        # the executor's workers wrote them on a file system of their own
        warnings.warn(
            f"the chains' checkpoints ({checkpoint!r}.chainK-of-N) were not found on this machine, so "
            f"{checkpoint!r} was not written: the executor's workers saved them where they run. Give "
            "`checkpoint=` a path on a file system the workers share with this process to resume or "
            "extend the run",
            RuntimeWarning,
            stacklevel=outside_stacklevel(),
        )
    if pool is not None and interrupt.is_set():
        # after Ctrl-C, leave no process behind (a pool whose worker died
        # is replaced by the next run's `_Pool.get`)
        pool.close()
    if error is not None:
        raise error
    cancelled = [task.chain for task, future in zip(tasks, futures) if future.cancelled()]
    if cancelled:
        raise RuntimeError(
            f"the executor cancelled the tasks of chains {cancelled} before they ended: it was shut down "
            "during the run, or (on a Dask cluster) the tasks were cancelled or their inputs lost. Run the "
            "sampling again on a running executor"
        )
    chains = []
    for future in futures:
        chain, stopped, _ = future.result()
        interrupted = interrupted or stopped
        chains.append(chain)
    return {"chains": chains, "interrupted": interrupted}


def rows_on_workers(function: Callable, workers: int, executor: concurrent.futures.Executor | None) -> Callable:
    """A vectorised log density ``f(xs) -> values`` that evaluates the rows
    of ``xs`` with ``function`` on the pool of ``workers`` processes started
    here, one task per worker, or on ``executor``, ``workers`` tasks (one
    per row if ``workers`` is 1). The tasks of the first evaluation carry
    the pickled density; later ones only its key, and a worker that lacks
    it is sent it again. An exception of ``function`` is re-raised (with
    the worker's traceback as its cause)."""
    key, blob = pickle_density(function, None)
    if executor is None:
        with _Pool.lock:
            _Pool.get(workers)  # started (or refused) before the run
    client = dask_client(executor)
    density = blob if client is None else on_cluster(client, blob)
    first = True

    def evaluate(xs: np.ndarray) -> np.ndarray:
        nonlocal first
        # a user's executor has as many workers as it has: a task per row
        # unless `workers` says how many
        tasks = len(xs) if executor is not None and workers == 1 else workers
        chunks = np.array_split(xs, min(len(xs), tasks))
        # the pool is held for each evaluation only: runs from other threads
        # go on between two half sweeps, and may have replaced it (a worker
        # that died shows as BrokenProcessPool, below)
        with _Pool.lock if executor is None else contextlib.nullcontext():
            if executor is None and (_Pool.current is None or _Pool.current.workers != workers):
                _Pool.get(workers)
            submit = (executor or _Pool.current.executor).submit
            futures = [submit(evaluate_rows, key, density if first else None, chunk) for chunk in chunks]
            first = False
            try:
                for i, future in enumerate(futures):
                    if isinstance(future.exception(), MissingDensity):
                        futures[i] = submit(evaluate_rows, key, density, chunks[i])
                values = [v for future in futures for v in future.result()]
            except (BrokenProcessPool, _CarriedError) as err:
                raise explained(err) from err.__cause__
            except concurrent.futures.CancelledError as err:
                raise RuntimeError(
                    "the executor cancelled an evaluation of the walkers: it was shut down during the run, "
                    "or (on a Dask cluster) the tasks were cancelled. Run the sampling again on a running "
                    "executor"
                ) from err
        return np.array(values, dtype=np.float64)

    return evaluate
