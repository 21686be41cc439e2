"""Sizes and intervals a user can get wrong: each is a clear Python error
(ValueError or MemoryError) that ``except Exception`` catches, never an
abort of the interpreter, a ``PanicException`` or a silently empty run."""

import math

import numpy as np
import pytest

import kameleon as km
from kameleon import targets


def normal(x):
    return -0.5 * float(x @ x)


@pytest.mark.parametrize("every", [math.nan, 0, -1.0, "soon"])
def test_checkpoint_every_must_be_a_positive_number_of_seconds(tmp_path, every):
    with pytest.raises(ValueError, match="checkpoint_every"):
        km.sample(normal, np.zeros(2), sampler=km.AM(), draws=10, tune=10, chains=1, progress=False,
                  checkpoint=tmp_path / "run.ckpt", checkpoint_every=every)
    with pytest.raises(ValueError, match="checkpoint_every"):
        km.sample_ensemble(normal, np.zeros(2), draws=10, tune=10, progress=False, seed=1,
                           checkpoint=tmp_path / "ens.ckpt", checkpoint_every=every)


@pytest.mark.parametrize("every", [math.inf, 1e19, 1e300])
def test_an_endless_checkpoint_interval_saves_at_the_end(tmp_path, every):
    # used to raise PanicException (an interval too long for a Duration, or
    # for an Instant plus it); now it means "only at the end and on Ctrl-C"
    kwargs = dict(sampler=km.AM(), draws=50, tune=50, chains=2, seed=4, progress=False)
    path = tmp_path / "run.ckpt"
    run = km.sample(normal, np.zeros(2), checkpoint=path, checkpoint_every=every, **kwargs)
    resumed = km.resume(path, normal, progress=False)
    np.testing.assert_array_equal(resumed.posterior["x"].values, run.posterior["x"].values)
    ens_path = tmp_path / "ens.ckpt"
    ens = km.sample_ensemble(normal, np.zeros(2), draws=20, tune=10, progress=False, seed=1,
                             checkpoint=ens_path, checkpoint_every=every)
    again = km.resume_ensemble(ens_path, normal, progress=False)
    np.testing.assert_array_equal(again.posterior["x"].values, ens.posterior["x"].values)


@pytest.mark.parametrize("vectorize", [False, True])
def test_a_tiny_checkpoint_interval_still_advances_the_chains(tmp_path, vectorize):
    # an interval shorter than starting a segment of the run took no step
    # between saves: the run saved for ever (stopped here by max_seconds)
    kwargs = dict(sampler=km.AM(), draws=20, tune=10, chains=2, seed=4, progress=False)
    density = (lambda xs: -0.5 * np.sum(xs * xs, axis=1)) if vectorize else normal
    run = km.sample(density, np.zeros(2), checkpoint=tmp_path / "run.ckpt", checkpoint_every=1e-9,
                    max_seconds=20, vectorize=vectorize, **kwargs)
    assert run.posterior.attrs["stopped_by"] == "draws"
    # the same arithmetic one point at a time (`normal`'s BLAS dot may fuse
    # its multiply-adds on some CPUs, and the pilot's Hessian sees the bits)
    one_point = (lambda x: float(density(x[None])[0])) if vectorize else normal
    reference = km.sample(one_point, np.zeros(2), **kwargs)
    np.testing.assert_array_equal(run.posterior["x"].values, reference.posterior["x"].values)


def test_draws_times_thin_that_overflows_is_an_error():
    # 2**40 · 2**30 = 2**70 steps wrapped to an empty run
    with pytest.raises(ValueError, match="overflows"):
        km.sample(normal, np.zeros(2), sampler=km.AM(), draws=2**40, thin=2**30, tune=1, chains=1, progress=False)


def test_more_iid_draws_than_memory_is_a_memory_error():
    with pytest.raises(MemoryError, match="n × d"):
        targets.Banana(2).sample_iid(2**60, seed=1)
    assert targets.Banana(2).sample_iid(3, seed=1).shape == (3, 2)


@pytest.mark.parametrize(
    "sampler",
    [
        km.KAMH(subsample_size=2**40),
        km.PCAKameleon(subsample_size=2**40),
        km.CKAM(subsample_size=2**40),
        km.KMCLite(n=2**40),
        km.FKAMH(features=2**40),
        km.FKAMH(features=2**40, feature_map="fastfood"),
    ],
    ids=lambda s: f"{type(s).__name__}-{getattr(s, 'feature_map', '')}",
)
def test_a_subsample_or_features_beyond_memory_is_an_error(sampler):
    # each used to abort the interpreter ("memory allocation of … failed")
    with pytest.raises(ValueError, match="more than can be allocated"):
        km.sample(normal, np.zeros(2), sampler=sampler, draws=5, tune=5, chains=1, progress=False)



def test_more_cores_than_chains_start_no_more_workers_than_chains():
    # cores=10**6 tried to start a million threads and hung
    kwargs = dict(sampler=km.AM(), draws=50, tune=50, chains=2, seed=1, progress=False)
    many = km.sample(normal, np.zeros(2), cores=10**6, parallel="thread", **kwargs)
    two = km.sample(normal, np.zeros(2), cores=2, parallel="thread", **kwargs)
    np.testing.assert_array_equal(many.posterior["x"].values, two.posterior["x"].values)


def test_complex_starting_points_are_refused():
    with pytest.raises(TypeError, match="real"):
        km.sample(normal, np.array([1 + 2j, 0]), sampler=km.AM(), draws=5, tune=5, chains=1, progress=False)
    with pytest.raises(TypeError, match="real"):
        km.sample_ensemble(normal, np.array([1 + 2j, 0]), draws=5, tune=5, progress=False, seed=1)


@pytest.mark.parametrize("setting", ["draws", "tune", "chains", "thin"])
def test_an_integer_setting_too_large_for_the_extension_is_named(setting):
    # 2**64 gave the extension's bare "OverflowError: int too big to
    # convert", naming no setting
    kwargs = {**dict(draws=10, tune=10, chains=1, progress=False), setting: 2**64}
    with pytest.raises(ValueError, match=f"`{setting}` must be an integer below 2\\*\\*63"):
        km.sample(normal, np.zeros(2), sampler=km.AM(), **kwargs)


def test_habc_names_a_simulation_count_too_large_for_the_extension():
    with pytest.raises(ValueError, match="`n_simulations` must be an integer below 2\\*\\*63"):
        km.HABC(lambda theta, rng: np.array([theta[0]]), [0.0], n_simulations=2**64)
