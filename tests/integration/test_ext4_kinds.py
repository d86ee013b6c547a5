"""Kinds of ext4 damage e2fsck -fn finds that fscrub missed (issue 34, item
5), each seen first on one of e2fsprogs' own regression images:

* the journal: a v2 superblock of an internal journal that names more than
  one user (f_bad_local_jnl, d_corrupt_journal_nr_users), a journal inode
  whose map leaves a hole in its i_size (f_badjour_indblks);
* the bad-blocks inode (inode 1): a block outside the filesystem
  (f_badbblocks), a block a file uses too (f_bbfile), group 0's
  descriptors, a bitmap or an inode table block (f_badprimary,
  f_badtable);
* one inode's fields: i_file_acl_hi without the 64bit feature
  (f_file_acl_high), a fast symlink with EXTENTS_FL (f_fast_symlink_extents);
* a group descriptor's itable_unused over inodes in use;
* quota: a file's owner changed without its usage moving in the quota
  files (f_quota: "Usage inconsistent for ID 0");
* an inode with no links, marked in use, on no orphan list (f_badorphan:
  "part of a corrupted orphan linked list", "deleted inode has zero
  dtime"); a file held open after its last name went is on one, clean;
* the superblock: a quota inode number past the last inode
  (f_quota_invalid_inum); the MMP block's magic or checksum
  (m_mmp_bad_magic, m_mmp_bad_csum).

Each fault is injected with debugfs -w (or a patch of the image file) on
the unmounted image, shown by e2fsck -fn, and the image is then scrubbed
just mounted, mounted again past the journal's commit interval, and
read-only (test_ext4_false.scrub_in()).  Where the kernel refuses a
read-write mount of the damage (a quota inode it cannot open, an MMP
block it cannot verify), the test says so and scrubs it read-only, just
mounted and remounted past the commit interval (RO_MODES).  The image without the fault, a
list of bad blocks included, scrubs clean the same three ways."""

import os
import re
import struct
import time

import pytest

from conftest import run_fscrub
from faults import debugfs, _patch
import fsimage
from test_ext4 import e2fsck
from test_ext4_false import MODES, scrub_in
from test_ext4_journal import fix_jsb_checksum, journal_runs

BS = 4096
# 8192 blocks a group: a 64 MiB image has two groups (and group 1 a backup).
MKFS = ("-g", "8192")
# Two free blocks near the end of the filesystem, listed as bad by mkfs -l.
BAD_BLOCKS = (16000, 16001)
JSB_NR_USERS = 64
# The mounts of damage the kernel will not mount read-write.
RO_MODES = ["ro", "ro_settled"]


@pytest.fixture
def kinds_img(image_factory, workdir):
    """A 64 MiB ext4 (4 KiB blocks) with a list of bad blocks, a file f of
    three blocks and a fast symlink sl; returned unmounted."""
    listed = os.path.join(workdir, "badblocks.txt")
    with open(listed, "w") as fh:
        fh.write("".join("%d\n" % b for b in BAD_BLOCKS))
    img = image_factory("ext4", size_mb=64, mkfs_args=MKFS + ("-l", listed))
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "f"), "wb") as fh:
        fh.write(b"f" * 3 * BS)
    os.symlink("short", os.path.join(mnt, "sl"))
    img.offline()
    return img


def ino_of(img, path):
    return int(re.search(r"Inode: (\d+)", debugfs(img, "stat %s" % path)).group(1))


def scrub_damaged(img, mode):
    """e2fsck -fn calls the image damaged (exit 4; 12 where it cannot go
    on); then fscrub's run on it mounted as mode says."""
    assert e2fsck(img).returncode & 4
    return scrub_in(img, mode)[1]


def error_of(r, check, inode=None, text=None, path=None):
    """The scrub found check's error (about inode, saying text, at path), exit 4."""
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == check and (inode is None or f.inode == inode)
            and (text is None or text in f.message) and (path is None or f.path == path)]
    assert hits, r
    return hits


