#!/usr/bin/env python3
"""Seed inputs of fuzz_btrfs_items from a real (unmounted) btrfs image:
the items of its chunk tree, device tree and top fs tree, and its block
groups, in the target's record format (see fuzz_btrfs_items.c), cut into
files of at most 64 items.  Usage: seed_btrfs_items.py IMAGE OUTDIR."""

import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import btrfs_edit  # noqa: E402

SEL = {btrfs_edit.CHUNK_TREE: 0, btrfs_edit.DEV_TREE: 1, btrfs_edit.FS_TREE: 2}
MAX_ITEMS = 64      # FAKE_TREE_MAX_ITEMS


def record(sel, key, data):
    data = data[:255]
    return struct.pack("<BQBQB", sel, key[0], key[1], key[2], len(data)) + data


def main(image, outdir):
    os.makedirs(outdir, exist_ok=True)
    recs = []
    with btrfs_edit.BtrfsImage(image) as img:
        for tree, sel in SEL.items():
            for it in img.items(tree):
                recs.append(record(sel, it.key, bytes(it.data)))
        for it in img.items(btrfs_edit.EXTENT_TREE):
            if it.key[1] == btrfs_edit.BLOCK_GROUP_ITEM:
                flags = struct.unpack_from("<Q", it.data, 16)[0]
                recs.append(record(3, (it.key[0], flags & 0xff, it.key[2]), b""))
    for n, i in enumerate(range(0, len(recs), MAX_ITEMS)):
        with open(os.path.join(outdir, "seed%02d" % n), "wb") as f:
            f.write(b"".join(recs[i:i + MAX_ITEMS]))


if __name__ == "__main__":
    main(*sys.argv[1:])
