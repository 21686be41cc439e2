"""Likelihoods of simulator models, estimated from simulations.

A *simulator* is a Python callable that draws the summary statistics of a
data set at parameters ``theta`` (a float64 array):

- ``sim(theta, rng) -> summaries`` of shape (s,), one simulation per call
  (the default, ``batched=False``), or
- ``sim(theta, n, rng) -> summaries`` of shape (n, s), ``n`` independent
  simulations in one call (``batched=True``; usually much faster with numpy).

``rng`` is a ``numpy.random.Generator``; the simulator must draw all its
randomness from it, so that a seeded run is reproducible. ``theta`` is
read-only (the simulations of one estimate share it): copy it to change
it. With one summary (s = 1), a scalar (or an (n,) array when batched) is
accepted too.

:class:`ABC` and :class:`SyntheticLikelihood` turn a simulator and the
observed summaries into a random estimate of the likelihood. Each is a
callable ``f(theta, rng) -> float`` (the log of the estimate) that
:func:`kameleon.sample` and :func:`kameleon.sample_ensemble` run as a
:class:`kameleon.PseudoMarginal`: the estimate of the current state is kept,
never recomputed, so the chains target the posterior whose likelihood is
the *expectation* of the estimate (stated in each class). Without
``prior=`` the estimator is the whole log density (a flat prior); pass a
prior with ``prior=`` (see :mod:`kameleon.priors`). Choose
``n_simulations`` with :func:`log_likelihood_sd`.

Errors: a simulator that raises stops the run and its exception is raised
by ``sample`` (with a note giving ``theta``); a simulator that returns
an array of another shape than expected raises ``ValueError`` naming the
shape expected, and one that returns something that is not an array of
real numbers (a ragged nesting; strings, which numpy would parse, complex
numbers, booleans, dates, None or other objects in an object array)
raises ``TypeError`` saying what it returned; so do such ``observed``
summaries. Summaries that are NaN or
infinite (or masked, in a numpy masked array) are rejections, not errors:
see each class.

A simulator may also be a C function, a :class:`CompiledSimulator` (e.g. a
numba ``cfunc``): the estimators then run entirely in Rust, without the
GIL, so the chains of :func:`kameleon.sample` (``cores`` > 1) simulate in
parallel on threads. Rust draws each simulation's random input from the
chain's own stream (see :class:`CompiledSimulator`), so a run is
reproducible and identical whatever ``cores``. With ``prior=`` or
``bounds=``, the prior and the transforms are evaluated in Python between
the estimates, which still run without the GIL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from . import _core
from ._checks import _check_rng, _flag, _integer, _real_array
from ._sample import SimulationEstimator, _address, _noisy_function

__all__ = ["ABC", "CompiledSimulator", "SyntheticLikelihood", "kmc_skew_normal_setup", "log_likelihood_sd"]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)
# the most float64 values a numpy array can hold
_MAX_SUMMARIES = np.iinfo(np.intp).max // 8


def _observed(value) -> np.ndarray:
    """``value`` as a read-only float64 vector of finite summaries."""
    if value is None:
        # numpy would make None a NaN summary
        raise ValueError("`observed` must be a vector of numbers, got None")
    # a copy, made read-only below
    observed = _real_array(value, "`observed` is", "shape (s,), one value per summary").copy()
    if observed.ndim == 0:
        observed = observed.reshape(1)
    if observed.ndim != 1 or observed.shape[0] == 0:
        raise ValueError(f"`observed` must be a non-empty vector of shape (s,), got shape {observed.shape}")
    if not np.isfinite(observed).all():
        raise ValueError("`observed` must be finite (no NaN or infinity)")
    observed.flags.writeable = False
    return observed


def _summaries(value, shape: tuple[int, ...], batched: bool) -> np.ndarray:
    """The simulator's output as a float64 array of ``shape``; with one
    summary, a scalar (or an (n,) array when batched) is accepted.
    ``ValueError`` naming the expected shape otherwise, ``TypeError`` for
    values that are not real numbers (see :func:`_real_array`)."""
    expected = (
        f"shape (n_simulations, s) = {shape} from a batched simulator"
        if batched
        else f"shape (s,) = {shape}, one value per observed summary"
    )
    if value is None:
        # numpy would make None a NaN summary: a rejection at every θ
        raise ValueError(f"the simulator returned None (a missing `return`?); expected {expected}")
    summaries = _real_array(value, "the simulator returned", expected)
    if summaries.shape != shape:
        if shape[-1] == 1 and summaries.shape == shape[:-1]:
            return summaries.reshape(shape)
        raise ValueError(f"the simulator returned summaries of shape {summaries.shape}; expected {expected}")
    return summaries


def _with_theta(err: BaseException, theta: np.ndarray) -> BaseException:
    """``err`` with a note saying at which ``theta`` the simulator raised."""
    err.add_note(f"raised by the simulator at theta = {np.array2string(theta, precision=6)}")
    return err


@dataclass(frozen=True)
class CompiledSimulator:
    """A simulator compiled to a C function of the signature

    .. code-block:: c

        int64_t simulate(const double *theta, int64_t dim,
                         const double *noise, int64_t n_noise,
                         double *summaries, int64_t n_summaries);

    at ``address`` (numba: ``numba.cfunc(km.CompiledSimulator.SIGNATURE)(f).address``),
    for :class:`ABC` and :class:`SyntheticLikelihood`. One call is one
    simulation: it reads the ``dim`` parameters ``theta`` and the
    ``n_noise`` random numbers ``noise``, writes the ``n_summaries``
    summaries, and returns 0. The sizes passed are always the declared
    ``dim``, ``n_noise`` and ``n_summaries``.

    **Randomness.** The function must draw nothing itself: the summaries
    are a deterministic function of ``theta`` and ``noise``. Rust draws
    ``noise`` for every simulation from the chain's own seeded stream:
    ``n_noise`` independent standard normals (``noise="normal"``) or
    uniforms on the open interval (0, 1) (``noise="uniform"``; e.g. for
    inverse-CDF draws, −log u for an exponential). So runs are
    reproducible for a seed and identical whatever the number of threads,
    and the function is thread-safe without any random state. (A seed per
    simulation for a generator inside the function would not do: numba's
    ``np.random.seed`` takes 32 bits, so seeds of different simulations
    would collide after some 10⁵ simulations, and re-seeding a Mersenne
    Twister costs more than many simulations.) A simulator whose number of
    draws varies (e.g. rejection sampling) declares an upper bound.

    **Errors.** Summaries that are NaN or infinite are rejections, as for
    a Python simulator (see each estimator). A nonzero return value stops
    the run: ``sample`` raises ``RuntimeError`` giving the status and
    ``theta``. The function must not touch Python objects (it is called
    from Rust threads without the GIL) and must be safe to call from
    several threads at once. Keep the object that owns the code (the numba
    cfunc) alive while sampling; pass it as ``owner`` to have this object
    hold it.
    """

    address: int | np.integer
    dim: int | np.integer
    n_summaries: int | np.integer
    n_noise: int | np.integer
    noise: str = "normal"
    owner: Any = None

    SIGNATURE: ClassVar[str] = "int64(CPointer(float64), int64, CPointer(float64), int64, CPointer(float64), int64)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", _address("CompiledSimulator", self.address))
        for name, minimum in (("dim", 1), ("n_summaries", 1), ("n_noise", 0)):
            object.__setattr__(self, name, _integer(name, getattr(self, name), minimum))
        if self.noise not in ("normal", "uniform"):
            raise ValueError(f"`noise` must be 'normal' or 'uniform', got {self.noise!r}")


def _theta(theta) -> np.ndarray:
    """One point ``theta`` of shape (d,) as a read-only float64 copy: the
    simulations of an estimate share it, so a simulator that modifies it
    raises instead of moving the later simulations' parameters."""
    theta = np.array(_real_array(theta, "`theta` is", "shape (d,), one point"))
    if theta.ndim != 1:
        raise ValueError(f"`theta` must be one point of shape (d,), got shape {theta.shape}")
    theta.flags.writeable = False
    return theta


