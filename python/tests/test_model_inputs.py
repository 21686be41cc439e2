"""Inputs a user's model brings to sample, sample_ensemble and HABC:
parameter names, compiled functions, target parameters."""

import math

import numpy as np
import pytest

import kameleon as km


def counting_gaussian():
    """A standard normal log density that counts its calls."""
    calls = []

    def logp(x):
        calls.append(1)
        return -0.5 * float(x @ x)

    return logp, calls


@pytest.mark.parametrize(
    "names, error, message",
    [
        (["a", "a"], ValueError, r"distinct, got \['a'\] more than once"),
        (["chain", "b"], ValueError, r"cannot use \['chain'\]"),
        (["a", "draw"], ValueError, r"cannot use \['draw'\]"),
        (["a"], ValueError, "1 names for dimension 2"),
        ([1, 2], TypeError, "must be strings, got 1"),
        ("ab", TypeError, "single string 'ab'"),
    ],
)
def test_bad_parameter_names_are_refused_before_any_sampling(names, error, message):
    # repeated names or a sample dimension's name used to drop a variable
    # from the output without a word (["a", "a"] gave one variable `a`,
    # ["chain", "b"] only `b`), and a wrong count surfaced after the run
    logp, calls = counting_gaussian()
    with pytest.raises(error, match=message):
        km.sample(logp, [0.0, 0.0], sampler=km.AM(), draws=20, tune=20, chains=2, seed=1, progress=False,
                  parameter_names=names)
    with pytest.raises(error, match=message):
        km.sample_ensemble(logp, [0.0, 0.0], draws=5, tune=0, seed=1, progress=False, parameter_names=names)
    assert calls == []
    habc = km.HABC(lambda theta, rng: theta + rng.normal(size=2), [0.0, 0.0], n_simulations=3, steps=2)
    with pytest.raises(error, match=message):
        habc.sample([0.0, 0.0], draws=2, tune=0, chains=1, seed=1, progress=False, parameter_names=names)


def test_the_keys_of_a_prior_dict_are_checked_as_names():
    with pytest.raises(ValueError, match=r"cannot use \['chain'\]"):
        km.sample(lambda x: 0.0, None, prior={"chain": km.priors.Normal(), "b": km.priors.Normal()},
                  draws=5, tune=0, chains=1, progress=False)


def test_resume_checks_the_names_against_the_checkpoint(tmp_path, quiet):
    logp, _ = counting_gaussian()
    path = tmp_path / "run.ckpt"
    km.sample(logp, [0.0, 0.0], sampler=km.AM(), draws=10, tune=0, chains=1, seed=1, progress=False, checkpoint=path)
    logp, calls = counting_gaussian()
    with pytest.raises(ValueError, match="distinct"):
        km.resume(path, logp, progress=False, parameter_names=["a", "a"])
    assert calls == []


@pytest.mark.parametrize(
    "address, message",
    [
        (0, "non-null integer address, got 0"),
        (-8, "non-null integer address, got -8"),
        (2**64, "non-null integer address"),
        (1.5e14, "non-null integer address, got 1"),
        (None, "non-null integer address, got None"),
        (True, "non-null integer address, got True"),
    ],
)
def test_a_compiled_function_needs_a_valid_address(address, message):
    # a null or negative address reached ctypes (the check of the jittered
    # starts) and crashed the interpreter with a segmentation fault
    with pytest.raises(ValueError, match=message):
        km.Compiled(address, 2)


def test_a_compiled_function_given_the_cfunc_itself_says_to_pass_its_address():
    numba = pytest.importorskip("numba")

    @numba.cfunc("float64(CPointer(float64), int64)")
    def logp(x, d):
        return -0.5 * x[0] * x[0]

    with pytest.raises(ValueError, match=r"pass the function's `.address`, not the CFunc itself"):
        km.Compiled(logp, 1)
    with pytest.raises(ValueError, match=r"pass the function's `.address`"):
        km.CompiledSimulator(logp, dim=1, n_summaries=1, n_noise=1)
    compiled = km.Compiled(logp.address, np.int64(1), owner=logp)
    assert type(compiled.dim) is int and compiled.dim == 1


