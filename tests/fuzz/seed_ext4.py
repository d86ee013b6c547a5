#!/usr/bin/env python3
"""Seed inputs of fuzz_ext4 from real filesystems: small ext4 (without and
with metadata_csum) and ext3 images with 1 KiB blocks and two groups are
made, mounted on a loop device and given an htree directory, a file of
many extents (an extent tree below the inode), a file past the double
indirect block (ext3: a block map), attributes in the inode and in a
block, symlinks; files hold zeros, so that, unmounted, the blocks that are
not all zeros are the metadata (the journal's: only its superblock).
Those go into the target's record format (see fuzz_ext4.c), one seed per
image.  And two regression inputs: an extent tree (five levels) and a block
map (triple indirect) whose every entry points to the same node below,
which a walk without a bound takes for a tree of the fan-outs' product.
Must run as root.  Usage: seed_ext4.py OUTDIR."""

import os
import re
import struct
import subprocess
import sys
import tempfile

KIB = 1024
SIZE = 12 << 20         # two groups of 8 MiB (1 KiB blocks)
IMAGES = {
    "seed-ext4": ["mkfs.ext4", "-O", "^metadata_csum"],
    "seed-ext4-csum": ["mkfs.ext4", "-O", "metadata_csum"],
    "seed-ext3": ["mkfs.ext3"],
}
COMMON = ["-F", "-q", "-b", "1024", "-I", "256", "-N", "512", "-J", "size=1"]


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout


def zeros(path, blocks, every=1):
    with open(path, "wb") as f:
        for i in range(0, blocks * every, every):
            f.seek(i * KIB)
            f.write(bytes(KIB))
            if every > 1:
                f.flush()
                os.fsync(f.fileno())


def populate(mnt):
    d = os.path.join(mnt, "htree")
    os.mkdir(d)
    for i in range(250):
        open(os.path.join(d, "entry-with-a-long-name-%04d" % i), "w").close()
    zeros(os.path.join(mnt, "frag"), 60, every=2)       # 60 extents
    zeros(os.path.join(mnt, "big"), 300)                # past the double indirect block
    small = os.path.join(mnt, "small-xattr")
    open(small, "w").close()
    os.setxattr(small, "user.a", b"value")
    big = os.path.join(mnt, "block-xattr")
    open(big, "w").close()
    for i in range(5):
        os.setxattr(big, "user.attribute-%d" % i, b"v" * 100)
    os.symlink("short", os.path.join(mnt, "fast-link"))
    os.symlink("l" * 300, os.path.join(mnt, "slow-link"))


def skip_blocks(path):
    """The journal's blocks but its first (its superblock), as KiB numbers."""
    out = run("debugfs", "-R", "blocks <8>", path, stderr=subprocess.DEVNULL).split()
    return set(int(b) for b in out[1:])


def records(img, skip):
    out, k, n = [], 0, len(img) // KIB
    while k < n:
        if k in skip or not any(img[k * KIB:(k + 1) * KIB]):
            k += 1
            continue
        j = k
        while j + 1 < n and j + 1 - k < 255 and j + 1 not in skip and any(
                img[(j + 1) * KIB:(j + 2) * KIB]):
            j += 1
        out.append(struct.pack("<IB", k, j - k + 1) + img[k * KIB:(j + 1) * KIB])
        k = j + 1
    return out


def debugfs(path, req):
    return run("debugfs", "-w", "-R", req, path, stderr=subprocess.DEVNULL)


def patch(path, off, data):
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)


def graph(path, kind):
    """The regression image: inode 12's tree a graph of a node per level."""
    run("mkfs.ext4", "-F", "-q", "-b", "1024", "-O", "^metadata_csum", path, "4096")
    debugfs(path, "write /dev/null victim")
    blocks = [int(b) for b in debugfs(path, "ffb 6").split(":")[1].split()]
    for b in blocks:
        debugfs(path, "setb %d" % b)
    m = re.search(r"located at block (\d+), offset (0x[0-9a-f]+)", debugfs(path, "imap <12>"))
    ioff = int(m.group(1)) * KIB + int(m.group(2), 16)
    if kind == "extent":
        room = (KIB - 12) // 12
        for depth, blk in zip(range(4, -1, -1), blocks):
            n = room if depth else 0
            node = struct.pack("<HHHHI", 0xF30A, n, room, depth, 0) + b"".join(
                struct.pack("<IIHH", i, blocks[5 - depth], 0, 0) for i in range(n))
            patch(path, blk * KIB, node)
        words = struct.pack("<HHHHI", 0xF30A, 4, 4, 5, 0) + b"".join(
            struct.pack("<IIHH", i, blocks[0], 0, 0) for i in range(4))
    else:
        for blk, child in zip(blocks[:3], blocks[1:4]):
            patch(path, blk * KIB, struct.pack("<256I", *[child] * 256))
        patch(path, ioff + 32, bytes(4))        # i_flags: no EXTENTS_FL
        words = struct.pack("<15I", *([0] * 14 + [blocks[0]]))
    patch(path, ioff + 40, words)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, mkfs in IMAGES.items():
        with tempfile.TemporaryDirectory() as tmp:
            path, mnt = os.path.join(tmp, "img"), os.path.join(tmp, "mnt")
            os.mkdir(mnt)
            with open(path, "wb") as f:
                f.truncate(SIZE)
            run(*(mkfs + COMMON + [path]))
            run("mount", "-o", "loop", path, mnt)
            try:
                populate(mnt)
            finally:
                run("umount", mnt)
            skip = skip_blocks(path)
            with open(path, "rb") as f:
                img = f.read()
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(b"\0" + b"".join(records(img, skip)))
    for kind in ("extent", "blockmap"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "img")
            graph(path, kind)
            with open(path, "rb") as f:
                img = f.read()
        with open(os.path.join(outdir, "regress-%s-graph" % kind), "wb") as f:
            f.write(b"\1" + b"".join(records(img, set())))     # phase 3 only


if __name__ == "__main__":
    main(*sys.argv[1:])