def _seed_of(rng: np.random.Generator) -> int:
    """A 64-bit seed drawn from ``rng`` for the extension's stream."""
    return int(rng.integers(2**64, dtype=np.uint64))


class _Simulations(SimulationEstimator):
    """What the estimators share: the checks of the simulator, the observed
    summaries, ``n_simulations`` and ``batched`` (fields of the subclasses),
    and ``simulate``, which runs the simulations."""

    simulator: Callable
    observed: np.ndarray
    n_simulations: int
    batched: bool

    def _check_simulations(self) -> None:
        compiled = isinstance(self.simulator, CompiledSimulator)
        if not compiled and not callable(self.simulator):
            raise ValueError(
                f"`simulator` must be callable or a CompiledSimulator, got {type(self.simulator).__name__}"
            )
        object.__setattr__(self, "observed", _observed(self.observed))
        object.__setattr__(self, "n_simulations", _integer("n_simulations", self.n_simulations, 1))
        object.__setattr__(self, "batched", _flag("batched", self.batched))
        s, n = self.observed.shape[0], self.n_simulations
        if not compiled and n * s > _MAX_SUMMARIES:
            # the compiled estimators refuse them in the extension
            raise ValueError(
                f"`n_simulations` = {n} simulations of {s} summaries are {n * s} float64 values, more than an "
                "array can hold"
            )
        if compiled:
            if self.batched:
                raise ValueError("`batched` does not apply to a CompiledSimulator (one call is one simulation)")
            if self.simulator.n_summaries != s:
                raise ValueError(
                    f"the CompiledSimulator writes {self.simulator.n_summaries} summaries but `observed` has {s}"
                )

    def _compile(self, **estimate) -> None:
        """For a :class:`CompiledSimulator`, the extension's estimator
        (ABC with ``epsilon=``, else the synthetic likelihood)."""
        sim = self.simulator
        if isinstance(sim, CompiledSimulator):
            compiled = _core.CompiledLikelihood(
                sim.address, sim.dim, self.observed.tolist(), sim.n_noise, sim.noise, self.n_simulations, **estimate
            )
            object.__setattr__(self, "_compiled", compiled)

    def simulate(self, theta, rng: np.random.Generator) -> np.ndarray:
        """``n_simulations`` simulated summaries at ``theta``, shape (n, s),
        drawn with ``rng``."""
        theta = _theta(theta)
        _check_rng(rng)
        if self._compiled is not None:
            return self._compiled.simulate(theta.tolist(), _seed_of(rng))
        n, s = self.n_simulations, self.observed.shape[0]
        if self.batched:
            try:
                value = self.simulator(theta, n, rng)
            except Exception as err:
                raise _with_theta(err, theta)
            return _summaries(value, (n, s), True)
        out = np.empty((n, s))
        for i in range(n):
            try:
                value = self.simulator(theta, rng)
            except Exception as err:
                raise _with_theta(err, theta)
            out[i] = _summaries(value, (s,), False)
        return out

    def __call__(self, theta, rng: np.random.Generator) -> float:
        """The log of the likelihood estimate at ``theta`` from
        ``n_simulations`` new simulations drawn with ``rng`` (for a
        :class:`CompiledSimulator`, computed in Rust from the simulations
        :meth:`simulate` gives for the same state of ``rng``)."""
        if self._compiled is not None:
            theta = _theta(theta)
            _check_rng(rng)
            return self._compiled.log_likelihood(theta.tolist(), _seed_of(rng))
        return self.log_likelihood(self.simulate(theta, rng))

    def _checked(self, summaries) -> np.ndarray:
        s = self.observed.shape[0]
        summaries = _real_array(summaries, "`summaries` is", f"shape (n, {s}) with n >= 1")
        if summaries.ndim != 2 or summaries.shape[1] != s or summaries.shape[0] == 0:
            raise ValueError(f"`summaries` must have shape (n, {s}) with n >= 1, got {summaries.shape}")
        return summaries

    def log_likelihood(self, summaries) -> float:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class ABC(_Simulations):
    """Approximate Bayesian computation with a Gaussian kernel: the
    likelihood estimate

        L̂(θ) = (1/n) Σᵢ N(observed; sᵢ, ε² I),   s₁, …, sₙ simulated at θ,

    computed in log space (log-sum-exp), ``n = n_simulations``.

    L̂ is an unbiased estimate of the ε-likelihood
    L_ε(θ) = ∫ N(observed; s, ε² I) p(s | θ) ds, the density of the observed
    summaries when Gaussian noise of sd ε is added to the simulated ones.
    Pseudo-marginal MCMC with it is therefore exact for the ε-posterior
    π_ε(θ) ∝ p(θ) L_ε(θ), whatever ``n_simulations``: n only changes how
    well the chains mix (see :func:`log_likelihood_sd`), not the target.
    As ε → 0, π_ε tends to the posterior given the summaries.

    ``epsilon``: the kernel's sd, a positive number, or one positive number
    per summary (shape (s,)) for the kernel N(observed; sᵢ, diag(ε²)).
    Summaries on very different scales need per-summary ε (or scaling in
    the simulator). ``batched``: see :mod:`kameleon.simulators`.

    A simulation whose summaries contain NaN (or ±infinity) matches no
    data: its kernel value is 0. If every simulation fails that way the
    estimate is 0, its log −inf, and the proposal is rejected.
    """

    simulator: Callable
    observed: Any
    epsilon: Any
    n_simulations: int | np.integer
    batched: bool = False

    def __post_init__(self) -> None:
        self._check_simulations()
        s = self.observed.shape[0]
        try:
            epsilon = _real_array(self.epsilon, "`epsilon` is", f"shape () or ({s},)")
        except (TypeError, ValueError) as err:
            raise ValueError(f"`epsilon` must be a positive number, got {self.epsilon!r}") from err
        if epsilon.shape not in ((), (s,)) or not (np.isfinite(epsilon).all() and (epsilon > 0).all()):
            raise ValueError(
                f"`epsilon` must be a positive finite number or {s} of them (one per summary), got {self.epsilon!r}"
            )
        epsilon = np.broadcast_to(epsilon, (s,)).copy()
        epsilon.flags.writeable = False
        object.__setattr__(self, "epsilon", float(epsilon[0]) if np.ndim(self.epsilon) == 0 else epsilon)
        object.__setattr__(self, "_scale", epsilon)
        object.__setattr__(self, "_log_norm", 0.5 * s * _LOG_2PI + float(np.log(epsilon).sum()))
        self._compile(epsilon=epsilon.tolist())

    def log_likelihood(self, summaries) -> float:
        """log L̂ from simulated summaries of shape (n, s), any n ≥ 1."""
        summaries = self._checked(summaries)
        with np.errstate(invalid="ignore", over="ignore"):
            z = (summaries - self.observed) / self._scale
            log_kernel = -0.5 * np.einsum("ij,ij->i", z, z) - self._log_norm
        log_kernel[np.isnan(log_kernel)] = -math.inf
        top = log_kernel.max()
        if top == -math.inf:
            return -math.inf
        return float(top + math.log(np.exp(log_kernel - top).sum()) - math.log(summaries.shape[0]))


