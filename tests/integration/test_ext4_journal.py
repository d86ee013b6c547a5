"""The ext4 journal beyond its superblock (src/backends/ext4/ext4_journal.c,
issue 21 item 9): the internal journal's blocks must be inside the
filesystem, no group metadata, marked in use in the block bitmap and used
by no other inode; an external journal's device must be found by the UUID
the superblock names, and its header must be a v2 jbd2 superblock of that
UUID, of the filesystem's block size, with this filesystem among its users.

Faults the kernel accepts at mount (journal blocks marked free, another
file's extent over the journal or over an inode table) are injected with
debugfs -w on the unmounted image and shown to be there by e2fsck -fn.  The
kernel refuses a journal inode mapped over metadata or outside the
filesystem, and checks an external journal's header at mount, so those are
injected into the image file of a filesystem mounted read-only (the kernel
keeps what it loaded; the device now reads the damage), as
test_ext4_xref's journal superblock tests do."""

import os
import re
import struct

import pytest

import faults
from faults import debugfs, _ext4_sb, _patch, _pread
import fsimage
from test_ext4 import e2fsck, ext4img, inode_offset, inode_with_csum, scrub, victim  # noqa: F401

# ext4_extent in i_block: a 12-byte header, then ee_block, ee_len, ee_start_hi, ee_start_lo.
I_BLOCK = 0x28
EXTENT0_START_HI = I_BLOCK + 12 + 6
EXTENT0_START_LO = I_BLOCK + 12 + 8


def journal_runs(img):
    """The journal inode's first physical block and its length in blocks."""
    out = debugfs(img, "stat <8>")
    m = re.search(r"\(0-(\d+)\):(\d+)-(\d+)", out)
    assert m, out
    return int(m.group(2)), int(m.group(1)) + 1


def itable_of_group(img, g):
    out = fsimage.run(["dumpe2fs", img.path]).stdout
    m = re.search(r"^Group %d: .*?Inode table at (\d+)-(\d+)" % g, out, re.S | re.M)
    assert m, out
    return int(m.group(1))


def ext4_errors(r):
    return [(f.check, f.inode, f.message) for f in r.errors if f.check.startswith("ext4.")]


def test_journal_clean(ext4img):
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 0 and r.errors == [], r
    assert "Phase 3: ext4: the journal is 1 run of blocks" in r.stdout, r
    assert not [f for f in r.findings if f.check in ("ext4.journal", "ext4.crosslink")], r


def test_journal_blocks_marked_free(ext4img):
    jblk, jlen = journal_runs(ext4img)
    first = jblk + jlen // 2
    debugfs(ext4img, "freeb %d 5" % first, write=True)
    p = e2fsck(ext4img)
    assert "Block bitmap differences:  +(%d--%d)" % (first, first + 4) in p.stdout, p.stdout
    # debugfs leaves the group's free count as it was: e2fsck finds that too.
    assert "Free blocks count wrong for group #" in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert sorted(e[0] for e in ext4_errors(r)) == ["ext4.group_counts", "ext4.journal"], r
    assert ("ext4.journal", 8, "5 of the journal's blocks are marked free in the block bitmap "
            "(blocks %d-%d)" % (first, first + 4)) in ext4_errors(r), r


def test_file_extent_over_journal(ext4img):
    """Another file's extent pointed at a journal block (e2fsck's pass 1B:
    a block claimed by the journal inode and a file)."""
    rel, ino, _ = victim(ext4img, "over_journal", data=b"v" * 4096)
    jblk, jlen = journal_runs(ext4img)
    target = jblk + 200
    debugfs(ext4img, "sif <%d> block[5] %d" % (ino, target), write=True)
    p = e2fsck(ext4img)
    assert "Multiply-claimed block(s) in inode %d: %d" % (ino, target) in p.stdout, p.stdout
    assert "<The journal inode> (inode #8" in p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert ("ext4.journal", ino, "blocks %d-%d of the journal (inode 8) are also used by this "
            "regular file" % (target, target)) in ext4_errors(r), r
    assert [e for e in ext4_errors(r) if e[0] != "ext4.journal"] == [], r


