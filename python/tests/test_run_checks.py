"""What a user sees around a run: integer arguments, the version, jittered
starts and the checks after every run (SamplingWarning and the attrs)."""

import contextlib
import importlib.resources
import inspect
import math
import typing
import warnings

import numpy as np
import pytest

import kameleon as km
from kameleon import targets

from conftest import banana_log_density


def standard_normal(x):
    return -0.5 * float(x @ x)


def fixed_walk(scale):
    """A random walk that keeps its scale (by default it learns it in tuning)."""
    return km.RandomWalk(scale=scale, learned=False, whiten=False)


@contextlib.contextmanager
def no_sampling_warning():
    """A SamplingWarning inside fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", km.SamplingWarning)
        yield


# ── integers and the version ─────────────────────────────────────────────


@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")  # short runs on purpose
def test_numpy_integers_are_accepted_and_give_the_same_draws_as_ints():
    kwargs = dict(sampler=km.RandomWalk(whiten=False), progress=False)
    plain = km.sample(standard_normal, [0.0, 0.0], draws=50, tune=10, chains=2, thin=2, seed=3, **kwargs)
    numpy = km.sample(
        standard_normal,
        [0.0, 0.0],
        draws=np.int64(50),
        tune=np.int32(10),
        chains=np.int64(2),
        thin=np.uint8(2),
        seed=np.int64(3),
        cores=np.int64(1),
        **kwargs,
    )
    np.testing.assert_array_equal(plain.posterior["x"].values, numpy.posterior["x"].values)
    assert numpy.posterior.attrs["seed"] == "3"
    top = km.sample(standard_normal, [0.0], draws=5, tune=0, chains=1, seed=np.uint64(2**64 - 1), **kwargs)
    assert top.posterior.attrs["seed"] == str(2**64 - 1)


def test_numpy_integers_are_accepted_by_sample_ensemble():
    plain = km.sample_ensemble(standard_normal, [0.0, 0.0], walkers=6, draws=20, tune=5, seed=4, progress=False)
    numpy = km.sample_ensemble(
        standard_normal,
        [0.0, 0.0],
        walkers=np.int64(6),
        draws=np.int64(20),
        tune=np.int16(5),
        seed=np.uint32(4),
        a=np.float32(2.0),
        progress=False,
    )
    np.testing.assert_array_equal(plain.posterior["x"].values, numpy.posterior["x"].values)


@pytest.mark.parametrize("name", ["seed", "draws", "tune", "chains", "thin", "cores"])
@pytest.mark.parametrize("value", [True, np.True_, 2.0, "2"])
def test_bools_floats_and_strings_are_refused(name, value):
    with pytest.raises(ValueError, match=f"`{name}` must be an integer"):
        km.sample(standard_normal, [0.0], sampler=km.RandomWalk(whiten=False), progress=False,
                  **{"draws": 5, "tune": 0, "chains": 2, **{name: value}})


@pytest.mark.parametrize("name", ["seed", "draws", "walkers"])
def test_sample_ensemble_refuses_bools(name):
    with pytest.raises(ValueError, match=f"`{name}` must be an integer"):
        km.sample_ensemble(standard_normal, [0.0, 0.0], progress=False, **{"draws": 5, "tune": 0, name: True})


def test_seed_out_of_range_is_refused():
    for seed in (-1, 2**64, np.int64(-1)):
        with pytest.raises(ValueError, match=r"`seed` must be an integer in \[0, 2\*\*64\)"):
            km.sample(standard_normal, [0.0], draws=5, tune=0, chains=1, seed=seed, progress=False)


def test_version_is_a_string_recorded_in_the_output():
    assert isinstance(km.__version__, str) and km.__version__
    idata = km.sample(standard_normal, [0.0], sampler=km.RandomWalk(whiten=False), draws=5, tune=0, chains=1, seed=1,
                      progress=False)
    assert idata.posterior.attrs["inference_library_version"] == km.__version__


def test_the_installed_package_declares_its_type_annotations():
    # PEP 561: mypy and pyright read an installed package's annotations only
    # when it ships a py.typed marker (in the 3.12 run the package comes from
    # the wheel, so this checks what maturin packs)
    assert importlib.resources.files("kameleon").joinpath("py.typed").is_file()


def public_functions():
    """(name, function) of every public function, constructor and method
    of the package's public modules."""
    for module in (km, km.targets, km.simulators, km.diagnostics, km.priors):
        for name in getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]:
            item = getattr(module, name)
            if getattr(item, "__module__", "").split(".")[0] != "kameleon":
                continue
            if inspect.isfunction(item):
                yield f"{module.__name__}.{name}", item
            elif inspect.isclass(item):
                for attribute, value in vars(item).items():
                    function = getattr(value, "__func__", value)  # class and static methods
                    if inspect.isfunction(function) and (attribute == "__init__" or not attribute.startswith("_")):
                        yield f"{module.__name__}.{name}.{attribute}", function