@dataclass(frozen=True, eq=False)
class SyntheticLikelihood(_Simulations):
    """Gaussian synthetic likelihood (Wood 2010): the summaries at θ are
    taken to be Gaussian, N(μ(θ), Σ(θ)), and the density of the observed
    summaries is estimated from the sample mean μ̂ and the sample
    covariance Σ̂ (divisor n − 1) of ``n = n_simulations`` simulations.

    ``unbiased=False`` (Wood 2010): the estimate N(observed; μ̂, Σ̂). It is
    biased for N(observed; μ, Σ), so pseudo-marginal MCMC targets a
    posterior that depends on n (it tends to the synthetic-likelihood
    posterior below as n grows). Needs n ≥ s + 1 (Σ̂ invertible).

    ``unbiased=True``: the unbiased estimate of the Gaussian density of
    Ghurye & Olkin (1969), used for synthetic likelihood by Price, Drovandi,
    Lee & Nott (2018, "Bayesian synthetic likelihood", JCGS): with
    M = (n − 1) Σ̂, u = observed − μ̂ and k = n / (n − 1),

        L̂ = k^(s/2) Γ((n−1)/2) / (π^(s/2) Γ((n−s−1)/2)) · |M|^(−1/2)
            · (1 − k uᵀM⁻¹u)₊^((n−s−3)/2),

    the conditional density of one simulation given (μ̂, M) evaluated at
    the observed summaries, so E[L̂] = N(observed; μ(θ), Σ(θ)) exactly when
    the summaries are Gaussian. Pseudo-marginal MCMC with it targets the
    synthetic-likelihood posterior p(θ) N(observed; μ(θ), Σ(θ)) whatever n;
    n only changes the mixing (see :func:`log_likelihood_sd`). The estimate
    is 0 (log −inf, a rejection) when the observed summaries lie outside
    the ellipsoid k uᵀM⁻¹u < 1, which happens often when n is small or the
    data are far from the simulations. Needs n ≥ s + 3: at n = s + 2 the
    estimate is still unbiased but its variance is infinite.

    Either way, a simulation with a NaN or infinite summary makes the
    estimate −inf (a rejection: the mean and covariance are undefined), and
    so does a singular Σ̂ (e.g. a summary that is constant over the
    simulations). A summary whose observed value is beyond about 1e±77 in
    magnitude is scaled, in the simulations too, by the power of two that
    brings the observed value into [0.5, 1) (exact, and the estimate is
    corrected for it), so that Σ̂ of summaries near 1e-160 or 1e154 neither
    underflows nor overflows. ``batched``: see :mod:`kameleon.simulators`.
    """

    simulator: Callable
    observed: Any
    n_simulations: int | np.integer
    unbiased: bool = False
    batched: bool = False

    def __post_init__(self) -> None:
        self._check_simulations()
        object.__setattr__(self, "unbiased", _flag("unbiased", self.unbiased))
        s, n = self.observed.shape[0], self.n_simulations
        if n < self._minimum(s):
            raise ValueError(self._too_few(s, n))
        object.__setattr__(self, "_exponents", _scale_exponents(self.observed))
        self._compile(unbiased=self.unbiased, exponents=self._exponents.tolist())

    def _minimum(self, s: int) -> int:
        return s + 3 if self.unbiased else s + 1

    def _too_few(self, s: int, n: int) -> str:
        if self.unbiased:
            why = "the unbiased estimator needs n >= s + 3 (at s + 2 its variance is infinite)"
        else:
            why = "the sample covariance needs n >= s + 1 to be invertible"
        return f"`n_simulations` must be at least {self._minimum(s)} for {s} summaries ({why}), got {n}"

    def log_likelihood(self, summaries) -> float:
        """log L̂ from simulated summaries of shape (n, s); n must be at
        least s + 1 (Wood) or s + 3 (unbiased)."""
        summaries = self._checked(summaries)
        n, s = summaries.shape
        if n < self._minimum(s):
            raise ValueError(self._too_few(s, n))
        if not np.isfinite(summaries).all():
            return -math.inf
        observed, log_jacobian = self.observed, 0.0
        if self._exponents.any():
            # summaries scaled by D = diag(2^e): exact, and the density of
            # D y is that of y times 1/|D|
            summaries, observed = np.ldexp(summaries, self._exponents), np.ldexp(observed, self._exponents)
            log_jacobian = float(self._exponents.sum()) * _LOG_2
        mean = summaries.mean(axis=0)
        centred = summaries - mean
        scatter = centred.T @ centred  # M = (n - 1) Σ̂
        try:
            cholesky = np.linalg.cholesky(scatter)
        except np.linalg.LinAlgError:
            return -math.inf
        diagonal = np.diag(cholesky)
        if not (diagonal > 0).all() or not np.isfinite(diagonal).all():
            return -math.inf
        log_det = 2.0 * float(np.log(diagonal).sum())  # log |M|
        r = np.linalg.solve(cholesky, observed - mean)
        q = float(r @ r)  # uᵀ M⁻¹ u
        if not self.unbiased:
            # N(y; μ̂, M/(n−1)): |Σ̂| = |M| (n−1)^(−s), uᵀΣ̂⁻¹u = (n−1) q
            log_estimate = -0.5 * (s * _LOG_2PI + log_det - s * math.log(n - 1) + (n - 1) * q)
        else:
            k = n / (n - 1)
            t = 1.0 - k * q
            if not t > 0.0:
                return -math.inf
            log_estimate = (
                0.5 * s * math.log(k)
                + math.lgamma(0.5 * (n - 1))
                - math.lgamma(0.5 * (n - s - 1))
                - 0.5 * s * math.log(math.pi)
                - 0.5 * log_det
                + 0.5 * (n - s - 3) * math.log(t)
            )
        return log_estimate + log_jacobian


