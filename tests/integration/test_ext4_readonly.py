"""An ext4 filesystem mounted read-only is not in flux, and some damage is
never a state the kernel passes through (src/backends/ext4/ext4_confirm.c,
issue 34).  On a ``ro,noload`` mount the kernel writes nothing and reads
the disk as it is, so what two fresh reads confirm is an error even when
the journal cannot be read to tell recent blocks from old.  And on any
mount, three faults the kernel never writes are errors once re-read:

  - a journal superblock with a bad magic (e2fsprogs' j_corrupt_sb_magic):
    jbd2 keeps it in memory and writes it whole;
  - an unused inode (marked free) whose checksum fails: the kernel writes
    the inodes it frees whole, with their checksums;
  - a BLOCK_UNINIT group with blocks in use (f_uninit_blk_used_not_set):
    the kernel initialises a group's bitmap before it allocates there.

Each is injected offline where the kernel accepts it at mount, checked
against ``e2fsck -fn``, and scrubbed on a fresh read-write mount, a
settled one (remounted, past the journal commit) and a ``ro,noload`` one.
The kernel refuses a read-write mount of a journal with a bad magic, so
for those two the magic is broken in the image file under the mount (the
kernel keeps the superblock it loaded)."""

import os
import re
import struct
import time

import pytest

from conftest import run_fscrub
import fsimage
from faults import debugfs, _ext4_sb, _patch, _pread

MOUNTS = ["fresh", "settled", "ro_noload"]
JBD2_MAGIC = 0xC03B3998


def make_image(image_factory):
    """64 MiB in eight groups of 8 MiB (2048 blocks of 4 KiB).  A file of
    20 MiB spans several groups; a file created and deleted leaves a free
    inode in the used part of group 0's table."""
    img = image_factory("ext4", size_mb=64, mkfs_args=("-g", "2048"))
    img.mkfs()
    mnt = img.mount()
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(20 << 20))
    for name in ("keep", "gone"):
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(b"x")
    gone = fsimage.inode_of(os.path.join(mnt, "gone"))
    os.unlink(os.path.join(mnt, "gone"))
    os.sync()
    img.offline()
    time.sleep(1.1)     # older than the 1 s "changed during the scan" window
    return img, gone


def mount_as(img, how):
    if how == "fresh":
        return img.mount()
    if how == "settled":
        img.mount("commit=1")
        img.offline()
        mnt = img.mount("commit=1")
        time.sleep(2.5)             # past the 1 s journal commit
        return mnt
    return img.mount("ro,noload")


def scrub(mnt):
    r = run_fscrub("-v", "-n", mnt)
    assert "with ext4 backend" in r.stdout, r
    for f in r.findings:
        if f.check.startswith("ext4.") and f.severity != "Warning":
            print("fscrub: %s" % f)
    return r


def e2fsck(img):
    p = fsimage.run(["e2fsck", "-fn", img.path], check=False)
    print("e2fsck -fn exit %d:\n%s" % (p.returncode, p.stdout))
    return p


def mount_with_journal_magic(img, how, magic):
    """Mount as how, the journal superblock's magic made magic: offline for
    ro,noload; a read-write mount refuses it, so there in the image file
    under the mount, after the mount's first commits (which write the
    superblock from memory).  Returns (mount point, the superblock's block)."""
    jblk = int(debugfs(img, "bmap <8> 0").split()[-1])
    off = jblk * _ext4_sb(img)["block_size"]
    assert struct.unpack(">I", _pread(img.path, off, 4))[0] == JBD2_MAGIC
    if how == "ro_noload":
        _patch(img.path, off, magic)
        return mount_as(img, how), jblk
    mnt = mount_as(img, how)
    for _ in range(2):
        os.sync()
        time.sleep(0.5)
    _patch(img.path, off, magic)
    return mnt, jblk


def errors_of(r, check):
    return [f for f in r.errors if f.check == check]


@pytest.mark.parametrize("how", MOUNTS)
def test_clean(image_factory, how):
    img, _ = make_image(image_factory)
    r = scrub(mount_as(img, how))
    assert r.rc == 0 and not r.errors, r


@pytest.mark.parametrize("how", MOUNTS)
def test_journal_superblock_magic(image_factory, how):
    img, _ = make_image(image_factory)
    mnt, jblk = mount_with_journal_magic(img, how, b"\x00\x3b\x39\x98")
    r = scrub(mnt)
    assert r.rc == 4, r
    hits = errors_of(r, "ext4.journal")
    assert [(f.inode, f.message) for f in hits] == [
        (8, "journal superblock (block %d) has magic 0x003b3998" % jblk)], r
    img.offline()
    p = e2fsck(img)
    assert p.returncode >= 4 and "superblock" in (p.stdout + p.stderr).lower(), p


