"""btrfs without -x: every copy of every tree block read and checked by
fscrub itself (btrfs_meta.c), no file data read.

A leaf of a subvolume's tree is damaged offline in one copy (DUP on one
device, one RAID1 mirror on two) or in both, at a byte past its header (a
bad checksum); the image is mounted fresh, settled or read-only and
scanned without -x.  With -n or on a read-only mount the bad copy is an
error; otherwise the kernel's scrub of that block group rewrites it and
the finding is Repaired, and a second run is clean.
"""

import os
import re
import time

import pytest

from conftest import run_fscrub
import fsimage
from fsimage import run
from test_btrfs import (MOUNTS, MiB, assert_clean, btrfs_factory,  # noqa: F401
                        damaged_leaf, mount_as)


def tree_findings(r, severity, bytenr):
    return [f for f in r.of(severity, "btrfs.tree") if "logical %d " % bytenr in f.message]


def assert_copy_not_repaired(r, bytenr, copy, why):
    """Exit 4 and one error: copy `copy` of the leaf at bytenr has a bad
    checksum, a good copy exists, not repaired (why)."""
    assert r.rc == 4, r
    bad = tree_findings(r, "Error", bytenr)
    assert len(bad) == 1, r
    assert re.search(r"copy %d on devid \d+ /dev/loop\d+ at \d+: bad checksum" % copy,
                     bad[0].message), r
    assert "subvolume 256" in bad[0].message, r
    assert "a good copy exists, not repaired (%s)" % why in bad[0].message, r


def one_bad_copy(fs, how, n, skip=0):
    """Damage one copy of a leaf (the first, or the one after `skip`),
    mount as how, scan without -x (with -n if n): an error where nothing
    may be repaired, else Repaired and a clean second run.  (A run with -n,
    then one without, on the same mount would not do: the kernel's own read
    of the leaf in phase 3 repairs the copy on a writable mount, -n or
    not.)  Returns the first run."""
    bytenr = damaged_leaf(fs, 1, skip=skip)
    mount_as(fs, how)
    r = run_fscrub(*(["-n"] if n else []), "-v", fs.mnt)
    if n or how == "ro":
        assert_copy_not_repaired(r, bytenr, skip + 1, "-n" if n else "read-only mount")
        return r
    assert r.rc == 1, r
    assert r.errors == [], r
    fixed = tree_findings(r, "Repaired", bytenr)
    assert len(fixed) == 1 and "corrected from a good copy" in fixed[0].message, r
    assert "copy %d on devid" % (skip + 1) in fixed[0].message, r
    assert_clean(run_fscrub("-v", "-n", fs.mnt))
    return r


@pytest.mark.parametrize("ndev", [1, 2], ids=["dup", "raid1"])
@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("n", [True, False], ids=["n", "repair"])
def test_one_bad_copy_found_without_x(btrfs_factory, ndev, how, n):
    one_bad_copy(btrfs_factory(ndev=ndev), how, n)


@pytest.mark.parametrize("ndev", [1, 2], ids=["dup", "raid1"])
@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("n", [True, False], ids=["n", "repair"])
def test_second_copy_bad_found_without_x(btrfs_factory, ndev, how, n):
    """Only the second copy damaged: on DUP it is read beside phase 3 (the
    kernel reads a DUP block's first copy, which is good) and judged after
    the walk; on RAID1 in phase 2.  Found as the first copy is."""
    r = one_bad_copy(btrfs_factory(ndev=ndev), how, n, skip=1)
    if ndev == 1:
        assert "second copies of DUP tree blocks read beside phase 3" in r.stdout, r


@pytest.mark.parametrize("how", MOUNTS)
def test_bad_copy_found_when_the_extent_tree_cannot_be_searched(btrfs_factory, how):
    """A copy that reads bad is asked about in the extent tree before it is
    said (a block freed since it was listed is no damage).  A search that
    fails there (FSCRUB_DEBUG_EXTENT_SEARCH_FAILS; the extent tree's own
    damage on the way to the block) cannot tell, and the reads judge: one
    bad copy of a DUP leaf is still an error with -n.  Before, a failed
    search counted as "freed", and the damage was an info."""
    fs = btrfs_factory()
    bytenr = damaged_leaf(fs, 1)
    mount_as(fs, how)
    r = run_fscrub("-n", "-v", fs.mnt, env={"FSCRUB_DEBUG_EXTENT_SEARCH_FAILS": "1"})
    assert_copy_not_repaired(r, bytenr, 1, "-n")


