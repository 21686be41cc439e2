"""Every sampler recovers the mean and covariance of a correlated Gaussian."""

import numpy as np
import pytest

import kameleon as km
from kameleon import diagnostics, targets

SAMPLERS = {
    "RandomWalk": km.RandomWalk(),
    "RandomWalk-learned": km.RandomWalk(learned=True),
    "AM-fixed": km.AM(),
    "AM-learned": km.AM(scale="learned"),
    "AM-RB": km.AM(rao_blackwell=True),
    "AMPCA": km.AMPCA(),
    "HMC": km.HMC(step_size=(0.1, 0.3), steps=(5, 10)),
    "KAMH": km.KAMH(subsample_size=100),
    "KAMH-matern": km.KAMH(subsample_size=100, kernel=km.Matern(nu=2.5)),
    "PCAKameleon": km.PCAKameleon(subsample_size=100, components=2),
    "FKAMH-cos": km.FKAMH(features=50, kernel=km.Gaussian(2.0)),
    "FKAMH-sincos": km.FKAMH(features=50, embedding="sincos", kernel=km.Gaussian(2.0)),
    "FKAMH-fastfood": km.FKAMH(features=64, feature_map="fastfood", kernel=km.Gaussian(2.0)),
    "KMCLite": km.KMCLite(n=100, sigma=2.0, step_size=(0.1, 0.3), steps=(5, 10)),
    "KMCFinite": km.KMCFinite(features=50, kernel=km.Gaussian(2.0), step_size=(0.1, 0.3), steps=(5, 10)),
}


def check_moments(draws: np.ndarray, mean: np.ndarray, cov: np.ndarray, k: float = 5.0) -> None:
    """Each of E[x_i] and E[(x_i − μ_i)(x_j − μ_j)] matches its true value to
    within k Monte Carlo standard errors sd(g)/√ESS(g), with ESS the
    multi-chain Geyer ESS of g's own draws. The estimates are asymptotically
    normal, so a k = 5 tolerance fails by chance with probability ~6·10⁻⁷
    per quantity: a failure means a wrong stationary distribution (or an ESS
    overestimated more than ~25-fold), not bad luck."""
    d = mean.size
    functions = {f"x{i}": draws[:, :, i] for i in range(d)}
    truths = {f"x{i}": mean[i] for i in range(d)}
    for i in range(d):
        for j in range(i, d):
            name = f"c{i}{j}"
            functions[name] = (draws[:, :, i] - mean[i]) * (draws[:, :, j] - mean[j])
            truths[name] = cov[i, j]
    for name, g in functions.items():
        ess = diagnostics.ess(g)
        se = g.std() / np.sqrt(ess)
        assert abs(g.mean() - truths[name]) < k * se, (name, g.mean(), truths[name], se, ess)


@pytest.mark.parametrize("name", SAMPLERS)
def test_sampler_recovers_a_correlated_gaussian(name, gaussian_2d):
    mean, cov, _, _ = gaussian_2d
    target = targets.Gaussian(mean, cov)
    idata = km.sample(
        target, mean + 0.5, sampler=SAMPLERS[name], draws=2000, tune=1000, chains=4, seed=11, progress=False
    )
    draws = idata.posterior["x"].values
    assert draws.shape == (4, 2000, 2)
    check_moments(draws, mean, cov)


def _ckam_gaussian_draws(gaussian_2d, keep):
    mean, cov, _, _ = gaussian_2d
    sampler = km.CKAM(
        cycle_length=200, exploration_fraction=0.4, kernel=km.Matern(nu=4.0, bandwidth=2.0), gamma=1.0, keep=keep
    )
    idata = km.sample(
        targets.Gaussian(mean, cov), mean + 0.5, sampler=sampler, draws=4000, tune=1000, chains=4, seed=5, progress=False
    )
    return idata.posterior["x"].values


def test_ckam_keeps_the_sampling_steps_and_recovers_a_correlated_gaussian(gaussian_2d):
    mean, cov, _, _ = gaussian_2d
    draws = _ckam_gaussian_draws(gaussian_2d, "sampling")
    # each cycle of 200 steps explores for ⌊0.4·200⌋ + 1 = 81 and keeps the other 119
    assert draws.shape == (4, 20 * 119, 2)
    check_moments(draws, mean, cov)


def test_ckam_keeping_every_step_adds_the_exploration_states_to_the_same_chains(gaussian_2d):
    mean, cov, _, _ = gaussian_2d
    every = _ckam_gaussian_draws(gaussian_2d, "all")
    assert every.shape == (4, 4000, 2)
    check_moments(every, mean, cov)
    # the same dynamics: the rows of the sampling steps are keep="sampling"'s
    # draws, bit for bit. The whitening pilot shifts where the cycles start
    # among the kept steps, so the offset is found: exactly one fits.
    sampling = _ckam_gaussian_draws(gaussian_2d, "sampling")
    steps = np.arange(4000)
    fits = [
        offset
        for offset in range(200)
        if np.array_equal(every[:, (steps + offset) % 200 >= 81], sampling)
    ]
    assert len(fits) == 1


def test_python_callable_with_hmc_gradient(gaussian_2d):
    mean, cov, logp, grad = gaussian_2d
    sampler = km.HMC(grad_log_density=grad, step_size=(0.1, 0.3), steps=(5, 10))
    idata = km.sample(logp, mean, sampler=sampler, draws=1000, tune=500, chains=2, seed=3, progress=False)
    check_moments(idata.posterior["x"].values, mean, cov)


