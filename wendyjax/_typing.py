"""Types of the values the public functions accept at their boundary.

jaxtyping's `ArrayLike` (JAX and NumPy arrays, NumPy scalars, Python numbers) leaves out what
users pass most: lists and tuples of numbers (`bounds=([0, 0], [10, 5])`). `ArrayLike` here
adds nested sequences of those, up to three levels deep, which `numpy.asarray` turns into a real
array; a public function converts such an argument once, where it enters. Under a runtime checker
(the test suite runs with `--jaxtyping-packages=wendyjax,beartype.beartype`) a sequence is
checked by one of its items, so a long list costs no more than a short one."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import jaxtyping
import numpy as np
import numpy.typing
from jaxtyping import Array, Int, Key, PRNGKeyArray, UInt32

_Nested1: TypeAlias = Sequence[jaxtyping.ArrayLike]
_Nested2: TypeAlias = Sequence[jaxtyping.ArrayLike | _Nested1]
_Nested3: TypeAlias = Sequence[jaxtyping.ArrayLike | _Nested2]

if TYPE_CHECKING:  # for the type checker: what `numpy.asarray` accepts (JAX arrays and lists included)
    ArrayLike: TypeAlias = numpy.typing.ArrayLike
else:  # for the run-time checks: a union beartype checks item by item
    ArrayLike: TypeAlias = jaxtyping.ArrayLike | _Nested3
"""An array, a NumPy or Python number, or a (nested) list or tuple of them."""

KeyLike: TypeAlias = (
    PRNGKeyArray | UInt32[np.ndarray, "2"] | UInt32[np.ndarray, "4"] | int | np.integer | Int[Array | np.ndarray, ""]
)
"""One PRNG key (a typed key, or raw uint32 key data of shape (2,) or (4,)) or an integer seed."""

Keys: TypeAlias = KeyLike | Key[Array, " n"] | UInt32[Array | np.ndarray, "n 2"] | UInt32[Array | np.ndarray, "n 4"]
"""One key or seed, or one key per dataset (typed keys of shape (n,), raw key data (n, 2) or (n, 4))."""
