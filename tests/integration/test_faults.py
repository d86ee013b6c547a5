"""Every detection, end to end: a fault injected with the filesystem's own
offline tool (faults.py: xfs_db -x, debugfs -w, bytes patched at a block
the debugger located) on an unmounted image is reported with the right
check id, path and inode, and exit status 4.  The same image scrubbed
before the injection exits 0 (the clean half of each pair)."""

import os
import re
import subprocess
import time

import pytest

from conftest import escaped, run_fscrub
import faults
import fsimage


@pytest.fixture
def prepared(image_factory):
    """Make an image of a type with the fixture tree, prove it scrubs
    clean, and return it unmounted for an injector."""
    def make(fstype, mkfs_args=()):
        img = image_factory(fstype, size_mb=300, mkfs_args=mkfs_args)
        img.mkfs()
        mnt = img.mount()
        fsimage.make_tree(mnt, deep=False)
        img.remount()
        r = run_fscrub("-x", mnt)
        assert r.rc == 0 and r.errors == [], r
        img.offline()
        return img
    return make


def scrub_faulty(img, *args):
    # An inode whose ctime is less than 1 s older than the scan counts as
    # changed during it (see src/scan/phase3.c), and the injectors
    # have just created their victims: let them age past that.
    time.sleep(1.1)
    mnt = img.mount()
    return mnt, run_fscrub(*args, mnt)


def assert_reported(r, check, path, inode=None, text=None):
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == check and f.path == escaped(path)]
    assert hits, "no %s error for %s in\n%r" % (check, path, r)
    if inode is not None:
        assert any(f.inode == inode for f in hits), r
    if text is not None:
        assert any(text in f.message for f in hits), r
    # metadata damage: the summary names the filesystem's offline checker
    assert r.summary[1] == len(r.errors) and re.search(
        r"found\. Unmount and run (xfs_repair -n|e2fsck -fn|btrfs check --readonly)[,;]",
        r.stdout), r


@pytest.mark.parametrize("fstype,inject", [("xfs", faults.xfs_wrong_nlink),
                                           ("ext4", faults.ext4_wrong_nlink)])
def test_wrong_nlink(prepared, fstype, inject):
    img = prepared(fstype)
    f = inject(img, nlink=3)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "nlink.count", os.path.join(mnt, f["path"]), f["inode"],
                    "link count is 3 but 1 name was found")
    # only that: the rest of the tree stays clean
    assert len(r.errors) == 1, r


def test_xfs_dirent_type_mismatch(prepared):
    img = prepared("xfs")
    f = faults.xfs_ftype_mismatch(img)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "dirent.type", os.path.join(mnt, f["path"]), f["inode"],
                    "directory entry says directory, the inode is a regular file")


def test_ext4_fast_symlink_size(prepared):
    """An ext4 fast symlink whose i_size exceeds its target: Linux 6.18
    refuses the inode at lookup (EUCLEAN), so the finding is that the inode
    cannot be read."""
    img = prepared("ext4")
    f = faults.ext4_symlink_size(img, size=40)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "inode.unreadable", os.path.join(mnt, f["path"]), None,
                    "Structure needs cleaning")


def test_ext4_slow_symlink_size(prepared):
    """A symlink whose target lives in a block (100 bytes) and whose i_size
    says 150: readlink and st_size disagree."""
    img = prepared("ext4")
    mnt = img.mount()
    os.symlink("t" * 100, os.path.join(mnt, "slow-symlink"))
    ino = os.lstat(os.path.join(mnt, "slow-symlink")).st_ino
    img.offline()
    faults.debugfs(img, "set_inode_field <%d> size 150" % ino, write=True)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "symlink.size", os.path.join(mnt, "slow-symlink"), ino,
                    "symlink target is 100 bytes but its size is 150 bytes")


@pytest.mark.parametrize("fstype,inject", [("xfs", faults.xfs_dotdot),
                                           ("ext4", faults.ext4_dotdot)])
