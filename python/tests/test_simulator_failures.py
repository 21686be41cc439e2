"""Simulators that fail: each failure is a clear error or a documented
rejection, in every sampler that runs them, and no run hangs."""

import math

import numpy as np
import pytest

import kameleon as km
from kameleon import priors

pytestmark = pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")


def forgets_to_return(theta, rng):
    rng.normal(theta[0], 1.0)


@pytest.mark.parametrize("batched", [False, True])
def test_a_simulator_returning_none_is_a_clear_error_not_a_nan_summary(batched):
    simulator = (lambda theta, n, rng: None) if batched else forgets_to_return
    abc = km.ABC(simulator, [0.0], 1.0, 4, batched=batched)
    with pytest.raises(ValueError, match="returned None"):
        km.sample(abc, [0.0], draws=5, tune=0, chains=1, progress=False)


def test_a_raising_simulator_stops_the_ensemble_sampler():
    def broken(theta, n, rng):
        if theta[0] > 0.5:
            raise RuntimeError("no simulation above 0.5")
        return rng.normal(theta[0], 1.0, size=(n, 1))

    abc = km.ABC(broken, [0.0], 1.0, 5, batched=True)
    with pytest.raises(RuntimeError, match="no simulation above 0.5") as info:
        km.sample_ensemble(abc, [0.0], walkers=8, draws=200, tune=0, seed=1, progress=False)
    assert any("raised by the simulator at theta" in note for note in info.value.__notes__)


def test_a_raising_simulator_stops_every_chain_on_several_cores():
    def broken(theta, rng):
        raise OSError("the simulator's input file is gone")

    abc = km.SyntheticLikelihood(broken, [0.0, 1.0], 5)
    with pytest.raises(OSError, match="input file is gone"):
        km.sample(abc, [0.0, 0.0], draws=50, tune=0, chains=4, cores=2, progress=False)


def test_a_raising_simulator_stops_the_prior_draws_of_the_starts():
    def broken(theta, rng):
        raise KeyError("missing")

    abc = km.ABC(broken, [0.0], 1.0, 3)
    with pytest.raises(KeyError, match="missing"):
        km.sample(abc, None, prior=[priors.Normal(0.0, 1.0)], draws=5, tune=0, chains=2, progress=False)


def test_infinite_or_nan_summaries_are_rejections_and_the_chain_stays_out_of_them():
    def overflows(theta, n, rng):
        # beyond 1 the simulator overflows (inf) or fails (NaN)
        s = rng.normal(theta[0], 1.0, size=(n, 1))
        if theta[0] > 1.0:
            s[:] = math.inf if theta[0] < 2.0 else math.nan
        return s

    for estimator in (
        km.ABC(overflows, [0.0], 0.5, 10, batched=True),
        km.SyntheticLikelihood(overflows, [0.0], 10, batched=True),
    ):
        idata = km.sample(estimator, [0.0], sampler=km.AM(), draws=500, tune=200, chains=2, seed=4, progress=False)
        x = idata.posterior["x"].values
        assert np.isfinite(x).all() and (x <= 1.0).all()
        assert sum(idata.posterior.attrs["rejected_non_finite"]) > 0


def test_the_wrong_number_of_batched_simulations_is_a_clear_error():
    abc = km.ABC(lambda theta, n, rng: np.zeros((n + 1, 1)), [0.0], 1.0, 4, batched=True)
    with pytest.raises(ValueError, match=r"shape \(5, 1\); expected shape \(n_simulations, s\) = \(4, 1\)"):
        km.sample(abc, [0.0], draws=5, tune=0, chains=1, progress=False)
