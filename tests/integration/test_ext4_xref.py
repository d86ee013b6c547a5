"""ext4 inode cores that e2fsck -fn's pass 1 rejects but every block-level
check passes (src/backends/ext4/ext4_xref.c): a linked inode with a deletion
time, flags the type or the features forbid, a directory size that is not
its blocks, a file's size before blocks it has written, i_blocks against
the extent tree; and an attribute block's
reference count against the inodes that share it (ext4_xattr_refs.c).  Each fault is set with
debugfs -w (which recomputes the inode checksum) on the unmounted image,
shown to be there by e2fsck -fn, and must be an error of the mounted
filesystem naming the inode; the fixture tree (symlinks, devices, fifos,
hard links, xattrs, a fragmented file) gives nothing."""

import os
import re
import stat
import struct
import time

import pytest

from conftest import escaped, run_fscrub
import faults
from faults import debugfs
import fsimage
from test_ext4 import e2fsck, ext4img, scrub, victim  # noqa: F401  (ext4img: a fixture)


def ino_of(img, rel):
    mnt = img.mount()
    ino = fsimage.inode_of(os.path.join(mnt, rel))
    img.offline()
    return ino


def sparse_file(path, extents):
    """extents one-block extents, a hole after each."""
    with open(path, "wb") as fh:
        for i in range(extents):
            fh.seek(2 * i * 4096)
            fh.write(b"x" * 4096)


def make_victims(img):
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "xref", "dir"))
    for name, size in (("small", 100), ("three_blocks", 3 * 4096), ("prealloc", 100)):
        with open(os.path.join(mnt, "xref", name), "wb") as fh:
            fh.write(b"s" * size)
    # Unwritten blocks past the end (fallocate -n): preallocation, no fault.
    fsimage.run(["fallocate", "-n", "-o", "4096", "-l", "65536",
                 os.path.join(mnt, "xref", "prealloc")])
    # One-block extents, every other block a hole: 600 make a tree of
    # depth 1 (two leaves); 1500, more than the inode's 4 leaves of 340,
    # one of depth 2 (an index block over 5 leaves); 11 000, one of depth 2
    # with 33 leaves, more tree blocks than a suspect holds.
    for name, extents in (("two_leaves", 600), ("deep", 1500), ("huge_tree", 11000)):
        sparse_file(os.path.join(mnt, "xref", name), extents)
    os.sync()
    img.offline()


def test_ext4_xref_clean(ext4img):
    make_victims(ext4img)
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 0 and r.errors == [], r
    assert not [f for f in r.findings if f.check.startswith("ext4.inode_")], r


@pytest.mark.parametrize("rel,field,value,check,says,e2says", [
    ("xref/small", "dtime", "1700000000", "ext4.inode_dtime",
     "in use with 1 links, but has a deletion time (dtime 1700000000)",
     "is in use, but has dtime set"),
    ("xref/small", "flags", "0x81000", "ext4.inode_flags",
     "flags 0x81000: htree index (INDEX_FL) on a non-directory",
     "has INDEX_FL flag set but is not a directory"),
    ("xref/dir", "size", "5000", "ext4.inode_size",
     "directory i_size 5000 is not a whole number of blocks (4096 bytes in 4096-byte blocks)",
     "i_size is 5000, should be 4096"),
    ("xref/dir", "size", "8192", "ext4.inode_size",
     "directory i_size 8192 is more than the blocks it has (4096 bytes in 4096-byte blocks)",
     "i_size is 8192, should be 4096"),
    ("xref/three_blocks", "size", "100", "ext4.inode_size",
     "i_size is 100, but the extent tree maps written blocks up to file block 2 (12288 bytes)",
     "i_size is 100, should be 12288"),
    # 1500 blocks at every other file block: the last written is 2998.
    ("xref/deep", "size", "100", "ext4.inode_size",
     "i_size is 100, but the extent tree maps written blocks up to file block 2998 "
     "(12283904 bytes)", "i_size is 100, should be 12283904"),
    ("xref/small", "blocks", "24", "ext4.inode_blocks",
     "i_blocks is 24, the extent tree maps 8", "i_blocks is 24, should be 8"),
    # 600 data blocks and 2 leaves: 602 blocks, 4816 sectors.
    ("xref/two_leaves", "blocks", "4800", "ext4.inode_blocks",
     "i_blocks is 4800, the extent tree maps 4816", "i_blocks is 4800, should be 4816"),
], ids=["dtime", "index_fl_on_file", "dir_size_partial", "dir_size_past_blocks",
        "file_size_before_written_blocks", "file_size_depth2", "i_blocks_depth0",
        "i_blocks_depth1"])
