#!/usr/bin/env python3
"""Seed inputs of fuzz_btrfs_v1 from a real btrfs with v1 space caches: a
filesystem without a free space tree is made, mounted twice with
space_cache=v1 (the second mount loads what the first wrote) and given
files, then, unmounted, each cache that is one extent becomes one seed in
the target's format (see fuzz_btrfs_v1.c): the superblock's fsid and the
fields fscrub reads, the cache's FREE_SPACE header, inode and extent
items, a chunk item that maps the cache's extent to where the target puts
the pages, the extent tree's used extents of its block group, and the
cache file itself.  Must run as root.  Usage: seed_btrfs_v1.py OUTDIR."""

import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import btrfs_edit as be  # noqa: E402

SIZE = 1536 << 20       # the kernel writes no cache for a block group under 100 MiB
CACHE_AT = 1 << 20      # fuzz_btrfs_v1.c's CACHE_AT
SUPER = 64 << 10
FLAGS = 3 << 1          # sectors of 512 << 3
MAX_USED = 200
FIRST_CHUNK_TREE_OBJECTID = 256
SINGLE_DATA = 1


def record(sel, key, data):
    assert len(data) <= 255
    return struct.pack("<BQBQB", sel, key[0], key[1], key[2], len(data)) + data


def populate(mnt):
    for i in range(40):
        with open(os.path.join(mnt, "f%02d" % i), "wb") as f:
            f.write(os.urandom((i % 7 + 1) * 20000))
    for i in range(0, 40, 3):           # holes in the free space
        os.unlink(os.path.join(mnt, "f%02d" % i))
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(20 << 20))


def make(path, mnt):
    with open(path, "wb") as f:
        f.truncate(SIZE)
    subprocess.run(["mkfs.btrfs", "-f", "-q", "-R", "^free-space-tree", path], check=True)
    for step in (populate, lambda m: open(os.path.join(m, "later"), "wb").write(b"x" * 65536)):
        subprocess.run(["mount", "-o", "loop,space_cache=v1", path, mnt], check=True)
        try:
            step(mnt)
            os.sync()
        finally:
            subprocess.run(["umount", mnt], check=True)


def super_records(img):
    with open(img, "rb") as f:
        f.seek(SUPER)
        sb = f.read(4096)
    spans = ((0x20, 0x30), (0x40, 0x80), (0x22b, 0x233))
    return [record(3, (SUPER + a, 0, 0), sb[a:b]) for a, b in spans]


def chunk_record(logical, length):
    """A single-profile chunk of one stripe at CACHE_AT."""
    data = struct.pack("<QQQQIIIHH", length, 2, 65536, SINGLE_DATA, 65536, 65536, 4096, 1, 0)
    data += struct.pack("<QQ", 1, CACHE_AT) + bytes(16)
    return record(0, (FIRST_CHUNK_TREE_OBJECTID, be.CHUNK_ITEM, logical), data)


def seed(ed, bg, sb_recs):
    hdr, ino, size = ed._cache_inode(bg)
    exts = [fe for fe in ed.items(be.ROOT_TREE, (ino, be.EXTENT_DATA, 0),
                                  (ino, be.EXTENT_DATA, 2 ** 64 - 1))]
    if len(exts) != 1 or exts[0].key[2] != 0:
        return None
    disk = exts[0].get("fe.disk_bytenr") + exts[0].get("fe.offset")
    recs = list(sb_recs) + [chunk_record(disk, size)]
    recs.append(record(1, hdr.key, bytes(hdr.data)))
    recs.append(record(1, (ino, be.INODE_ITEM, 0),
                       bytes(ed.find(be.ROOT_TREE, (ino, be.INODE_ITEM, 0)).data)))
    recs.append(record(1, exts[0].key, bytes(exts[0].data)))
    used = 0
    for it in ed.items(be.EXTENT_TREE, (bg, 0, 0)):
        if used >= MAX_USED:
            break
        if it.key[1] == be.EXTENT_ITEM:
            recs.append(record(2, (it.key[0], 1, it.key[2]), b""))
            used += 1
        elif it.key[1] == be.METADATA_ITEM:
            recs.append(record(2, (it.key[0], 1, 16384), b""))
            used += 1
    body = b"".join(recs)
    return bytes([FLAGS]) + struct.pack("<H", len(body)) + body + ed.read_space_cache(bg)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path, mnt = os.path.join(tmp, "btrfs.img"), os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        make(path, mnt)
        sb_recs = super_records(path)
        n = 0
        with be.BtrfsImage(path) as ed:
            for bg in sorted(ed.space_caches()):
                s = seed(ed, bg, sb_recs)
                if s and len(s) < 65536 + 4096:
                    with open(os.path.join(outdir, "seed%02d" % n), "wb") as f:
                        f.write(s)
                    n += 1
        print("%d seeds" % n)


if __name__ == "__main__":
    main(*sys.argv[1:])
