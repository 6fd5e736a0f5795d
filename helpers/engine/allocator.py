"""glibc's allocator told to keep freed activation buffers for reuse (CPU runs on Linux).

A forward of many head-set copies allocates and frees the same megabyte-sized activations layer after
layer. Under glibc's defaults such blocks may be mapped fresh from the kernel (zero-filled, one page fault per
4 KiB) and the heap's top is handed back after frees, so the next forward faults the same pages in again.
With blocks up to MMAP_THRESHOLD served from the heap and the heap trimmed only past TRIM_THRESHOLD, the
buffers stay in the process; an NCS call of the toy then takes no page faults instead of thousands.
"""

import ctypes
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # mallopt options (glibc's malloc.h)
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 2**30
TOP_PAD = 64 * 2**20  # the heap grows by at least this much at a time


def keep_freed_memory() -> bool:
    """Set the three options in this process (and the workers it forks later); False where the C library
    is not glibc or refuses one of them."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(mallopt(option, value) == 1 for option, value in settings)