@pytest.mark.parametrize("how", MOUNTS)
def test_no_good_copy_is_an_error(btrfs_factory, how):
    fs = btrfs_factory()
    bytenr = damaged_leaf(fs, 2)
    mount_as(fs, how)
    r = run_fscrub(fs.mnt)
    assert r.rc == 4, r
    bad = tree_findings(r, "Error", bytenr)
    assert len(bad) == 2, r
    assert all("no good copy" in f.message for f in bad), r


def sectors_read(dev):
    """Sectors read from a block device so far (its sysfs stat, field 3)."""
    with open("/sys/block/%s/stat" % os.path.basename(dev)) as f:
        return int(f.read().split()[2])


@pytest.mark.parametrize("ndev", [1, 2], ids=["dup", "raid1"])
def test_clean_reads_no_file_data(btrfs_factory, ndev):
    """64 MiB of file data: a scan without -x reads the tree blocks (every
    copy) and none of it -- the devices' own counters say so; with -x the
    kernel's scrub reads the data."""
    fs = btrfs_factory(ndev=ndev)
    mnt = fs.mount()
    for i in range(4):
        with open(os.path.join(mnt, "data%d" % i), "wb") as f:
            f.write(os.urandom(16 * MiB))
    for i in range(200):
        fsimage._write(os.path.join(mnt, "small%d" % i), b"s" * 100)
    time.sleep(1.2)
    fs.offline()
    fs.mount()
    before = [sectors_read(d) for d in fs.devs]
    r = run_fscrub("-v", fs.mnt)
    after = [sectors_read(d) for d in fs.devs]
    assert_clean(r)
    m = re.search(r"Phase 2: (\d+) tree blocks in \d+ metadata block groups: (\d+) copies "
                  r"read \((\d+) bytes, no file data\), 0 bad", r.stdout)
    assert m, r
    blocks, copies, nbytes = map(int, m.groups())
    assert blocks > 0 and copies == 2 * blocks and nbytes == copies * 16384, r
    read = sum(a - b for a, b in zip(after, before)) * 512
    assert read < 16 * MiB, (read, r)            # the data is 64 MiB (128 on RAID1)
    r = run_fscrub("-v", "-x", fs.mnt)
    assert_clean(r)
    scrubbed = re.findall(r"Phase 2: devid \d+ \S+: (\d+) data bytes", r.stdout)
    assert len(scrubbed) == ndev and all(int(d) >= 64 * MiB for d in scrubbed), r


SCRUBBED = re.compile(r"(\d+) device ranges given to the kernel's scrub \((\d+) tree bytes, "
                      r"(\d+) data bytes\)")


@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("n", [True, False], ids=["n", "repair"])
def test_xxhash_left_to_the_scrub_of_the_metadata(btrfs_factory, how, n):
    """A checksum fscrub does not compute (xxhash): the kernel's scrub of
    the metadata block groups' device ranges only finds the bad copy; it
    reads their tree blocks and no file data."""
    fs = btrfs_factory(mkfs_args=["--csum", "xxhash"])
    damaged_leaf(fs, 1)
    mount_as(fs, how)
    r = run_fscrub("-v", *(["-n"] if n else []), fs.mnt)
    m = SCRUBBED.search(r.stdout)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0 and m.group(3) == "0", r
    assert "0 copies read" in r.stdout, r
    if n or how == "ro":
        assert r.rc == 4, r
        bad = r.of("Error", "btrfs.scrub")
        assert bad and "not repaired (read-only scrub)" in bad[0].message, r
        return
    assert r.rc == 1 and not r.errors, r
    assert r.of("Repaired", "btrfs.scrub"), r
    assert_clean(run_fscrub("-v", "-n", fs.mnt))