@pytest.mark.parametrize("mode", MODES)
def test_clean(kinds_img, mode):
    assert "16000, 16001" in debugfs(kinds_img, "stat <1>").replace("-", ", ")
    assert e2fsck(kinds_img).returncode == 0
    mnt, r = scrub_in(kinds_img, mode)
    assert r.rc == 0 and r.errors == [] and "fscrub:" not in r.stderr, r
    assert not r.warnings, r


# ---- the journal ---------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_internal_journal_many_users(kinds_img, mode):
    """d_corrupt_journal_nr_users: s_nr_users 9999 (checksum made right)."""
    off = journal_runs(kinds_img)[0] * BS
    _patch(kinds_img.path, off + JSB_NR_USERS, struct.pack(">I", 9999))
    fix_jsb_checksum(kinds_img.path, off)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.journal", 8, "journal superblock (block %d) says 9999 users; an "
             "internal journal has one" % (off // BS))


@pytest.mark.parametrize("mode", MODES)
def test_journal_map_hole(kinds_img, mode):
    """f_badjour_indblks: the journal's one extent split in two around a
    hole of one block at file block 500 (i_block rewritten by debugfs, which
    sets the inode's checksum)."""
    start, n = journal_runs(kinds_img)
    words = {0: 0xF30A | 2 << 16,              # the header: magic, 2 entries
             3: 0, 4: 500, 5: start,            # file blocks 0-499
             6: 501, 7: n - 501, 8: start + 501}  # 501 to the end
    for i, v in words.items():
        debugfs(kinds_img, "set_inode_field <8> block[%d] 0x%x" % (i, v), write=True)
    assert "(0-499):%d-%d, (501-%d)" % (start, start + 499, n - 1) in \
        debugfs(kinds_img, "stat <8>")
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.journal", 8, "the journal's extent tree maps %d of the %d blocks of "
             "its size: jbd2 needs every one of them, no hole" % (n - 1, n))


@pytest.mark.parametrize("mode", MODES)
def test_journal_block_past_its_end_is_clean(kinds_img, mode):
    """f_bad_local_jnl once e2fsck -fy has run: old mke2fs mapped one block
    more than the journal's i_size, and e2fsck passes it.  Here the
    journal's extent made one block longer over the free block after it,
    the counts made right by e2fsck -fy."""
    start, n = journal_runs(kinds_img)
    assert "not in use" in debugfs(kinds_img, "testb %d" % (start + n))
    debugfs(kinds_img, "set_inode_field <8> block[4] %d" % (n + 1), write=True)  # ee_len
    debugfs(kinds_img, "setb %d" % (start + n), write=True)
    fsimage.run(["e2fsck", "-fy", kinds_img.path], check=False)
    assert "(0-%d):%d-%d" % (n, start, start + n) in debugfs(kinds_img, "stat <8>")
    assert e2fsck(kinds_img).returncode == 0
    mnt, r = scrub_in(kinds_img, mode)
    assert r.rc == 0 and r.errors == [], r


# ---- the bad-blocks inode ------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_bad_block_outside(kinds_img, mode):
    """f_badbblocks: the bad-blocks inode's second pointer past the end."""
    debugfs(kinds_img, "set_inode_field <1> block[1] 99999", write=True)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.block_map", 1, "the bad blocks inode's block map pointers in the "
             "inode: pointer 1 points to block 99999, outside the filesystem")


@pytest.mark.parametrize("mode", MODES)
def test_bad_block_in_a_file(kinds_img, mode):
    """f_bbfile: a block of f listed as bad (its second pointer)."""
    ino = ino_of(kinds_img, "/f")
    blk = int(re.search(r"\(0-2\):(\d+)-", debugfs(kinds_img, "stat /f")).group(1)) + 1
    debugfs(kinds_img, "set_inode_field <1> block[1] %d" % blk, write=True)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.crosslink", ino, "block %d, used by this regular file, is in the bad "
             "blocks list (inode 1)" % blk, os.path.join(kinds_img.mnt, "f"))


def group_layout(img, what, group=0):
    """A block of group's layout in dumpe2fs: what is "Primary superblock",
    "Group descriptors", "Block bitmap", "Inode bitmap", "Inode table" or
    "Backup superblock" (the first block of a range)."""
    out = fsimage.run(["dumpe2fs", img.path]).stdout
    part = out.split("Group %d:" % group, 1)[1].split("\nGroup ", 1)[0]
    return int(re.search(r"%s at (\d+)" % what, part).group(1))