def test_hmc_on_a_callable_needs_a_gradient(gaussian_2d):
    _, _, logp, _ = gaussian_2d
    with pytest.raises(ValueError, match="grad_log_density"):
        km.sample(logp, [0.0, 0.0], sampler=km.HMC(), draws=10, tune=10, chains=1, progress=False)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: km.KAMH(subsample_size=1), "subsample_size"),
        (lambda: km.AM(scale="sometimes"), "scale"),
        (lambda: km.Gaussian(bandwidth=-1.0), "bandwidth"),
        (lambda: km.FKAMH(kernel=km.Gaussian(), whiten=False), "bandwidth"),
        (lambda: km.HMC(steps=(5, 2)), "steps"),
        (lambda: km.KAMH(median_points=1), "median_points"),
        (lambda: km.FKAMH(feature_map="hadamard"), "feature_map"),
        (lambda: km.FKAMH(feature_map="fastfood", kernel=km.Laplacian(1.0)), "radial"),
        (lambda: km.CKAM(kernel=km.Gaussian(), whiten=False), "bandwidth"),
        (lambda: km.CKAM(exploration_fraction=1.0), "exploration_fraction"),
        (lambda: km.CKAM(switch="never"), "switch"),
        (lambda: km.CKAM(keep="some"), "keep"),
    ],
)
def test_invalid_parameters_name_the_parameter(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_rust_validation_of_ckam_names_the_parameter():
    # a cycle too short for one sampling step passes Python and is refused by Rust
    sampler = km.CKAM(cycle_length=2, exploration_fraction=0.5)
    with pytest.raises(ValueError, match="cycle_length"):
        km.sample(targets.Banana(2), [0.0, 0.0], sampler=sampler, draws=10, tune=10, chains=1, progress=False)


def test_rust_validation_names_the_parameter():
    # components > d passes the Python check and is rejected by Rust
    with pytest.raises(ValueError, match="components"):
        km.sample(
            targets.Banana(2), [0.0, 0.0], sampler=km.AMPCA(components=3), draws=10, tune=10, chains=1, progress=False
        )


def test_settings_serialise_with_a_kind_tag():
    d = km.KAMH(kernel=km.Matern(nu=1.5, bandwidth=2.0)).to_dict()
    assert d["kind"] == "KAMH" and d["kernel"] == {"kind": "Matern", "nu": 1.5, "bandwidth": 2.0}
    assert km.KAMH().to_dict()["kernel"]["bandwidth"] is None  # the median heuristic
    assert "grad_log_density" not in km.HMC().to_dict()


@pytest.mark.parametrize("make", [
    lambda: km.KMCLite(sigma=True),
    lambda: km.KAMH(kernel=km.Gaussian(bandwidth=True)),
    lambda: km.KAMH(kernel=km.Matern(nu=np.bool_(True))),
    lambda: km.KMCLite(kappa=True),
    lambda: km.KMCLite(target_accept=np.bool_(True)),
    lambda: km.CKAM(exploration_fraction=False),
    lambda: km.PCAKameleon(refresh_kappa=True),
], ids=["sigma", "bandwidth", "nu", "kappa", "target_accept", "exploration_fraction", "refresh_kappa"])
def test_a_bool_for_a_number_setting_is_refused(make):
    # sigma=True and bandwidth=True ran with 1.0
    with pytest.raises(ValueError, match="must"):
        make()


@pytest.mark.parametrize("cls", [km.KAMH, km.PCAKameleon, km.FKAMH, km.CKAM, km.KMCFinite])
@pytest.mark.parametrize("kernel", ["gaussian", None, km.Gaussian], ids=["str", "none", "class"])
def test_a_kernel_that_is_not_a_kernel_instance_is_a_type_error_naming_it(cls, kernel):
    # FKAMH, CKAM and KMCFinite raised AttributeError ('str' object has no
    # attribute 'bandwidth'); KAMH and PCAKameleon failed only when run
    with pytest.raises(TypeError, match=rf"`kernel` of a {cls.kind} must be a kameleon kernel"):
        cls(kernel=kernel)


def test_numpy_numbers_in_sampler_settings_are_the_python_numbers(quiet):
    # np.int64(50) was "not an integer", np.float32(0.2) "not a positive number"
    logp = lambda x: -0.5 * float(x @ x)
    run = dict(draws=20, tune=20, chains=1, seed=1, progress=False)
    for numpy_made, plain in [
        (km.KAMH(subsample_size=np.int64(50), kernel=km.Gaussian(bandwidth=np.float32(1.5)), scale=np.float64(0.5)),
         km.KAMH(subsample_size=50, kernel=km.Gaussian(bandwidth=1.5), scale=0.5)),
        (km.KMCLite(n=np.int32(50), step_size=(np.float32(0.125), 0.25), steps=(np.int64(3), 5), kappa=np.float32(0.5)),
         km.KMCLite(n=50, step_size=(0.125, 0.25), steps=(3, 5), kappa=0.5)),
    ]:
        assert numpy_made.to_dict() == plain.to_dict()
        np.testing.assert_array_equal(
            km.sample(logp, [0.0, 0.0], sampler=numpy_made, **run).posterior["x"].values,
            km.sample(logp, [0.0, 0.0], sampler=plain, **run).posterior["x"].values,
        )


def test_lockstep_refuses_hmc_and_says_why():
    # the refusal came from deep in the run and blamed the target for not
    # supporting gradients, although one was passed
    def rows(xs):
        return -0.5 * (xs * xs).sum(axis=1)

    with pytest.raises(ValueError, match="`vectorize=True` does not run HMC"):
        km.sample(rows, [0.0, 0.0], sampler=km.HMC(grad_log_density=lambda x: -x), vectorize=True, draws=5,
                  tune=5, chains=2, seed=1, progress=False)