def test_ext4_inode_core(ext4img, rel, field, value, check, says, e2says):
    make_victims(ext4img)
    ino = ino_of(ext4img, rel)
    debugfs(ext4img, "sif /%s %s %s" % (rel, field, value), write=True)
    p = e2fsck(ext4img)
    assert "Inode %d" % ino in p.stdout and e2says in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert [(f.check, f.inode, f.message) for f in r.errors] == [(check, ino, says)], r


@pytest.mark.parametrize("rel,extents,tree_blocks", [
    ("xref/deep", 1500, 6),
    # 34 tree blocks: the suspect holds 31 of them, the rest are read afresh.
    ("xref/huge_tree", 11000, 34),
], ids=["depth2", "more_tree_blocks_than_a_suspect_holds"])
def test_i_blocks_of_deep_trees(ext4img, rel, extents, tree_blocks):
    """i_blocks of a tree of depth 2 (an index block under the inode's
    root), one cut by a block offline: e2fsck's "i_blocks is X, should be
    Y"; fscrub's scan walks the tree whole, at any depth."""
    make_victims(ext4img)
    mnt = ext4img.mount()
    st = os.stat(os.path.join(mnt, rel))
    ext4img.offline()
    assert "Level Entries" in debugfs(ext4img, "ex /" + rel)
    assert " 2/ 2 " in debugfs(ext4img, "ex /" + rel), "not a tree of depth 2"
    assert st.st_blocks == (extents + tree_blocks) * 8, st.st_blocks
    cut = st.st_blocks - 8
    debugfs(ext4img, "sif /%s blocks %d" % (rel, cut), write=True)
    p = e2fsck(ext4img)
    assert "i_blocks is %d, should be %d" % (cut, st.st_blocks) in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert [(f.check, f.inode, f.message) for f in r.errors] == [
        ("ext4.inode_blocks", st.st_ino,
         "i_blocks is %d, the extent tree maps %d" % (cut, st.st_blocks))], r