def test_raid5_metadata_left_to_the_scrub(btrfs_factory):
    """RAID5 metadata (parity): the kernel's scrub of its block groups'
    device ranges on every device, no file data; clean: exit 0."""
    fs = btrfs_factory(ndev=3, mkfs_args=["-m", "raid5", "-d", "single"])
    mnt = fs.mount()
    for i in range(300):
        fsimage._write(os.path.join(mnt, "f%d" % i), b"x" * 3000)
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(8 * MiB))
    time.sleep(1.2)
    fs.offline()
    fs.mount()
    r = run_fscrub("-v", fs.mnt)
    assert_clean(r)
    m = SCRUBBED.search(r.stdout)
    assert m and int(m.group(1)) >= 3 and int(m.group(2)) > 0 and m.group(3) == "0", r


def raid10_copies(fs, logical):
    """Every (image, offset) holding logical in a RAID10 chunk of 4 stripes
    (2 copies): its 64 KiB unit goes to the pair of stripes unit % 2."""
    images = fs.devid_of_image()
    for start, length, stripes in fs.chunks():
        if start <= logical < start + length:
            assert len(stripes) == 4, stripes
            unit, within = divmod(logical - start, 64 << 10)
            pair = stripes[2 * (unit % 2):2 * (unit % 2) + 2]
            return [(images[d], p + (unit // 2) * (64 << 10) + within) for d, p in pair]
    raise AssertionError("logical %d is in no chunk" % logical)


@pytest.mark.parametrize("profile,ndev", [("raid10", 4), ("raid0", 2), ("raid1c3", 3)])
def test_striped_and_triple_profiles_clean(btrfs_factory, profile, ndev):
    """Metadata striped in 64 KiB units (RAID0, RAID10) or in three copies:
    every copy is found where the chunk map puts it (a wrong mapping reads
    another block: its bytenr is not the block's)."""
    fs = btrfs_factory(ndev=ndev, mkfs_args=["-m", profile, "-d", "single"])
    mnt = fs.mount()
    for i in range(3000):
        fsimage._write(os.path.join(mnt, "f%d" % i), b"x" * 100)
    time.sleep(1.2)
    fs.offline()
    fs.mount()
    r = run_fscrub("-v", "-n", fs.mnt)
    assert_clean(r)
    m = re.search(r"Phase 2: (\d+) tree blocks .*: (\d+) copies read", r.stdout)
    copies = {"raid10": 2, "raid0": 1, "raid1c3": 3}[profile]
    assert m and int(m.group(1)) > 20 and int(m.group(2)) == copies * int(m.group(1)), r


@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("n", [True, False], ids=["n", "repair"])
def test_raid10_one_bad_copy(btrfs_factory, how, n):
    """RAID10 metadata on 4 devices: the leaf's 64 KiB unit on one pair of
    stripes, one of the two copies damaged."""
    fs = btrfs_factory(ndev=4, mkfs_args=["-m", "raid10", "-d", "single"])
    fs.locate = lambda logical: raid10_copies(fs, logical)
    one_bad_copy(fs, how, n)


# Alone: another test's sync(2) commits every filesystem, this one's
# running transaction too, and then no block is "not on disk yet" (the
# sanitizer pass of a rehearsal, beside a neighbour that synced).
@pytest.mark.alone
def test_blocks_of_the_running_transaction_are_left_out(btrfs_factory):
    """Tree blocks the running transaction wrote are in the extent tree the
    kernel serves but not on the disk (a 300 s commit interval, files
    created and removed after the last commit): they are left out, not
    taken for bad copies; everything else reads good."""
    fs = btrfs_factory()
    mnt = fs.mount("commit=300")
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(2000):
        fsimage._write(os.path.join(mnt, "d", "f%d" % i), b"%d" % i)
    run(["sync"])
    for i in range(3000):
        fsimage._write(os.path.join(mnt, "d", "g%d" % i), b"%d" % i)
    for i in range(0, 2000, 3):
        os.unlink(os.path.join(mnt, "d", "f%d" % i))
    # Phase 2 is what this is about: phase 3's tree check would find the
    # running transaction's refs unsettled and, under -n, wait out the
    # 300 s commit interval for the kernel's own commit before reading
    # them again (a rehearsal's alone pass: 304 s).
    r = run_fscrub("-n", "-v", mnt, env={"FSCRUB_DEBUG_NO_BTRFS_TREES": "1"})
    assert r.rc == 0 and not r.errors and not r.warnings, r
    m = re.search(r"Phase 2: \d+ tree blocks .* 0 bad; (\d+) not on disk yet", r.stdout)
    assert m and int(m.group(1)) > 0, r