@pytest.mark.parametrize("dim", [0, -1, 2.0, True])
def test_a_compiled_function_needs_an_integer_dimension(dim):
    with pytest.raises(ValueError, match="`dim` must be an integer >= 1"):
        km.Compiled(12345, dim)


def test_a_compiled_function_in_a_subprocess_with_address_zero_is_an_error_not_a_crash():
    # the crash took the whole interpreter down: run it where it cannot take pytest along
    import subprocess
    import sys

    code = (
        "import kameleon as km\n"
        "try:\n"
        "    km.sample(km.Compiled(0, 2), [0.0, 0.0], draws=5, tune=0, chains=2, progress=False)\n"
        "except ValueError as err:\n"
        "    print('ValueError', err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ValueError" in out.stdout


def test_built_in_targets_take_numpy_scalars_as_parameters():
    # numpy scalars failed in json.dumps: "Object of type int64 is not JSON serializable"
    from kameleon import targets

    banana = targets.Banana(dim=np.int64(3), b=np.float32(0.25), v=np.int64(4))
    assert banana.dim == 3
    reference = targets.Banana(dim=3, b=float(np.float32(0.25)), v=4.0)
    x = np.array([0.3, -0.2, 0.1])
    assert banana.log_density(x) == reference.log_density(x)
    assert targets.Flower(petals=np.int64(4), radius=np.float32(5.0)).dim == 2
    assert targets.GridMixture(np.int64(2), [-1.0, 1.0], np.float32(0.5)).dim == 2
    assert targets.CkamBimodal(code_weights=np.bool_(True)).dim == 2


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda t: t.Banana(b=float("nan")), "b"),
        (lambda t: t.Ring(radius=float("inf")), "radius"),
        (lambda t: t.Gaussian([0.0, float("nan")], np.eye(2)), "means"),
        (lambda t: t.GridMixture(2, [0.0, 1.0], np.float64("nan")), "variance"),
    ],
)
def test_a_non_finite_target_parameter_is_named(make, name):
    # NaN used to reach the Rust side as a JSON token it cannot read:
    # "invalid target description: expected value at line 1 column 35"
    from kameleon import targets

    with pytest.raises(ValueError, match=f"invalid target parameter `{name}`: must be finite"):
        make(targets)


def test_a_target_evaluated_at_several_points_says_it_takes_one():
    # a (1, d) array gave "TypeError: dimensionality mismatch: from=2, to=1"
    from kameleon import targets

    banana = targets.Banana()
    with pytest.raises(ValueError, match=r"one point of shape \(2,\), got shape \(1, 2\)"):
        banana.log_density([[0.0, 0.0]])
    with pytest.raises(ValueError, match=r"one point of shape \(2,\), got shape \(3, 2\)"):
        banana.grad_log_density(np.zeros((3, 2)))
    assert banana.log_density([0, 0]) == banana.log_density(np.zeros(2))


@pytest.mark.parametrize("friction", [np.float32(0.25), np.int64(0), np.float64(0.25), 0])
def test_habc_takes_a_numpy_friction(friction):
    # np.float32(0.25) and np.int64(0) were refused: "`friction` must be a
    # finite number >= 0, got np.float32(0.25)"
    habc = km.HABC(lambda theta, rng: theta + rng.normal(size=1), [0.0], friction=friction)
    assert type(habc.friction) is float and habc.friction == float(friction)


def test_habc_refuses_a_negative_or_boolean_friction():
    for friction in (-0.5, np.float32(-1), True, float("nan")):
        with pytest.raises(ValueError, match="`friction` must be a finite number >= 0"):
            km.HABC(lambda theta, rng: theta, [0.0], friction=friction)


