"""Checks of the values users pass and the functions they give return:
integers, flags, real numbers and arrays of real numbers, each refused
with an error that names the argument when numpy or ``float`` would take
it silently."""

from __future__ import annotations

import itertools
import numbers
import operator
import secrets

import numpy as np


def _as_int(value) -> int | None:
    """``value`` as an ``int`` if it is a Python or numpy integer (bools,
    which are integers to Python, are not), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


# the largest count, size or length the extension takes (a C long)
_INTEGER_MAX = 2**63 - 1


def _integer(name: str, value, minimum: int) -> int:
    """``value`` as an ``int`` if it is an integer (see :func:`_as_int`)
    from ``minimum`` to 2⁶³ − 1; else ``ValueError`` naming ``name`` (a
    larger one gave the extension's bare ``OverflowError``)."""
    number = _as_int(value)
    if number is None or number < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    if number > _INTEGER_MAX:
        raise ValueError(f"`{name}` must be an integer below 2**63, got {value!r}")
    return number


# what the values of a numpy dtype kind are, for the kinds that are not
# real numbers
_NOT_REAL = {"U": "strings", "S": "bytes", "c": "complex numbers", "b": "booleans", "M": "dates", "m": "time spans"}


# the types of items that make _first_bool look further
_BOOLEANS = frozenset({bool, np.bool_, np.ndarray})
_NESTINGS = frozenset({list, tuple})
_BOOL_OR_NESTING = _BOOLEANS | _NESTINGS


def _first_bool(values: list | tuple):
    """The first boolean (a bool, a numpy bool or a bool array) in the
    nesting of lists and tuples ``values``, or None. Level by level, with
    the types of a level's items gathered in C: a flat list of numbers
    costs a few hundred nanoseconds."""
    level = values
    while level:
        kinds = set(map(type, level))
        if kinds.isdisjoint(_BOOL_OR_NESTING):
            return None
        if not kinds.isdisjoint(_BOOLEANS):
            for v in level:
                if isinstance(v, (bool, np.bool_)) or (isinstance(v, np.ndarray) and v.dtype.kind == "b"):
                    return v
        if kinds <= _NESTINGS:
            level = list(itertools.chain.from_iterable(level))
        else:
            level = list(itertools.chain.from_iterable(v for v in level if type(v) in _NESTINGS))
    return None


def _real_array(value, what: str, shape: str) -> np.ndarray:
    """``value`` as a float64 array if it holds real numbers: integers or
    floats of any width, also as Python numbers in an object array. What
    numpy would convert silently is a ``TypeError`` instead: strings and
    bytes (parsed as numbers), complex numbers (cut to their real part),
    booleans (0 and 1, also beside numbers in a list or tuple), dates and
    times (counts of days or seconds), and other objects (None as NaN); so is a value numpy cannot make an array
    of (a ragged nesting). The masked entries of a masked array are NaN
    (numpy would use the values under the mask).
    The messages begin with ``what`` (e.g. "the simulator returned") and
    end with ``shape``, the shape expected."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{what} a {type(value).__name__} that is not an array of numbers ({value!r:.100}); expected a "
            f"real-valued float array of {shape}"
        ) from err
    if array.dtype.kind == "O":
        # numbers.Real counts bool, an int
        wrong = [v for v in array.flat if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real)]
        held, example = (f"{type(wrong[0]).__name__} objects", wrong[0]) if wrong else (None, None)
    elif array.dtype.kind in "fiu":
        # numpy makes a bool beside numbers in a list 0 or 1 (an array
        # holds one dtype, so only a nesting of sequences can mix them);
        # a flat list of numbers is seen to be one in C
        held = example = None
        if type(value) in _NESTINGS and not _BOOL_OR_NESTING.isdisjoint(map(type, value)):
            example = _first_bool(value)
            if example is not None:
                held = "booleans"
    else:
        held, example = _NOT_REAL.get(array.dtype.kind, f"{array.dtype} values"), next(iter(array.flat), None)
    if held is None:
        real = np.asarray(array, dtype=np.float64)
        # numpy drops a mask: masked entries are missing values, NaN (only
        # a masked array has one; asking any other value costs microseconds
        # on every estimate)
        if isinstance(value, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(value)
            if mask.any():
                return np.where(mask, np.nan, real)
        return real
    if isinstance(example, np.generic):
        example = example.item()  # '1.5', not np.str_('1.5')
    name = type(value).__name__
    if isinstance(value, np.ndarray):
        returned = f"an array of dtype {array.dtype} holding {held} (e.g. {example!r:.60})"
    elif array.ndim == 0:
        returned = f"{'an' if name[0] in 'aeiou' else 'a'} {name} ({value!r:.60})"
    else:
        returned = f"{'an' if name[0] in 'aeiou' else 'a'} {name} holding {held} (e.g. {example!r:.60})"
    raise TypeError(f"{what} {returned}; expected a real-valued float array of {shape}")


def _flag(name: str, value) -> bool:
    """``value`` as a bool if it is True or False (Python's or numpy's);
    else ``ValueError`` naming ``name`` (a string such as "no" is true)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


def _is_real_number(value) -> bool:
    """Whether ``value`` is a real number: a Python or numpy integer or
    float, not a bool, a complex number or a string (which ``float``
    would take)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _seed(seed) -> int:
    """The run's seed as an ``int`` in [0, 2**64): ``seed`` checked, or 64
    bits of OS entropy if None."""
    if seed is None:
        return secrets.randbits(64)
    number = _as_int(seed)
    if number is None or not 0 <= number < 2**64:
        raise ValueError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    return number


def _check_rng(rng) -> None:
    """``TypeError`` unless ``rng`` is a ``numpy.random.Generator``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"`rng` must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), got {rng!r:.60}"
        )
