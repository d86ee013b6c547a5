"""btrfs's logical trees, checked online (src/backends/btrfs/btrfs_check.c).

Faults are made with btrfs_edit.py on the unmounted image (the edit is
proven by `btrfs check --readonly` naming the same problem), then the image
is mounted and `fscrub -n` must exit 4 with the right check id and path.
The faults are ones the kernel mounts and keeps while mounted: counters and
reference counts that it only reads back (an extent item's refs, an
inode's nbytes, a block group's used, the superblock's bytes_used) and
which it does not recompute at mount.  Clean images with subvolumes,
snapshots, reflinks, compression, inline extents, prealloc and nodatacow
files must exit 0.

The editor's own tests come first: an edit makes `btrfs check` report the
matching problem (so the edit hit the intended item and every checksum and
copy is right), and an edit reverted leaves `btrfs check` clean.
"""

import os
import re
import shutil
import struct
import subprocess
import time

import pytest

from conftest import FSCRUB, need_fs, run_fscrub
import btrfs_edit as be
import fsimage
from fsimage import run

MiB = 1 << 20
U64 = 2 ** 64 - 1


def btrfs_check(path):
    """(exit code, output) of `btrfs check --readonly` on an image file."""
    r = subprocess.run(["btrfs", "check", "--readonly", path], capture_output=True,
                       text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def populate(mnt):
    """Files of every extent kind: regular, inline, reflinked, prealloc,
    nodatacow, in the top level, a subvolume and a snapshot of it."""
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(MiB))
    for name in ("x1", "x2"):    # separate extents of one size: a crosslink
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(os.urandom(64 << 10))
    with open(os.path.join(mnt, "small"), "w") as f:
        f.write("tiny inline file\n")
    run(["cp", "--reflink=always", os.path.join(mnt, "big"), os.path.join(mnt, "big.reflink")])
    with open(os.path.join(mnt, "prealloc"), "wb") as f:
        os.posix_fallocate(f.fileno(), 0, 256 << 10)
        f.write(b"x" * 5000)
    nocow = os.path.join(mnt, "nocow")
    open(nocow, "wb").close()
    run(["chattr", "+C", nocow])
    with open(nocow, "wb") as f:
        f.write(os.urandom(300 << 10))
    with open(os.path.join(mnt, "compressible"), "wb") as f:
        f.write(b"abcdefgh" * (64 << 10))
    run(["btrfs", "subvolume", "create", os.path.join(mnt, "sv")])
    os.makedirs(os.path.join(mnt, "sv", "d"))
    with open(os.path.join(mnt, "sv", "d", "g"), "wb") as f:
        f.write(os.urandom(200 << 10))
    with open(os.path.join(mnt, "sv", "d", "s"), "w") as f:
        f.write("small in a subvolume\n")
    run(["btrfs", "subvolume", "snapshot", os.path.join(mnt, "sv"), os.path.join(mnt, "snap")])
    with open(os.path.join(mnt, "snap", "d", "new"), "wb") as f:
        f.write(os.urandom(100 << 10))
    os.sync()
    # the source rewrites a block after the snapshot: its shared leaf is COWed
    with open(os.path.join(mnt, "sv", "d", "g"), "r+b") as f:
        f.seek(8192)
        f.write(os.urandom(4096))
    for i in range(40):
        with open(os.path.join(mnt, "sv", "many%02d" % i), "wb") as f:
            f.write(os.urandom(4096 * (i % 3 + 1)))
    os.sync()
    # checksummed data after a nodatasum gap: the csum items before the gap
    # are not the csum tree's last run (btrfs check judges a run at a gap)
    nocow2 = os.path.join(mnt, "nocow2")
    open(nocow2, "wb").close()
    run(["chattr", "+C", nocow2])
    with open(nocow2, "wb") as f:
        f.write(os.urandom(64 << 10))
    os.sync()
    with open(os.path.join(mnt, "tail"), "wb") as f:
        f.write(os.urandom(16 << 10))
    os.sync()


@pytest.fixture
def image(image_factory):
    return populated_image(image_factory)