def test_hmc_on_a_density_without_a_gradient_says_so_before_the_run():
    # the run failed at its start with "chain 0: this target does not
    # support gradient", which did not say why a given grad_log_density was not used
    hmc = km.HMC(grad_log_density=lambda x: -x)
    noisy = km.PseudoMarginal(lambda x, rng: -0.5 * float(x @ x))
    abc = km.ABC(lambda theta, rng: theta + rng.normal(size=1), [0.0], 0.5, 5)
    for density, name in ((noisy, "PseudoMarginal"), (abc, "ABC"), (km.Compiled(12345, 1), "Compiled")):
        with pytest.raises(ValueError, match=f"HMC needs the gradient of the log density, which a {name} does not give"):
            km.sample(density, [0.0], sampler=hmc, draws=5, tune=5, chains=1, progress=False)


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize("gradient, named", [
    (lambda x: [True, False], "booleans"),
    (lambda x: [-x[0], True], "beside numbers"),
    (lambda x: (-x).astype(complex), "complex"),
    (lambda x: np.array(["1", "2"]), "strings"),
], ids=["bools", "bool-beside-float", "complex", "strings"])
def test_an_hmc_gradient_that_is_not_real_numbers_is_a_type_error(gradient, named):
    # bools were read as 1 and 0 and complex numbers cut to their real part:
    # HMC ran on a wrong gradient
    hmc = km.HMC(grad_log_density=gradient)
    with pytest.raises(TypeError, match=rf"gradient function `.*` returned .*{named}.*; expected 2 real floats"):
        km.sample(lambda x: -0.5 * float(x @ x), [0.1, 0.2], sampler=hmc, draws=5, tune=5, chains=1, progress=False)


def test_bounds_may_be_a_numpy_array_of_pairs(quiet):
    # np.array([[0, 1], [0, inf]]) was refused as "not a list of (low, high) pairs"
    from kameleon.priors import JointPrior

    as_array = JointPrior(None, np.array([[0.0, 1.0], [0.0, np.inf]]))
    as_pairs = JointPrior(None, [np.array([0.0, 1.0]), np.array([0.0, np.inf])])
    for joint in (as_array, as_pairs):
        np.testing.assert_array_equal(joint.low, [0.0, 0.0])
        np.testing.assert_array_equal(joint.high, [1.0, np.inf])
    kwargs = dict(sampler=km.AM(), draws=30, tune=30, chains=2, seed=3, progress=False)
    a = km.sample(lambda x: 0.0, [0.5, 1.0], bounds=np.array([[0.0, 1.0], [0.0, np.inf]]), **kwargs)
    b = km.sample(lambda x: 0.0, [0.5, 1.0], bounds=[(0.0, 1.0), (0.0, None)], **kwargs)
    np.testing.assert_array_equal(a.posterior["x"].values, b.posterior["x"].values)
    for bad in (np.array([0.0, 1.0]), np.zeros((1, 3)), np.array([[1.0, 0.0]]), np.array([[np.nan, 1.0]])):
        with pytest.raises(ValueError, match=r"bounds"):
            JointPrior(None, bad)


@pytest.mark.parametrize("x0, shown", [({"mu": 0.5}, "a dict ({'mu': 0.5})"),
                                       ([[0.0, 1.0], [0.0]], "a list that is not an array of numbers"),
                                       (["a", "b"], "a list holding strings (e.g. 'a')")])
def test_an_x0_that_is_not_an_array_of_numbers_is_named(x0, shown):
    # a dict (a PyMC-style point) gave "float() argument must be a string or
    # a real number, not 'dict'", which does not say which argument
    logp, calls = counting_gaussian()
    shown = shown.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(TypeError, match=rf"`x0` is {shown}.*; expected a real-valued float array of shape \(d,\) "
                       r"or \(chains, d\)"):
        km.sample(logp, x0, draws=5, tune=0, chains=2, progress=False)
    with pytest.raises(TypeError, match=rf"`x0` is {shown}"):
        km.sample_ensemble(logp, x0, draws=5, tune=0, progress=False)
    with pytest.raises(TypeError, match=rf"`x0` is {shown}"):
        km.sample_ensemble(logp, x0, bounds=[(None, None)] * 2, draws=5, tune=0, progress=False)
    assert calls == []