def list_bad(img, blk):
    """blk made the bad-blocks inode's second entry in place of 16001, which
    is freed (e2fsck then sees only what blk is)."""
    debugfs(img, "set_inode_field <1> block[1] %d" % blk, write=True)
    debugfs(img, "freeb %d" % BAD_BLOCKS[1], write=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what,owner,plus", [
    ("Group descriptors", "the superblock or group descriptors in group 0", 0),
    ("Block bitmap", "the block bitmap of group 0", 0),
    ("Inode bitmap", "the inode bitmap of group 0", 0),
    ("Inode table", "the inode table of group 0", 1)])
def test_bad_block_is_metadata(kinds_img, mode, what, owner, plus):
    """f_badprimary, f_badtable: group 0's descriptors, a bitmap or an inode
    table block in the bad blocks list."""
    blk = group_layout(kinds_img, what) + plus
    list_bad(kinds_img, blk)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.crosslink", 1, "block %d, %s, is in the bad blocks list: the kernel "
             "uses it as metadata all the same" % (blk, owner))


@pytest.mark.parametrize("mode", MODES)
def test_bad_block_backup_superblock_is_clean(kinds_img, mode):
    """A backup superblock may be listed as bad: mke2fs lists it and warns,
    e2fsck passes it."""
    backup = group_layout(kinds_img, "Backup superblock", 1)
    list_bad(kinds_img, backup)
    fsimage.run(["e2fsck", "-fy", kinds_img.path], check=False)  # the free counts
    assert "(1):%d" % backup in debugfs(kinds_img, "stat <1>"), "e2fsck unlisted it"
    assert e2fsck(kinds_img).returncode == 0
    mnt, r = scrub_in(kinds_img, mode)
    assert r.rc == 0 and r.errors == [], r


# ---- one inode's fields ----------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_file_acl_hi_without_64bit(image_factory, mode):
    """f_file_acl_high: i_file_acl_hi 2 on a filesystem without 64bit."""
    img = image_factory("ext4", size_mb=64, mkfs_args=MKFS + ("-O", "^64bit"))
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "motd"), "wb") as fh:
        fh.write(b"motd\n")
    img.offline()
    debugfs(img, "set_inode_field /motd file_acl 0x200000000", write=True)
    r = scrub_damaged(img, mode)
    error_of(r, "ext4.inode_field", ino_of(img, "/motd"),
             "i_file_acl_hi is 2 without the 64bit feature", os.path.join(img.mnt, "motd"))


@pytest.mark.parametrize("mode", MODES)
def test_fast_symlink_with_extents_flag(kinds_img, mode):
    """f_fast_symlink_extents: EXTENTS_FL on the fast symlink sl."""
    debugfs(kinds_img, "set_inode_field /sl flags 0x80000", write=True)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.inode_flags", ino_of(kinds_img, "/sl"),
             "flags 0x80000: EXTENTS_FL on a fast symlink", os.path.join(kinds_img.mnt, "sl"))


# ---- a group descriptor's itable_unused ------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_itable_unused_over_inodes_in_use(kinds_img, mode):
    """Group 0's itable_unused says every inode from 12 on is unused, and
    f (13) and sl (14) are in use (the descriptor's checksum made right)."""
    ipg = int(re.search(r"Inodes per group:\s+(\d+)",
                        fsimage.run(["dumpe2fs", "-h", kinds_img.path]).stdout).group(1))
    debugfs(kinds_img, "set_bg 0 itable_unused %d" % (ipg - 11), write=True)
    debugfs(kinds_img, "set_bg 0 checksum calc", write=True)
    r = scrub_damaged(kinds_img, mode)
    last = max(ino_of(kinds_img, "/f"), ino_of(kinds_img, "/sl"))
    error_of(r, "ext4.group_desc", None, "inode %d is in use, but the group descriptor's "
             "itable_unused (%d) says the inodes from 12 on were never used" % (last, ipg - 11))


# ---- the superblock and the MMP block ---------------------------------------------