def admits_int_only(hint) -> bool:
    """Whether the annotation ``hint`` admits ``int`` somewhere (a tuple's
    items included) where it does not admit numpy integers."""
    args = typing.get_args(hint)
    if hint is int:
        return True
    if int in args:
        return np.integer not in args
    return any(admits_int_only(a) for a in args)


def test_every_integer_parameter_admits_numpy_integers_as_the_checks_do():
    # the runs take numpy integers for counts, sizes and seeds (above), so
    # a type checker must too: an annotation of plain `int` makes mypy
    # reject seed=np.int64(3)
    checked, narrow = 0, []
    for name, function in public_functions():
        for parameter, hint in typing.get_type_hints(function).items():
            if parameter != "return" and "int" in repr(hint):
                checked += 1
                if admits_int_only(hint):
                    narrow.append(f"{name}({parameter}: {hint})")
    assert checked > 50  # the walk found the API: km.sample, the samplers' fields, ...
    assert not narrow


# ── starting points ──────────────────────────────────────────────────────


def starts_of(log_density, x0, *, chains=4, seed=1, **kwargs):
    """The chains' starting points: a random walk whose every proposal is
    rejected stays at its start, so its first draw is the start."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(log_density, x0, sampler=fixed_walk(1e8), draws=8, tune=0,
                          chains=chains, seed=seed, progress=False, **kwargs)
    x = idata.posterior["x"].values
    assert (x == x[:, :1]).all(), "some proposal was accepted"
    return x[:, 0]


def test_one_x0_gives_jittered_starts_that_differ_per_chain_and_are_reproducible():
    x0 = np.array([0.5, -2.0, 0.0])
    starts = starts_of(standard_normal, x0, seed=7)
    np.testing.assert_array_equal(starts[0], x0)  # chain 0 starts at x0 itself
    assert len({tuple(s) for s in starts}) == 4
    # spread like the posterior: neither a negligible nudge nor a far tail
    spread = np.abs(starts[1:] - x0).max(axis=1)
    assert (spread > 1e-2).all() and (spread < 10).all()
    np.testing.assert_array_equal(starts, starts_of(standard_normal, x0, seed=7))
    assert not np.array_equal(starts[1:], starts_of(standard_normal, x0, seed=8)[1:])
    # chain k's jitter depends on the seed and k, not on the number of chains
    np.testing.assert_array_equal(starts[:2], starts_of(standard_normal, x0, seed=7, chains=2))


def test_a_two_dimensional_x0_is_used_exactly():
    x0 = np.array([[0.0, 0.0], [3.0, -1.0], [0.25, 7.5]])
    np.testing.assert_array_equal(starts_of(standard_normal, x0, chains=3), x0)
    same = np.tile([1.0, 2.0], (3, 1))
    np.testing.assert_array_equal(starts_of(standard_normal, same, chains=3), same)


def test_jittered_starts_stay_in_the_support_and_scale_with_the_target():
    # a narrow target (sd 1e-4) around 1, with support x > 0.9999: the
    # width starts at max(|x0|, 1) = 1 and is halved until the start is in
    # the support and no more than d + 10 nats below x0, so the starts end
    # up within a few sd of the centre
    sd, centre = 1e-4, 1.0

    def narrow(x):
        if (x <= centre - 1e-4).any():
            return -math.inf
        return -0.5 * float(((x - centre) / sd) @ ((x - centre) / sd))

    x0 = np.full(2, centre)
    starts = starts_of(narrow, x0, chains=5)
    assert all(math.isfinite(narrow(s)) for s in starts)
    assert (np.abs(starts - centre) < 10 * sd).all()
    assert len({tuple(s) for s in starts}) == 5


def test_builtin_targets_and_python_callables_get_the_same_starts():
    b, v = 0.1, 4.0
    python = starts_of(banana_log_density(b, v), [0.1, 0.2, 0.3], seed=11)
    rust = starts_of(targets.Banana(3, b, v), [0.1, 0.2, 0.3], seed=11)
    np.testing.assert_array_equal(python, rust)


def test_compiled_densities_get_checked_jittered_starts():
    nb = pytest.importorskip("numba")

    @nb.cfunc("float64(CPointer(float64), int64)")
    def half_space(x, d):
        # the standard normal on x_0 > 0
        if x[0] <= 0.0:
            return -np.inf
        s = 0.0
        for i in range(d):
            s += x[i] * x[i]
        return -0.5 * s

    x0 = [0.05, 0.0]
    starts = starts_of(km.Compiled(half_space.address, 2, owner=half_space), x0, chains=6, seed=2)
    assert (starts[:, 0] > 0).all()
    assert len({tuple(s) for s in starts}) == 6


def test_a_start_outside_the_support_falls_back_to_x0_and_is_still_reported():
    with pytest.raises(ValueError, match="chain 0.*support"):
        km.sample(lambda x: -math.inf, [0.0, 0.0], sampler=km.RandomWalk(whiten=False), draws=10, tune=0, chains=3,
                  progress=False)


@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")
def test_a_checkpointed_run_uses_and_keeps_the_jittered_starts(tmp_path):
    # (that a run interrupted part-way resumes bit-identically from its
    # jittered starts is test_sample's test_checkpoint_resume_equals_an_
    # uninterrupted_run, whose x0 has shape (d,))
    path = tmp_path / "run.ckpt"
    kwargs = dict(sampler=km.AM(), draws=300, tune=200, chains=3, seed=21, progress=False)
    whole = km.sample(standard_normal, [1.0, 2.0], checkpoint=path, **kwargs)
    again = km.resume(path, standard_normal, progress=False)
    np.testing.assert_array_equal(again.posterior["x"].values, whole.posterior["x"].values)
    # and they are the jittered starts, not x0 tiled
    tiled = km.sample(standard_normal, np.tile([1.0, 2.0], (3, 1)), **kwargs)
    assert not np.array_equal(tiled.posterior["x"].values[1:], whole.posterior["x"].values[1:])
    np.testing.assert_array_equal(tiled.posterior["x"].values[0], whole.posterior["x"].values[0])


# ── checks after a run ───────────────────────────────────────────────────


def test_a_stuck_sampler_warns_naming_the_chains_and_their_acceptance():
    with pytest.warns(km.SamplingWarning) as record:
        idata = km.sample(standard_normal, np.zeros(5), sampler=fixed_walk(100.0), draws=500, tune=100,
                          chains=3, seed=5, progress=False)
    assert len(record) == 1  # one warning listing every problem
    message = str(record[0].message)
    assert "kameleon.sample (seed 5)" in message
    for k in range(3):
        assert f"chain {k}" in message
    assert "acceptance" in message and "%" in message
    assert "km.AM()" in message and "tune" in message
    attrs = idata.posterior.attrs
    assert len(attrs["acceptance_rate"]) == 3
    assert max(attrs["acceptance_rate"]) < 0.01
    assert attrs["warnings"] and all(isinstance(w, str) for w in attrs["warnings"])
    assert attrs["ess_bulk_min"] < 100 or math.isnan(attrs["ess_bulk_min"])
    # the same figures on every group
    assert idata.sample_stats.attrs["acceptance_rate"] == attrs["acceptance_rate"]


def test_a_chain_that_never_moves_is_named():
    # every proposal of scale 1e8 is rejected: the chains never leave their starts
    with pytest.warns(km.SamplingWarning, match=r"chain 0 never left its start \(acceptance 0\.0 %\)") as record:
        idata = km.sample(standard_normal, [0.0, 0.0], sampler=fixed_walk(1e8), draws=200, tune=50,
                          chains=2, seed=3, progress=False)
    assert "chain 1 never left its start" in str(record[0].message)
    assert idata.posterior.attrs["stuck"] == [1, 1]
    assert idata.posterior.attrs["acceptance_rate"] == [0.0, 0.0]
    # frozen at two different points: no variance within the chains, some
    # between them, so R-hat is infinite, and the draws are worth about two
    assert idata.posterior.attrs["rhat_max"] == math.inf
    assert "R-hat inf > 1.01" in str(record[0].message)
    assert idata.posterior.attrs["ess_bulk_min"] < 3


def test_chains_frozen_at_one_point_have_no_r_hat():
    with pytest.warns(km.SamplingWarning, match="never left its start"):
        idata = km.sample(standard_normal, np.zeros((2, 2)), sampler=fixed_walk(1e8),
                          draws=100, tune=0, chains=2, seed=3, progress=False)
    assert math.isnan(idata.posterior.attrs["rhat_max"]) and math.isnan(idata.posterior.attrs["ess_bulk_min"])


def test_proposals_far_too_wide_are_reported_per_chain():
    # a fixed random walk of scale 5 on a 5-d standard normal: chains 1 and 2
    # accept a few proposals in a thousand, chain 0 (started at the mode,
    # where every proposal is much worse) none
    with pytest.warns(km.SamplingWarning) as record:
        idata = km.sample(standard_normal, np.zeros(5), sampler=fixed_walk(5.0), draws=2000,
                          tune=200, chains=3, seed=5, progress=False)
    message = str(record[0].message)
    rates = idata.posterior.attrs["acceptance_rate"]
    assert rates[0] == 0.0 and all(0 < r < 0.01 for r in rates[1:])
    assert "chain 0 never left its start (acceptance 0.0 %)" in message
    low = f"acceptance below 1.0 % in chain 1 ({100 * rates[1]:.1f} %), chain 2 ({100 * rates[2]:.1f} %)"
    assert low in message
    assert "the scale of the log density" in message and "km.AM()" in message


def test_a_good_run_gives_no_warning_and_records_the_figures(gaussian_2d):
    mean, _, logp, _ = gaussian_2d
    with no_sampling_warning():
        idata = km.sample(logp, mean, sampler=km.AM.paper(), draws=2000, tune=1000, chains=4, seed=13, progress=False)
    attrs = idata.posterior.attrs
    rates = attrs["acceptance_rate"]
    assert len(rates) == 4 and all(0.1 < r < 0.6 for r in rates)
    accepted = idata.sample_stats["accepted"].values
    np.testing.assert_allclose(rates, accepted.mean(axis=1))
    assert attrs["stuck"] == [0, 0, 0, 0]
    x = idata.posterior["x"].values
    assert attrs["rhat_max"] == pytest.approx(km.diagnostics.rhat(x).max())
    assert attrs["ess_bulk_min"] == pytest.approx(km.diagnostics.ess_bulk(x).min())
    assert 1.0 <= attrs["rhat_max"] < 1.01 and attrs["ess_bulk_min"] >= 100
    assert len(attrs["warnings"]) == 0
    # unwhitened: one evaluation for the start and one per step (a whitening
    # pilot adds those of its curvature at the start)
    assert attrs["evaluations"] == [1 + 1000 + 2000] * 4


def test_evaluations_count_every_call_of_the_log_density():
    calls = []

    def counted(x):
        calls.append(1)
        return standard_normal(x)

    x0 = np.zeros((2, 2))  # given starts: no calls to check jittered ones
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        # threads named: the default rule would time one call at a given start
        idata = km.sample(counted, x0, sampler=km.RandomWalk(whiten=False), draws=30, tune=20, chains=2, thin=3, seed=1,
                          progress=False, parallel="thread")
    assert sum(idata.posterior.attrs["evaluations"]) == len(calls) == 2 * (1 + 20 + 30 * 3)


def test_one_chain_is_checked_without_r_hat():
    with pytest.warns(km.SamplingWarning) as record:
        idata = km.sample(standard_normal, [0.0, 0.0], sampler=fixed_walk(0.01), draws=300, tune=0,
                          chains=1, seed=2, progress=False)
    message = str(record[0].message)
    assert "acceptance above 95.0 % in chain 0" in message
    assert "bulk ESS" in message and "over 300 draws" in message
    assert "R-hat" not in message
    assert math.isnan(idata.posterior.attrs["rhat_max"])
    assert idata.posterior.attrs["acceptance_rate"][0] > 0.95


def test_disagreeing_chains_are_reported_by_r_hat():
    # two far-apart modes, one chain started in each; a small random walk
    # never crosses, so the chains sample different modes
    def bimodal(x):
        return float(np.logaddexp(-0.5 * (x[0] - 20) ** 2, -0.5 * (x[0] + 20) ** 2)) - 0.5 * float(x[1] ** 2)

    with pytest.warns(km.SamplingWarning, match=r"R-hat \S+ > \S+ \(worst parameter: a[;)]"):
        idata = km.sample(bimodal, [[20.0, 0.0], [-20.0, 0.0]], sampler=fixed_walk(1.0), draws=1000,
                          tune=100, chains=2, seed=4, progress=False, parameter_names=["a", "b"])
    assert idata.posterior.attrs["rhat_max"] > 1.5


def test_hamiltonian_samplers_are_not_flagged_for_high_acceptance(gaussian_2d):
    mean, cov, _, _ = gaussian_2d
    sampler = km.HMC(step_size=(0.05, 0.1), steps=(20, 40))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", km.SamplingWarning)
        idata = km.sample(targets.Gaussian(mean, cov), mean, sampler=sampler, draws=300, tune=100, chains=2,
                          seed=6, progress=False)
    assert min(idata.posterior.attrs["acceptance_rate"]) > 0.95
    assert not any("acceptance above" in str(w.message) for w in caught)


def test_too_few_draws_are_not_checked():
    with no_sampling_warning():
        idata = km.sample(standard_normal, [0.0], sampler=fixed_walk(1e8), draws=3, tune=0, chains=2,
                          seed=1, progress=False)
    assert len(idata.posterior.attrs["warnings"]) == 0


def test_sampling_warnings_can_be_filtered_and_are_user_warnings():
    assert issubclass(km.SamplingWarning, UserWarning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=km.SamplingWarning)
        km.sample(standard_normal, [0.0], sampler=fixed_walk(1e8), draws=50, tune=0, chains=2, seed=1,
                  progress=False)
    assert not caught


def test_the_warning_points_at_the_callers_line(tmp_path):
    # extend and resume reach the checks through more of the package's
    # frames than sample: their warnings named a line of the package
    path = tmp_path / "run.ckpt"
    run = dict(sampler=fixed_walk(1e8), draws=50, tune=0, chains=2, seed=1, progress=False)
    calls = {
        "sample": lambda: km.sample(standard_normal, [0.0], checkpoint=path, **run),
        "extend": lambda: km.extend(path, standard_normal, draws=10, progress=False),
        "resume": lambda: km.resume(path, standard_normal, progress=False),
        "sample_ensemble": lambda: km.sample_ensemble(
            standard_normal, [0.0], walkers=4, draws=5, tune=0, a=1e6, seed=1, progress=False
        ),
    }
    for name, call in calls.items():
        with pytest.warns((km.SamplingWarning, UserWarning)) as record:
            call()
        assert [w.filename for w in record] == [__file__] * len(record), name


def test_the_warnings_survive_a_netcdf_round_trip(tmp_path):
    import arviz as az

    with pytest.warns(km.SamplingWarning):
        idata = km.sample(standard_normal, [0.0, 0.0], sampler=fixed_walk(1e8), draws=50, tune=0,
                          chains=2, seed=1, progress=False)
    path = tmp_path / "run.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path)).posterior.attrs
    assert list(np.atleast_1d(back["warnings"])) == list(idata.posterior.attrs["warnings"])
    assert list(back["stuck"]) == [1, 1]


# ── the ensemble ─────────────────────────────────────────────────────────


def test_ensemble_reports_its_acceptance_and_warns_when_it_is_extreme():
    with no_sampling_warning():
        good = km.sample_ensemble(standard_normal, [0.0, 0.0], walkers=8, draws=500, tune=100, seed=3,
                                  progress=False)
    attrs = good.posterior.attrs
    expected = sum(attrs["accepted_total"]) / (8 * 600)
    assert attrs["acceptance_rate"] == pytest.approx(expected)
    assert 0.2 < attrs["acceptance_rate"] < 0.9
    assert len(attrs["warnings"]) == 0

    # a density finite only on the integer lattice (a discrete parameter
    # given to a continuous sampler): a stretch move from one lattice point
    # towards another almost never lands on a third, so nothing is accepted
    def lattice(x):
        return -0.5 * float(x @ x) if np.array_equal(x, np.round(x)) else -math.inf

    start = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 1], [1, 2], [-1, 0], [0, -1]], dtype=float)
    with pytest.warns(km.SamplingWarning, match=r"sample_ensemble \(seed 3\)(.|\n)*acceptance 0\.0 % below 1\.0 %"):
        bad = km.sample_ensemble(lattice, start, draws=20, tune=0, seed=3, progress=False)
    assert bad.posterior.attrs["acceptance_rate"] == 0.0


def test_ensemble_progress_is_on_by_default(capsys):
    km.sample_ensemble(standard_normal, [0.0, 0.0], walkers=6, draws=40, tune=10, seed=1)
    err = capsys.readouterr().err
    assert "sweeps" in err and "50/50" in err


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_converged_default_runs_at_a_modest_ess_raise_no_r_hat_alarm(seed):
    # 4 chains × 1000 draws of a 5-d standard normal on the defaults: a bulk
    # ESS of about 150–250, where R-hat of converged chains is about
    # 1 + 8/(2·ESS)·χ²₇/7 ≈ 1.02–1.04; the bare 1.01 bar warned on every one
    # of 20 such runs
    target = km.targets.Gaussian(np.zeros(5), np.eye(5))
    idata = km.sample(target, np.zeros(5), sampler=km.KAMH(), chains=4, seed=seed, progress=False)
    assert not any("R-hat" in w for w in idata.posterior.attrs["warnings"]), idata.posterior.attrs["warnings"]


def test_a_chain_shifted_beyond_the_noise_of_its_ess_is_reported():
    # independent draws, 4 chains × 50 (ESS ≈ 200): the noise bar on R-hat
    # is about 1.07; one chain moved by 1 sd pushes R-hat to about 1.1
    rng = np.random.default_rng(8)
    samples = rng.standard_normal((4, 50, 3))
    accepted = np.ones((4, 50), dtype=bool)
    names = ["a", "b", "c"]
    _, problems = km._sample._check_chains(samples, accepted, [50] * 4, "AM", names)
    assert not any("R-hat" in p for p in problems), problems
    samples[0, :, 1] += 1.0
    figures, problems = km._sample._check_chains(samples, accepted, [50] * 4, "AM", names)
    (line,) = [p for p in problems if "R-hat" in p]
    assert "worst parameter: b; the most sampling noise gives" in line, line
    assert figures["rhat_max"] > 1.05



def resident_bytes(field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (the peak) of this process, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def test_a_long_run_holds_its_draws_about_once_more_at_most():
    # the chains' draws, their stacked copy and the checks' copy of every
    # parameter at once were alive together: the peak rose by 3.4 times the
    # posterior's size; now each chain's draws are dropped once stacked and
    # the checks copy one parameter per thread: 1.6 times (its 16 MB here)
    d = 50
    target = targets.Gaussian(np.zeros(d), np.eye(d))
    run = dict(sampler=km.RandomWalk(), chains=4, tune=10, progress=False, cores=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        km.sample(target, np.zeros(d), draws=10, **run)  # what a first run imports
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # the peak starts again from the current size
    except OSError:
        pytest.skip("needs Linux's resettable peak of the resident set")
    before = resident_bytes("VmRSS")
    idata = km.sample(target, np.zeros(d), draws=10_000, **run)
    ratio = (resident_bytes("VmHWM") - before) / idata.posterior["x"].values.nbytes
    assert ratio < 2.0


def test_r_hat_and_bulk_ess_together_are_each_on_its_own():
    # the checks compute both from one rank normalisation: the same figures
    # bit for bit, NaN where one alone is NaN (a constant parameter)
    from kameleon._sample import _per_parameter, _rhat_and_ess_bulk

    rng = np.random.default_rng(8)
    draws = rng.normal(size=(3, 400, 4)).cumsum(axis=1)
    draws[:, :, 2] = np.round(draws[:, :, 2])
    draws[:, :, 3] = 1.5
    rhat, ess = _rhat_and_ess_bulk(draws)
    np.testing.assert_array_equal(rhat.view(np.int64), _per_parameter("rhat", draws).view(np.int64))
    np.testing.assert_array_equal(ess.view(np.int64), _per_parameter("ess_bulk", draws).view(np.int64))
    assert np.isnan(rhat[3]) and np.isnan(ess[3]) and not np.isnan(rhat[:3]).any()
