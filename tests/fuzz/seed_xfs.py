#!/usr/bin/env python3
"""Seed inputs of fuzz_xfs from a real XFS: a small v5 filesystem (two AGs,
4 KiB blocks, rmapbt, reflink, finobt) is made, mounted on a loop device
and given directories in block, leaf and node form, attribute forks in
leaf and node form, a fragmented file (a bmbt) and shared extents; then,
unmounted, every metadata block of it (the AG headers and every block
that starts with a v5 magic, inode chunks whole) goes into the target's
record format (see fuzz_xfs.c): one seed of the whole filesystem, and one
per AG with the primary superblock.  Must run as root.
Usage: seed_xfs.py OUTDIR."""

import os
import struct
import subprocess
import sys
import tempfile

SECTOR = 512
BSIZE = 4096       # directory and attribute blocks the same size
SPB = BSIZE // SECTOR
SIZE = 48 << 20     # two AGs of 24 MiB; the internal log in the first
MAGICS32 = {b"XFSB", b"XAGF", b"XAGI", b"XAFL", b"AB3B", b"AB3C", b"IAB3", b"FIB3",
            b"RMB3", b"R3FC", b"BMA3", b"XDB3", b"XDD3", b"XDF3"}
MAGICS_DA = {0x3df1, 0x3dff, 0x3ebe, 0x3bee}    # dir3 leaf1/leafn, da3 node, attr3 leaf
ENV = dict(os.environ, TEST_DIR="/tmp", TEST_DEV="fscrub", QA_CHECK_FS="1")


def run(*cmd):
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL)


def populate(mnt):
    def mkfiles(d, n, namelen=12):
        os.makedirs(d)
        for i in range(n):
            open(os.path.join(d, ("f%d-" % i).ljust(namelen, "x")), "w").close()
    mkfiles(os.path.join(mnt, "short"), 4)          # short form
    mkfiles(os.path.join(mnt, "block"), 20)         # block form
    mkfiles(os.path.join(mnt, "leaf"), 80)          # leaf form
    mkfiles(os.path.join(mnt, "node"), 300, 40)     # node form, free blocks
    with open(os.path.join(mnt, "frag"), "wb") as f:   # many extents: a bmbt
        for i in range(0, 600, 2):
            f.seek(i * BSIZE)
            f.write(b"x" * BSIZE)
            f.flush()
            os.fsync(f.fileno())
    a = os.path.join(mnt, "attrs")
    open(a, "w").close()
    for i in range(200):                            # attr leaf, then node form
        os.setxattr(a, "user.attribute-%04d" % i, b"v" * 20)
    with open(os.path.join(mnt, "data"), "wb") as f:
        f.write(os.urandom(64 * BSIZE))
    run("cp", "--reflink=always", os.path.join(mnt, "data"), os.path.join(mnt, "shared"))
    os.unlink(os.path.join(mnt, "short", "f0-".ljust(12, "x")))


def has_magic(b):
    return b[:4] in MAGICS32 or struct.unpack_from(">H", b, 8)[0] in MAGICS_DA


def metadata(img, agblocks):
    """Sorted sectors of metadata: AG headers, magic blocks, inode chunks whole."""
    keep = set()
    nblocks = len(img) // BSIZE
    b = 0
    while b < nblocks:
        blk = img[b * BSIZE:(b + 1) * BSIZE]
        if b % agblocks == 0:
            keep.update(range(b * SPB, b * SPB + 4))
        if blk[:2] == b"IN":
            while b < nblocks and img[b * BSIZE:b * BSIZE + 2] == b"IN":
                keep.update(range(b * SPB, (b + 1) * SPB))
                b += 1
            continue
        if has_magic(blk) and blk[:4] != b"XFSB" or blk[:4] == b"XFSB" and b % agblocks == 0:
            keep.update(range(b * SPB, (b + 1) * SPB))
        b += 1
    return sorted(keep)


def records(img, sectors):
    out, i = [], 0
    while i < len(sectors):
        j = i
        while j + 1 < len(sectors) and sectors[j + 1] == sectors[j] + 1 and j + 1 - i < 255:
            j += 1
        first, n = sectors[i], j - i + 1
        out.append(struct.pack("<IB", first, n) + img[first * SECTOR:(first + n) * SECTOR])
        i = j + 1
    return out


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path, mnt = os.path.join(tmp, "xfs.img"), os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        with open(path, "wb") as f:
            f.truncate(SIZE)
        run("mkfs.xfs", "-f", "-q", "-b", "size=%d" % BSIZE, "-d", "agcount=2",
            "-m", "crc=1,reflink=1,rmapbt=1,finobt=1", "-n", "size=%d" % BSIZE, path)
        run("mount", "-o", "loop", path, mnt)
        try:
            populate(mnt)
        finally:
            run("umount", mnt)
        with open(path, "rb") as f:
            img = f.read()
    agblocks = struct.unpack_from(">I", img, 84)[0]
    sectors = metadata(img, agblocks)
    per_ag = agblocks * BSIZE // SECTOR
    seeds = {"seed-all": sectors}
    for ag in range(2):
        seeds["seed-ag%d" % ag] = [s for s in sectors if s < 4 or s // per_ag == ag]
    for name, secs in seeds.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(b"\0" + b"".join(records(img, secs)))


if __name__ == "__main__":
    main(*sys.argv[1:])