# What numpy would have turned into starting points silently: strings and
# bytes parsed as numbers, booleans as 0 and 1, None as NaN (and complex
# numbers cut to their real part, with only a ComplexWarning).
NOT_REAL_X0 = [
    pytest.param(["0.1", "0.2"], "str", id="str-list"),
    pytest.param(np.array([["0.1", "0.2"], ["0.3", "0.4"]]), "str", id="str-array"),
    pytest.param([b"0.1", b"0.2"], "bytes", id="bytes"),
    pytest.param([True, False], "bool", id="bool"),
    pytest.param([0.5, True], "bool", id="bool-beside-float"),
    pytest.param((0.5, np.bool_(False)), "bool", id="np-bool-beside-float"),
    pytest.param([[0.5, 0.1], [1, True]], "bool", id="nested-bool-beside-int"),
    pytest.param([np.array([0.5, 0.1]), np.array([True, False])], "bool", id="bool-array-beside-float-array"),
    pytest.param(np.array([np.bool_(True), 0.5], dtype=object), "bool", id="object-bool"),
    pytest.param(np.array([0.1, None], dtype=object), "NoneType", id="object-none"),
    pytest.param([0.1 + 1j, 0.2], "complex", id="complex"),
]


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize("x0, named", NOT_REAL_X0)
def test_an_x0_that_is_not_real_numbers_is_a_type_error(x0, named):
    logp, calls = counting_gaussian()
    run = dict(draws=5, tune=0, progress=False)
    habc = km.HABC(lambda theta, rng: theta + rng.standard_normal(2), [0.0, 0.0], steps=2)
    for call in (
        lambda: km.sample(logp, x0, chains=2, **run),
        lambda: km.sample(logp, x0, chains=2, bounds=[(-1.0, 1.0)] * 2, **run),
        lambda: km.sample_ensemble(logp, x0, **run),
        lambda: km.sample_ensemble(logp, x0, bounds=[(-1.0, 1.0)] * 2, **run),
        lambda: habc.sample(x0, chains=2, seed=0, **run),
    ):
        with pytest.raises(TypeError, match=rf"`x0` is .*{named}.*; expected a real-valued float array of shape"):
            call()
    assert calls == []


def test_a_refused_extend_leaves_the_checkpoint_as_it_was(tmp_path, quiet):
    # extend lengthened the checkpoint before checking the density against
    # it: after a call refused for a wrong target, the next extend(draws=10)
    # ran 20 more draws; a Compiled function of the wrong dim was not refused at all
    from kameleon import targets

    path = tmp_path / "run.ckpt"
    kwargs = dict(sampler=km.AM(), tune=10, chains=2, seed=1, progress=False)
    km.sample(targets.Banana(), [0.0, 0.0], draws=30, checkpoint=path, **kwargs)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="the checkpointed run has dimension 2 but the target has dimension 3"):
        km.extend(path, targets.Banana(dim=3), draws=10, progress=False)
    with pytest.raises(ValueError, match="the checkpointed run has dimension 2 but the compiled function has dimension 5"):
        km.extend(path, km.Compiled(12345, 5), draws=10, progress=False)
    with pytest.raises(ValueError, match="distinct"):
        km.extend(path, targets.Banana(), draws=10, progress=False, parameter_names=["a", "a"])
    with pytest.raises(ValueError, match="the checkpointed run has dimension 2 but the compiled function"):
        km.resume(path, km.Compiled(12345, 5), progress=False)
    assert path.read_bytes() == before
    extended = km.extend(path, targets.Banana(), draws=10, progress=False)
    longer = km.sample(targets.Banana(), [0.0, 0.0], draws=40, **kwargs)
    np.testing.assert_array_equal(extended.posterior["x"].values, longer.posterior["x"].values)


def test_resume_ensemble_checks_a_targets_dimension(tmp_path):
    from kameleon import targets

    path = tmp_path / "ensemble.ckpt"
    km.sample_ensemble(targets.Banana(), [0.0, 0.0], draws=5, tune=0, seed=1, progress=False, checkpoint=path)
    with pytest.raises(ValueError, match="the checkpointed run has dimension 2 but the compiled function has dimension 3"):
        km.resume_ensemble(path, km.Compiled(12345, 3), progress=False)