def refused_rw(img):
    """The kernel refuses the image read-write (and leaves nothing mounted)."""
    with pytest.raises(RuntimeError):
        img.mount()
    img.offline()


@pytest.mark.parametrize("mode", RO_MODES)
def test_quota_inode_past_the_last(image_factory, mode):
    """f_quota_invalid_inum: the user quota inode 808464432 (0x30303030)
    with the quota feature."""
    img = image_factory("ext4", size_mb=16, mkfs_args=("-O", "quota"))
    img.mkfs()
    debugfs(img, "ssv usr_quota_inum 808464432", write=True)
    refused_rw(img)
    r = scrub_damaged(img, mode)
    error_of(r, "ext4.superblock", None, "superblock: the user quota inode is 808464432, "
             "which is past the last inode")


@pytest.fixture
def mmp_img(image_factory):
    """A 16 MiB ext4 with the mmp feature (metadata_csum), unmounted; its
    MMP block's number as img.mmp."""
    img = image_factory("ext4", size_mb=16, mkfs_args=("-O", "mmp"))
    img.mkfs()
    img.mmp = int(re.search(r"MMP block number:\s+(\d+)",
                            fsimage.run(["dumpe2fs", "-h", img.path]).stdout).group(1))
    return img


# struct mmp_struct: mmp_magic first, mmp_checksum in its last 4 bytes of 1024.
MMP_MAGIC_OFF, MMP_CSUM_OFF = 0, 1020


@pytest.mark.parametrize("mode", MODES)
def test_mmp_clean(mmp_img, mode):
    """A sound MMP block, which kmmpd rewrites on a read-write mount."""
    mnt, r = scrub_in(mmp_img, mode)
    assert r.rc == 0 and r.errors == [] and not r.of(check="ext4.mmp"), r


@pytest.mark.parametrize("mode", RO_MODES)
@pytest.mark.parametrize("field,off,says", [("magic", MMP_MAGIC_OFF, "bad magic number"),
                                            ("csum", MMP_CSUM_OFF, "checksum does not match")])
def test_mmp_damaged(mmp_img, mode, field, off, says):
    """m_mmp_bad_magic, m_mmp_bad_csum: one word of the MMP block overwritten."""
    _patch(mmp_img.path, mmp_img.mmp * BS + off, struct.pack("<I", 0x12345678))
    refused_rw(mmp_img)
    r = scrub_damaged(mmp_img, mode)
    error_of(r, "ext4.mmp", None, "MMP block %d: %s" % (mmp_img.mmp, says))


# ---- inodes with no links on no orphan list --------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtime", [0, 11])
def test_unlisted_orphan(kinds_img, mode, dtime):
    """f_badorphan: f's name removed and its link count made 0, its dtime 0
    ("deleted inode has zero dtime") or 11, an orphan-list link that no
    list reaches ("part of a corrupted orphan linked list")."""
    ino = ino_of(kinds_img, "/f")
    debugfs(kinds_img, "unlink /f", write=True)
    debugfs(kinds_img, "set_inode_field <%d> links_count 0" % ino, write=True)
    debugfs(kinds_img, "set_inode_field <%d> dtime %d" % (ino, dtime), write=True)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.orphan_list", ino, "regular file of %d bytes, owner 0:0, has no links "
             "and is marked in use in the inode bitmap of group 0, but is on no orphan list "
             "(dtime %d): nothing will free it" % (3 * BS, dtime))


@pytest.mark.parametrize("mode", MODES)
def test_linked_inode_with_orphan_link(kinds_img, mode):
    """A file in use whose dtime is an orphan-list link (11) that no list
    reaches: e2fsck's "was part of the orphaned inode list", "is in use,
    but has dtime set"."""
    ino = ino_of(kinds_img, "/f")
    debugfs(kinds_img, "set_inode_field /f dtime 11", write=True)
    r = scrub_damaged(kinds_img, mode)
    error_of(r, "ext4.orphan_list", ino, "regular file, link count 1, has an orphan-list link "
             "as its deletion time (dtime 11), but is on no orphan list",
             os.path.join(kinds_img.mnt, "f"))