# a summary whose observed value is beyond 2^±_ORDINARY_EXPONENT in
# magnitude (about 1e±77) is scaled for the synthetic likelihood's
# covariance, whose entries are squares of the summaries' spread
_ORDINARY_EXPONENT = 256


def _scale_exponents(observed: np.ndarray) -> np.ndarray:
    """Per summary, the power of two e (an integer array) by which the
    synthetic likelihood scales it: 0 if the observed value is 0 or of
    ordinary magnitude, else the e that brings it into [0.5, 1) (at most
    2^±1022, a normal float, for the few subnormal or largest values), so
    the covariance of summaries near 1e-160 or 1e154 neither underflows
    nor overflows. Scaling by a power of two is exact."""
    _, exponents = np.frexp(observed)
    exponents = np.clip(-exponents.astype(np.int64), -1022, 1022)
    exponents[np.abs(exponents) <= _ORDINARY_EXPONENT] = 0
    return exponents


def _log_estimate(value) -> float:
    """One log-likelihood estimate as a float: a real number (or a 0-d
    array of one), as the samplers take it; ``TypeError`` otherwise."""
    what = "one log-likelihood estimate, a float"
    estimate = _real_array(value, "the estimator returned", f"shape () ({what})")
    if estimate.ndim != 0:
        raise TypeError(f"the estimator returned an array of shape {estimate.shape}; expected {what}")
    return float(estimate)


