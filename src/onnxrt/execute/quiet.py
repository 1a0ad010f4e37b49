"""NumPy's floating-point error state for the length of a run: every error ignored.

ONNX's results of log(0), 0/0 and overflow are values, not errors (onnxruntime does not
warn either), so runs go under ``np.errstate(all="ignore")``. Entering that context costs
~2-3 us a run (it builds NumPy's error-state object anew each time); ``quiet()`` sets a
state built once per enclosing state instead, through the same context variable, and falls
back to ``np.errstate`` where NumPy lacks it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["quiet"]

try:    # NumPy >= 2: the error state is one context variable of umath
    from numpy._core.umath import _extobj_contextvar as _VAR
    from numpy._core.umath import _make_extobj as _MAKE
except ImportError:     # pragma: no cover - NumPy 1.x
    _VAR = _MAKE = None

_IGNORED: dict[Any, Any] = {}   # the caller's state -> that state with every error ignored
_KEPT = 16


class _Quiet:
    __slots__ = ("_token",)

    def __enter__(self) -> None:
        cur = _VAR.get()
        ign = _IGNORED.get(cur)
        if ign is None:
            ign = _MAKE(all="ignore")       # the rest (buffer size, callback) from ``cur``
            if len(_IGNORED) < _KEPT:
                _IGNORED[cur] = ign
        self._token = _VAR.set(ign)

    def __exit__(self, *exc: Any) -> None:
        _VAR.reset(self._token)


def quiet() -> Any:
    """A context in which NumPy ignores every floating-point error (one per use)."""
    if _VAR is None:
        return np.errstate(all="ignore")
    return _Quiet()