@pytest.mark.parametrize("value", [lambda X: -0.5 * float((X**2).sum()), lambda X: None, lambda X: "a"])
def test_a_vectorized_density_returning_no_array_names_what_it_must_return(value):
    # a scalar failed in the start checks with "'float' object is not subscriptable"
    with pytest.raises(TypeError, match=r"must return 1 floats \(an array of shape \(1,\)\) for an array of 1 points"):
        km.sample(value, [0.0, 0.0], vectorize=True, draws=5, tune=5, chains=2, progress=False)


# ── log density values that are not real numbers ───────────────────────

# What a log density could return that was read silently before: complex
# numbers cut to their real part (with only numpy's ComplexWarning), a
# bool as 0 or 1, and strings parsed by a vectorized density.
NOT_A_REAL_FLOAT = [
    pytest.param(lambda: np.complex128(-0.5 + 1j), "complex128", id="np-complex128"),
    pytest.param(lambda: np.complex64(-0.5), "complex64", id="np-complex64"),
    pytest.param(lambda: complex(-0.5, 1.0), "complex", id="complex"),
    pytest.param(lambda: np.array(-0.5 + 1j), "complex", id="0d-complex-array"),
    pytest.param(lambda: True, "bool", id="bool"),
    pytest.param(lambda: np.bool_(True), "bool", id="np-bool"),
    pytest.param(lambda: np.array(True), "bool", id="0d-bool-array"),
    pytest.param(lambda: "-0.5", "str", id="str"),
]

# every way a sampler reads a Python log density's value
DENSITY_PATHS = {
    "callable": lambda value: dict(log_density=lambda x: value()),
    "pseudo-marginal": lambda value: dict(log_density=km.PseudoMarginal(lambda x, rng: value())),
    "vectorized": lambda value: dict(log_density=lambda xs: [value() for _ in xs], vectorize=True),
    "vectorized-array": lambda value: dict(log_density=lambda xs: np.array([value() for _ in xs]), vectorize=True),
    "with-bounds": lambda value: dict(log_density=lambda x: value(), bounds=[(-5.0, 5.0)]),
    "noisy-with-bounds": lambda value: dict(log_density=km.PseudoMarginal(lambda x, rng: value()),
                                            bounds=[(-5.0, 5.0)]),
    "callable-prior": lambda value: dict(log_density=lambda x: 0.0, prior=lambda x: value(), bounds=[(-5.0, 5.0)]),
}


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize("value, named", NOT_A_REAL_FLOAT)
@pytest.mark.parametrize("path", DENSITY_PATHS)
def test_a_log_density_value_that_is_not_a_real_float_is_a_type_error(path, value, named):
    kwargs = DENSITY_PATHS[path](value)
    with pytest.raises(TypeError, match=rf"returned .*{named}.*; expected .*real float"):
        km.sample(x0=[0.5], sampler=km.AM(), draws=5, tune=0, chains=2, seed=1, progress=False, **kwargs)
    if path in ("callable", "pseudo-marginal", "vectorized"):
        with pytest.raises(TypeError, match=rf"returned .*{named}.*; expected .*real float"):
            km.sample_ensemble(x0=[0.5], walkers=4, draws=5, tune=0, seed=1, progress=False, **kwargs)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("value, named", [NOT_A_REAL_FLOAT[0], NOT_A_REAL_FLOAT[5]])
def test_a_log_density_value_that_is_not_a_real_float_is_a_type_error_on_worker_processes(value, named):
    # (chains, d) starting points: the workers make the first evaluations
    def density(x):
        return value()

    with pytest.raises(TypeError, match=rf"returned .*{named}.*; expected .*real float"):
        km.sample(density, [[0.5], [0.4]], sampler=km.AM(), draws=5, tune=0, chains=2, cores=2,
                  parallel="process", seed=1, progress=False)
    with pytest.raises(TypeError, match=rf"density` returned .*{named}.*; expected .*real float"):
        km.sample_ensemble(density, [[0.5], [0.4], [0.3], [0.2]], draws=5, tune=0, cores=2, seed=1,
                           progress=False)