@pytest.fixture
def ext3img(image_factory):
    """A 64 MiB ext3 image (1 KiB blocks): every file block-mapped.  The
    file bmap/many has 300 blocks: 12 in the inode, 256 under the single
    indirect block, 32 under the double indirect block and its one
    indirect block (303 blocks in all, 606 sectors).  Beside it: a sparse
    file, a slow and a fast symlink, a hard link, a directory of 300
    entries, a fifo and a device node."""
    img = image_factory("ext3", size_mb=64)
    img.mkfs()
    d = os.path.join(img.mount(), "bmap")
    os.makedirs(os.path.join(d, "dir"))
    with open(os.path.join(d, "many"), "wb") as fh:
        fh.write(os.urandom(300 * 1024))
    with open(os.path.join(d, "sparse"), "wb") as fh:
        for off in (0, 100 * 1024, 70000 * 1024):       # direct, IND, DIND
            fh.seek(off)
            fh.write(b"s" * 1024)
    os.symlink("x" * 300, os.path.join(d, "slow_link"))
    os.symlink("many", os.path.join(d, "fast_link"))
    os.link(os.path.join(d, "many"), os.path.join(d, "dir", "many2"))
    for i in range(300):
        with open(os.path.join(d, "dir", "f%03d" % i), "wb") as fh:
            fh.write(b"%d\n" % i)
    os.mkfifo(os.path.join(d, "fifo"))
    os.mknod(os.path.join(d, "null"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.sync()
    img.offline()
    return img


def names_of_many(mnt):
    """bmap/many has a hard link, bmap/dir/many2: a finding names the file
    by either, whichever name the walk's threads reach first."""
    return [escaped(os.path.join(mnt, rel)) for rel in ("bmap/many", "bmap/dir/many2")]


def ind_blocks(img, rel):
    """The indirect blocks of rel, by kind (IND, DIND): debugfs stat's list."""
    out = debugfs(img, "stat /" + rel)
    return {k: [int(b) for b in re.findall(r"\(%s\):(\d+)" % k, out)] for k in ("IND", "DIND")}


def test_block_mapped_clean(ext3img):
    mnt, r = scrub(ext3img, "-n")
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert not r.of(check="ext4.block_bitmap"), r   # the indirect blocks are claimed


@pytest.mark.parametrize("fault", ["block_in_use", "i_blocks", "i_size", "pointer"])
def test_block_mapped_files(ext3img, fault):
    """ext2/ext3 files map their blocks through indirect blocks; the scan
    walks them from the disk as it walks extent trees, so what e2fsck
    finds in them is found, and confirmed on fresh copies of the inode and
    its indirect blocks (before, a used block marked free in such a file
    was an info, "block-mapped files are not confirmed")."""
    rel = "bmap/many"
    ino = ino_of(ext3img, rel)
    ind = ind_blocks(ext3img, rel)
    assert len(ind["IND"]) == 2 and len(ind["DIND"]) == 1, ind
    if fault == "block_in_use":
        blk = int(debugfs(ext3img, "bmap /%s 280" % rel))     # under the double indirect
        debugfs(ext3img, "freeb %d" % blk, write=True)
        check, says, e2says = ("ext4.block_in_use", "1 block used by this regular file is "
                               "marked free in the block bitmap (the first: block %d)" % blk,
                               "Block bitmap differences:  +%d" % blk)
    elif fault == "i_blocks":
        debugfs(ext3img, "sif /%s blocks 600" % rel, write=True)
        check, says, e2says = ("ext4.inode_blocks", "i_blocks is 600, the block map maps 606",
                               "i_blocks is 600, should be 606")
    elif fault == "i_size":
        debugfs(ext3img, "sif /%s size 100" % rel, write=True)
        check, says, e2says = ("ext4.inode_size", "i_size is 100, but the block map maps "
                               "written blocks up to file block 299 (307200 bytes)",
                               "i_size is 100, should be 307200")
    else:
        # The single indirect block's 6th pointer (file block 17), past the end.
        with open(ext3img.path, "r+b") as fh:
            fh.seek(ind["IND"][0] * 1024 + 5 * 4)
            fh.write((0x7fffffff).to_bytes(4, "little"))
        check, says, e2says = ("ext4.block_map", "block map indirect block %d: pointer 5 "
                               "points to block 2147483647, outside the filesystem"
                               % ind["IND"][0], "Illegal block #17 (2147483647)")
    p = e2fsck(ext3img)
    assert e2says in p.stdout, p.stdout
    mnt, r = scrub(ext3img, "-n")
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == check]
    assert [(f.inode, f.message) for f in hits] == [(ino, says)], r
    assert hits[0].path in names_of_many(mnt), r


def test_block_mapped_directory_block(ext3img):
    """A block-mapped directory's blocks are checked as an extent-mapped
    one's are: the second block of a 300-entry directory (an htree leaf on
    ext3), its first entry's record length cut to 6 (not a multiple of 4)."""
    rel = "bmap/dir"
    ino = ino_of(ext3img, rel)
    blk = int(debugfs(ext3img, "bmap /%s 1" % rel))
    with open(ext3img.path, "r+b") as fh:
        fh.seek(blk * 1024 + 4)                 # ext2_dir_entry_2.rec_len
        fh.write((6).to_bytes(2, "little"))
    p = e2fsck(ext3img)
    assert "Directory inode %d, block #1, offset 0: directory corrupted" % ino in p.stdout, \
        p.stdout
    mnt, r = scrub(ext3img, "-n")
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == "ext4.dir_block"]
    assert [(f.inode, f.message.split(":")[0]) for f in hits] == \
        [(ino, "directory block 1 (block %d)" % blk)], r
    assert hits[0].path == escaped(os.path.join(mnt, rel)), r


