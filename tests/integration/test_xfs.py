"""The XFS backend on the host kernel, which has no XFS online scrub: fscrub
must say so once and still find, with its own checks, what xfs_db -x broke
on an unmounted image -- orphaned inodes (BULKSTAT against the walk),
extents without their reverse mapping and reverse mappings without their
extent (GETFSMAP against FIEMAP), cross-linked blocks, wrong link counts
and directory entry types -- while a clean image, reflinked files and an
unlinked-but-open file give nothing.  The kernel scrub and repair paths run
in a VM: test_xfs_vm.py."""

import os
import re
import time

import pytest

from conftest import escaped, run_fscrub
import faults
import fsimage


@pytest.fixture
def xfs_image(image_factory):
    """An XFS image (crc, finobt, rmapbt, reflink: fsimage's defaults) with
    the fixture tree, proved clean with the xfs backend, left unmounted."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert "with xfs backend" in r.stdout, r
    img.offline()
    return img


def odd_warnings(r):
    """Warnings other than the fixture tree's deliberately odd names."""
    return [w for w in r.warnings if not w.check.startswith("name.")]


def scrub(img, *args):
    # Victims younger than 1 s count as changed during the scan (phase 3).
    time.sleep(1.1)
    mnt = img.mount()
    return mnt, run_fscrub(*args, mnt)


def errors_of(r, check):
    return [f for f in r.errors if f.check == check]


def no_online_scrub(r):
    return "kernel online scrub" not in r.stdout


def test_clean_geometry_and_no_online_scrub(xfs_image):
    mnt, r = scrub(xfs_image, "-v")
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert re.search(r"XFS v5, \d+ AGs of \d+ blocks, block 4096 bytes", r.stdout), r
    feat = re.search(r"XFS features:(.*)", r.stdout).group(1).split()
    for f in ("+crc", "+finobt", "+rmapbt", "+reflink", "-realtime", "-quota"):
        assert f in feat, feat
    if no_online_scrub(r):
        said = r.of("Info", "xfs.scrub_unsupported")
        assert len(said) == 1 and "no XFS online scrub" in said[0].message, r
    # A quiet filesystem: BULKSTAT finds exactly the inodes the walk found.
    m = re.search(r"(\d+) inodes found by name, (\d+) by BULKSTAT", r.stdout)
    assert m and m.group(1) == m.group(2), r
    m = re.search(r"Phase 3: (\d+) data extents against (\d+) reverse mappings: 0 to look",
                  r.stdout)
    assert m and int(m.group(1)) > 40, r
    # -t generic: none of it.
    g = run_fscrub("-v", "-t", "generic", mnt)
    assert g.rc == 0 and "with generic backend" in g.stdout, g
    assert "BULKSTAT" not in g.stdout and "[xfs." not in g.stdout, g


def test_orphaned_inode(xfs_image):
    """The dirent 'victim' is pointed at another file's inode: the victim's
    own inode stays allocated with one link and no name reaches it."""
    f = faults.xfs_dirent_ino(xfs_image, target="existing")
    mnt, r = scrub(xfs_image)
    assert r.rc == 4, r
    orphans = errors_of(r, "xfs.orphan")
    assert [o.inode for o in orphans] == [f["orphan_inode"]], r
    msg = orphans[0].message
    assert "allocated with 1 link, but no directory entry reaches it" in msg, r
    assert "regular file, 7 bytes, owner uid 0 gid 0" in msg, r
    # The target now has two names and one link: the generic check.
    nl = errors_of(r, "nlink.count")
    assert [(e.path, e.inode) for e in nl] == [(escaped(os.path.join(mnt, f["target"])),
                                                 f["inode"])] or \
        [e.inode for e in nl] == [f["inode"]], r


def test_unlinked_but_open_is_no_orphan(xfs_image):
    """nlink 0 and open, created long before the scan: not an orphan."""
    mnt = xfs_image.mount()
    path = os.path.join(mnt, "doomed")
    with open(path, "wb") as fh:
        fh.write(b"x" * 5000)
        fh.flush()
        os.fsync(fh.fileno())
        os.unlink(path)
        time.sleep(1.1)
        r = run_fscrub(mnt)
        assert r.rc == 0 and r.errors == [], r