REAL_FLOATS = [
    pytest.param(lambda v: float(v), id="float"),
    pytest.param(lambda v: np.float64(v), id="np-float64"),
    pytest.param(lambda v: np.float32(v), id="np-float32"),
    pytest.param(lambda v: np.array(v), id="0d-array"),
    pytest.param(lambda v: np.array(v, dtype=np.float32), id="0d-float32-array"),
    pytest.param(lambda v: int(round(v)), id="int"),
    pytest.param(lambda v: np.int64(round(v)), id="np-int64"),
]


# a warning on the way is a failure (these short runs' SamplingWarning aside)
@pytest.mark.filterwarnings("error", "ignore::kameleon.SamplingWarning")
@pytest.mark.parametrize("convert", REAL_FLOATS)
def test_real_log_density_values_of_any_numeric_type_are_read_as_their_float(convert):
    # each path gives the chain of the float density of the converted values
    # (the integer ones make a coarse but valid density); a non-finite value
    # (a float32 -inf here) is still a rejection, counted
    def exact(x):
        v = -0.5 * float(x @ x)
        return float(convert(v)) if v > -2 else -math.inf

    def value(x):
        v = -0.5 * float(x @ x)
        return convert(v) if v > -2 else np.float32(-np.inf)

    kwargs = dict(sampler=km.AM(), draws=30, tune=0, chains=2, seed=1, progress=False)
    # (a pseudo-marginal density draws from the chains' streams: its
    # reference is the pseudo-marginal float density)
    for density, float_density, extra in (
        (value, exact, {}),
        (km.PseudoMarginal(lambda x, rng: value(x)), km.PseudoMarginal(lambda x, rng: exact(x)), {}),
        (lambda xs: [value(x) for x in xs], exact, dict(vectorize=True)),
    ):
        run = km.sample(density, [0.5], **kwargs, **extra)
        reference = km.sample(float_density, [0.5], **kwargs)
        np.testing.assert_array_equal(run.posterior["x"].values, reference.posterior["x"].values)
        assert run.posterior.attrs["rejected_non_finite"] == reference.posterior.attrs["rejected_non_finite"]
        assert sum(reference.posterior.attrs["rejected_non_finite"]) > 0


@pytest.mark.parametrize("function, shown", [(None, "NoneType None"), (5, "int 5"), ("logp", "str 'logp'")])
def test_a_pseudo_marginal_of_something_not_callable_is_refused_on_creation(function, shown):
    # None was refused by `sample` as "log_density must be a callable,
    # PseudoMarginal, ... got PseudoMarginal", 5 only at the first
    # evaluation with "'int' object is not callable"
    with pytest.raises(TypeError, match=rf"PseudoMarginal needs a callable f\(x, rng\) -> float, got {shown}"):
        km.PseudoMarginal(function)


# ── flags and numbers of the run ───────────────────────────────────────────


@pytest.mark.parametrize("name, value", [
    ("progress", "no"), ("progress", None), ("progress", 0), ("vectorize", "no"), ("vectorize", 1),
])
def test_a_flag_that_is_not_true_or_false_is_refused_before_any_evaluation(tmp_path, quiet, name, value):
    # "no" is true: progress="no" drew bars, vectorize="no" ran the density on
    # (k, d) arrays and failed with the density's own error
    logp, calls = counting_gaussian()
    run = dict(draws=5, tune=5, seed=1, progress=False)
    path, ensemble_path = tmp_path / "run.ckpt", tmp_path / "ensemble.ckpt"
    km.sample(logp, [0.0, 0.0], chains=2, checkpoint=path, **run)
    km.sample_ensemble(logp, [0.0, 0.0], checkpoint=ensemble_path, **run)
    calls.clear()
    bad = {name: value}
    calls_made = [
        lambda: km.sample(logp, [0.0, 0.0], chains=2, **{**run, **bad}),
        lambda: km.sample_ensemble(logp, [0.0, 0.0], **{**run, **bad}),
        lambda: km.resume(path, logp, **{"progress": False, **bad}),
        lambda: km.extend(path, logp, draws=5, **{"progress": False, **bad}),
        lambda: km.resume_ensemble(ensemble_path, logp, **{"progress": False, **bad}),
    ]
    if name == "progress":
        habc = km.HABC(lambda theta, rng: theta + rng.standard_normal(2), [0.0, 0.0], steps=2)
        calls_made.append(lambda: habc.sample([0.0, 0.0], draws=2, tune=0, chains=1, seed=0, progress=value))
    for call in calls_made:
        with pytest.raises(ValueError, match=rf"`{name}` must be True or False, got {value!r}"):
            call()
    assert calls == []


