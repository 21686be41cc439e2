"""Checkpoints written at this format version still load, resume and extend.

``python/tests/checkpoints/`` holds one finished run's checkpoint per
sampler (and one of the ensemble), with the draws and acceptances each run
returned (``runs.npz``). The checkpoints' payload is postcard, which stores
no field names: a field added to any checkpointed state (a chain, a
proposal, a surrogate, the run's configuration) without a new format
version makes these files fail to decode, or decode into shifted values,
and the tests below catch both.

When the format version changes on purpose, write the files again with

    KAMELEON_WRITE_CHECKPOINTS=1 .venv/bin/python -m pytest python/tests/test_checkpoint_format.py

and commit them with the change.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import kameleon as km

HERE = Path(__file__).parent / "checkpoints"
DRAWS = HERE / "runs.npz"
WRITE = os.environ.get("KAMELEON_WRITE_CHECKPOINTS") == "1"
RUN = dict(tune=60, draws=30, chains=2, seed=5, progress=False)
# the runs are short: their ESS and R-hat warnings say nothing here
pytestmark = pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")


def log_density(x):
    return -0.5 * float(x @ x)


def gradient(x):
    return -x


SAMPLERS = {
    "RandomWalk": km.RandomWalk,
    "AM": km.AM,
    "AMPCA": km.AMPCA,
    "HMC": lambda: km.HMC(grad_log_density=gradient),
    "KAMH": km.KAMH,
    "PCAKameleon": km.PCAKameleon,
    # fewer features than the defaults keep the files small
    "FKAMH": lambda: km.FKAMH(features=40),
    "CKAM": km.CKAM,
    # every other kernel of the KAMH-type samplers, whose state holds it
    "KAMH-Laplacian": lambda: km.KAMH(kernel=km.Laplacian()),
    "PCAKameleon-Matern": lambda: km.PCAKameleon(kernel=km.Matern(nu=1.5)),
    "CKAM-InverseMultiquadric": lambda: km.CKAM(kernel=km.InverseMultiquadric(beta=0.7)),
    "KAMH-RationalQuadratic": lambda: km.KAMH(kernel=km.RationalQuadratic(alpha=2.0, bandwidth=1.3)),
    "KMCLite": km.KMCLite,
    "KMCFinite": lambda: km.KMCFinite(features=40),
}


def arrays(idata) -> tuple[np.ndarray, np.ndarray]:
    """(draws (chain, draw, d), acceptances (chain, draw)) of a run."""
    draws = np.stack([v.values for v in idata.posterior.data_vars.values()], axis=-1)
    return draws.reshape(draws.shape[0], draws.shape[1], -1), idata.sample_stats["accepted"].values


@pytest.fixture(scope="module")
def recorded():
    if WRITE:
        HERE.mkdir(exist_ok=True)
        runs = {}
        for name, make in SAMPLERS.items():
            idata = km.sample(log_density, np.zeros(2), sampler=make(), checkpoint=HERE / f"{name}.ckpt", **RUN)
            runs[f"{name}_draws"], runs[f"{name}_accepted"] = arrays(idata)
        idata = km.sample_ensemble(log_density, np.zeros(2), tune=10, draws=10, seed=5, progress=False,
                                   checkpoint=HERE / "ensemble.ckpt")
        runs["ensemble_draws"] = arrays(idata)[0]
        np.savez(DRAWS, **runs)
    with np.load(DRAWS) as runs:
        return dict(runs)


def copy_of(name: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{name}.ckpt"
    shutil.copyfile(HERE / f"{name}.ckpt", path)
    return path


def refused(error: Exception):
    pytest.fail(
        f"a committed checkpoint no longer loads ({error}). If the checkpoint format changed on purpose, give it "
        "a new version (kameleon_samplers::checkpoint::FORMAT_VERSION) and write the files again as this "
        "module's docstring says; if not, a checkpointed state changed its layout without one."
    )


@pytest.mark.parametrize("name", SAMPLERS)
def test_a_committed_checkpoint_extends_from_its_own_draws(name, recorded, tmp_path):
    try:
        extended = km.extend(copy_of(name, tmp_path), log_density, draws=20, progress=False,
                             grad_log_density=gradient if name == "HMC" else None)
    except ValueError as error:
        refused(error)
    draws, accepted = arrays(extended)
    kept = recorded[f"{name}_draws"].shape[1]
    assert draws.shape[1] == kept + 20
    # the stored chains come back bit for bit, and the continuation is a
    # chain on N(0, I): finite, moving, within 6 sd
    np.testing.assert_array_equal(draws[:, :kept], recorded[f"{name}_draws"])
    np.testing.assert_array_equal(accepted[:, :kept], recorded[f"{name}_accepted"])
    assert np.isfinite(draws).all() and np.abs(draws).max() < 6
    assert accepted[:, kept:].any()


def test_a_committed_ensemble_checkpoint_resumes_to_its_own_draws(recorded, tmp_path):
    try:
        resumed = km.resume_ensemble(copy_of("ensemble", tmp_path), log_density, progress=False)
    except ValueError as error:
        refused(error)
    np.testing.assert_array_equal(arrays(resumed)[0], recorded["ensemble_draws"])