def xfs_crosslink(img):
    """File 'a' gets its only extent pointed at 'b''s block with xfs_db
    (u3.bmx[0].startblock; the inode CRC is recomputed).  Both 16 KiB.
    Returns the paths and inode numbers and both start blocks."""
    mnt = img.mount()
    d = os.path.join(mnt, "xfs_crosslink")
    os.mkdir(d)
    for name, byte in (("a", b"a"), ("b", b"b")):
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(byte * 16384)
    os.sync()
    ino_a = fsimage.inode_of(os.path.join(d, "a"))
    ino_b = fsimage.inode_of(os.path.join(d, "b"))
    img.offline()

    def startblock(ino):
        out = faults.xfs_db(img, "inode %d" % ino, "print u3.bmx[0].startblock", write=False)
        return int(re.search(r"startblock = (\d+)", out).group(1))

    def device_bytes(fsb):
        out = faults.xfs_db(img, "convert fsblock %d daddr" % fsb, write=False)
        return int(re.search(r"\((\d+)\)", out).group(1)) * 512

    old, new = startblock(ino_a), startblock(ino_b)
    faults.xfs_db(img, "inode %d" % ino_a, "write u3.bmx[0].startblock %d" % new)
    assert startblock(ino_a) == new
    return {"a": "xfs_crosslink/a", "b": "xfs_crosslink/b", "ino_a": ino_a, "ino_b": ino_b,
            "old_bytes": device_bytes(old), "new_bytes": device_bytes(new)}


def test_crosslinked_extent(xfs_image):
    f = xfs_crosslink(xfs_image)
    mnt, r = scrub(xfs_image, "-v")
    assert r.rc == 4, r
    a, b = escaped(os.path.join(mnt, f["a"])), escaped(os.path.join(mnt, f["b"]))
    xl = errors_of(r, "extent.crosslinked")
    assert xl and {(e.path, e.inode) for e in xl} <= {(a, f["ino_a"]), (b, f["ino_b"])}, r
    assert any("not as shared extents" in e.message for e in xl), r
    # GETFSMAP: the rmap still gives a's old block to a, and nothing gives
    # it b's block.
    miss = errors_of(r, "xfs.rmap_missing")
    extra = errors_of(r, "xfs.rmap_extra")
    assert [(e.path, e.inode) for e in miss] == [(a, f["ino_a"])], r
    assert [(e.path, e.inode) for e in extra] == [(a, f["ino_a"])], r
    assert "file offset 0 maps device bytes %d-" % f["new_bytes"] in miss[0].message, r
    assert "device bytes %d-" % f["old_bytes"] in extra[0].message, r
    assert len(r.errors) == len(xl) + 2, r


@pytest.mark.parametrize("inject,check", [(faults.xfs_wrong_nlink, "nlink.count"),
                                          (faults.xfs_ftype_mismatch, "dirent.type")])
def test_generic_findings_with_xfs_backend(xfs_image, inject, check):
    f = inject(xfs_image)
    mnt, r = scrub(xfs_image, "-v")
    assert "with xfs backend" in r.stdout, r
    assert r.rc == 4, r
    assert [(e.check, e.path, e.inode) for e in r.errors] == \
        [(check, escaped(os.path.join(mnt, f["path"])), f["inode"])], r


def make_reflinked(mnt):
    """'orig' (4 MiB) and two reflinked copies, 'copy' partly overwritten:
    every extent of 'copy2' shared, some of 'copy' no longer."""
    src = os.path.join(mnt, "orig")
    with open(src, "wb") as fh:
        for i in range(64):
            fh.write(os.urandom(65536))
    fsimage.run(["cp", "--reflink=always", src, os.path.join(mnt, "copy")])
    fsimage.run(["cp", "--reflink=always", src, os.path.join(mnt, "copy2")])
    with open(os.path.join(mnt, "copy"), "r+b") as fh:
        fh.seek(1 << 20)
        fh.write(os.urandom(65536))
    os.sync()


def test_reflinked_files_not_flagged(xfs_image):
    """A reflinked copy (every extent shared), partly overwritten (some
    extents no longer shared): no cross-link, no rmap mismatch."""
    mnt = xfs_image.mount()
    make_reflinked(mnt)
    shared = [e["flags"] & 0x2000 for e in fsimage.fiemap(os.path.join(mnt, "copy"))]
    assert any(shared) and not all(shared), shared    # FIEMAP_EXTENT_SHARED
    xfs_image.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert re.search(r"data extents against \d+ reverse mappings: 0 to look at again",
                     r.stdout), r


def test_ondisk_headers(xfs_image):
    """AG 1's bnobt root block and AG 2's superblock get a bad CRC (xfs_db
    write -c crc): the kernel reads neither while the filesystem is only
    scanned, so only the O_DIRECT read of the device can tell."""
    faults.xfs_db(xfs_image, "agf 1", "addr bnoroot", "write -c crc 0xdeadbeef")
    faults.xfs_db(xfs_image, "sb 2", "write -c crc 0xdeadbeef")
    mnt, r = scrub(xfs_image, "-v")
    assert r.rc == 4, r
    got = sorted(e.message for e in errors_of(r, "xfs.ondisk"))
    assert got == ["AG 1 on disk: bnobt root block 1 fails its CRC",
                   "AG 2 on disk: superblock fails its CRC"], r
    assert [e.path for e in r.errors] == [mnt, mnt], r
    assert "4 AGs' headers and btree roots read from" in r.stdout, r