@pytest.mark.parametrize("name, value", [
    ("checkpoint_every", "5"), ("checkpoint_every", True), ("target_ess", np.complex128(400)),
    ("target_rhat", 1.01 + 0j), ("max_seconds", "10"),
])
def test_a_run_setting_that_is_not_a_real_number_is_refused(name, value):
    # float() took "5" as 5 s and True as 1 s; a complex target ESS ran
    logp, calls = counting_gaussian()
    with pytest.raises(ValueError, match=rf"`{name}` must be a (positive|finite) number"):
        km.sample(logp, [0.0, 0.0], chains=2, draws=5, tune=5, progress=False, **{name: value})
    assert calls == []



@pytest.mark.parametrize("bool_value", [True, np.bool_(False), np.array(True)], ids=["bool", "np-bool", "0d-bool-array"])
def test_a_vectorized_density_returning_a_bool_beside_floats_is_a_type_error(bool_value):
    # numpy made [-0.3, True] the floats [-0.3, 1.0]: the run went on with
    # a log density of 1 at the chain whose row returned True
    def logp(xs):
        values = [-0.5 * float(x @ x) for x in xs]
        if len(values) > 1:
            values[-1] = bool_value
        return values

    with pytest.raises(TypeError, match=r"vectorized log density `[^`]*logp` returned \[.*\], which holds a `\w+` .* beside numbers"):
        km.sample(logp, [0.0, 0.0], vectorize=True, chains=2, draws=5, tune=5, seed=1, progress=False)
    with pytest.raises(TypeError, match=r"which holds a `\w+` .* beside numbers"):
        km.sample_ensemble(logp, [0.0, 0.0], vectorize=True, draws=5, tune=5, seed=1, progress=False)


# ── built-in targets ─────────────────────────────────────────────────────


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize("x, named", [
    ([0.5, True], "booleans"), (["0.5", "1"], "strings"), ([0.5 + 1j, 0.0], "complex"), (None, "NoneType"),
])
def test_a_target_point_that_is_not_real_numbers_is_a_type_error(x, named):
    # [0.5, True] was the point (0.5, 1), ["0.5", "1"] was parsed, None was
    # "x has length 1"
    banana = km.targets.Banana()
    for call in (banana.log_density, banana.grad_log_density):
        with pytest.raises(TypeError, match=rf"x is .*{named}.*; expected a real-valued float array of shape \(2,\)"):
            call(x)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("make, named", [
    (lambda: km.targets.GaussianMixture([0.5, 0.5], [[0, 0], [1, True]], [np.eye(2)] * 2), "`means` is .*booleans"),
    (lambda: km.targets.GaussianMixture([True, 1], [[0, 0], [1, 1]], [np.eye(2)] * 2), "`weights` is .*booleans"),
    (lambda: km.targets.GaussianMixture(["0.5", "0.5"], [[0, 0], [1, 1]], [np.eye(2)] * 2), "`weights` is .*strings"),
    (lambda: km.targets.GaussianMixture([1.0], [[0, 0]], [np.eye(2) * (1 + 0j)]), "`covariances` is .*complex"),
    (lambda: km.targets.Gaussian([0.0, True], np.eye(2)), "`mean` is .*booleans"),
    (lambda: km.targets.Gaussian([0.0, 0.0], [[1.0, 0.0], ["0", 1.0]]), "`cov` is .*strings"),
    (lambda: km.targets.GridMixture(2, [0.0, True], 1.0), "`centres` is .*booleans"),
    (lambda: km.targets.GridMixture(2, ["0", "1"], 1.0), "`centres` is .*strings"),
], ids=["mean-bool", "weight-bool", "weight-str", "cov-complex", "gaussian-mean", "gaussian-cov", "centre-bool", "centre-str"])
def test_target_parameters_that_are_not_real_numbers_are_a_type_error(make, named):
    # each was converted silently (True as 1, "0.5" parsed, the real part kept)
    with pytest.raises(TypeError, match=named):
        make()