@pytest.mark.parametrize("feature", ["^orphan_file", "orphan_file"])
def test_open_unlinked_is_clean(image_factory, feature):
    """Files held open after their names went are on the superblock's
    orphan list, or in the orphan file: no finding, on the live mount."""
    img = image_factory("ext4", size_mb=64, mkfs_args=MKFS + ("-O", feature))
    img.mkfs()
    mnt = img.mount()
    held = []
    for i in range(3):
        path = os.path.join(mnt, "gone%d" % i)
        fh = open(path, "wb")
        fh.write(b"g" * BS)
        held.append(fh)
        os.unlink(path)
    r = scrub_while_held(mnt, held)
    assert r.rc == 0 and r.errors == [] and not r.of(check="ext4.orphan_list"), r


def scrub_while_held(mnt, held):
    """fscrub -n -v on mnt while the files held (open, their names gone)
    stay open, written back first; then closes them."""
    try:
        for fh in held:
            fh.flush()
            os.fsync(fh.fileno())
        time.sleep(1.1)     # older than the "changed during the scan" window
        return run_fscrub("-n", "-v", mnt)
    finally:
        for fh in held:
            fh.close()


# ---- quota usage -------------------------------------------------------------------

@pytest.fixture
def quota_img(image_factory, workdir):
    """A 16 MiB ext4 with the quota feature made from a directory (mke2fs
    -d): a (3 blocks, root's) and d/b (one block, d and b 100:200); the
    quota files then made right by e2fsck -fy (mke2fs -d leaves them
    empty).  This kernel mounts it read-only only (no CONFIG_QFMT_V2)."""
    src = os.path.join(workdir, "quota-src")
    os.makedirs(os.path.join(src, "d"))
    for name, size in (("a", 3 * BS), ("d/b", 100)):
        with open(os.path.join(src, name), "wb") as fh:
            fh.write(b"q" * size)
    for name in ("d", "d/b"):
        os.chown(os.path.join(src, name), 100, 200)
    img = image_factory("ext4", size_mb=16, mkfs_args=("-O", "quota", "-d", src))
    img.mkfs()
    return quota_made_right(img)


def quota_made_right(img):
    """img's quota files made right by e2fsck -fy, which then finds nothing."""
    fsimage.run(["e2fsck", "-fy", img.path], check=False)
    assert e2fsck(img).returncode == 0
    return img


def scrub_quota_clean(img, mode):
    """fscrub on img mounted as mode says: no finding, ext4.quota's none."""
    mnt, r = scrub_in(img, mode)
    assert r.rc == 0 and r.errors == [] and not r.of(check="ext4.quota"), r
    return r


@pytest.mark.parametrize("mode", RO_MODES)
def test_quota_clean(quota_img, mode):
    scrub_quota_clean(quota_img, mode)


@pytest.mark.parametrize("mode", RO_MODES)
def test_quota_usage_wrong(quota_img, mode):
    """f_quota: a's owner made 100 offline, the quota files left as they
    were: user 0 has a's blocks and inode in its quota, user 100 not."""
    def said():     # e2fsck's quota warnings go to stderr
        p = fsimage.run(["e2fsck", "-fn", quota_img.path], check=False)
        return p.stdout + p.stderr

    sectors = int(re.search(r"Blockcount: (\d+)", debugfs(quota_img, "stat /a")).group(1))
    assert "QUOTA" not in said()
    debugfs(quota_img, "set_inode_field /a uid 100", write=True)
    used0 = re.search(r"ID 0:actual \((\d+), (\d+)\)", said())
    assert used0
    r = scrub_damaged(quota_img, mode)
    space0, inodes0 = int(used0.group(1)), int(used0.group(2))
    hits = error_of(r, "ext4.quota", 3, "user quota of id 0: the quota file says %d bytes in "
                    "%d inodes, the inodes use %d bytes in %d" % (
                        space0 + sectors * 512, inodes0 + 1, space0, inodes0))
    assert hits[0].path == quota_img.mnt, r
    error_of(r, "ext4.quota", 3, "user quota of id 100: the quota file says")
    assert not [f for f in r.errors if "group quota" in f.message], r
