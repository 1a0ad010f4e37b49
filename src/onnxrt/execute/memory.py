"""The CPU memory arena (``SessionOptions.enable_cpu_mem_arena``, on by default).

NumPy takes every array from the C allocator. glibc hands out blocks above its mmap
threshold (128 KiB at first, raised as such blocks are freed) as fresh mappings and gives
the top of its heap back to the system once more than twice that is free, so a run's
activations and im2col buffers come back as new pages on the next run: every 4 KiB page is
faulted in and zeroed again (measured: 1,850 page faults per run of one 64->192 3x3 conv at
56x56, 5.8 ms; without them 4.0 ms). The arena keeps freed memory in the process for the
next run instead, as onnxruntime's arena does: every block comes from the heap (no
mappings at all: glibc's mmap threshold stops at 32 MiB, and VGG's 8x64x224x224
activations, 100 MiB, were faulted in again on every run, 20-80 ms of a 1.4 s run), and
the heap is never trimmed below 1 GiB of free space.

The setting is process-wide and stays once made (the first session with the arena on makes
it); other allocators (musl, macOS, Windows) are left alone.
"""

from __future__ import annotations

import ctypes
import platform
import threading

__all__ = ["use_arena", "arena_in_use", "set_extend_strategy", "shrink_arena"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_TOP_PAD = -2
_DEFAULT_TOP_PAD = 128 * 1024  # glibc's default
_TRIM_BYTES = 1 << 30
_DONE: list[bool] = []
_LOCK = threading.Lock()


def use_arena() -> bool:
    """Keep freed blocks in the process (glibc only); True when the arena is in use."""
    if _DONE:
        return _DONE[0]
    with _LOCK:
        if not _DONE:
            ok = False
            if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
                try:
                    libc = ctypes.CDLL(None)
                    # no mappings (so no mmap threshold to raise), no trimming below 1 GiB
                    ok = bool(libc.mallopt(_M_MMAP_MAX, 0)) and \
                        bool(libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES))
                except (OSError, AttributeError):
                    ok = False
            _DONE.append(ok)
    return _DONE[0]


def arena_in_use() -> bool:
    return bool(_DONE and _DONE[0])


def _libc() -> ctypes.CDLL | None:
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        try:
            return ctypes.CDLL(None)
        except OSError:
            return None
    return None


def set_extend_strategy(strategy: str) -> bool:
    """onnxruntime's ``arena_extend_strategy`` for the host heap: ``kSameAsRequested`` grows
    it by exactly what an allocation needs, ``kNextPowerOfTwo`` by glibc's default padding
    (M_TOP_PAD). Process-wide, like the arena itself; True when applied."""
    if strategy not in ("kNextPowerOfTwo", "kSameAsRequested"):
        raise ValueError(f"arena_extend_strategy must be kNextPowerOfTwo or kSameAsRequested, "
                         f"not {strategy!r}")
    libc = _libc()
    if libc is None:
        return False
    pad = 0 if strategy == "kSameAsRequested" else _DEFAULT_TOP_PAD
    return bool(libc.mallopt(_M_TOP_PAD, pad))


def shrink_arena() -> bool:
    """Give the heap's free memory back to the system now (onnxruntime's run option
    ``memory.enable_memory_arena_shrinkage``); True when the allocator could."""
    libc = _libc()
    if libc is None:
        return False
    try:
        libc.malloc_trim(0)
    except AttributeError:
        return False
    return True