def log_likelihood_sd(estimator, theta, repeats: int | np.integer = 50, seed: int | np.integer = 0) -> float:
    """The standard deviation of the log-likelihood estimate at ``theta``,
    over ``repeats`` independent estimates (sample sd, divisor
    ``repeats − 1``; the i-th estimate uses the generator of
    ``SeedSequence(seed).spawn(repeats)[i]``, so the result is reproducible).

    ``estimator``: an :class:`ABC`, a :class:`SyntheticLikelihood`, a
    :class:`kameleon.PseudoMarginal` or any callable ``f(theta, rng)``.
    Returns infinity if some estimate is −inf or NaN (an estimate of 0, as
    the unbiased synthetic likelihood or ABC with a small ε can give: more
    simulations are needed).

    Use it to choose ``n_simulations``: pseudo-marginal MCMC mixes best,
    for a given cost, when this sd is about 1 to 1.7 at parameters typical
    of the posterior (Doucet, Pitt, Deligiannidis & Kohn 2015, Biometrika:
    about 1 when the exact-likelihood chain would mix well, up to about 1.7
    when it mixes poorly). Much larger values make the chains stick for
    long stretches at states whose estimate happened to be high; much
    smaller ones waste simulations. The sd shrinks roughly like
    1/√n_simulations, so from a measured sd σ at n simulations, about
    n·(σ/1.2)² simulations give σ ≈ 1.2. Evaluate it at a central θ (near
    the posterior mode, e.g. from a short pilot run): in the tails the sd
    is larger.
    """
    function = _noisy_function(estimator)
    if function is None:
        if not callable(estimator):
            raise ValueError(f"`estimator` must be callable as f(theta, rng), got {type(estimator).__name__}")
        function = estimator
    repeats = _integer("repeats", repeats, 2)
    seed = _integer("seed", seed, 0)
    theta = _theta(theta)
    values = np.array(
        [
            _log_estimate(function(theta.copy(), np.random.default_rng(child)))
            for child in np.random.SeedSequence(seed).spawn(repeats)
        ]
    )
    if not np.isfinite(values).all():
        return math.inf
    return float(values.std(ddof=1))


def kmc_skew_normal_setup() -> dict:
    """The set-up of the KMC paper's ABC skew-normal posterior, the built-in
    target :class:`kameleon.targets.AbcSkewNormal`: ``alpha``, the shape of
    the skew-normal SN(θ, I, α) (d = 10); ``n_samples``, the draws whose
    mean is one simulated summary; ``observed``, the observed summary (one
    simulation at θ = 10·1, drawn in Rust); ``epsilon``, the width of the
    Gaussian ABC kernel; ``n_pseudo``, the simulations per likelihood
    estimate; and ``prior_variance``, of the prior N(0, prior_variance·I).
    With these, :class:`ABC` on a simulator of the same summaries targets
    the same ε-posterior (its kernel's normalising constant does not depend
    on θ)."""
    from . import _core

    return dict(_core.abc_skew_normal_setup())
