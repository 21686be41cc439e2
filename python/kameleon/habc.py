"""Hamiltonian ABC (Meeds, Leenders & Welling, UAI 2015), the KMC paper's
baseline on its ABC skew-normal target, run in Rust.

**HABC is a biased baseline, not an exact sampler.** It follows a noisy
gradient of a synthetic likelihood (SPSA finite differences with "sticky"
random numbers) with a friction integrator and accepts every trajectory:
there is no Metropolis–Hastings correction, so its chains do not have the
posterior as their invariant distribution. Use it to reproduce the KMC
paper's comparison, not to infer; :func:`kameleon.sample` with
:class:`kameleon.ABC` or :class:`kameleon.SyntheticLikelihood` is exact for
its target.

The likelihood at θ is log N(s_obs; μ̂(θ), Σ̂(θ) + ε²I), μ̂ and Σ̂ the mean and
covariance (divisor S − 1) of S = ``n_simulations`` simulated summaries; the
prior is N(0, prior_sd²·I). Each iteration draws a step size
ε ~ U[``step_size``), fresh momentum and a sticky seed, then takes ``steps``
integration steps, each costing 2·S simulations (the SPSA difference with
perturbation ``perturbation``); ``friction`` is the constant part of the
friction (the rest is the running variance of the gradient estimates).
:meth:`HABC.kmc_paper` has the paper's settings. One recorded draw costs
S more simulations (its log density, kept as ``lp``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import _core
from ._arviz import check_parameter_names, inference_data, posterior_variables
from ._checks import _flag, _integer, _seed
from ._sample import __version__, _points, _run
from .simulators import CompiledSimulator, _observed, _summaries, _theta, _with_theta

__all__ = ["HABC"]

# the integrator counts its steps per trajectory in 32 bits
_MAX_STEPS = 2**32 - 1


def _finite(name: str, value, positive: bool) -> float:
    """``value`` as a float if it is a finite Python or numpy number, > 0
    when ``positive`` else >= 0; ``ValueError`` naming ``name`` otherwise."""
    what = "a positive finite number" if positive else "a finite number >= 0"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"`{name}` must be {what}, got {value!r}")
    if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
        raise ValueError(f"`{name}` must be {what}, got {value!r}")
    return float(value)


@dataclass(frozen=True, eq=False)
class HABC:
    """The HABC baseline (see :mod:`kameleon.habc`: biased, no MH step) on a
    simulator of summaries.

    ``simulator``: ``sim(theta, rng) -> summaries`` of shape (s,), or with
    ``batched=True`` ``sim(theta, n, rng) -> (n, s)`` (called with n = 1:
    HABC draws its simulations one at a time, each from its own generator
    seeded from the chain's stream); as in :mod:`kameleon.simulators`. Or a
    :class:`~kameleon.simulators.CompiledSimulator`: the whole run then
    goes without the GIL, each simulation's noise drawn from HABC's sticky
    streams.
    None: the built-in skew-normal simulator of the KMC paper's ABC target
    (:func:`kameleon.simulators.kmc_skew_normal_setup`), run without Python,
    with its observed summary (then ``observed`` must be None).
    ``epsilon``: the ridge ε of Σ̂ + ε²I, and ``prior_sd``: the prior's sd
    (each > 0 with a positive finite square: about 1e-154 to 1e154).
    ``n_simulations``: S ≥ 2. ``steps``: at most 2³² − 1.

    A simulator that raises stops the run: the rest of the run rejects every
    trajectory without calling it, and :meth:`sample` raises its exception
    (with a note giving θ). Summaries of the wrong shape raise
    ``ValueError`` the same way, and summaries that are not real numbers
    ``TypeError`` (see :mod:`kameleon.simulators`); NaN or infinite
    summaries make that trajectory non-finite: it is rejected (the state
    stays) and counted in ``rejected_non_finite``.
    """

    simulator: Callable | None = None
    observed: object = None
    n_simulations: int | np.integer = 10
    epsilon: float = 0.55
    prior_sd: float = 5.0
    step_size: tuple[float, float] = (0.01, 0.1)
    steps: int | np.integer = 50
    friction: float = 1e-5
    perturbation: float = 5.0
    batched: bool = False

    @classmethod
    def kmc_paper(cls) -> "HABC":
        """The KMC paper's HABC run on its ABC skew-normal target: S = 10,
        ε = 0.55, prior N(0, 25 I), ε ~ U[0.01, 0.1), 50 steps, friction
        10⁻⁵, SPSA perturbation 5."""
        return cls()

    def __post_init__(self) -> None:
        if self.simulator is None:
            if self.observed is not None:
                raise ValueError("`observed` is given by the built-in simulator: pass it only with a `simulator`")
        else:
            compiled = isinstance(self.simulator, CompiledSimulator)
            if not compiled and not callable(self.simulator):
                raise ValueError(
                    f"`simulator` must be callable or a CompiledSimulator, got {type(self.simulator).__name__}"
                )
            object.__setattr__(self, "observed", _observed(self.observed))
            if compiled:
                if self.batched:
                    raise ValueError("`batched` does not apply to a CompiledSimulator (one call is one simulation)")
                if self.simulator.n_summaries != self.observed.shape[0]:
                    raise ValueError(
                        f"the CompiledSimulator writes {self.simulator.n_summaries} summaries "
                        f"but `observed` has {self.observed.shape[0]}"
                    )
        object.__setattr__(self, "n_simulations", _integer("n_simulations", self.n_simulations, 2))
        object.__setattr__(self, "steps", _integer("steps", self.steps, 1))
        if self.steps > _MAX_STEPS:
            raise ValueError(f"`steps` must be at most {_MAX_STEPS}, got {self.steps}")
        object.__setattr__(self, "batched", _flag("batched", self.batched))
        for name in ("epsilon", "prior_sd", "perturbation"):
            object.__setattr__(self, name, _finite(name, getattr(self, name), positive=True))
        for name in ("epsilon", "prior_sd"):
            # used squared: the ridge ε²I, the prior's variance
            value = getattr(self, name)
            if not 0.0 < value * value < math.inf:
                raise ValueError(
                    f"`{name}` must have a positive finite square (about 1e-154 to 1e154), got {value!r}"
                )
        object.__setattr__(self, "friction", _finite("friction", self.friction, positive=False))
        try:
            low, high = (_finite("step_size", v, positive=True) for v in self.step_size)
        except (TypeError, ValueError):
            low = high = math.nan
        if not (0 < low <= high < math.inf):
            raise ValueError(
                f"`step_size` must be a pair (low, high) with 0 < low <= high < inf, got {self.step_size!r}"
            )
        object.__setattr__(self, "step_size", (low, high))

    def _simulate_one(self, theta: np.ndarray, seed: int) -> np.ndarray:
        """One simulated summary at ``theta`` from a generator seeded with
        ``seed`` (called by the Rust sampler), checked for its shape."""
        rng = np.random.default_rng(seed)
        theta = _theta(theta)
        s = self.observed.shape[0]
        try:
            value = self.simulator(theta, 1, rng) if self.batched else self.simulator(theta, rng)
        except Exception as err:
            raise _with_theta(err, theta)
        if self.batched:
            return np.ascontiguousarray(_summaries(value, (1, s), True)[0])
        return np.ascontiguousarray(_summaries(value, (s,), False))

    def sample(
        self,
        x0,
        *,
        draws: int | np.integer = 1000,
        tune: int | np.integer = 1000,
        chains: int | np.integer = 4,
        seed: int | np.integer | None = None,
        thin: int | np.integer = 1,
        parameter_names: Sequence[str] | None = None,
        progress: bool = True,
    ):
        """Runs ``chains`` HABC chains of ``draws`` kept iterations after
        ``tune`` discarded ones, chain k from row k of ``x0`` (shape
        (chains, d)) or every chain from ``x0`` (shape (d,)), one after
        another, with a progress bar per chain unless ``progress=False``
        (as :func:`kameleon.sample`); Ctrl-C stops the run with
        ``KeyboardInterrupt``. Returns ArviZ data: ``posterior`` as :func:`kameleon.sample`
        names it, ``sample_stats`` with ``lp`` (log prior + synthetic log
        likelihood at the kept state, with that iteration's sticky seed) and
        ``accepted`` (False where the trajectory was non-finite), and attrs
        (``sampler`` says it is the biased baseline). No convergence checks
        or warnings: the chains are biased whatever their R-hat."""
        progress = _flag("progress", progress)
        draws = _integer("draws", draws, 0)
        tune = _integer("tune", tune, 0)
        chains = _integer("chains", chains, 1)
        thin = _integer("thin", thin, 1)
        seed = _seed(seed)
        x0 = _points(x0)
        if x0.ndim == 1:
            x0 = np.tile(x0, (chains, 1))
        if x0.ndim != 2 or x0.shape[0] != chains or x0.shape[1] == 0:
            raise ValueError(f"`x0` must have shape (d,) or ({chains}, d), got {x0.shape}")
        parameter_names = check_parameter_names(parameter_names, x0.shape[1])
        if self.simulator is None and x0.shape[1] != 10:
            raise ValueError(f"the built-in skew-normal simulator has 10 parameters, but `x0` has {x0.shape[1]}")
        settings = (*self.step_size, self.steps, self.friction, self.perturbation)
        if isinstance(self.simulator, CompiledSimulator):
            sim = self.simulator
            if x0.shape[1] != sim.dim:
                raise ValueError(f"the CompiledSimulator has {sim.dim} parameters, but `x0` has {x0.shape[1]}")
            simulator, observed = (sim.address, sim.dim, sim.n_noise, sim.noise), self.observed.tolist()
        elif self.simulator is None:
            simulator, observed = None, None
        else:
            simulator, observed = self._simulate_one, self.observed.tolist()
        result = _run(
            lambda report: _core.habc_sample(
                simulator,
                observed,
                self.n_simulations,
                self.epsilon,
                self.prior_sd**2,
                settings,
                np.ascontiguousarray(x0),
                seed,
                tune,
                draws,
                thin,
                report,
            ),
            [tune + draws * thin] * chains,
            progress,
        )
        runs = result["chains"]
        samples = np.stack([c["samples"] for c in runs])
        stats = {"lp": np.stack([c["lp"] for c in runs]), "accepted": np.stack([c["accepted"] for c in runs])}
        attrs = {
            "inference_library": "kameleon",
            "inference_library_version": __version__,
            "sampler": "HABC (biased baseline: no Metropolis-Hastings correction)",
            "habc": repr(self._settings()),
            "seed": str(seed),
            "draws": draws,
            "tune": tune,
            "thin": thin,
            "accepted_total": [int(c["accepted_total"]) for c in runs],
            "rejected_non_finite": [int(c["rejected_non_finite"]) for c in runs],
        }
        posterior = posterior_variables(samples, parameter_names)
        return inference_data({"posterior": posterior, "sample_stats": stats}, attrs)

    def _settings(self) -> dict:
        return {
            "simulator": "skew-normal (built in)" if self.simulator is None else getattr(
                self.simulator, "__qualname__", repr(self.simulator)
            ),
            "n_simulations": self.n_simulations,
            "epsilon": self.epsilon,
            "prior_sd": self.prior_sd,
            "step_size": self.step_size,
            "steps": self.steps,
            "friction": self.friction,
            "perturbation": self.perturbation,
        }
