"""Which blocks of a block device are in its page cache (mincore(2) on a
read-only shared mapping of the device: mapping and asking read nothing).

As a program, for a test's FSCRUB_DEBUG_AFTER_BULK hook::

    python3 pagecache.py DEV BLOCK_SIZE TIMEOUT OUT BLOCK...

waits until every BLOCK is cached or TIMEOUT seconds passed, then writes
"<cached> <total>" to OUT;

    python3 pagecache.py --bytes DEV AT_LEAST TIMEOUT SETTLE OUT

waits until at least AT_LEAST bytes of DEV are cached or TIMEOUT seconds
passed, then SETTLE seconds more, and writes how many bytes are cached to
OUT.  It must be root (mincore shows another owner's file's cache only to
a caller that may write it)."""

import ctypes
import os
import sys
import time

PROT_READ = 1
MAP_SHARED = 1
PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def cached(dev, blocks, block_size):
    """How many of *blocks* (block numbers of *block_size* bytes) are in
    the page cache of block device *dev*."""
    fd = os.open(dev, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        addr = _libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap %s" % dev)
        try:
            vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore %s" % dev)
            return sum(1 for b in blocks if vec[b * block_size // PAGE] & 1)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def cached_bytes(dev):
    """How many bytes of block device *dev* are in its page cache."""
    fd = os.open(dev, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
    return cached(dev, range(size // PAGE), PAGE) * PAGE


def main_bytes(argv):
    dev, at_least, timeout, settle, out = argv[2], int(argv[3]), float(argv[4]), \
        float(argv[5]), argv[6]
    end = time.monotonic() + timeout
    while cached_bytes(dev) < at_least and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(settle)
    with open(out, "w") as f:
        f.write("%d\n" % cached_bytes(dev))
    return 0


def main(argv):
    if argv[1] == "--bytes":
        return main_bytes(argv)
    dev, bs, timeout, out = argv[1], int(argv[2]), float(argv[3]), argv[4]
    blocks = [int(b) for b in argv[5:]]
    end = time.monotonic() + timeout
    while True:
        n = cached(dev, blocks, bs)
        if n == len(blocks) or time.monotonic() >= end:
            break
        time.sleep(0.05)
    with open(out, "w") as f:
        f.write("%d %d\n" % (n, len(blocks)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