@pytest.mark.parametrize("off,says", [
    (0xfc, "fails its checksum"),
    # The most significant byte of s_feature_incompat.
    (40, "has unknown incompatible features 0xff000000"),
    # No journal to read then, but the superblock's finding needs none,
    # and on this read-only mount no other finding does (issue 34).
    (0, "has magic 0x3f3b3998"),
], ids=["checksum", "incompat", "magic"])
def test_journal_superblock_damaged_after_mount(ext4img, off, says):
    """The kernel checks the journal superblock at mount and rewrites it
    from memory when the log tail moves, so damage to it is seen online
    only when it happens after the mount, on a filesystem that does not
    write (mounted read-only here); e2fsck -fn afterwards refuses it."""
    jblk = int(debugfs(ext4img, "bmap <8> 0").split()[-1])
    bs = faults._ext4_sb(ext4img)["block_size"]
    mnt = ext4img.mount("ro")
    with open(ext4img.path, "r+b") as fh:
        fh.seek(jblk * bs + off)
        b = fh.read(1)
        fh.seek(jblk * bs + off)
        fh.write(bytes([b[0] ^ 0xff]))
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert [(f.check, f.inode, f.message) for f in r.errors] == \
        [("ext4.journal", 8, "journal superblock (block %d) %s" % (jblk, says))], r
    ext4img.offline()
    p = e2fsck(ext4img)
    assert p.returncode >= 4 and "journal superblock" in (p.stdout + p.stderr).lower(), \
        p.stdout + p.stderr


def test_inode_in_use_marked_free(ext4img):
    """An inode a name reaches, in use, whose inode-bitmap bit is cleared
    (debugfs freei, which also leaves the group's free count as it was):
    e2fsck's pass 5 "Inode bitmap differences"; the inode scan reads only
    the inodes the bitmap marks, so this is found from the walk's side."""
    rel, ino, _ = victim(ext4img, "freei")
    debugfs(ext4img, "freei <%d>" % ino, write=True)
    assert "is not in use" in debugfs(ext4img, "testi <%d>" % ino)
    p = e2fsck(ext4img)
    assert "Inode bitmap differences:  +%d" % ino in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    g = (ino - 1) // int(re.search(r"^Inodes per group:\s*(\d+)", fsimage.run(
        ["dumpe2fs", "-h", ext4img.path]).stdout, re.M).group(1))
    assert ("ext4.inode_bitmap", ino, "regular file with 1 links, reached by a name, is marked "
            "free in the inode bitmap of group %d" % g) in \
        [(f.check, f.inode, f.message) for f in r.errors], r
    # debugfs freei leaves the free count as it was: e2fsck says so too.
    assert {f.check for f in r.errors} <= {"ext4.inode_bitmap", "ext4.group_counts"}, r


def test_unreached_inode_marked_free(ext4img):
    """An inode in use (a link, no deletion time) whose name is gone
    (debugfs unlink, which leaves the inode) and whose bitmap bit is
    cleared: e2fsck's pass 4 "Unattached inode" and pass 5 "Inode bitmap
    differences: +N".  The inode scan looks at the slots the bitmap calls
    free too (in the part of the table in use): an error by number."""
    rel, ino, _ = victim(ext4img, "unreached")
    debugfs(ext4img, "unlink %s" % rel, write=True)
    debugfs(ext4img, "freei <%d>" % ino, write=True)
    p = e2fsck(ext4img)
    assert "Unattached inode %d" % ino in p.stdout and \
        "Inode bitmap differences:  +%d" % ino in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    hits = [(f.check, f.inode, f.path, f.message) for f in r.errors
            if f.check == "ext4.inode_bitmap"]
    assert len(hits) == 1 and hits[0][:3] == ("ext4.inode_bitmap", ino, escaped(mnt)), r
    assert re.fullmatch(r"regular file of \d+ bytes, link count 1, no deletion time, is "
                        r"marked free in the inode bitmap of group \d+, and no name was "
                        r"found for it", hits[0][3]), r
    # debugfs freei leaves the free count as it was: e2fsck says so too.
    assert {f.check for f in r.errors} <= {"ext4.inode_bitmap", "ext4.group_counts"}, r


def test_deleted_inode_marked_in_use(ext4img):
    """A deleted inode (debugfs rm: no links, a deletion time) whose bit is
    set again (debugfs seti): e2fsck's pass 5 "Inode bitmap differences:
    -N"; the kernel clears the bit in the transaction that sets dtime."""
    rel, ino, _ = victim(ext4img, "seti")
    debugfs(ext4img, "rm %s" % rel, write=True)
    debugfs(ext4img, "seti <%d>" % ino, write=True)
    p = e2fsck(ext4img)
    assert "Inode bitmap differences:  -%d" % ino in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    hits = [(f.check, f.inode, f.message) for f in r.errors if f.check == "ext4.inode_bitmap"]
    assert len(hits) == 1 and hits[0][1] == ino and re.fullmatch(
        r"regular file deleted \(dtime \d+, no links\) is still marked in use in the inode "
        r"bitmap of group \d+", hits[0][2]), r
    assert {f.check for f in r.errors} <= {"ext4.inode_bitmap", "ext4.group_counts"}, r


