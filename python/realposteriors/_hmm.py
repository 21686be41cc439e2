"""The forward algorithm of a two-state hidden Markov model (numba-compiled
when available), as in the Stan models ``hmm_example`` and ``hmm_drive_0``:

    γ₁(k) = e₁(k),   γ_t(k) = log Σ_j exp(γ_{t−1}(j) + log A[j, k]) + e_t(k),
    log p(y) = log Σ_k exp(γ_N(k)),

with no initial distribution (Stan's code starts from the emissions alone).
It runs in probability space, normalised at every step, which is the same
sum with one exponential per state and step instead of one per pair.
"""

from __future__ import annotations

import math

from ._jit import jit


@jit
def forward2(e1, e2, a11, a12, a21, a22):
    """log p(y) given the log emissions ``e1``, ``e2`` (arrays of length N)
    of states 1 and 2 and the transition probabilities A[j, k] = a_jk;
    −inf if the sum underflows or a value is not finite."""
    m = max(e1[0], e2[0])
    p1 = math.exp(e1[0] - m)
    p2 = math.exp(e2[0] - m)
    s = p1 + p2
    total = m + math.log(s)
    p1 /= s
    p2 /= s
    for t in range(1, e1.shape[0]):
        m = max(e1[t], e2[t])
        q1 = (p1 * a11 + p2 * a21) * math.exp(e1[t] - m)
        q2 = (p1 * a12 + p2 * a22) * math.exp(e2[t] - m)
        s = q1 + q2
        if not (s > 0.0) or not math.isfinite(s):
            return -math.inf
        total += m + math.log(s)
        p1 = q1 / s
        p2 = q2 / s
    return total