@pytest.mark.parametrize("what", ["itable", "superblock", "gdt"])
def test_file_extent_over_metadata(ext4img, what):
    """A file's extent pointed at group 1's inode table, or at block 0 (the
    primary superblock) or 1 (its descriptors): e2fsck's pass 1B (a block
    shared with "<filesystem metadata>"); ext4.crosslink."""
    rel, ino, _ = victim(ext4img, "over_meta", data=b"v" * 4096)
    target, owner = {"itable": (itable_of_group(ext4img, 1) + 3, "the inode table of group 1"),
                     "superblock": (0, "the superblock or group descriptors in group 0"),
                     "gdt": (1, "the superblock or group descriptors in group 0")}[what]
    debugfs(ext4img, "sif <%d> block[5] %d" % (ino, target), write=True)
    p = e2fsck(ext4img)
    # e2fsck (like the kernel) takes a block up to s_first_data_block for invalid.
    assert ("invalid physical block 0" if target == 0 else "<filesystem metadata>") in \
        p.stdout, p.stdout
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert ("ext4.crosslink", ino, "block %d, used by this inode, is also %s" % (target, owner)) \
        in ext4_errors(r), r


def patch_journal_inode_while_mounted(img, start):
    """Mount read-only, then point the journal inode's first extent at
    block *start* in the image file (checksum fixed).  The kernel checked
    the journal at mount and keeps what it loaded; a writable mount would
    not get there (it refuses such a journal at mount)."""
    off = inode_offset(img, 8)
    isize = int(re.search(r"^Inode size:\s*(\d+)",
                          fsimage.run(["dumpe2fs", "-h", img.path]).stdout, re.M).group(1))
    seed = faults._ext4_inode_csum_seed(img, _ext4_sb(img), 8)
    img.mount("ro")
    raw = bytearray(_pread(img.path, off, isize))
    struct.pack_into("<H", raw, EXTENT0_START_HI, start >> 32)
    struct.pack_into("<I", raw, EXTENT0_START_LO, start & 0xFFFFFFFF)
    _patch(img.path, off, inode_with_csum(raw, seed))


@pytest.mark.parametrize("where", ["metadata", "outside"])
def test_journal_mapped_wrong_after_mount(ext4img, where):
    jblk, jlen = journal_runs(ext4img)
    if where == "metadata":
        start = itable_of_group(ext4img, 0) + 10
        says = "block %d, the journal's, is also the inode table of group 0" % start
    else:
        blocks = int(re.search(r"^Block count:\s*(\d+)", fsimage.run(
            ["dumpe2fs", "-h", ext4img.path]).stdout, re.M).group(1))
        start = blocks + 100
        says = ("the journal's extent tree root in the inode: extent at file block 0 maps "
                "blocks %d-%d, outside the filesystem" % (start, start + jlen - 1))
    patch_journal_inode_while_mounted(ext4img, start)
    mnt, r = scrub(ext4img, "-n")
    assert r.rc == 4, r
    assert ext4_errors(r) == [("ext4.journal", 8, says)], r
    ext4img.offline()
    p = e2fsck(ext4img)
    assert p.returncode >= 4, p.stdout + p.stderr


# ---- an external journal ------------------------------------------------------

JSB_UUID = 48
JSB_USERS = 256
JSB_CHECKSUM = 0xFC


