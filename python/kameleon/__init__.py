"""kameleon: gradient-free kernel adaptive MCMC, run in Rust, driven from Python.

>>> import kameleon as km
>>> idata = km.sample(lambda x: -0.5 * float(x @ x), [0.0, 0.0], sampler=km.AM(), progress=False)  # doctest: +SKIP
"""

from . import diagnostics, priors, simulators, targets
from ._ensemble import resume_ensemble, sample_ensemble
from .habc import HABC
from ._sample import Compiled, PseudoMarginal, SamplingWarning, __version__, extend, resume, sample
from .pymc import PyMCPosterior, from_pymc
from .results import load_results
from .samplers import (
    AM,
    AMPCA,
    CKAM,
    FKAMH,
    HMC,
    KAMH,
    Gaussian,
    InverseMultiquadric,
    KMCFinite,
    KMCLite,
    Laplacian,
    Matern,
    PCAKameleon,
    RandomWalk,
    RationalQuadratic,
)
from .simulators import ABC, CompiledSimulator, SyntheticLikelihood, log_likelihood_sd

__all__ = [
    "ABC",
    "AM",
    "AMPCA",
    "CKAM",
    "FKAMH",
    "HABC",
    "HMC",
    "KAMH",
    "Compiled",
    "CompiledSimulator",
    "Gaussian",
    "InverseMultiquadric",
    "KMCFinite",
    "KMCLite",
    "Laplacian",
    "Matern",
    "PCAKameleon",
    "PseudoMarginal",
    "PyMCPosterior",
    "RandomWalk",
    "RationalQuadratic",
    "SamplingWarning",
    "SyntheticLikelihood",
    "diagnostics",
    "from_pymc",
    "load_results",
    "log_likelihood_sd",
    "priors",
    "resume",
    "resume_ensemble",
    "extend",
    "sample",
    "sample_ensemble",
    "simulators",
    "targets",
]