def test_dotdot_elsewhere(prepared, fstype, inject):
    img = prepared(fstype)
    f = inject(img)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "dir.dotdot", os.path.join(mnt, f["path"]), f["inode"],
                    "'..' points to inode %d, but the directory is in inode %d"
                    % (f["dotdot_ondisk"], f["real_parent"]))


def test_ext4_directory_block_checksum(prepared):
    """The same '..' edit without fixing the block checksum: getdents
    fails with EBADMSG."""
    img = prepared("ext4")
    f = faults.ext4_dotdot(img, fix_csum=False)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "dir.unreadable", os.path.join(mnt, f["path"]), f["inode"],
                    "Bad message")


def test_ext4_directory_block_checksum_no_dir_index(prepared):
    """Without dir_index, a directory block failing its checksum reads as
    empty, without even '.' and '..'."""
    img = prepared("ext4", mkfs_args=("-O", "^dir_index"))
    f = faults.ext4_dotdot(img, fix_csum=False)
    mnt, r = scrub_faulty(img)
    assert_reported(r, "dir.dot", os.path.join(mnt, f["path"]), f["inode"],
                    "reading the directory returns no '.' entry")


@pytest.mark.parametrize("fstype,inject", [("xfs", faults.xfs_read_error),
                                           ("ext4", faults.ext4_read_error)])
def test_unreadable_file_data(prepared, fstype, inject):
    """A destroyed extent-tree block: FIEMAP fails (phase 3) and, with -x,
    every read of the file fails from offset 0 (phase 5)."""
    img = prepared(fstype)
    f = inject(img)
    path = os.path.join(img.mnt, f["path"])
    mnt, r = scrub_faulty(img)
    assert_reported(r, "extent.unreadable", path, f["inode"], "cannot map the data fork")
    assert not r.of("Error", "data.read"), r
    r = run_fscrub("-x", mnt)
    assert_reported(r, "data.read", path, f["inode"], "read error at offset 0 (")
    # one range for the whole file, reported once
    ranges = [x for x in r.of("Error", "data.read") if x.path == escaped(path)]
    assert len(ranges) == 1 and "(%d bytes)" % f["size"] in ranges[0].message, r


@pytest.mark.parametrize("fstype,inject", [("xfs", faults.xfs_dirent_ino),
                                           ("ext4", faults.ext4_dirent_ino)])
def test_dirent_to_another_inode(prepared, fstype, inject):
    """A directory entry rewritten to point at another single-link file:
    that inode has two names but a link count of 1."""
    img = prepared(fstype)
    f = inject(img, target="existing")
    mnt, r = scrub_faulty(img)
    paths = {escaped(os.path.join(mnt, f["path"])), escaped(os.path.join(mnt, f["target"]))}
    hits = [e for e in r.of("Error", "nlink.count") if e.path in paths]
    assert r.rc == 4 and hits, r
    assert hits[0].inode == f["inode"]
    assert "link count is 1 but 2 names were found" in hits[0].message


def test_xfs_dirent_to_free_inode(prepared):
    img = prepared("xfs")
    f = faults.xfs_dirent_ino(img, target="free")
    mnt, r = scrub_faulty(img)
    assert_reported(r, "dirent.dangling", os.path.join(mnt, f["path"]), f["inode"],
                    "which cannot be found")


def test_ext4_dirent_to_free_inode(prepared):
    img = prepared("ext4")
    f = faults.ext4_dirent_ino(img, target="free")
    mnt, r = scrub_faulty(img)
    assert_reported(r, "inode.unreadable", os.path.join(mnt, f["path"]), None,
                    "Structure needs cleaning")


def test_max_errors_stops_early(prepared):
    img = prepared("ext4")
    for _ in range(3):
        faults.ext4_wrong_nlink(img, nlink=5)
    mnt, r = scrub_faulty(img)
    assert r.rc == 4 and len(r.errors) == 3, r
    r = run_fscrub("-a", "1", mnt)
    assert r.rc == 4 and len(r.errors) == 1, r
    assert "stopped after 1 error (-a)" in r.stdout