def populated_image(image_factory):
    """A populated btrfs image (mkfs defaults: DUP metadata, free space tree,
    no-holes), unmounted."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300)
    img.mkfs()
    populate(img.mount("compress=zstd"))
    img.offline()
    return img


def ino_of(img, relpath):
    """The inode number of a path (mounts the image for a moment)."""
    mnt = img.mount()
    try:
        return os.stat(os.path.join(mnt, relpath)).st_ino
    finally:
        img.offline()


def subvol_id(img, name):
    mnt = img.mount()
    try:
        out = run(["btrfs", "inspect-internal", "rootid", os.path.join(mnt, name)]).stdout
        return int(out.strip())
    finally:
        img.offline()


def move_csum_item_to_free_space(ed):
    """Move the first csum item that ends a run of checksummed data into
    the free space after it (its key offset only: the tree stays sorted).
    Its new range holds no extent (`btrfs check`: "there are no extents for
    csum range"); its old one loses its checksums.  Not the last run:
    btrfs check judges a run of csum items when the next one starts after
    a gap.  Returns (new start, end)."""
    items = list(ed.items(be.CSUM_TREE, (be.EXTENT_CSUM_OBJECTID, be.EXTENT_CSUM, 0),
                          (be.EXTENT_CSUM_OBJECTID, be.EXTENT_CSUM, U64)))
    sector = ed.super("sectorsize")
    for cur, nxt in zip(items, items[1:]):
        length = cur.size // 4 * sector
        end = cur.key[2] + length
        new = (end + MiB + MiB - 1) // MiB * MiB     # 1 MiB past it, aligned
        if new + length > nxt.key[2]:
            continue
        used = [it for it in ed.items(be.EXTENT_TREE, (0, 0, 0), (new + length, 0, 0))
                if it.key[1] in (be.EXTENT_ITEM, be.METADATA_ITEM) and
                it.key[0] + (it.key[2] if it.key[1] == be.EXTENT_ITEM else ed.nodesize) > new]
        if used:
            continue
        ed.set_key(cur, (be.EXTENT_CSUM_OBJECTID, be.EXTENT_CSUM, new))
        return new, new + length
    raise AssertionError("no csum item with free space after it")


def file_extents(ed, tree, ino):
    return [it for it in ed.items(tree, (ino, be.EXTENT_DATA, 0), (ino, be.EXTENT_DATA, U64))]


def data_extent_item(ed, fe):
    db, dl = fe.get("fe.disk_bytenr"), fe.get("fe.disk_num_bytes")
    return ed.find(be.EXTENT_TREE, (db, be.EXTENT_ITEM, dl))


def block_group_tree(ed):
    """The tree holding BLOCK_GROUP_ITEMs: the block group tree if any."""
    try:
        ed.tree_root(be.BLOCK_GROUP_TREE)
        return be.BLOCK_GROUP_TREE
    except KeyError:
        return be.EXTENT_TREE


def data_block_group(ed):
    tree = block_group_tree(ed)
    for it in ed.items(tree, (0, be.BLOCK_GROUP_ITEM, 0), (U64, be.BLOCK_GROUP_ITEM, U64)):
        if it.key[1] == be.BLOCK_GROUP_ITEM and it.get("bg.flags") & 1 and it.get("bg.used"):
            return it
    raise AssertionError("no data block group in use")


# ============================================================================
# the editor
# ============================================================================

def test_edit_maps_dup_metadata(image):
    """mkfs's default metadata profile on one device is DUP: every metadata
    chunk has two copies, and the editor writes both."""
    with be.BtrfsImage(image.path) as ed:
        meta = [c for c in ed.chunks if len(c[2]) == 2]
        assert meta, ed.chunks
        root, _ = ed.tree_root(be.EXTENT_TREE)
        a, b = ed.physical(root)
        with open(image.path, "rb") as f:
            f.seek(a)
            ca = f.read(ed.nodesize)
            f.seek(b)
            cb = f.read(ed.nodesize)
        assert ca == cb


@pytest.mark.parametrize("what", ["extent_refs", "nbytes", "bg_used", "bytes_used",
                                  "delete_file_extent", "csum_orphan"])
def test_edit_seen_by_btrfs_check(image, what):
    rc, out = btrfs_check(image.path)
    assert rc == 0, out
    big = ino_of(image, "big")
    reflink = ino_of(image, "big.reflink")
    with be.BtrfsImage(image.path) as ed:
        if what == "extent_refs":
            item = data_extent_item(ed, file_extents(ed, be.FS_TREE, big)[0])
            assert item.get("extent.refs") == 2
            ed.set_field(item, "extent.refs", 3)
            want = "ref mismatch on [%d %d] extent item 3, found 2" % (item.key[0], item.key[2])
        elif what == "nbytes":
            item = ed.find(be.FS_TREE, (big, be.INODE_ITEM, 0))
            assert item.get("inode.nbytes") == MiB
            ed.set_field(item, "inode.nbytes", 4096)
            want = "root 5 inode %d errors 400, nbytes wrong" % big
        elif what == "bg_used":
            item = data_block_group(ed)
            used = item.get("bg.used")
            ed.set_field(item, "bg.used", used + 4096)
            want = "block group [%d %d] used %d but extent items used %d" % (
                item.key[0], item.key[2], used + 4096, used)
        elif what == "bytes_used":
            used = ed.super("bytes_used")
            ed.set_super("bytes_used", used + 4096)
            want = "super bytes used %d mismatches actual used %d" % (used + 4096, used)
        elif what == "csum_orphan":
            # x1's file extent item and data extent item gone: its csums
            # remain; nbytes 0 (a hole now), or btrfs check stops at the fs roots
            x1 = ino_of(image, "x1")
            fe = file_extents(ed, be.FS_TREE, x1)
            item = data_extent_item(ed, fe[0])
            ed.delete_item(fe[0])
            ed.delete_item(item)
            ed.set_field(ed.find(be.FS_TREE, (x1, be.INODE_ITEM, 0)), "inode.nbytes", 0)
            want = "there are no extents for csum range %d-%d" % (
                item.key[0], item.key[0] + item.key[2])
        else:
            # the reflink's only file extent gone: the shared extent has one
            # reference less than it counts, and the file's nbytes is wrong
            fe = file_extents(ed, be.FS_TREE, reflink)
            assert len(fe) == 1
            item = data_extent_item(ed, fe[0])
            ed.delete_item(fe[0])
            assert file_extents(ed, be.FS_TREE, reflink) == []
            want = "ref mismatch on [%d %d] extent item 2, found 1" % (item.key[0], item.key[2])
    rc, out = btrfs_check(image.path)
    assert rc != 0 and want in out, out


def test_edit_revert_is_clean(image):
    big = ino_of(image, "big")
    with be.BtrfsImage(image.path) as ed:
        item = ed.find(be.FS_TREE, (big, be.INODE_ITEM, 0))
        old = ed.set_field(item, "inode.nbytes", 12345)
        ed.set_field(item, "inode.nbytes", old)
        bg = data_block_group(ed)
        ed.set_field(bg, "bg.used", ed.set_field(bg, "bg.used", 1))
        ed.set_super("bytes_used", ed.super("bytes_used") + 1)
        ed.set_super("bytes_used", ed.super("bytes_used") - 1)
    rc, out = btrfs_check(image.path)
    assert rc == 0, out


def test_edit_subvolume_tree(image):
    """An fs tree found through its ROOT_ITEM (a subvolume, a snapshot)."""
    sv = subvol_id(image, "sv")
    snap = subvol_id(image, "snap")
    g = ino_of(image, "sv/d/g")
    with be.BtrfsImage(image.path) as ed:
        a = file_extents(ed, sv, g)
        b = file_extents(ed, snap, g)
        assert a and b and a[0].get("fe.disk_bytenr") == b[0].get("fe.disk_bytenr")
        item = ed.find(snap, (g, be.INODE_ITEM, 0))
        ed.set_field(item, "inode.nbytes", 4096)
    rc, out = btrfs_check(image.path)
    assert rc != 0 and "root %d inode %d errors 400, nbytes wrong" % (snap, g) in out, out


# ============================================================================
# fscrub on the mounted image
# ============================================================================

# The fault tests' mount: under -n fscrub waits for the kernel's own commit
# before it reads a finding again, and a fresh mount has a transaction
# running: commit=5 holds that wait to 5 s, not the default 30 (the default
# is test_damage_confirmed_however_mounted's "fresh").
FAULT_OPTIONS = "compress=zstd,commit=5"


def fscrub_mounted(img, options=FAULT_OPTIONS):
    mnt = img.mount(options)
    try:
        return mnt, run_fscrub("-n", mnt)
    finally:
        img.offline()


def test_clean_image_exits_0(image):
    """Subvolumes, a snapshot and its source both changed after it, reflinks,
    zstd compression, inline, prealloc and nodatacow files: all legal."""
    rc, out = btrfs_check(image.path)
    assert rc == 0, out
    mnt = image.mount("compress=zstd")
    try:
        r = run_fscrub("-n", "-v", mnt)
    finally:
        image.offline()
    assert r.rc == 0, r.stdout + r.stderr
    assert "btrfs trees (first pass)" in r.stdout
    assert not [f for f in r.findings if f.check.startswith("btrfs.")], r.findings


def mnt_of(img):
    return img.mnt


def inject(img, what):
    """Make one fault; returns (check id, path suffix that must be named)."""
    big = ino_of(img, "big")
    reflink = ino_of(img, "big.reflink")
    snap = subvol_id(img, "snap")
    sv = subvol_id(img, "sv")
    g = ino_of(img, "snap/d/g")
    with be.BtrfsImage(img.path) as ed:
        if what == "extent_refs":
            ed.set_field(data_extent_item(ed, file_extents(ed, be.FS_TREE, big)[0]),
                         "extent.refs", 3)
            return "btrfs.extent_refs", "/big", "counts 3 references, its back references add up to 2"
        if what == "missing_file_extent":
            ed.delete_item(file_extents(ed, be.FS_TREE, reflink)[0])
            return "btrfs.extent_refs", "/big.reflink", "counts 1 file extent items, the tree has 0"
        if what == "backref_inode":
            # the reflink's inline EXTENT_DATA_REF names inode 9999 instead
            item = data_extent_item(ed, file_extents(ed, be.FS_TREE, reflink)[0])
            off = 24
            while off < item.size:
                t = item.data[off]
                if t == be.EXTENT_DATA_REF:
                    if be.struct.unpack_from("<Q", item.data, off + 9)[0] == reflink:
                        ed.patch(item, off + 9, "<Q", 9999)
                        break
                    off += 29
                else:
                    off += 9 if t != be.SHARED_DATA_REF else 13
            else:
                raise AssertionError("no inline ref for the reflink")
            return "btrfs.crosslink", "/big.reflink", "name another file, %s/big" % mnt_of(img)
        if what == "crosslink":
            # x2's file extent points at x1's extent (same size): both named
            x1, x2 = ino_of(img, "x1"), ino_of(img, "x2")
            fe = file_extents(ed, be.FS_TREE, x2)
            ed.set_field(fe[0], "fe.disk_bytenr",
                         file_extents(ed, be.FS_TREE, x1)[0].get("fe.disk_bytenr"))
            return "btrfs.crosslink", "/x2", "name another file, %s/x1 (inode %d)" % (
                mnt_of(img), x1)
        if what == "nbytes":
            ed.set_field(ed.find(be.FS_TREE, (big, be.INODE_ITEM, 0)), "inode.nbytes", 4096)
            return "btrfs.nbytes", "/big", "nbytes 4096, its file extents add up to 1048576"
        if what == "nbytes_snapshot":
            ed.set_field(ed.find(snap, (g, be.INODE_ITEM, 0)), "inode.nbytes", 4096)
            return "btrfs.nbytes", "/snap/d/g", "nbytes 4096"
        if what == "root_backref":
            # sv's ROOT_BACKREF deleted: its ROOT_REF is alone, nothing names it
            ed.delete_item(ed.find(be.ROOT_TREE, (sv, be.ROOT_BACKREF, be.FS_TREE)))
            return "btrfs.root_ref", "", 'subvolume %d "sv" (directory index' % sv
        if what == "root_ref_index":
            # the ROOT_REF's directory index points at no entry for sv
            ed.patch(ed.find(be.ROOT_TREE, (be.FS_TREE, be.ROOT_REF, sv)), 8, "<Q", 99)
            return "btrfs.root_ref", "", "names directory index 99, which is not an entry"
        if what == "csum_missing":
            # the nodatacow file loses NODATASUM: its data has no csum items
            nocow = ino_of(img, "nocow")
            item = ed.find(be.FS_TREE, (nocow, be.INODE_ITEM, 0))
            assert item.get("inode.flags") & 1
            ed.set_field(item, "inode.flags", item.get("inode.flags") & ~3)
            return "btrfs.csum", "/nocow", "has no checksum items"
        if what == "csum_unexpected":
            # x1 gains NODATASUM: its data has csum items it should not have
            item = ed.find(be.FS_TREE, (ino_of(img, "x1"), be.INODE_ITEM, 0))
            ed.set_field(item, "inode.flags", item.get("inode.flags") | 1)
            return "btrfs.csum", "/x1", "the file is nodatasum but its data"
        if what == "csum_orphan":
            start, end = move_csum_item_to_free_space(ed)
            return "btrfs.csum", None, "checksum items cover logical %d-%d (%d bytes)" % (
                start, end, end - start)
        if what == "csum_orphan_deleted":
            # x1's file extent item and its data extent item deleted: its
            # csum items cover bytes that no extent holds
            x1 = ino_of(img, "x1")
            fe = file_extents(ed, be.FS_TREE, x1)
            assert len(fe) == 1
            ext = data_extent_item(ed, fe[0])
            ed.delete_item(fe[0])
            ed.delete_item(ext)
            ed.set_field(ed.find(be.FS_TREE, (x1, be.INODE_ITEM, 0)), "inode.nbytes", 0)
            start, length = ext.key[0], ext.key[2]
            return "btrfs.csum", None, "checksum items cover logical %d-%d (%d bytes)" % (
                start, start + length, length)
        if what == "fst_count":
            bg = data_block_group(ed)
            info = ed.find(be.FREE_SPACE_TREE, (bg.key[0], be.FREE_SPACE_INFO, bg.key[2]))
            ed.set_field(info, "fsi.extent_count", info.get("fsi.extent_count") + 1)
            return "btrfs.free_space_tree", None, "block group at logical %d" % bg.key[0]
        if what == "fst_used_free":
            # the data group's first free extent grows 4 KiB down, over the
            # end of the used extent before it (mounted read-only: the kernel
            # would allocate from it)
            bg = data_block_group(ed)
            start, end = bg.key[0], bg.key[0] + bg.key[2]
            free = [it for it in ed.items(be.FREE_SPACE_TREE, (start, be.FREE_SPACE_EXTENT, 0),
                                          (end, 0, 0)) if it.key[1] == be.FREE_SPACE_EXTENT]
            first = free[0]
            assert first.key[0] > start
            ed.set_key(first, (first.key[0] - 4096, be.FREE_SPACE_EXTENT, first.key[2] + 4096))
            return "btrfs.free_space_tree", None, "free (its free range %d-" % (first.key[0])
        if what == "dir_index_gone":
            # "small"'s DIR_INDEX deleted: its DIR_ITEM and INODE_REF remain
            small = ino_of(img, "small")
            idx = [it for it in ed.items(be.FS_TREE, (256, be.DIR_INDEX, 0), (256, be.DIR_INDEX, U64))
                   if it.data[30:] == b"small"]
            ed.delete_item(idx[0])
            return "btrfs.dir_item", "/small", 'INODE_REF names "small" in directory inode 256'
        if what == "inode_ref_gone":
            # "x1"'s INODE_REF deleted: its directory entries name an inode
            # that has no name back, and nothing reaches it (nlink 1)
            x1 = ino_of(img, "x1")
            ed.delete_item(ed.find(be.FS_TREE, (x1, be.INODE_REF, 256)))
            return "btrfs.dir_item", "", 'directory entry "x1" (index'
        if what == "dir_isize":
            d = ino_of(img, "sv/d")
            item = ed.find(sv, (d, be.INODE_ITEM, 0))
            ed.set_field(item, "inode.size", item.get("inode.size") + 2)
            return "btrfs.dir_item", "/sv/d", "directory i_size"
        if what == "nlink":
            ed.set_field(ed.find(be.FS_TREE, (big, be.INODE_ITEM, 0)), "inode.nlink", 2)
            return "btrfs.inode_ref", "/big", "inode nlink 2, it has 1 names"
        if what == "orphan":
            # x2 has a name but no links, and is not on the orphan list
            ed.set_field(ed.find(be.FS_TREE, (ino_of(img, "x2"), be.INODE_ITEM, 0)), "inode.nlink", 0)
            return "btrfs.orphan", "/x2", "not on the orphan list"
        if what == "bg_used":
            bg = data_block_group(ed)
            ed.set_field(bg, "bg.used", bg.get("bg.used") + 4096)
            return "btrfs.bg_used", None, "block group at logical %d" % bg.key[0]
        if what == "bytes_used":
            ed.set_super("bytes_used", ed.super("bytes_used") + 4096)
            return "btrfs.bytes_used", None, "superblock bytes_used"
    raise ValueError(what)


@pytest.mark.parametrize("what", ["extent_refs", "missing_file_extent", "backref_inode", "crosslink",
                                  "nbytes", "nbytes_snapshot", "root_backref", "root_ref_index",
                                  "csum_missing", "csum_unexpected", "csum_orphan", "csum_orphan_deleted",
                                  "fst_count", "fst_used_free",
                                  "dir_index_gone", "inode_ref_gone", "dir_isize", "nlink",
                                  "orphan",
                                  "bg_used", "bytes_used"])
def test_fault_found(image, what):
    """Each fault is one the kernel mounts with and keeps: it reads these
    counters and references back but does not recompute them at mount (a
    deleted file extent item or a renamed back reference only matter when
    the extent is next freed, which the test does not do)."""
    check, suffix, text = inject(image, what)
    rc, out = btrfs_check(image.path)
    assert rc != 0, out
    mnt, r = fscrub_mounted(image, "ro" if what == "fst_used_free" else FAULT_OPTIONS)
    assert r.rc == 4, r.stdout + r.stderr
    hits = [f for f in r.of("Error", check) if text in f.message]
    assert hits, r.stdout
    if suffix is not None:
        assert any(f.path == mnt + suffix for f in hits), hits
        assert all(f.inode for f in hits), hits


def test_free_space_bitmap(image_factory):
    """A fragmented data block group is kept as bitmaps in the free space
    tree: clean, then one used sector's bit set (read-only mount)."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=1024)
    img.mkfs()
    mnt = img.mount()
    for i in range(6000):
        with open(os.path.join(mnt, "f%d" % i), "wb") as f:
            f.write(os.urandom(4096))
    os.sync()
    for i in range(0, 6000, 2):
        os.unlink(os.path.join(mnt, "f%d" % i))
    os.sync()
    keep = os.stat(os.path.join(mnt, "f4001")).st_ino
    r = run_fscrub("-n", mnt)
    img.offline()
    assert r.rc == 0, r.stdout + r.stderr
    with be.BtrfsImage(img.path) as ed:
        bytenr = file_extents(ed, be.FS_TREE, keep)[0].get("fe.disk_bytenr")
        bitmaps = [it for it in ed.items(be.FREE_SPACE_TREE, (0, be.FREE_SPACE_BITMAP, 0),
                                         (U64, be.FREE_SPACE_BITMAP, U64))
                   if it.key[1] == be.FREE_SPACE_BITMAP
                   and it.key[0] <= bytenr < it.key[0] + it.key[2]]
        assert bitmaps, "no bitmap covers logical %d" % bytenr
        bm = bitmaps[0]
        bit = (bytenr - bm.key[0]) // 4096
        data = bytearray(bm.data)
        assert not data[bit // 8] & (1 << (bit % 8))
        data[bit // 8] |= 1 << (bit % 8)
        ed.write_item(bm, bytes(data))
    rc, out = btrfs_check(img.path)
    assert rc != 0, out
    mnt = img.mount("ro")
    try:
        r = run_fscrub("-n", mnt)
    finally:
        img.offline()
    assert r.rc == 4, r.stdout + r.stderr
    assert any("the extent at logical %d " % bytenr in f.message
               for f in r.of("Error", "btrfs.free_space_tree")), r.stdout


# ============================================================================
# the v1 free space cache (space_cache=v1, no free space tree)
# ============================================================================

V1 = "space_cache=v1"


@pytest.fixture
def v1_image(image_factory):
    """A populated btrfs without a free space tree, mounted with v1 caching
    twice (the second mount loads the caches the first wrote).  1.5 GiB: the
    kernel writes no cache for a block group under 100 MiB, and a data
    chunk is a tenth of the filesystem."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=1536, mkfs_args=["-R", "^free-space-tree"])
    img.mkfs()
    mnt = img.mount(V1)
    populate(mnt)
    with open(os.path.join(mnt, "big20"), "wb") as f:   # past the 8 MiB mkfs chunk
        f.write(os.urandom(20 * MiB))
    os.sync()
    img.offline()
    mnt = img.mount(V1)
    with open(os.path.join(mnt, "later"), "wb") as f:
        f.write(os.urandom(64 << 10))
    os.sync()
    img.offline()
    return img


def cached_data_group(ed):
    """(block group start, its cache, entries) of the v1 cache with the most
    entries that holds a free extent entry right after used space."""
    for bg, (gen, entries, bitmaps) in sorted(ed.space_caches().items(),
                                              key=lambda kv: -kv[1][1]):
        data = ed.read_space_cache(bg)
        ents = [e for e in ed.cache_entries(data, entries) if e[3] == 1 and e[1] > bg]
        if ents:
            return bg, bytearray(data), ents
    raise AssertionError("no v1 cache with a free extent entry after used space")


def v1_fscrub(img, options):
    mnt = img.mount(options)
    try:
        return run_fscrub("-n", "-v", mnt)
    finally:
        img.offline()


def test_v1_space_cache_clean(v1_image):
    """The caches are read, found to agree with the extent tree: exit 0."""
    rc, out = btrfs_check(v1_image.path)
    assert rc == 0, out
    with be.BtrfsImage(v1_image.path) as ed:
        assert ed.space_caches(), "the kernel wrote no v1 cache"
    r = v1_fscrub(v1_image, V1)
    assert r.rc == 0, r.stdout + r.stderr
    m = re.search(r"(\d+) v1 space caches: (\d+) checked, (\d+) stale", r.stdout)
    assert m and int(m.group(2)) >= 1 and m.group(3) == "0", r.stdout
    assert not [f for f in r.findings if f.check.startswith("btrfs.")], r.findings


def shift_cache_entry(ed):
    """Move a free extent entry 64 KiB down, onto the used extent before it:
    its length and so the cache's free total stay (the kernel checks that
    total and would drop the cache otherwise, but it loads this one and
    allocates there).  Returns (block group, the cache's bytes, the entry's
    new start)."""
    bg, data, ents = cached_data_group(ed)
    pos, off, nbytes, _ = ents[0]
    struct.pack_into("<Q", data, pos, off - (64 << 10))
    ed.write_space_cache(bg, bytes(data))
    return bg, data, off - (64 << 10)


@pytest.mark.parametrize("options", ["ro," + V1, V1])
def test_v1_space_cache_used_free(v1_image, options):
    """A cache entry covering a used extent (`btrfs check`: "cache appears
    valid but isn't"), mounted with v1 caching: exit 4.  Read-only, the
    trees are read again at once; read-write, after the kernel's commit
    (-n forces none), which does not rewrite the cache of a block group
    nothing changed: the second reading finds it again."""
    with be.BtrfsImage(v1_image.path) as ed:
        _, _, start = shift_cache_entry(ed)
    rc, out = btrfs_check(v1_image.path)
    assert rc != 0 and "cache appears valid but isn't" in out, out
    r = v1_fscrub(v1_image, options)
    assert r.rc == 4, r.stdout + r.stderr
    assert any("its free range %d-" % start in f.message
               for f in r.of("Error", "btrfs.space_cache")), r.stdout
    assert "btrfs trees (read again)" in r.stdout, r.stdout


def test_v1_space_cache_stale_is_ignored(v1_image):
    """The same fault in a cache whose page generation is not its header's:
    the kernel ignores such a cache, so does fscrub (counted stale)."""
    with be.BtrfsImage(v1_image.path) as ed:
        bg, data, _ = shift_cache_entry(ed)
        pages = len(data) // be.CACHE_PAGE
        gen, = struct.unpack_from("<Q", data, 4 * pages)
        struct.pack_into("<Q", data, 4 * pages, gen + 1)
        ed.write_space_cache(bg, bytes(data))
    r = v1_fscrub(v1_image, "ro," + V1)
    assert r.rc == 0, r.stdout + r.stderr
    m = re.search(r"v1 space caches: \d+ checked, (\d+) stale", r.stdout)
    assert m and int(m.group(1)) >= 1, r.stdout
    assert not r.of("Error", "btrfs.space_cache"), r.stdout


def bitmap_cache(ed):
    """Rewrite the data block group's cache with its free space in a bitmap
    (as the kernel keeps a fragmented group): the free ranges in the first
    128 MiB window as a bitmap entry and its page, the rest as extent
    entries.  Returns (block group, the cache's bytes, the bitmap page's
    offset in them, a used sector's bit in the bitmap)."""
    bg, data, _ = cached_data_group(ed)
    hdr = ed.find(be.ROOT_TREE, (be.FREE_SPACE_OBJECTID, 0, bg))
    gen, entries, bitmaps = struct.unpack_from("<QQQ", hdr.data, 17)
    assert not bitmaps
    free = [(e[1], e[1] + e[2]) for e in ed.cache_entries(data, entries)]
    window = bg + 8 * be.CACHE_PAGE * 4096         # a bitmap page's bytes
    pages = len(data) // be.CACHE_PAGE
    head = 4 * pages + 8
    page = be.CACHE_PAGE                            # the entries fit page 0
    data[head:] = bytes(len(data) - head)
    ents, in_bitmap, used = [], 0, None
    for a, b in free:
        for x in range(a, min(b, window), 4096):
            bit = (x - bg) // 4096
            data[page + bit // 8] |= 1 << (bit % 8)
            in_bitmap += 4096
        if b > window:
            ents.append((max(a, window), b - max(a, window), 1))
        if used is None and bg < a < window and all(not (c <= a - 4096 < d) for c, d in free):
            used = (a - 4096 - bg) // 4096
    assert in_bitmap and used is not None, free
    ents.append((bg, in_bitmap, 2))
    for i, e in enumerate(ents):
        struct.pack_into("<QQB", data, head + 17 * i, *e)
    ed.patch(hdr, 25, "<Q", len(ents))
    ed.patch(hdr, 33, "<Q", 1)
    ed.write_space_cache(bg, bytes(data))
    return bg, data, page, used


def test_v1_space_cache_bitmap(v1_image):
    """A cache that keeps its free space in a bitmap: clean (read, not
    stale); then the bit of a used sector set and the last free one cleared
    (the free total stays): exit 4 read-only."""
    with be.BtrfsImage(v1_image.path) as ed:
        bg, data, page, used = bitmap_cache(ed)
    rc, out = btrfs_check(v1_image.path)
    assert rc == 0, out
    r = v1_fscrub(v1_image, "ro," + V1)
    assert r.rc == 0, r.stdout + r.stderr
    m = re.search(r"v1 space caches: (\d+) checked, (\d+) stale", r.stdout)
    assert m and int(m.group(1)) >= 1 and m.group(2) == "0", r.stdout
    last = max(b for b in range(8 * be.CACHE_PAGE) if data[page + b // 8] & (1 << (b % 8)))
    with be.BtrfsImage(v1_image.path) as ed:
        data[page + used // 8] |= 1 << (used % 8)
        data[page + last // 8] &= ~(1 << (last % 8)) & 0xFF
        ed.write_space_cache(bg, bytes(data))
    rc, out = btrfs_check(v1_image.path)
    assert rc != 0, out
    r = v1_fscrub(v1_image, "ro," + V1)
    assert r.rc == 4, r.stdout + r.stderr
    assert any("calls bytes of the extent at logical" in f.message and
               "its free range %d-%d" % (bg, bg + 8 * be.CACHE_PAGE * 4096) in f.message
               for f in r.of("Error", "btrfs.space_cache")), r.stdout


# ============================================================================
# the live-filesystem rule: reflinks, snapshots, compression under churn
# ============================================================================

FICLONE = 0x40049409


def _btrfs_churn(mnt, stop, counter, seed, snapshots=True):
    """Until stop: write (compressible and not), overwrite inside shared
    extents, reflink, fallocate, truncate, hard-link, unlink, and take and
    delete snapshots of a subvolume being written (unless not snapshots: a
    snapshot of a member of a higher qgroup leaves the qgroups
    inconsistent, unchecked)."""
    import random
    rnd = random.Random(seed)
    sv = os.path.join(mnt, "work")
    files = []
    n = 0
    while not stop.is_set():
        n += 1
        op = rnd.randrange(10)
        try:
            if op < 3 or len(files) < 5 or (op == 9 and not snapshots):
                p = os.path.join(sv, "f%d" % n)
                with open(p, "wb") as f:
                    f.write((b"z" * 8192 if rnd.random() < 0.5 else os.urandom(8192))
                            * rnd.randrange(1, 20))
                files.append(p)
            elif op == 3:
                src, dst = rnd.choice(files), os.path.join(sv, "r%d" % n)
                with open(src, "rb") as a, open(dst, "wb") as b:
                    import fcntl
                    fcntl.ioctl(b.fileno(), FICLONE, a.fileno())
                files.append(dst)
            elif op == 4:
                with open(rnd.choice(files), "r+b") as f:
                    f.seek(rnd.randrange(0, 65536))
                    f.write(os.urandom(rnd.randrange(1, 20000)))
            elif op == 5:
                with open(rnd.choice(files), "r+b") as f:
                    os.posix_fallocate(f.fileno(), rnd.randrange(0, 200000), 65536)
            elif op == 6:
                os.truncate(rnd.choice(files), rnd.randrange(0, 100000))
            elif op == 7:
                p = files.pop(rnd.randrange(len(files)))
                os.unlink(p)
            elif op == 8:
                src = rnd.choice(files)
                dst = os.path.join(sv, "h%d" % n)
                os.link(src, dst)
                files.append(dst)
            else:
                snap = os.path.join(mnt, "snaps", "s%d" % n)
                subprocess.run(["btrfs", "subvolume", "snapshot", sv, snap],
                               capture_output=True, check=True)
                old = sorted(os.listdir(os.path.join(mnt, "snaps")))
                if len(old) > 3:
                    subprocess.run(["btrfs", "subvolume", "delete",
                                    os.path.join(mnt, "snaps", old[0])],
                                   capture_output=True, check=True)
        except (FileNotFoundError, IndexError):
            pass
        with counter.get_lock():
            counter.value += 1


def nest_qgroups(mnt, subvol):
    """The level-1 qgroup 1/100 over subvol's and 0/5, the level-2 2/1 over it."""
    sid = run(["btrfs", "inspect-internal", "rootid", subvol]).stdout.strip()
    for q in ("1/100", "2/1"):
        run(["btrfs", "qgroup", "create", q, mnt])
    for member, parent in (("0/" + sid, "1/100"), ("0/5", "1/100"), ("1/100", "2/1")):
        run(["btrfs", "qgroup", "assign", "--no-rescan", member, parent, mnt])
    run(["btrfs", "quota", "rescan", "-w", mnt])


@pytest.mark.parametrize("mkfs_args,options,nested", [
    ([], "compress=zstd", False),
    # v1 caches rewritten at every commit, read while the extent tree moves
    (["-R", "^free-space-tree"], "compress=zstd," + V1, False),
    # every hole an item: truncates and writes past the end move them
    (["-O", "^no-holes"], "compress=zstd", False),
    # qgroups counted at every commit, snapshots made and dropped
    (["-R", "quota"], "compress=zstd", False),
    # and qgroups of qgroups over the churned subvolume
    (["-R", "quota"], "compress=zstd", True),
], ids=["free_space_tree", "space_cache_v1", "explicit_holes", "quotas", "nested_qgroups"])
def test_no_false_alarms_under_btrfs_churn(image_factory, mkfs_args, options, nested):
    """fscrub -n, three times while the workload runs: its first passes see
    delayed references, block group counters, dropped snapshots and names in
    flux; after the forced commit none of that may be an error."""
    import multiprocessing as mp
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=1024, mkfs_args=mkfs_args)
    img.mkfs()
    mnt = img.mount(options)
    run(["btrfs", "subvolume", "create", os.path.join(mnt, "work")])
    if nested:
        nest_qgroups(mnt, os.path.join(mnt, "work"))
    os.mkdir(os.path.join(mnt, "snaps"))
    stop, counter = mp.Event(), mp.Value("l", 0)
    worker = mp.Process(target=_btrfs_churn, args=(mnt, stop, counter, 7, not nested))
    worker.start()
    try:
        while counter.value < 300:
            worker.join(0.1)
            assert worker.is_alive()
        infos = 0
        for _ in range(3):
            start = counter.value
            r = run_fscrub("-n", "-v", mnt)
            print("%d operations during the scan" % (counter.value - start))
            bad = [f for f in r.findings if f.severity in ("Error", "Warning")]
            # A snapshot deleted while the walk reads one of its
            # directories is a race (an info), not an operational error.
            ops = [l for l in r.stderr.splitlines() if l.startswith("fscrub: ")]
            assert r.rc == 0 and not ops and not bad, r.stdout + r.stderr
            assert "btrfs trees (first pass)" in r.stdout
            # the qgroups of every level compared while their figures move
            assert not nested or "qgroups checked: 2 of level 0, 2 above" in r.stdout, r
            infos += len([f for f in r.findings if "changed while being checked (" in f.message])
            print("\n".join(l for l in r.stdout.splitlines() if "v1 space caches" in l or "space_cache" in l or "qgroup" in l))
        print("%d btrfs tree findings were in flux" % infos)
    finally:
        stop.set()
        worker.join(60)
        img.offline()
    rc, out = btrfs_check(img.path)
    assert rc == 0, out


def test_no_false_alarms_on_a_read_only_bind_of_a_churning_btrfs(image_factory, workdir):
    """A read-only bind mount of a btrfs that is written through its other
    mount is still in flux: fscrub -n of the bind, three times while the
    workload runs, finds no error.  Before, the bind's read-only flag
    (statvfs) was taken for a read-only filesystem, every finding seen the
    same twice was an error at once, without a commit waited for, and torn
    readings that agreed became false alarms (the old binary: 1 of 2 runs,
    "inode nlink 1, it has 2 names" of a file being hard-linked)."""
    import multiprocessing as mp
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=1024)
    img.mkfs()
    mnt = img.mount("compress=zstd")
    run(["btrfs", "subvolume", "create", os.path.join(mnt, "work")])
    os.mkdir(os.path.join(mnt, "snaps"))
    bind = os.path.join(workdir, "robind")
    os.mkdir(bind)
    run(["mount", "--bind", mnt, bind])
    try:
        run(["mount", "-o", "remount,bind,ro", bind])
        stop, counter = mp.Event(), mp.Value("l", 0)
        worker = mp.Process(target=_btrfs_churn, args=(mnt, stop, counter, 11))
        worker.start()
        try:
            while counter.value < 300:
                worker.join(0.1)
                assert worker.is_alive()
            for _ in range(3):
                r = run_fscrub("-n", "-v", bind)
                bad = [f for f in r.findings if f.severity in ("Error", "Warning")]
                assert r.rc == 0 and not bad, r.stdout + r.stderr
                assert "btrfs trees (first pass)" in r.stdout, r
        finally:
            stop.set()
            worker.join(60)
    finally:
        run(["umount", bind])
        img.offline()
    rc, out = btrfs_check(img.path)
    assert rc == 0, out


def test_shared_leaf_reported_once(image_factory):
    """An item in a leaf that a snapshot still shares with its source is read
    through both trees: one error (the source's path), naming the snapshot,
    not two."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    sv = os.path.join(mnt, "sv")
    run(["btrfs", "subvolume", "create", sv])
    for i in range(400):     # enough inline files for a tree of two levels
        with open(os.path.join(sv, "f%03d" % i), "wb") as f:
            f.write(b"%d" % i * 100)
    with open(os.path.join(sv, "victim"), "wb") as f:
        f.write(os.urandom(65536))
    victim = os.stat(os.path.join(sv, "victim")).st_ino
    run(["btrfs", "subvolume", "snapshot", sv, os.path.join(mnt, "snap")])
    os.sync()
    img.offline()
    svid, snapid = subvol_id(img, "sv"), subvol_id(img, "snap")
    with be.BtrfsImage(img.path) as ed:
        a = ed.find(svid, (victim, be.INODE_ITEM, 0))
        b = ed.find(snapid, (victim, be.INODE_ITEM, 0))
        assert a.leaf == b.leaf and a.path, "the leaf is not shared"
        ed.set_field(a, "inode.nbytes", 4096)
    rc, out = btrfs_check(img.path)
    assert rc != 0, out
    mnt, r = fscrub_mounted(img, "")
    errs = r.of("Error", "btrfs.nbytes")
    assert r.rc == 4 and len(errs) == 1, r.stdout
    assert errs[0].path == mnt + "/sv/victim", errs
    assert "shared with 1 snapshot, is seen through subvolume %d" % snapid in errs[0].message


def test_file_outside_the_mounted_subvolume(image):
    """Mounted with subvol=sv, a finding in the top level (tree 5) names the
    file by its path in that tree: <subvolume 5>/big."""
    big = ino_of(image, "big")
    with be.BtrfsImage(image.path) as ed:
        ed.set_field(ed.find(be.FS_TREE, (big, be.INODE_ITEM, 0)), "inode.nbytes", 4096)
    mnt, r = fscrub_mounted(image, "subvol=sv")
    errs = r.of("Error", "btrfs.nbytes")
    assert r.rc == 4 and [f.path for f in errs] == [mnt + "/<subvolume 5>/big"], r.stdout


@pytest.mark.parametrize("mkfs_args,options", [
    (["-O", "^skinny-metadata"], ""),        # tree blocks as EXTENT_ITEMs
    (["-M"], ""),                             # mixed data and metadata groups
    (["-O", "^no-holes"], ""),                # explicit hole extents
    (["-R", "^free-space-tree"], "space_cache=v1"),  # no free space tree
    ([], "compress-force=zstd"),              # compressed inline and regular
    ([], "nodatasum"),
    ([], "nodatacow"),
])
def test_clean_variants(image_factory, mkfs_args, options):
    """Other on-disk formats and mount options, each with reflinks, prealloc,
    inline files, a snapshot changed after it was taken and deletions: no
    finding, and `btrfs check` agrees the image is clean."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300, mkfs_args=mkfs_args)
    img.mkfs()
    mnt = img.mount(options)
    with open(os.path.join(mnt, "inline"), "wb") as f:
        f.write(b"a" * 3000)
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(MiB))
    with open(os.path.join(mnt, "cmp"), "wb") as f:
        f.write(b"abc" * 100000)
    run(["cp", "--reflink=always", os.path.join(mnt, "big"), os.path.join(mnt, "big2")])
    with open(os.path.join(mnt, "pre"), "wb") as f:
        os.posix_fallocate(f.fileno(), 0, MiB)
        f.write(b"x" * 5000)
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(300):
        with open(os.path.join(mnt, "d", str(i)), "wb") as f:
            f.write(os.urandom(i * 37))
    run(["btrfs", "subvolume", "snapshot", mnt, os.path.join(mnt, "snap")])
    with open(os.path.join(mnt, "snap", "big"), "r+b") as f:
        f.write(b"y" * 10000)
    for i in range(0, 300, 3):
        os.unlink(os.path.join(mnt, "d", str(i)))
    # holes: written past the end, and grown by truncate (without no-holes
    # each hole has an item of its own)
    with open(os.path.join(mnt, "sparse"), "wb") as f:
        f.write(b"s" * 4096)
        f.seek(MiB)
        f.write(b"e" * 100)
    with open(os.path.join(mnt, "grown"), "wb") as f:
        f.write(b"g" * 100)
        f.truncate(3 * MiB)
    os.sync()
    r = run_fscrub("-n", "-v", mnt)
    img.offline()
    assert r.rc == 0, r.stdout + r.stderr
    assert "btrfs trees (first pass)" in r.stdout
    # -n forces no commit: what the kernel still does after the sync (the
    # cleaner, discard) may be read in flux, an info that says so
    assert not [f for f in r.findings if f.check.startswith("btrfs.") and
                not (f.severity == "Info" and "changed while being checked" in f.message)], \
        r.findings
    rc, out = btrfs_check(img.path)
    assert rc == 0, out


def test_file_extent_hole_without_its_item(image_factory):
    """Without the no-holes feature every hole of a file has a file extent
    item (disk_bytenr 0); one deleted leaves file bytes below i_size that
    no item covers: `btrfs check`'s "file extent discount"."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300, mkfs_args=["-O", "^no-holes"])
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "sparse"), "wb") as f:
        f.write(os.urandom(4096))
        f.seek(64 << 10)
        f.write(os.urandom(4096))
    img.offline()
    ino = ino_of(img, "sparse")
    with be.BtrfsImage(img.path) as ed:
        fe = file_extents(ed, be.FS_TREE, ino)
        assert [(it.key[2], it.get("fe.disk_bytenr") == 0) for it in fe] == \
            [(0, False), (4096, True), (64 << 10, False)], fe
        ed.delete_item(fe[1])
    rc, out = btrfs_check(img.path)
    assert rc != 0 and "file extent discount" in out, out
    mnt, r = fscrub_mounted(img, "")
    assert r.rc == 4, r.stdout + r.stderr
    assert [(f.path, f.inode, f.message) for f in r.of("Error", "btrfs.file_extent")] == [
        (mnt + "/sparse", ino, "no file extent item covers file offset 4096 (i_size 69632); "
         "without the no-holes feature every hole has one")], r.stdout


def test_file_extent_overlap_across_leaves(image_factory):
    """A file of 300 extents of 8 KiB, 4 KiB apart: its items fill more
    than one leaf.  The first item of a leaf gets a key offset 4 KiB past
    the start of the last item of the leaf before, so that the two extents
    map the same 4 KiB of the file.  The kernel's tree checker refuses such
    an overlap only inside one leaf, so the filesystem mounts and reads."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "frag"), "wb") as f:
        for i in range(300):
            f.seek(i * (12 << 10))
            f.write(os.urandom(8 << 10))
            f.flush()
            os.fsync(f.fileno())
    img.offline()
    ino = ino_of(img, "frag")
    with be.BtrfsImage(img.path) as ed:
        fe = file_extents(ed, be.FS_TREE, ino)
        assert len(fe) == 300, fe
        i = next(i for i in range(1, len(fe)) if fe[i].leaf != fe[i - 1].leaf)
        prev, first = fe[i - 1], fe[i]
        assert prev.get("fe.num_bytes") == 8 << 10
        ed.set_key(first, (ino, be.EXTENT_DATA, prev.key[2] + 4096))
    rc, out = btrfs_check(img.path)
    assert rc != 0, out
    mnt, r = fscrub_mounted(img, "")
    assert r.rc == 4, r.stdout + r.stderr
    assert [(f.path, f.inode, f.message) for f in r.of("Error", "btrfs.file_extent")] == [
        (mnt + "/frag", ino, "the file extent item at file offset %d begins before the one "
         "before it ends (at %d): two extents map the same file bytes"
         % (prev.key[2] + 4096, prev.key[2] + 8192))], r.stdout


def test_sigint_stops_the_tree_check(image):
    """SIGINT during the walk (fscrub frozen at the phase 3 header, the
    signal pending when it goes on) stops the walk, and the tree check that
    phase 3 still calls looks before reading any tree: exit 32, no tree
    counts, no operational error."""
    import signal
    mnt = image.mount()
    try:
        p = subprocess.Popen([FSCRUB, "-n", "-v", mnt], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        out = []
        for line in p.stdout:
            out.append(line)
            if line.startswith("Phase 3: Scan all inodes"):
                p.send_signal(signal.SIGSTOP)
                p.send_signal(signal.SIGINT)
                p.send_signal(signal.SIGCONT)
                break
        rest, err = p.communicate(timeout=60)
    finally:
        image.offline()
    text = "".join(out) + rest
    assert p.returncode == 32, text + err
    assert "btrfs trees" not in text, text
    assert "fscrub:" not in err, err


# ============================================================================
# chunks, device extents, block groups (btrfs.chunk)
# ============================================================================

def dev_extents(ed):
    return [it for it in ed.items(be.DEV_TREE, (1, be.DEV_EXTENT, 0), (U64, be.DEV_EXTENT, U64))
            if it.key[1] == be.DEV_EXTENT]


@pytest.mark.parametrize("what", ["dev_extent_length", "bg_type"])
def test_chunk_damage_refused_at_mount(image, what):
    """The kernel verifies every dev extent against its chunk at mount
    (btrfs_verify_dev_extents) and every block group against its chunk
    (check_chunk_block_group_mappings), and refuses the filesystem: such
    damage never reaches fscrub's online check, whose logic the unit test
    tests/unit/backends/btrfs/test_btrfs_chunks.c covers with a fake TREE_SEARCH_V2."""
    with be.BtrfsImage(image.path) as ed:
        if what == "dev_extent_length":
            de = dev_extents(ed)[-1]
            ed.set_field(de, "dev_extent.length", de.get("dev_extent.length") + MiB)
        else:
            bg = data_block_group(ed)
            ed.set_field(bg, "bg.flags", bg.get("bg.flags") ^ 3)     # DATA -> SYSTEM
    rc, out = btrfs_check(image.path)
    # btrfs-progs 6.2 prints a chunk / block group mismatch but may exit 0
    assert rc != 0 or "mismatch with block group" in out, out
    with pytest.raises(Exception):
        image.mount()
    image.offline()


@pytest.mark.parametrize("what", ["dev_bytes_used", "bg_profile"])
def test_chunk_fault_found(image, what):
    """Damage the kernel mounts with: a DEV_ITEM's bytes_used that is not
    the sum of its device extents (nothing verifies it at mount), a block
    group whose profile bits are not its chunk's (the mount compares the
    type bits only).  Mounted read-only: right after a read-write mount
    the kernel deletes mkfs's unused block groups and rewrites the DEV_ITEM
    from its (wrong) count, so both passes would see items in flux."""
    with be.BtrfsImage(image.path) as ed:
        if what == "dev_bytes_used":
            dev = ed.find(be.CHUNK_TREE, (1, be.DEV_ITEM, 1))
            used = dev.get("dev_item.bytes_used")
            assert used == sum(it.get("dev_extent.length") for it in dev_extents(ed))
            ed.set_field(dev, "dev_item.bytes_used", used + 64 * MiB)
            ed.set_super("dev_item.bytes_used", used + 64 * MiB)
            want = "device 1 item bytes_used %d, its device extents add up to %d" % (
                used + 64 * MiB, used)
        else:
            bg = data_block_group(ed)
            flags = bg.get("bg.flags")
            ed.set_field(bg, "bg.flags", flags ^ (1 << 5))     # DUP on/off
            want = "chunk at logical %d: %d bytes, type 0x%x; its block group item: %d " \
                   "bytes, flags 0x%x" % (bg.key[0], bg.key[2], flags, bg.key[2], flags ^ (1 << 5))
    rc, out = btrfs_check(image.path)
    assert rc != 0 or "mismatch with block group" in out, out
    mnt = image.mount("ro")
    try:
        r = run_fscrub("-n", "-v", mnt)
    finally:
        image.offline()
    assert r.rc == 4, r.stdout + r.stderr
    assert [f for f in r.of("Error", "btrfs.chunk") if want in f.message], r.stdout


def test_debug_no_btrfs_trees(image):
    """FSCRUB_DEBUG_NO_BTRFS_TREES (bench/btrfs_trees.sh's run without the
    check) skips the tree check: a fault it would find goes unreported."""
    inject(image, "bytes_used")
    mnt = image.mount("compress=zstd")
    try:
        off = run_fscrub("-n", "-v", mnt, env={"FSCRUB_DEBUG_NO_BTRFS_TREES": "1"})
        on = run_fscrub("-n", "-v", mnt)
    finally:
        image.offline()
    assert off.rc == 0 and "btrfs trees not checked" in off.stdout, off.stdout
    assert "btrfs trees (first pass)" not in off.stdout
    assert on.rc == 4 and on.of("Error", "btrfs.bytes_used"), on.stdout


# ============================================================================
# confirmation judges the damage, not the neighbourhood (issue 34)
# ============================================================================

# "settled": remounted and scanned past the commit interval (commit=2 s);
# the read-write mounts keep the default commit interval otherwise.
SETTLE_COMMIT_S = 2


def mount_for(img, how, forget=False):
    """Mount the damaged image: fresh (scanned at once after the mount, while
    the cleaner may still delete mkfs's unused block groups and rewrite the
    leaves that hold the damage), settled (mounted, unmounted, mounted again
    and left past the commit interval) or read-only.  forget: each loop
    device the image gets is first forgotten by the kernel's btrfs registry
    (for a clone whose fsid is mounted: the kernel looks a device up by its
    number first then, and a stale entry of an earlier test's filesystem on
    the same loop device may be taken for it)."""
    def mount(opts):
        if forget:
            img.attach()
            run(["btrfs", "device", "scan", "--forget", img.dev], check=False)
        return img.mount(opts)
    if how == "ro":
        return mount("ro")
    if how == "fresh":
        mnt = mount("compress=zstd")
        # issue 34's measure: the cleaner's first transaction, not committed
        time.sleep(1.2)
        return mnt
    mount("compress=zstd,commit=%d" % SETTLE_COMMIT_S)
    img.offline()
    mnt = mount("compress=zstd,commit=%d" % SETTLE_COMMIT_S)
    time.sleep(SETTLE_COMMIT_S * 2 + 1)
    return mnt


def leave_empty_block_group(img):
    """A data block group emptied just before the unmount: the next
    read-write mount's cleaner deletes it, in a transaction of its own that
    rewrites extent-tree, chunk and device leaves, some of them holding the
    damage (issue 34: "6 block groups" in the first pass, "5" after)."""
    mnt = img.mount()
    with open(os.path.join(mnt, "passing"), "wb") as f:
        f.write(os.urandom(30 * MiB))     # more than one 8 MiB data block group
    os.sync()
    os.unlink(os.path.join(mnt, "passing"))
    os.sync()
    img.offline()
    with be.BtrfsImage(img.path) as ed:
        bgs = ed.items(block_group_tree(ed), (0, be.BLOCK_GROUP_ITEM, 0),
                       (U64, be.BLOCK_GROUP_ITEM, U64))
        assert [bg for bg in bgs if bg.key[1] == be.BLOCK_GROUP_ITEM and
                bg.get("bg.used") == 0], "no empty block group left"


def inject_dev_bytes_used(img, delta):
    """A device's bytes_used delta off its device extents (DEV_ITEM and the
    superblock's copy alike, as btrfs-progs' fsck test 047 makes it)."""
    with be.BtrfsImage(img.path) as ed:
        dev = ed.find(be.CHUNK_TREE, (1, be.DEV_ITEM, 1))
        used = dev.get("dev_item.bytes_used")
        ed.set_field(dev, "dev_item.bytes_used", used + delta)
        ed.set_super("dev_item.bytes_used", used + delta)
    return "btrfs.chunk", None, "device 1 item bytes_used"


@pytest.mark.parametrize("how", ["fresh", "settled", "ro"])
@pytest.mark.parametrize("what", ["crosslink", "bg_used", "bytes_used", "fst_used_free",
                                  "fst_count", "dev_bytes_used"])
def test_damage_confirmed_however_mounted(image, what, how):
    """Damage that reads the same twice is an error (exit 4) on a fresh
    mount, a settled one and a read-only one alike, under -n: before, on a
    fresh mount the forced commit let the cleaner remove an unused block
    group, whose transaction rewrote the extent-tree leaves holding the
    findings, and the damage was excused as "changed while being checked"
    (exit 0).  The device's bytes_used is 1 MiB off: the kernel rewrites
    the DEV_ITEM when it deletes a block group, and the difference stays."""
    leave_empty_block_group(image)
    if what == "dev_bytes_used":
        check, suffix, text = inject_dev_bytes_used(image, MiB)
    else:
        check, suffix, text = inject(image, what)
    mnt = mount_for(image, how)
    try:
        r = run_fscrub("-n", "-v", mnt)
    finally:
        image.offline()
    assert r.rc == 4, r.stdout + r.stderr
    hits = [f for f in r.of("Error", check) if text in f.message]
    assert hits, r.stdout
    if suffix is not None:
        assert any(f.path == mnt + suffix for f in hits), hits
    if what == "dev_bytes_used":
        m = re.search(r"bytes_used (\d+), its device extents add up to (\d+)", hits[0].message)
        assert int(m.group(1)) - int(m.group(2)) == MiB, hits
    assert "could not be confirmed" not in r.stdout, r.stdout


def _rewrite_leaf(path, stop, commit=False):
    """Until stop: set an attribute of path again and again.  An XATTR_ITEM
    goes into the fs tree at once (no delayed item), next to the file's
    other items: their leaf is rewritten in every transaction.  commit:
    and commit each time (syncfs), so that transactions end while the trees
    are read."""
    import ctypes
    syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    n = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while not stop.is_set():
            n += 1
            os.setxattr(path, "user.passing", b"%d" % n)
            if commit:
                syncfs(fd)
    finally:
        os.close(fd)


def scan_while_rewriting(image, commit):
    """fscrub -n -v of image mounted commit=3 while _rewrite_leaf() sets an
    attribute of x2 over and over (commit: and commits after each); the
    mount point and the run."""
    import multiprocessing as mp
    mnt = image.mount("compress=zstd,commit=3")
    stop = mp.Event()
    worker = mp.Process(target=_rewrite_leaf, args=(os.path.join(mnt, "x2"), stop, commit))
    worker.start()
    try:
        return mnt, run_fscrub("-n", "-v", mnt)
    finally:
        stop.set()
        worker.join(30)
        image.offline()


def test_damage_in_a_leaf_rewritten_meanwhile(image):
    """x2's file extent item points at x1's extent (a crosslink) while
    another process keeps rewriting the leaf that holds it (an attribute of
    x2 set over and over: an unrelated change, not to the damaged items).
    The leaf is always newer than the last commit, the items in it read the
    same every time: an error, exit 4.  Before, a finding whose items sat in
    a leaf newer than the forced commit was excused as "changed while being
    checked" (exit 0).  commit=3: -n waits for the kernel's own commit."""
    check, suffix, text = inject(image, "crosslink")
    mnt, r = scan_while_rewriting(image, commit=False)
    assert r.rc == 4, r.stdout + r.stderr
    assert [f for f in r.of("Error", check) if text in f.message and f.path == mnt + suffix], \
        r.stdout


@pytest.mark.parametrize("what", ["bg_used", "fst_count", "bytes_used"])
def test_counter_damage_while_another_leaf_is_rewritten(image, what):
    """A counter's damage (the data block group's used bytes or its free
    space info's count, the superblock's bytes_used) while another process
    keeps rewriting a leaf of the fs tree and committing (an attribute set
    over and over: every transaction allocates and frees metadata, so the superblock's
    bytes_used and the metadata block group's items move in every one).
    A counter read torn by a commit needs a third agreeing reading; the
    damage is still an error, exit 4, and not excused as "changed while
    being checked".  The writer commits after each change, so commits end
    while the trees are read (a rule that waited for a reading with none of
    the counter's items newer than its start never got one here)."""
    check, suffix, text = inject(image, what)
    mnt, r = scan_while_rewriting(image, commit=True)
    assert r.rc == 4, r.stdout + r.stderr
    assert [f for f in r.of("Error", check) if text in f.message], r.stdout
    assert not [f for f in r.of("Info", check) if text in f.message], r.stdout


def rescue_scan(img, rc):
    """fscrub -n -v on img mounted ro,rescue=all: exit rc, no operational error."""
    mnt = img.mount("ro,rescue=all")
    try:
        r = run_fscrub("-n", "-v", mnt)
    finally:
        img.offline()
    assert r.rc == rc, r.stdout + r.stderr
    assert not [l for l in r.stderr.splitlines() if l.startswith("fscrub: ")], r.stderr
    return mnt, r


@pytest.mark.parametrize("what", [None, "bg_used", "crosslink"])
def test_rescue_mount(image, what):
    """ro,rescue=all: the kernel refuses to scrub (EROFS: with -x; without
    it fscrub reads the tree blocks itself) and does not load the csum tree.  Said once each (infos), not operational errors; every
    other check runs: damage is an error (exit 4), a clean image exits 0.
    Before, the refused scrub and the csum tree were operational errors
    (exit 8 or 12)."""
    if what:
        check, suffix, text = inject(image, what)
    mnt = image.mount("ro,rescue=all")
    try:
        # without -x fscrub reads the tree blocks itself: no scrub to refuse
        plain = run_fscrub("-n", "-v", mnt)
        r = run_fscrub("-n", "-x", "-v", mnt)
    finally:
        image.offline()
    assert re.search(r"^Phase 2: \d+ tree blocks .* 0 bad", plain.stdout, re.M), plain
    assert not plain.of("Info", "btrfs.scrub"), plain
    for res in (plain, r):
        assert res.rc == (4 if what else 0), res.stdout + res.stderr
        assert not [l for l in res.stderr.splitlines() if l.startswith("fscrub: ")], res.stderr
        if what:
            assert [f for f in res.of("Error", check) if text in f.message], res.stdout
    said = [f for f in r.of("Info", "btrfs.scrub") if "does not scrub" in f.message]
    assert len(said) == 1 and "rescue=" in said[0].message, r.stdout


def break_tree_root(img, tree):
    """The root block of tree bad in every copy: the kernel cannot load the
    tree, so the filesystem mounts only with rescue=ignorebadroots."""
    with be.BtrfsImage(img.path) as ed:
        root, _ = ed.tree_root(tree)
        for phys in ed.physical(root):
            with open(img.path, "r+b") as f:
                f.seek(phys + 200)      # past the header: the checksum no longer matches
                f.write(b"\xff" * 64)


@pytest.mark.parametrize("what", [None, "nbytes"])
def test_rescue_mount_without_the_extent_tree(image, what):
    """The extent tree's root bad in both copies: only ro,rescue=all mounts,
    and the kernel leaves the extent tree unloaded (the tree search finds no
    such tree).  fscrub reads it from the devices (btrfs_devtree.c): the
    root is the damage, a btrfs.tree error, and what needs the whole tree
    is not checked (no extent reference or block group finding from an
    empty extent tree); the fs trees are: an inode's nbytes off is found.
    Before, the tree check stopped at the missing tree ("inode scan: No such
    file or directory", exit 8) and nothing else was checked; then the
    root's damage was an info only."""
    if what:
        check, suffix, text = inject(image, what)
    break_tree_root(image, be.EXTENT_TREE)
    with pytest.raises(RuntimeError):
        image.mount("ro")
    mnt, r = rescue_scan(image, 4)
    root = [f for f in r.of("Error", "btrfs.tree") if "(the extent tree, level" in f.message and
            "the tree's root" in f.message and "bad checksum in every copy" in f.message]
    assert len(root) == 1, r.stdout
    assert not r.of("Error", "btrfs.extent_refs") and not r.of("Error", "btrfs.bg_used"), r.stdout
    if what:
        assert [f for f in r.of("Error", check) if text in f.message and
                f.path == mnt + suffix], r.stdout
    else:
        assert len(r.of("Error")) == 1, r.stdout


def test_unreadable_csum_tree_is_the_finding(image_factory):
    """A leaf of the csum tree bad in both of its DUP copies: the kernel
    mounts (the root is fine) but cannot read that leaf, so its scrub stops
    with EIO on the device and the tree check cannot read the csum tree.
    That is the damage: one btrfs.csum error naming the tree, exit 4, and
    no operational error for the scrub it stopped or the tree it could not
    read (before: exit 12, "scrub of devid 1: Input/output error" and
    "cannot read the btrfs csum tree")."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "data"), "wb") as f:
        f.write(os.urandom(64 * MiB))     # 64 KiB of crc32c: csum items in several leaves
    img.offline()
    with be.BtrfsImage(img.path) as ed:
        root, level = ed.tree_root(be.CSUM_TREE)
        assert level > 0, "the csum tree is one leaf"
        leaf = [it.leaf for it in ed.items(be.CSUM_TREE)][-1]
        assert leaf != root
        for phys in ed.physical(leaf):
            with open(img.path, "r+b") as f:
                f.seek(phys + 200)      # past the header: the checksum no longer matches
                f.write(b"\xff" * 64)
    mnt = img.mount()
    try:
        r = run_fscrub("-n", "-v", mnt)
    finally:
        img.offline()
    assert r.rc == 4, r.stdout + r.stderr
    assert not [l for l in r.stderr.splitlines() if l.startswith("fscrub: ")], r.stderr
    said = [f for f in r.of("Error", "btrfs.csum") if "the csum tree cannot be read" in f.message]
    assert len(said) == 1, r.stdout


@pytest.mark.parametrize("how", ["fresh", "settled", "ro"])
def test_leaf_the_kernel_refuses_is_a_finding(image_factory, how):
    """A leaf of the top subvolume's tree whose DIR_ITEM name no longer
    matches its hash: the kernel's tree checker refuses the whole leaf
    (EUCLEAN, EIO to userspace), so the tree check cannot read that tree.
    That is the damage (a btrfs.tree error naming the subvolume, exit 4),
    not a failure to check (it was "btrfs backend: inode scan:
    Input/output error", exit 12); the other trees are read on."""
    need_fs("btrfs")
    img = image_factory("btrfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(600):            # a tree of several leaves
        fsimage._write(os.path.join(mnt, "d", "file%d" % i), b"x\n")
    img.offline()
    with be.BtrfsImage(img.path) as ed:
        assert ed.tree_root(be.FS_TREE)[1] > 0      # the leaf is not the root
        it = next(i for i in ed.items(be.FS_TREE) if i.key[1] == be.DIR_ITEM and
                  i.data.endswith(b"file377"))
        ed.write_item(it, it.data[:-1] + b"z")      # file37z: its hash no longer
    mnt = mount_for(img, how)
    try:
        r = run_fscrub("-n", mnt)
    finally:
        img.offline()
    assert r.rc == 4, r
    tree = r.of("Error", "btrfs.tree")
    assert len(tree) == 1 and tree[0].message.startswith(
        "the tree of subvolume 5 (the top level) cannot be read"), r
    assert "operational" not in r.stdout and "fscrub:" not in r.stderr, r


def break_extent_leaf_order(ed):
    """A data extent item, not first in its leaf and in a leaf after the
    last block group item (the kernel walks the leaves up to it at mount),
    keyed below the item before it: the kernel's tree checker refuses the
    leaf ('bad key order') whenever a search reaches it.  Returns the leaf."""
    items = list(ed.items(be.EXTENT_TREE))
    last_bg = max(i for i, it in enumerate(items) if it.key[1] == be.BLOCK_GROUP_ITEM)
    for it in items[last_bg + 1:]:
        if it.key[1] == be.EXTENT_ITEM and it.slot > 0 and it.leaf != items[last_bg].leaf:
            ed.set_key(it, (0, be.EXTENT_ITEM, it.key[2]))
            return it.leaf
    raise AssertionError("no extent leaf without block group items")


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_extent_tree_refused(image_factory, how):
    """An extent tree leaf the kernel refuses (its keys out of order, the
    checksum right): a btrfs.tree error and exit 4, not an operational
    error in phases 2 and 3 (tests/fuzz/images found the exit 8: mutant
    20261207/btrfs/162), fresh, settled and read-only.  4 KiB nodes: the
    extent tree has leaves without the block group items the kernel reads
    at mount."""
    need_fs("btrfs")
    image = image_factory("btrfs", size_mb=300, mkfs_args=("-n", "4096"))
    image.mkfs()
    mnt = image.mount()
    populate(mnt)
    for i in range(200):        # data extents: leaves past the block groups
        with open(os.path.join(mnt, "extent%03d" % i), "wb") as f:
            f.write(os.urandom(8192))
    image.offline()
    with be.BtrfsImage(image.path) as ed:
        break_extent_leaf_order(ed)
    rc, out = btrfs_check(image.path)
    assert rc != 0, out
    mnt = image.mount_as(how)
    try:
        r = run_fscrub("-n", mnt)
    finally:
        image.offline()
    assert r.rc == 4, r.stdout + r.stderr
    hits = [f for f in r.of("Error", "btrfs.tree")
            if f.message.startswith("the extent tree cannot be read (Input/output error), "
                                    "read twice: the kernel refuses a block of it")]
    assert len(hits) == 1 and hits[0].path == mnt, r.stdout


def test_inode_time_past_int64_ns(image):
    """An inode item's times past what signed 64-bit nanoseconds hold (2^62
    seconds: damage, or a time set by another tool): the bulk reader
    leaves the inode to statx, with no signed overflow (the sanitizer
    build reported one on tests/fuzz/images' mutant 20261207/btrfs/340)."""
    big = ino_of(image, "big")
    with be.BtrfsImage(image.path) as ed:
        it = ed.find(be.FS_TREE, (big, be.INODE_ITEM, 0))
        ed.patch(it, 148, "<Q", 2 ** 62)     # otime.sec: no syscall sets it
        ed.patch(it, 112, "<Q", 2 ** 62)     # atime.sec
    mnt = image.mount("ro")
    try:
        assert os.stat(os.path.join(mnt, "big")).st_atime > 2 ** 61
        r = run_fscrub("-n", mnt)
    finally:
        image.offline()
    assert r.rc == 0, r.stdout + r.stderr