def shared_xattr_block(img, names=("a", "b", "c")):
    """Files with the same attribute, too big for the inode: the kernel
    keeps it in one block they share (reference count 3)."""
    mnt = img.mount()
    d = os.path.join(mnt, "xattr_shared")
    os.mkdir(d)
    for n in names:
        p = os.path.join(d, n)
        with open(p, "w") as fh:
            fh.write(n)
        os.setxattr(p, "user.big", b"v" * 400)
    inos = [fsimage.inode_of(os.path.join(d, n)) for n in names]
    img.offline()
    blks = {int(re.search(r"File ACL: (\d+)", debugfs(img, "stat <%d>" % i)).group(1))
            for i in inos}
    assert len(blks) == 1 and 0 not in blks, blks
    return inos, blks.pop()


@pytest.mark.parametrize("count", [1, 5], ids=["too_low", "too_high"])
def test_xattr_block_refcount(ext4img, count):
    """Three files share an attribute block; its count set to 1, deleting
    one of them would free the block the other two still use; set to 5,
    it is never freed.  e2fsck -fn's pass 1: "has reference count N, should
    be 3".  Too low is an error, named by a file that uses the block; too
    high only an info, as a file given the same attributes during a scan
    may not be counted."""
    inos, blk = shared_xattr_block(ext4img)
    assert faults.ext4_xattr_refcount(ext4img, blk, count) == 3
    p = e2fsck(ext4img)
    assert "Extended attribute block %d has reference count %d, should be 3" % (blk, count) \
        in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    hits = r.of(check="ext4.xattr_refcount")
    says = "attribute block %d counts %d reference%s, but 3 inodes in use refer to it " \
        "(inodes %d, %d, %d)" % ((blk, count, "" if count == 1 else "s") + tuple(inos))
    if count == 1:
        assert r.rc == 4 and [f.check for f in r.errors] == ["ext4.xattr_refcount"], r
        assert [(f.severity, f.inode, f.path) for f in hits] == \
            [("Error", inos[0], escaped(os.path.join(mnt, "xattr_shared", "a")))], r
        assert hits[0].message.startswith(says + ": deleting 1 of them would free it"), r
    else:
        assert r.rc == 0 and r.errors == [], r
        assert [f.severity for f in hits] == ["Info"] and says in hits[0].message, r
    assert re.search(r"Phase 3: ext4: \d+ attribute blocks' reference counts checked", r.stdout), r


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_block_map_points_at_itself(ext3img, how):
    """A triple indirect block whose every pointer names itself (debugfs
    setb, sif block[TIND], the block written raw: indirect blocks have no
    checksum): FIEMAP maps that one block 256^3 times, which the kernel
    walks for tens of seconds.  The map is stopped at the file's blocks
    (extent.count) and the scan ends within seconds, fresh, settled and
    read-only."""
    rel = "bmap/many"
    blk = int(re.search(r"Free blocks found: (\d+)", debugfs(ext3img, "ffb")).group(1))
    debugfs(ext3img, "setb %d" % blk, write=True)
    with open(ext3img.path, "r+b") as fh:
        fh.seek(blk * 1024)
        fh.write(struct.pack("<I", blk) * 256)
    debugfs(ext3img, "sif /%s block[TIND] %d" % (rel, blk), write=True)
    debugfs(ext3img, "sif /%s size %d" % (rel, (12 + 256 + 256 ** 2 + 256 ** 3) * 1024),
            write=True)
    mnt = ext3img.mount_as(how)
    time.sleep(1.1)
    t0 = time.monotonic()
    r = run_fscrub("-n", mnt, timeout=60)
    took = time.monotonic() - t0
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == "extent.count"]
    assert len(hits) == 1 and hits[0].path in names_of_many(mnt), r
    assert hits[0].message.startswith("data fork: more than "), r
    # the one block the map names over and over: said once (was 504 errors)
    assert len([f for f in r.findings if f.check == "extent.crosslinked"]) <= 1, r
    assert took < 10, took