@pytest.fixture
def extjournal(workdir, image_factory, cleanups):
    """An ext4 image whose journal is on a second loop device (mke2fs -O
    journal_dev), with the fixture tree; returned unmounted, the journal
    device attached.  Yields (image, journal image path, journal device)."""
    jpath = os.path.join(workdir, "journal.img")
    with open(jpath, "wb") as f:
        f.truncate(32 << 20)
    jdev = fsimage.Mounts(cleanups).loop(jpath)
    fsimage.run(["mke2fs", "-q", "-F", "-O", "journal_dev", "-b", "4096", jdev])
    img = image_factory("ext4", size_mb=128, mkfs_args=("-J", "device=" + jdev))
    # image_factory's cleanup runs before the losetup -d above: unmounted first.
    img.mkfs()
    fsimage.make_tree(img.mount(), deep=False)
    img.offline()
    return img, jpath, jdev


def test_external_journal_clean(extjournal):
    img, jpath, jdev = extjournal
    mnt, r = scrub(img, "-n")
    assert r.rc == 0 and r.errors == [], r
    assert "Phase 1: ext4: the external journal is %s" % jdev in r.stdout, r
    assert not r.of(check="ext4.unchecked"), r
    assert not r.of(check="ext4.journal"), r


def fix_jsb_checksum(path, off):
    """A checksum v2/v3 journal superblock's checksum made right again:
    CRC32c from ~0 of its 1024 bytes with the field zeroed, big-endian."""
    raw = bytearray(_pread(path, off, 1024))
    if struct.unpack_from(">I", raw, 40)[0] & 0x18:      # CSUM_V2 | CSUM_V3
        struct.pack_into(">I", raw, JSB_CHECKSUM, 0)
        struct.pack_into(">I", raw, JSB_CHECKSUM, faults.crc32c(0xFFFFFFFF, bytes(raw)))
        _patch(path, off, bytes(raw))


def fs_uuid(img):
    return _ext4_sb(img)["uuid"]


@pytest.mark.parametrize("fault", ["magic", "users", "journal_uuid"])
def test_external_journal_damaged_after_mount(extjournal, fault):
    """The kernel checks the external journal's header at mount (and that
    the device's UUID is the one the superblock names), so the damage is
    made to the files of a read-only mount."""
    img, jpath, jdev = extjournal
    uuid = fs_uuid(img)
    jsb = 4096                           # ext2fs_journal_sb_start(4096) == 1
    mnt = img.mount("ro")
    if fault == "magic":
        _patch(jpath, jsb, b"\0\0\0\0")
        says = "has magic 0x00000000"
    elif fault == "users":
        users = bytearray(_pread(jpath, jsb + JSB_USERS, 16))
        users[0] ^= 0xFF
        _patch(jpath, jsb + JSB_USERS, bytes(users))
        fix_jsb_checksum(jpath, jsb)
        says = "does not list this filesystem (%s) among its 1 users" % uuid
    else:
        # The superblock names another journal: no device has its UUID.
        raw = bytearray(_pread(img.path, 1024, 1024))
        raw[0xD0] ^= 0xFF                # s_journal_uuid[0]
        struct.pack_into("<I", raw, 0x3FC, faults.crc32c(0xFFFFFFFF, bytes(raw[:0x3FC])))
        _patch(img.path, 1024, bytes(raw))
        wrong = bytes(raw[0xD0:0xE0]).hex()
        wrong = "-".join((wrong[:8], wrong[8:12], wrong[12:16], wrong[16:20], wrong[20:]))
        says = "the external journal (UUID %s, device 7:%d) is not found: no block device " \
               "has that UUID" % (wrong, os.minor(os.stat(jdev).st_rdev))
    mnt, r = scrub(img, "-n")
    assert r.rc == 4, r
    hits = [f for f in r.errors if f.check == "ext4.journal"]
    assert len(hits) == 1 and says in hits[0].message, r
    img.offline()
    p = e2fsck(img)
    if fault == "users":
        # Stricter than e2fsck 1.47 and the kernel, which check only the
        # journal's UUID and (the kernel) that it has one user.
        assert p.returncode == 0, p.stdout + p.stderr
    else:
        assert p.returncode >= 4 and "journal" in (p.stdout + p.stderr).lower(), \
            p.stdout + p.stderr