def _two_files(img, size=65536):
    mnt = img.mount()
    for name in ("a", "b"):
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(os.urandom(size))
    if img.fstype == "xfs":
        subprocess.run(["cp", "--reflink=always", os.path.join(mnt, "a"),
                        os.path.join(mnt, "a-reflink")], check=True)
    ia, ib = (os.stat(os.path.join(mnt, n)).st_ino for n in ("a", "b"))
    img.offline()
    return ia, ib


def test_xfs_crosslinked_extent(prepared):
    """b's only extent pointed at a's blocks (xfs_db write
    u3.bmx[0].startblock); a also has a reflinked copy, which is fine."""
    img = prepared("xfs")
    ia, ib = _two_files(img)
    out = faults.xfs_db(img, "inode %d" % ia, "print u3.bmx[0].startblock", write=False)
    start = int(out.split("=")[-1])
    faults.xfs_db(img, "inode %d" % ib, "write u3.bmx[0].startblock %d" % start)
    mnt, r = scrub_faulty(img)
    hits = r.of("Error", "extent.crosslinked")
    assert r.rc == 4 and len(hits) == 1, r
    assert hits[0].path in (escaped(os.path.join(mnt, "a")), escaped(os.path.join(mnt, "a-reflink")))
    assert escaped(os.path.join(mnt, "b")) in hits[0].message
    assert "and not as shared extents" in hits[0].message


def test_ext4_crosslinked_extent(prepared):
    """b's in-inode extent's start block (i_block[5], ee_start_lo) set to
    a's with debugfs."""
    img = prepared("ext4")
    ia, ib = _two_files(img)
    out = faults.debugfs(img, "stat <%d>" % ia)
    start = int(out.split("(0-15):")[1].split("-")[0])
    faults.debugfs(img, "set_inode_field <%d> block[5] %d" % (ib, start), write=True)
    mnt, r = scrub_faulty(img)
    hits = r.of("Error", "extent.crosslinked")
    assert r.rc == 4 and len(hits) == 1, r
    paths = {hits[0].path, hits[0].message.split(" are also mapped by ")[1].split(" (inode")[0]}
    assert paths == {escaped(os.path.join(mnt, "a")), escaped(os.path.join(mnt, "b"))}, r


def test_ext2_crosslinked_between_two_inodes(image_factory):
    """The neighbour of issue 18 item 3: on ext2 (indirect-block maps), a
    file mapped once however many names it has still shows a real
    cross-link: b's first block pointer (i_block[0]) set to a's with
    debugfs.  a has two names; b is a different inode."""
    img = image_factory("ext2", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    for name in ("a", "b"):
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(os.urandom(400000))
    os.link(os.path.join(mnt, "a"), os.path.join(mnt, "a-link"))
    ia, ib = (os.stat(os.path.join(mnt, n)).st_ino for n in ("a", "b"))
    img.offline()
    out = faults.debugfs(img, "stat <%d>" % ia)
    start = int(re.search(r"\(0(?:-\d+)?\):(\d+)", out).group(1))    # a's block 0
    faults.debugfs(img, "set_inode_field <%d> block[0] %d" % (ib, start), write=True)
    mnt, r = scrub_faulty(img, "-n")
    hits = r.of("Error", "extent.crosslinked")
    assert r.rc == 4 and len(hits) == 1, r
    other = re.search(r" are also mapped by (.*) \(inode \d+\) at its offset", hits[0].message)
    assert other, r
    names = {hits[0].path, other.group(1)}
    assert escaped(os.path.join(mnt, "b")) in names, r
    assert names - {escaped(os.path.join(mnt, "b"))} <= \
        {escaped(os.path.join(mnt, "a")), escaped(os.path.join(mnt, "a-link"))}, r
    assert "mapped twice" not in r.stdout, r
