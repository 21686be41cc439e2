"""Optional numba compilation of the few loops numpy cannot vectorise
(the forward algorithm of the two hidden Markov models and the ODE solver).

Without numba (or with ``REALPOSTERIORS_NO_NUMBA=1`` in the environment)
the same functions run as plain Python: identical results, much slower.
"""

from __future__ import annotations

import os

HAVE_NUMBA = False
if not os.environ.get("REALPOSTERIORS_NO_NUMBA"):
    try:
        import numba

        HAVE_NUMBA = True
    except ImportError:  # pragma: no cover - numba is optional
        pass


def jit(function):
    """``numba.njit(cache=True)`` when numba is available, else the function itself."""
    if HAVE_NUMBA:
        return numba.njit(cache=True, nogil=True)(function)
    return function
