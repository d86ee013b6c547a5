#!/usr/bin/env python3
"""Seed inputs of fuzz_xfslog from real XFS logs: a small v5 filesystem is
made and mounted on a loop device, given files, directories, renames and
removals, then shut down with its log forced (xfs_io shutdown -f), which
leaves the log dirty; every non-zero block of its log goes into the
target's record format (see fuzz_xfslog.c).  Seeds: that dirty log, the
clean log of a fresh mkfs, and the clean log after a mount and unmount.
Must run as root.  Usage: seed_xfslog.py OUTDIR."""

import os
import re
import struct
import subprocess
import sys
import tempfile

SECTOR = 512
SIZE = 48 << 20
# mkfs.xfs makes one under 300 MB only for fstests (as seed_xfs.py does)
ENV = dict(os.environ, TEST_DIR="/tmp", TEST_DEV="fscrub", QA_CHECK_FS="1")


def run(*cmd, out=False):
    p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=ENV)
    return p.stdout if out else None


def log_region(img):
    """(byte offset, 512-byte blocks) of the internal log."""
    out = run("xfs_db", "-r", "-c", "sb 0", "-c", "print logstart logblocks blocksize agblocks "
              "agblklog", img, out=True)
    f = {k.strip(): int(v) for k, v in (line.split("=") for line in out.splitlines())}
    agno, agbno = f["logstart"] >> f["agblklog"], f["logstart"] & ((1 << f["agblklog"]) - 1)
    return ((agno * f["agblocks"] + agbno) * f["blocksize"],
            f["logblocks"] * f["blocksize"] // SECTOR)


def seed(img, path):
    off, nbb = log_region(img)
    out = bytearray(b"\0" + struct.pack("<I", nbb))
    with open(img, "rb") as fh:
        fh.seek(off)
        log = fh.read(nbb * SECTOR)
    # the kernel stamps the blocks past the head with old cycle numbers at
    # mount (about 2 MiB of them): up to the head is enough, and what is
    # not placed reads as zeros, an older cycle than the head's
    lp = run("xfs_logprint", "-t", img, out=True)
    head = int(re.search(r"log tail: \d+ head: (\d+)", lp).group(1))
    end = min(nbb, head + 8)
    bb = 0
    while bb < end:
        if not any(log[bb * SECTOR:(bb + 1) * SECTOR]):
            bb += 1
            continue
        n = 1
        while n < 255 and bb + n < end and any(log[(bb + n) * SECTOR:(bb + n + 1) * SECTOR]):
            n += 1
        out += struct.pack("<IB", bb, n) + log[bb * SECTOR:(bb + n) * SECTOR]
        bb += n
    with open(path, "wb") as fh:
        fh.write(out)


def populate(mnt):
    for i in range(300):
        with open(os.path.join(mnt, "f%d" % i), "wb") as fh:
            fh.write(b"x" * (100 + 4096 * (i % 3)))
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(0, 300, 2):
        os.rename(os.path.join(mnt, "f%d" % i), os.path.join(mnt, "d", "g%d" % i))
    for i in range(1, 300, 4):
        os.unlink(os.path.join(mnt, "f%d" % i))
    os.setxattr(os.path.join(mnt, "d"), "user.seed", b"v" * 300)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        img, mnt = os.path.join(tmp, "img"), os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        with open(img, "wb") as fh:
            fh.truncate(SIZE)
        run("mkfs.xfs", "-q", "-f", "-m", "crc=1,rmapbt=1,reflink=1", img)
        seed(img, os.path.join(outdir, "seed-mkfs"))
        run("mount", "-o", "loop", img, mnt)
        try:
            run("umount", mnt)
            seed(img, os.path.join(outdir, "seed-clean"))
            run("mount", "-o", "loop", img, mnt)
            populate(mnt)
            run("xfs_io", "-x", "-c", "shutdown -f", mnt)
        finally:
            subprocess.run(["umount", mnt])
        seed(img, os.path.join(outdir, "seed-dirty"))


if __name__ == "__main__":
    main(sys.argv[1])