@pytest.mark.parametrize("call, named", [
    (lambda t: t.sample_iid(-1), "`n` must be an integer >= 0"),
    (lambda t: t.sample_iid(True), "`n` must be an integer >= 0"),
    (lambda t: t.sample_iid(3, seed=-1), r"`seed` must be an integer in \[0, 2\*\*64\)"),
    (lambda t: t.sample_iid(3, seed=2**64), r"`seed` must be an integer in \[0, 2\*\*64\)"),
    (lambda t: t.log_density([0.0, 0.0], seed=True), r"`seed` must be an integer in \[0, 2\*\*64\)"),
])
def test_target_draw_counts_and_seeds_out_of_range_are_a_value_error(call, named):
    # a negative n or seed was the extension's bare OverflowError; True was 1
    with pytest.raises(ValueError, match=named):
        call(km.targets.Banana())


def test_a_checkpoint_path_may_be_bytes_and_what_is_not_a_path_is_a_type_error_naming_it(tmp_path, quiet):
    # bytes were "'bytes' object is not an instance of 'str'" from the
    # extension, an int "expected str, bytes or os.PathLike object"
    logp, calls = counting_gaussian()
    run = dict(draws=5, tune=5, seed=1, progress=False)
    path = bytes(tmp_path / "run.ckpt")
    ensemble_path = bytes(tmp_path / "ensemble.ckpt")
    first = km.sample(logp, [0.0, 0.0], chains=2, checkpoint=path, **run)
    assert first.posterior.attrs["checkpoint"] == str(tmp_path / "run.ckpt")
    km.resume(path, logp, progress=False)
    km.extend(path, logp, draws=5, progress=False)
    km.sample_ensemble(logp, [0.0, 0.0], checkpoint=ensemble_path, **run)
    km.resume_ensemble(ensemble_path, logp, progress=False)
    calls.clear()
    for call, name in (
        (lambda: km.sample(logp, [0.0, 0.0], chains=2, checkpoint=3, **run), "checkpoint"),
        (lambda: km.resume(3, logp, progress=False), "path"),
        (lambda: km.resume_ensemble(None, logp, progress=False), "path"),
        (lambda: km.sample_ensemble(logp, [0.0, 0.0], checkpoint=3.5, **run), "checkpoint"),
    ):
        with pytest.raises(TypeError, match=rf"`{name}` must be a file path"):
            call()
    assert calls == []


def test_masked_values_of_a_vectorized_density_reject_as_nan_does(quiet):
    # the values under the mask were read: the chains went where the
    # density masked its values; a masked scalar was NaN already
    def masked(xs):
        values = -0.5 * (xs**2).sum(axis=1)
        return np.ma.array(values, mask=xs[:, 0] > 0.5)

    def nan(xs):
        values = -0.5 * (xs**2).sum(axis=1)
        values[xs[:, 0] > 0.5] = np.nan
        return values

    run = dict(vectorize=True, draws=100, tune=50, chains=3, seed=2, progress=False)
    expected = km.sample(nan, [0.0, 0.0], **run)
    chains = km.sample(masked, [0.0, 0.0], **run)
    assert chains.posterior["x"].values[..., 0].max() <= 0.5
    np.testing.assert_array_equal(chains.posterior["x"].values, expected.posterior["x"].values)
