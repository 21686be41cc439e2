import concurrent.futures
import math
import os
import pickle
import signal
import subprocess
import time
import warnings

import numpy as np
import pytest

import kameleon as km

LN_2PI = 1.8378770664093455  # ln(2π), the constant of the Rust targets


def banana_log_density(b: float, v: float):
    """The Rust Banana's log density with the same floating-point operations
    in the same order (so chains agree bit for bit)."""
    ln_v = math.log(v)

    def f(x):
        y0 = float(x[0])
        r = float(x[1]) - b * (y0 * y0 - v)
        s = -0.0
        for t in x[2:]:
            t = float(t)
            s += t * t
        n = y0 * y0 / v + r * r + s
        return -0.5 * (len(x) * LN_2PI + ln_v + n)

    return f


@pytest.fixture
def gaussian_2d():
    """A correlated 2-d Gaussian: mean, covariance and its log density."""
    mean = np.array([1.0, -2.0])
    cov = np.array([[2.0, 1.2], [1.2, 1.5]])
    prec = np.linalg.inv(cov)

    def logp(x):
        d = x - mean
        return -0.5 * float(d @ prec @ d)

    def grad(x):
        return -(prec @ (x - mean))

    return mean, cov, logp, grad


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt (or reaches the handler a run
    installs) while the test runs, even if this process was started with
    SIGINT ignored (a background job of a non-interactive shell)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def quiet():
    """Silences kameleon's SamplingWarning (tests of short runs that
    trigger it on purpose; use with ``pytest.mark.usefixtures``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        yield


@pytest.fixture
def submitted_bytes(monkeypatch):
    """The pickled size of each task submitted to any
    ``ProcessPoolExecutor`` in this process while the test runs (the pool
    kameleon starts and a user's), in order."""
    sizes = []
    submit = concurrent.futures.ProcessPoolExecutor.submit

    def recording(self, fn, /, *args, **kwargs):
        sizes.append(len(pickle.dumps((fn, args, kwargs))))
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "submit", recording)
    return sizes


class CancellingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A pool of one thread that runs the tasks ``runs(n, args)`` accepts
    (``n`` counts the submissions from 1) and cancels the others without
    notice, as a ``ProcessPoolExecutor`` shut down with
    ``cancel_futures=True`` leaves the tasks it has not started."""

    def __init__(self, runs) -> None:
        super().__init__(1)
        self.runs = runs
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        if self.runs(self.submitted, args):
            return super().submit(fn, *args, **kwargs)
        future = concurrent.futures.Future()
        future.cancel()
        return future


def interrupt_and_wait(proc: subprocess.Popen) -> tuple[int, str, float]:
    """Sends SIGINT to ``proc`` and waits up to 20 s for it to end (killing
    it and failing the test otherwise): its return code, its standard
    output and the seconds from the signal to its end."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the sampling process did not stop within 20 s of SIGINT")
    return proc.returncode, out, time.monotonic() - sent


def self_interrupting(log_density, at_call: int, sleep: float):
    """``log_density`` slowed by ``sleep`` seconds a call, sending SIGINT to
    this process at its ``at_call``-th call (a run stopped part-way)."""
    calls = []

    def interrupting(x):
        calls.append(1)
        if len(calls) == at_call:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(sleep)
        return log_density(x)

    return interrupting