@pytest.mark.parametrize("how", MOUNTS)
def test_unused_inode_checksum(image_factory, how):
    """The deleted file's inode (free in the bitmap, in the used part of
    the table) with a byte of its deletion time flipped, its checksum left."""
    img, gone = make_image(image_factory)
    assert "Links: 0" in debugfs(img, "stat <%d>" % gone)
    break_unused_inode(img, gone)
    p = e2fsck(img)
    assert p.returncode == 4 and "inode %d" % gone in p.stdout.lower(), p.stdout
    r = scrub(mount_as(img, how))
    assert r.rc == 4, r
    hits = errors_of(r, "ext4.inode_csum")
    assert [f.inode for f in hits] == [gone], r
    assert "in an unused inode (marked free in the inode bitmap of group 0)" in hits[0].message


@pytest.mark.parametrize("how", MOUNTS)
def test_block_uninit_group_in_use(image_factory, how):
    """The highest group the 20 MiB file uses flagged BLOCK_UNINIT (its
    descriptor's checksum recomputed): its bitmap reads as empty but for
    the group's own metadata, the file's blocks are in use there."""
    img, _ = make_image(image_factory)
    ino = int(debugfs(img, "stat /big").split("Inode: ")[1].split()[0])
    blocks = [int(b) for b in debugfs(img, "blocks <%d>" % ino).split()]
    out = fsimage.run(["dumpe2fs", "-h", img.path]).stdout
    bpg = int(re.search(r"Blocks per group:\s*(\d+)", out).group(1))
    first = int(re.search(r"First block:\s*(\d+)", out).group(1))
    g = max((b - first) // bpg for b in blocks)
    assert g > 0, blocks
    flags = re.search(r"^Group %d: .*?\[([^\]]*)\]" % g,
                      fsimage.run(["dumpe2fs", img.path]).stdout, re.M).group(1)
    assert "BLOCK_UNINIT" not in flags, flags
    # bg_flags: INODE_UNINIT 1, BLOCK_UNINIT 2, ITABLE_ZEROED 4.
    cur = 4 | (1 if "INODE_UNINIT" in flags else 0)
    # One session: a descriptor whose checksum fails stops the next debugfs's open.
    fsimage.run(["debugfs", "-w", "-f", "-", img.path],
                input="set_bg %d flags %d\nset_bg %d checksum calc\n" % (g, cur | 2, g))
    p = e2fsck(img)
    assert p.returncode == 4 and "block bitmap differences" in p.stdout.lower(), p.stdout
    r = scrub(mount_as(img, how))
    assert r.rc == 4, r
    hits = errors_of(r, "ext4.block_in_use")
    assert any(f.inode == ino for f in hits), r


def break_unused_inode(img, gone):
    """Flip a byte of the deleted file's deletion time, its checksum left."""
    out = debugfs(img, "imap <%d>" % gone)
    m = re.search(r"located at block (\d+), offset (0x[0-9a-f]+)", out)
    off = int(m.group(1)) * _ext4_sb(img)["block_size"] + int(m.group(2), 16)
    raw = bytearray(_pread(img.path, off, 256))
    raw[0x14] ^= 0xFF                                               # i_dtime
    _patch(img.path, off, bytes(raw))


@pytest.mark.parametrize("how", MOUNTS)
def test_journal_unreadable(image_factory, how):
    """The journal superblock's magic broken and an unused inode's
    checksum: with no journal to tell recent blocks from old, the inode's
    finding is an info on a writable mount (the disk may lag), and an error
    on a ro,noload one (e2fsprogs' j_corrupt_sb_magic, ro,norecovery),
    where nothing is in flux."""
    img, gone = make_image(image_factory)
    break_unused_inode(img, gone)
    mnt, _ = mount_with_journal_magic(img, how, b"\0\0\0\0")
    r = scrub(mnt)
    assert r.rc == 4 and [f.inode for f in errors_of(r, "ext4.journal")] == [8], r
    csum = [(f.severity, f.inode) for f in r.findings if f.check == "ext4.inode_csum"]
    if how == "ro_noload":
        assert csum == [("Error", gone)], r
    else:
        assert csum == [("Info", gone)], r
        assert "the journal cannot be read to tell old from recent" in \
            r.of("Info", "ext4.inode_csum")[0].message, r


@pytest.mark.parametrize("how", MOUNTS)
def test_unused_inode_checksum_when_its_block_cannot_be_read_again(image_factory, how):
    """test_unused_inode_checksum's fault, every confirming read of its
    block failing (FSCRUB_DEBUG_CONFIRM_READ_FAILS; a block that has gone
    bad on the medium meanwhile does that).  A read that fails is no sign
    of a change: it says nothing, and the first reading stands, an error
    (it was "changed while being checked" before)."""
    img, gone = make_image(image_factory)
    break_unused_inode(img, gone)
    mnt = mount_as(img, how)
    r = run_fscrub("-v", "-n", mnt, env={"FSCRUB_DEBUG_CONFIRM_READ_FAILS": "1"})
    assert r.rc == 4, r
    assert [f.inode for f in errors_of(r, "ext4.inode_csum")] == [gone], r
    assert re.search(r"ext4\.inode_csum: a block of .* cannot be read again \(second read\)",
                     r.stdout), r
