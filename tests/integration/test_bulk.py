"""Phase 3's bulk inode records (backend.h, bulk_inodes; walk.c): on XFS
(and ext4, btrfs: their own sections below) the walk takes a single-link non-directory's inode from a BULKSTAT record
of its getdents buffer instead of a statx, opens only files with blocks
to map, and lists attributes only of inodes that may have some.  These
tests show that the bulk path is taken (-v counts the entries), that it
finds what the per-file path finds, and that an inode changed between the
bulk read and the visit of its entry is looked at again through the VFS,
never reported from its record."""

import os
import re
import stat
import struct
import subprocess
import time

import pytest

from conftest import FSCRUB, need_fs, need_tools, run_fscrub
import faults
import fsimage

BULK_RE = re.compile(r"Phase 3: (\d+) of (\d+) entries' inodes from bulk records")


def bulk_counts(r):
    m = BULK_RE.search(r.stdout)
    assert m, r
    return int(m.group(1)), int(m.group(2))


MAPS_RE = re.compile(r"Phase 3: (\d+) files' extent maps from bulk records, not opened")


def bulk_maps(r):
    """Files whose extent map came from the backend's bulk_extents hook."""
    m = MAPS_RE.search(r.stdout)
    assert m, r
    return int(m.group(1))


def single_link_non_dirs(mnt):
    """The entries the bulk path may take: single-link non-directories."""
    n = 0
    for top, dirs, files in os.walk(mnt):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            st = os.lstat(os.path.join(top, name))
            if not stat.S_ISDIR(st.st_mode) and st.st_nlink == 1:
                n += 1
    return n


def findings(r):
    return sorted((f.severity, f.check, f.path, f.inode) for f in r.findings)


def xfs_image_rmapbt(image_factory, rmapbt):
    """A 300 MiB XFS, with or without the rmapbt (fsimage's mkfs gives
    -m rmapbt=1, which mkfs.xfs cannot be told twice)."""
    need_fs("xfs")
    img = image_factory("xfs", size_mb=300)
    with open(img.path, "wb") as fh:
        fh.truncate(img.size_mb << 20)
    fsimage.run(["mkfs.xfs", "-f", "-q", "-m", "crc=1,reflink=1,rmapbt=%d" % rmapbt, img.path],
                env=dict(os.environ, **fsimage._XFS_SMALL_ENV))
    return img


@pytest.fixture
def xfs_tree(image_factory):
    need_fs("xfs")
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.remount()
    return img, mnt


def test_bulk_path_taken(xfs_tree):
    """Every single-link non-directory comes from a bulk record; with
    FSCRUB_DEBUG_NO_BULK=1 none does, and both runs find the same."""
    img, mnt = xfs_tree
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [], r
    bulk, entries = bulk_counts(r)
    assert 0 < bulk == single_link_non_dirs(mnt), (bulk, entries, r)
    m = re.search(r"Phase 3: (\d+) bulk records for the walk from (\d+) BULKSTAT requests",
                  r.stdout)
    # A directory's files share inode chunks: far fewer requests than inodes.
    assert m and int(m.group(1)) >= bulk and 0 < int(m.group(2)) < bulk / 4, r
    # With the rmapbt (fsimage's default) files with data are mapped from
    # GETFSMAP's owner records, not opened.
    assert bulk_maps(r) > 0, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_counts(old) == (0, entries) and bulk_maps(old) == 0, old
    assert findings(old) == findings(r), (old, r)


def test_xfs_dense_directory_in_few_requests(image_factory):
    """The records of a directory whose files have nearly consecutive
    inode numbers (600: ten chunks, in a run or two where the allocator
    placed them) come from a request per run, each reading all its chunks
    ahead at once, not from a request per chunk (ten); and no more inodes
    are returned than those asked for and the few directories'."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(600):
        open(os.path.join(mnt, "d", "f%03d" % i), "w").close()
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    m = re.search(r"Phase 3: (\d+) bulk records for the walk from (\d+) BULKSTAT requests",
                  r.stdout)
    assert m and int(m.group(1)) == 600 and int(m.group(2)) <= 3, r
    t = re.search(r"Phase 3: \d+ BULKSTAT requests since the scan began, (\d+) inodes "
                  r"returned", r.stdout)
    assert t and 600 <= int(t.group(1)) <= 600 + 8, r


def test_changed_after_bulk_read(image_factory):
    """Inodes changed between the bulk read of their directory and the
    visit of their entries (FSCRUB_DEBUG_AFTER_BULK runs the changes right
    after the first bulk records, those of the root directory's only
    getdents buffer): a symlink replaced by a longer one, a removed file,
    an empty file that gets data, a file that gets an attribute, a
    truncated file, a new hard link.  The records are stale; nothing may be
    reported from them: the symlink's size is looked at again (a change,
    an info), and nothing else is an error or a warning."""
    need_fs("xfs")
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    r = run_with_stale_records(img, img.mount(), "")
    assert bulk_counts(r)[0] == 6, r


def run_with_stale_records(img, mnt, then):
    """The changes of test_changed_after_bulk_read, made after the root
    directory's records were read (then: a command after them); fscrub -v
    -j 1's result, checked for no error or warning and the one symlink
    info."""
    os.symlink("a", os.path.join(mnt, "sym"))
    for name in ("gone", "empty", "xa", "hl"):
        open(os.path.join(mnt, name), "w").close()
    with open(os.path.join(mnt, "data"), "wb") as f:
        f.write(b"d" * 65536)
    img.remount()
    time.sleep(1.1)
    cmd = ("cd %s && ln -s bbbbbbbbbbbbbbbbbbbb sym.new && mv -T sym.new sym && rm gone && "
           "echo more >> empty && sync empty && setfattr -n user.x -v 1 xa && "
           "truncate -s 0 data && ln hl hl2%s" % (mnt, then))
    r = run_fscrub("-v", "-j", "1", mnt, env={"FSCRUB_DEBUG_AFTER_BULK": cmd})
    assert os.readlink(os.path.join(mnt, "sym")) == "b" * 20, "the changes did not run"
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    changed = r.of("Info", "symlink.size")
    assert len(changed) == 1 and "changed while being checked" in changed[0].message, r
    return r


def syscalls(out):
    """{syscall: calls} from strace -c's table."""
    calls = {}
    for line in open(out):
        f = line.split()
        if len(f) >= 5 and re.match(r"^[\d.]+$", f[0]) and f[-1] != "total":
            calls[f[-1]] = int(f[3])
    return calls


NR_DATA, NR_EMPTY = 600, 200


@pytest.mark.parametrize("fstype", ["xfs", "ext4", "btrfs"])
def test_syscalls_per_file(image_factory, workdir, fstype):
    """What a file costs phase 3, counted with strace -c on 600 small
    files with data and 200 empty ones.  Before the bulk records a file
    cost a statx by name, an open, a statx of the open file, a FIEMAP, an
    xattr listing and a close, and on ext4 the backend's own FIEMAP and
    statx on top: now neither stats a file by name nor opens an empty
    one, nor one with data: XFS (with the rmapbt) maps it from GETFSMAP's
    owner records, ext4 from the extent root in its inode, read from the
    inode table (ext4_bulk.c, one pread per 64 inodes), btrfs from its
    file extent items (btrfs_bulk.c, one tree search per 64 inodes)."""
    need_fs(fstype)
    need_tools("strace")
    img = image_factory(fstype, size_mb=300)
    img.mkfs()
    mnt = img.mount()
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for i in range(NR_DATA):
        with open(os.path.join(d, "f%04d" % i), "wb") as f:
            f.write(b"x" * (100 + i))
    for i in range(NR_EMPTY):
        open(os.path.join(d, "e%04d" % i), "w").close()
    img.remount()
    time.sleep(1.1)
    out = os.path.join(str(workdir), "strace.out")
    # LeakSanitizer cannot run under ptrace: off for a sanitizer build here.
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    p = subprocess.run(["strace", "-f", "-qq", "-c", "-o", out, FSCRUB, "-n", mnt],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    c = syscalls(out)
    files = NR_DATA + NR_EMPTY
    print(c)
    # No statx, open or FIEMAP per file: files with data are mapped from
    # GETFSMAP (XFS, rmapbt), their inode (ext4) or their file extent
    # items (btrfs); a few dozen for the directories and phases 1-2.  Was
    # two statx, an open and a FIEMAP per file (ext4: three statx and two
    # FIEMAP).
    assert c["statx"] < 100, c
    assert c["openat"] < 100, c
    assert c["ioctl"] < files / 8 + 100, c
    if fstype == "ext4":
        # One pread of the inode table per 64 inodes.
        assert c.get("pread64", 0) < files / 16 + 100, c
    if fstype == "btrfs":
        # Nor listed: no attribute items, no listxattr.
        assert c.get("listxattr", 0) + c.get("flistxattr", 0) + c.get("llistxattr", 0) < 100, c


@pytest.mark.parametrize("rmapbt", [0, 1])
def test_opened_files_still_compared_with_bulkstat(image_factory, rmapbt):
    """A file taken from its BULKSTAT record and opened (it has blocks to
    map: without the rmapbt) is still compared with BULKSTAT as the open
    file's statx shows it (xfs.bulkstat, xfs_walkstat.c); an empty file,
    never opened, has nothing but its record, and neither has a file whose
    map came from GETFSMAP (with the rmapbt): neither is opened."""
    need_fs("xfs")
    img = xfs_image_rmapbt(image_factory, rmapbt)
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(50):
        with open(os.path.join(mnt, "d", "f%02d" % i), "wb") as f:
            f.write(b"x" * 100)
    for i in range(10):
        open(os.path.join(mnt, "d", "e%02d" % i), "w").close()
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [], r
    assert bulk_counts(r) == (60, 61), r
    assert bulk_maps(r) == 50 * rmapbt, r
    c = re.search(r"Phase 3: (\d+) inodes compared with BULKSTAT in \d+ requests \((\d+) "
                  r"opened files with the record the walk took them from\)", r.stdout)
    # the files with data (opened without the rmapbt), and 2 directories;
    # an opened file against the record it was taken from, moments before,
    # with no request of its own (a disagreement would ask again)
    assert c and int(c.group(1)) == 50 * (1 - rmapbt) + 2, r
    assert int(c.group(2)) == 50 * (1 - rmapbt), r


# ------------------------------------- extent maps from GETFSMAP (XFS rmapbt)

MAP_FALLBACK_RE = re.compile(
    r"Phase 3: (\d+) files' extent maps from (\d+) GETFSMAP owner records \(read ([a-z0-9 ]+)\); "
    r"mapped with FIEMAP instead: (\d+) not covered by their records alone, (\d+) without an "
    r"on-disk data fork read, (\d+) whose on-disk data fork differs, (\d+) changed since the "
    r"records were read")


def test_maps_from_getfsmap_fault_still_found(image_factory):
    """With the rmapbt a file with data is mapped from GETFSMAP's owner
    records, not opened -- but only where its records agree with its data
    fork as phase 2 read it from the disk.  A data fork pointed at another
    file's block (xfs_db, as test_xfs's cross-link) disagrees with its
    reverse mapping: that file is mapped with FIEMAP, and the cross-link
    and both reverse-mapping errors are found with its path and exit 4,
    as FSCRUB_DEBUG_NO_BULK=1 finds them."""
    from test_xfs import xfs_crosslink
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for i in range(20):
        with open(os.path.join(mnt, "f%02d" % i), "wb") as f:
            f.write(b"x" * 8192)
    img.umount()
    f = xfs_crosslink(img)
    time.sleep(1.1)
    mnt = img.mount()
    r = run_fscrub("-v", mnt)
    assert r.rc == 4, r
    m = MAP_FALLBACK_RE.search(r.stdout)
    # f00-f19 and b from their records; a's differs (its rmap is the old block).
    assert m and int(m.group(1)) == 21 and int(m.group(6)) == 1, r
    assert bulk_maps(r) == 21, r
    a = os.path.join(mnt, f["a"])
    assert [(e.check, e.path, e.inode) for e in r.errors if e.check.startswith("xfs.rmap")] \
        == [("xfs.rmap_missing", a, f["ino_a"]), ("xfs.rmap_extra", a, f["ino_a"])], r
    assert any(e.check == "extent.crosslinked" and e.path == a for e in r.errors), r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_maps(old) == 0 and old.rc == 4, old
    assert findings(old) == findings(r), (old, r)


def xfs_with_random_files(image_factory, names, dirs=()):
    """An XFS with directories dirs and 64 KiB files of random data names,
    remounted (cold) and older than the scan; its mount point."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for d in dirs:
        os.mkdir(os.path.join(mnt, d))
    for name in names:
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(os.urandom(65536))
    img.remount()
    time.sleep(1.1)     # ctime more than 1 s before the scan: not "changed"
    return img.mnt


def test_extents_changed_after_getfsmap(image_factory):
    """Files rewritten (new blocks, same inode) after the GETFSMAP pass
    and their BULKSTAT records, before the walk visits them
    (FSCRUB_DEBUG_AFTER_BULK), and new files in a directory read later
    that may take their old blocks: their maps are stale, yet nothing is
    an error or a warning -- every suspect (a cross-link, a reverse
    mapping the map lacks) is looked at again through the VFS."""
    mnt = xfs_with_random_files(image_factory, ["r%d" % i for i in range(10)], dirs=["sub"])
    cmd = ("cd %s && for i in 0 1 2 3 4 5 6 7 8 9; do "
           "head -c 65536 /dev/urandom > n$i && mv n$i sub/n$i; "
           "head -c 65536 /dev/urandom > r$i; sync; "
           "head -c 65536 /dev/urandom > sub/m$i; done; sync" % mnt)
    before = {i: fsimage.inode_of(os.path.join(mnt, "r%d" % i)) for i in range(10)}
    r = run_fscrub("-v", "-j", "1", mnt, env={"FSCRUB_DEBUG_AFTER_BULK": cmd})
    assert os.path.exists(os.path.join(mnt, "sub", "m9")), "the changes did not run"
    assert before == {i: fsimage.inode_of(os.path.join(mnt, "r%d" % i)) for i in range(10)}
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    # The ten stale maps were used (their records predate the rewrite),
    # and the reverse-mapping check's suspects in them were looked at
    # again through the VFS: changed while being checked, infos only.  (Which
    # are suspects depends on where the rewrites land: beside other tests
    # one of the ten was not.)
    assert bulk_maps(r) >= 10, r
    rechecked = {e.path for e in r.of("Info", "xfs.rmap_missing")}
    assert rechecked and rechecked <= {os.path.join(mnt, "r%d" % i) for i in range(10)}, r


def test_files_changed_after_early_getfsmap_are_mapped_with_fiemap(image_factory):
    """The GETFSMAP pass runs alongside phase 2, before phase 3 takes the
    time the scan's changes are counted from.  Files rewritten after the
    pass and more than 1 s before phase 3 (FSCRUB_DEBUG_AFTER_FSMAP, which
    phase 2's end waits for) look older than the scan to phase 3, and
    their on-disk data forks, read by phase 2 before the rewrite, may still
    match the pass's records: their ctime, after the pass began, is what
    sends them to FIEMAP.  Nothing else is mapped with FIEMAP, and the
    scan is clean."""
    mnt = xfs_with_random_files(image_factory, ["f%02d" % i for i in range(30)])
    cmd = ("cd %s && for i in 00 01 02 03 04; do head -c 65536 /dev/urandom > f$i; done; "
           "sync; sleep 1.2" % mnt)
    r = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_AFTER_FSMAP": cmd})
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    m = MAP_FALLBACK_RE.search(r.stdout)
    assert m and m.group(3) == "alongside phase 2", r
    # the five rewritten files, and only they: changed since the records were read
    assert int(m.group(7)) == 5 and int(m.group(1)) == 25, r
    assert sum(int(m.group(k)) for k in (4, 5, 6)) == 0, r
    assert bulk_maps(r) == 25, r
    # Made when the walk asks, after phase 3 began: nothing counts as
    # changed since.  The five rewritten inodes are in the log, and reach
    # their place on the disk (what phase 2 reads) when the log worker
    # pushes them: within fs.xfs.xfssyncd_centisecs, 30 s by default, 1 s
    # where an earlier test or session left it at 100.  Until then their
    # on-disk data forks are the old ones and differ from the records.
    late = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_LATE_FSMAP": "1"})
    m = MAP_FALLBACK_RE.search(late.stdout)
    assert late.rc == 0 and m and m.group(3) == "at the start of the walk", late
    assert int(m.group(7)) == 0 and int(m.group(1)) + int(m.group(6)) == 30, late
    assert int(m.group(1)) >= 25, late
    # A freeze writes every logged inode back: now the disk agrees, all 30.
    subprocess.run(["xfs_freeze", "-f", mnt], check=True)
    subprocess.run(["xfs_freeze", "-u", mnt], check=True)
    late = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_LATE_FSMAP": "1"})
    m = MAP_FALLBACK_RE.search(late.stdout)
    assert late.rc == 0 and m and m.group(3) == "at the start of the walk", late
    assert int(m.group(7)) == 0 and int(m.group(1)) == 30, late


# ------------------------- attribute forks without a name (XFS, on the disk)

ATTRS_RE = re.compile(r"Phase 3: .* (\d+) attributes \((\d+) values read\)")
UNLISTED_RE = re.compile(r"Phase 3: (\d+) inodes with an attribute fork not listed")


def test_nameless_attr_forks_not_listed(image_factory):
    """Linux 6.18's XFS gives every new file an attribute fork (BULKSTAT's
    HASATTR), empty: phase 2's on-disk read of the inode shows it without a
    name, so the walk does not list it -- while the inode's ctime is the
    one on the disk.  An attribute set after that read (FSCRUB_DEBUG_AFTER_BULK:
    after phase 2, before the BULKSTAT of sub/'s files) changes the ctime:
    those files are listed and their attributes read, as are the files
    whose attributes were on the disk already; the same findings and
    attribute counts as FSCRUB_DEBUG_NO_BULK=1."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "sub"))
    for i in range(20):
        for d in ("", "sub"):
            with open(os.path.join(mnt, d, "f%02d" % i), "wb") as f:
                f.write(b"x" * (i * 100))
    for i in range(3):
        os.setxattr(os.path.join(mnt, "f%02d" % i), "user.before", b"1")
    img.remount()
    time.sleep(1.1)
    cmd = "cd %s/sub && for i in 00 01 02 03 04; do setfattr -n user.after -v 2 f$i; done" % mnt
    r = run_fscrub("-v", "-j", "1", mnt, env={"FSCRUB_DEBUG_AFTER_BULK": cmd})
    assert os.getxattr(os.path.join(mnt, "sub", "f04"), "user.after") == b"2"
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    m = ATTRS_RE.search(r.stdout)
    assert m and (int(m.group(1)), int(m.group(2))) == (3 + 5, 3 + 5), r
    u = UNLISTED_RE.search(r.stdout)
    # 40 files less the 3 with attributes on the disk and the 5 changed
    # (the 2 directories are stat'ed, never bulk records)
    assert u and int(u.group(1)) == 40 - 3 - 5, r
    old = run_fscrub("-v", "-j", "1", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    m = ATTRS_RE.search(old.stdout)
    assert m and int(m.group(1)) == 8 and findings(old) == findings(r), old


# ------------------------------------------- ext4: records from the inode tables

EXT4_BULK_RE = re.compile(r"Phase 3: (\d+) bulk records for the walk from (\d+) inode-table "
                          r"reads; (\d+) files' extent maps from their inodes")


def ext4_bulk(r):
    """(records, inode-table reads, maps) ext4_bulk.c served the walk."""
    m = EXT4_BULK_RE.search(r.stdout)
    assert m, r
    return tuple(int(g) for g in m.groups())


def ext4_mounted(image_factory):
    need_fs("ext4")
    img = image_factory("ext4", size_mb=300)
    img.mkfs()
    return img, img.mount()


def test_ext4_bulk_records(image_factory):
    """On ext4 the walk's single-link non-directories come from the inode
    tables (ext4_bulk.c), read through the device's page cache window by
    window: files with data (their one extent in the inode: not opened),
    empty files, fast and slow symlinks, a FIFO, a file of 5 extents (a
    tree below the inode: its record, but FIEMAP for its map), files with
    an attribute in the inode (listed).  Stat'ed as before: hard links,
    directories.  Both runs find the same; FSCRUB_DEBUG_NO_BULK=1 takes
    no record."""
    img, mnt = ext4_mounted(image_factory)
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for i in range(40):
        with open(os.path.join(d, "f%02d" % i), "wb") as f:
            f.write(b"x" * (1000 + 200 * i))
    for i in range(10):
        open(os.path.join(d, "e%02d" % i), "w").close()
    for i in range(5):
        os.symlink("t%d" % i, os.path.join(d, "s%d" % i))
    for i in range(2):
        os.symlink("L" * 100 + str(i), os.path.join(d, "slow%d" % i))
    os.mkfifo(os.path.join(d, "fifo"))
    with open(os.path.join(d, "holes"), "wb") as f:
        for i in range(5):
            f.seek(i * 2 * 4096)
            f.write(b"h" * 4096)
    for i in range(3):
        p = os.path.join(d, "xa%d" % i)
        open(p, "w").close()
        os.setxattr(p, "user.x", b"1")
    for i in range(2):
        open(os.path.join(d, "hl%d" % i), "w").close()
        os.link(os.path.join(d, "hl%d" % i), os.path.join(d, "hl%d.b" % i))
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert bulk_counts(r)[0] == 40 + 10 + 5 + 2 + 1 + 1 + 3, r
    records, reads, maps = ext4_bulk(r)
    # The hard links' records (2 links: stat'ed by the walk) are read too.
    assert records == 62 + 2 and 0 < reads <= 4 and maps == 40 == bulk_maps(r), r
    # The three attributes were listed and read from their records' files.
    assert re.search(r"Phase 3: .* 3 attributes \(3 values read\)", r.stdout), r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_counts(old)[0] == 0 and bulk_maps(old) == 0 and ext4_bulk(old)[0] == 0, old
    assert findings(old) == findings(r), (old, r)


def test_ext4_bulk_same_findings_fixture_tree(image_factory):
    """The fixture tree (fragmented and sparse files, many hard links,
    special files, attributes): the same findings with and without the
    bulk records, most of its files from records."""
    img, mnt = ext4_mounted(image_factory)
    fsimage.make_tree(mnt, deep=False)
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    # (its names with control characters are warnings)
    assert r.rc == 0 and r.errors == [], r
    assert bulk_counts(r)[0] > 100 and bulk_maps(r) > 50, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_counts(old)[0] == 0, old
    assert findings(old) == findings(r), (old, r)


def test_ext4_changed_after_bulk_read(image_factory):
    """As test_changed_after_bulk_read, on ext4: the records of the root
    directory's getdents buffer are read, then (FSCRUB_DEBUG_AFTER_BULK)
    a symlink is replaced by a longer one, a file removed, an empty file
    given data, a file an attribute, a file truncated, a hard link made;
    the entries are visited with their stale records.  Nothing may be
    reported from them: the symlink's size is looked at again (a change,
    an info); the inode-table scan after the walk sees the removed inode
    free and the others changed: nothing is an error or a warning."""
    img, mnt = ext4_mounted(image_factory)
    r = run_with_stale_records(img, mnt, " && sync")
    assert bulk_counts(r)[0] == 6 and bulk_maps(r) == 1, r


def test_ext4_bulk_faults_still_found(image_factory):
    """Inodes the kernel refuses to look up (ext4_iget()) get no record,
    so the walk stats them and reports them as before, with their paths
    and exit 4: a fast symlink whose size is not its target's length, a
    file whose extent (in the inode) points into an inode table, one whose
    extent points into the journal; and a single-name file whose link
    count says 3 (its record says 3: stat'ed, nlink.count).  The findings
    are those of FSCRUB_DEBUG_NO_BULK=1."""
    from test_ext4 import victim
    from test_ext4_journal import itable_of_group, journal_runs
    need_fs("ext4")
    img = image_factory("ext4", size_mb=300)
    img.mkfs()
    img.mount()
    img.offline()
    sym = faults.ext4_symlink_size(img)
    nlink = faults.ext4_wrong_nlink(img)
    over = {}
    for what, target in (("itable", itable_of_group(img, 1) + 3),
                         ("journal", journal_runs(img)[0] + 200)):
        rel, ino, _ = victim(img, "over_" + what, data=b"v" * 4096)
        faults.debugfs(img, "sif <%d> block[5] %d" % (ino, target), write=True)
        over[what] = (rel, ino)
    mnt = img.mount()
    time.sleep(1.1)
    r = run_fscrub("-v", "-n", mnt)
    assert r.rc == 4, r
    got = {(e.check, e.path, e.inode) for e in r.errors}
    assert any(e.path == os.path.join(mnt, sym["path"]) and e.inode == sym["inode"]
               for e in r.errors), r
    assert ("nlink.count", os.path.join(mnt, nlink["path"]), nlink["inode"]) in got, r
    assert {c for c, p, i in got if i == over["itable"][1]} >= {"ext4.crosslink"}, r
    assert {c for c, p, i in got if i == over["journal"][1]} >= {"ext4.journal"}, r
    assert bulk_counts(r)[0] > 0, r
    old = run_fscrub("-v", "-n", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert old.rc == 4 and bulk_counts(old)[0] == 0, old
    assert findings(old) == findings(r), (old, r)


def test_ext4_bulk_bad_ibody_xattr(image_factory):
    """An attribute in the inode's body whose value lies outside the inode
    (e_value_offs past its end; checksum fixed): ext4_iget() refuses the
    inode, so ext4_bulk.c gives it no record and the walk stats it and
    reports it with its path and exit 4, as FSCRUB_DEBUG_NO_BULK=1 does;
    its well-formed neighbour comes from its record and is listed."""
    from test_ext4 import inode_offset, inode_with_csum
    need_fs("ext4")
    img = image_factory("ext4", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for name in ("bad", "good"):
        p = os.path.join(mnt, name)
        open(p, "w").close()
        os.setxattr(p, "user.x", b"value")
    ino = fsimage.inode_of(os.path.join(mnt, "bad"))
    img.offline()
    off = inode_offset(img, ino)
    isize = 256
    raw = bytearray(faults._pread(img.path, off, isize))
    extra = struct.unpack_from("<H", raw, 0x80)[0]
    entry = 128 + extra + 4
    assert struct.unpack_from("<I", raw, 128 + extra)[0] == 0xEA020000, raw
    struct.pack_into("<H", raw, entry + 2, 0x7FF0)         # e_value_offs
    seed = faults._ext4_inode_csum_seed(img, faults._ext4_sb(img), ino)
    faults._patch(img.path, off, inode_with_csum(raw, seed))
    mnt = img.mount()
    time.sleep(1.1)
    r = run_fscrub("-v", "-n", mnt)
    assert r.rc == 4, r
    assert [(e.path, e.inode) for e in r.errors] == [(os.path.join(mnt, "bad"), ino)], r
    assert bulk_counts(r)[0] == 1, r
    old = run_fscrub("-v", "-n", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert old.rc == 4 and bulk_counts(old)[0] == 0, old
    assert findings(old) == findings(r), (old, r)


# ------------------------------ btrfs: records from the subvolumes' trees

BTRFS_BULK_RE = re.compile(r"Phase 3: btrfs: (\d+) bulk records for the walk from (\d+) tree "
                           r"searches; (\d+) files' extent maps from their file extent items")
EXTENTS_RE = re.compile(r"Phase 3: \d+ directories, \d+ files, \d+ symlinks, \d+ special "
                        r"files, (\d+) extents, (\d+) attributes \((\d+) values read\)")


def btrfs_bulk(r):
    """(records, tree searches, maps) btrfs_bulk.c served the walk."""
    m = BTRFS_BULK_RE.search(r.stdout)
    assert m, r
    return tuple(int(g) for g in m.groups())


def walk_totals(r):
    """(extents, attributes, values read) of phase 3's summary line."""
    m = EXTENTS_RE.search(r.stdout)
    assert m, r
    return tuple(int(g) for g in m.groups())


def btrfs_mounted(image_factory):
    need_fs("btrfs")
    need_tools("btrfs")
    img = image_factory("btrfs", size_mb=300)
    img.mkfs()
    return img, img.mount()


def write_pieces(path, pieces, size=4096):
    """A file of `pieces` extents: every other block, each synced."""
    with open(path, "wb") as f:
        for i in range(pieces):
            f.seek(2 * i * size)
            f.write(os.urandom(size))
            f.flush()
            os.fsync(f.fileno())


def fill_subvolume(sv, order):
    """The same names in the same order of creation, so the same inode
    numbers, in each subvolume, but of other kinds and maps: order 0 makes
    f00-f19 files of 1 extent, l00-l04 symlinks, then 3-extent files
    g00-g09; order 1 makes those numbers 3-extent files, FIFOs and
    1-extent files.  A record read from the wrong subvolume's tree would
    disagree with its entry's type, or give another extent count."""
    for i in range(20):
        p = os.path.join(sv, "f%02d" % i)
        if order == 0:
            with open(p, "wb") as f:
                f.write(os.urandom(8192))
        else:
            write_pieces(p, 3)
    for i in range(5):
        p = os.path.join(sv, "l%02d" % i)
        if order == 0:
            os.symlink("target%d" % i, p)
        else:
            os.mkfifo(p)
    for i in range(10):
        p = os.path.join(sv, "g%02d" % i)
        if order == 0:
            write_pieces(p, 3)
        else:
            with open(p, "wb") as f:
                f.write(b"small %d" % i)       # inline
    os.setxattr(os.path.join(sv, "f%02d" % (3 + order)), "user.x", b"1")


def two_subvolumes(mnt):
    """sva and svb, filled by fill_subvolume() in orders 0 and 1; their
    files have the same inode numbers.  Returns their paths."""
    out = []
    for order, name in enumerate(("sva", "svb")):
        sv = os.path.join(mnt, name)
        fsimage.run(["btrfs", "subvolume", "create", sv])
        fill_subvolume(sv, order)
        out.append(sv)
    return out


def test_btrfs_bulk_records_two_subvolumes(image_factory):
    """On btrfs the walk's single-link non-directories come from the
    INODE_ITEMs, XATTR_ITEMs and EXTENT_DATA items of their directory's
    subvolume (btrfs_bulk.c), in two subvolumes whose files have the same
    inode numbers but other types and maps, and the fixture tree beside
    them (fragmented, sparse, preallocated, inline files, hard links,
    special files, attributes): every such entry from a record, files
    with data mapped from their items (not opened), and the same findings,
    extent count and attributes read as FSCRUB_DEBUG_NO_BULK=1, which
    takes no record."""
    img, mnt = btrfs_mounted(image_factory)
    sva, svb = two_subvolumes(mnt)
    assert fsimage.inode_of(os.path.join(sva, "l00")) == fsimage.inode_of(os.path.join(svb, "l00"))
    fsimage.make_tree(os.path.join(mnt, "tree"), deep=False)
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    # (the fixture tree's names with control characters are warnings)
    assert r.rc == 0 and r.errors == [], r
    bulk, entries = bulk_counts(r)
    assert 0 < bulk == single_link_non_dirs(mnt), (bulk, entries, r)
    records, searches, maps = btrfs_bulk(r)
    # Hard links' records are read too (then stat'ed by the walk).
    assert records >= bulk and 0 < searches < bulk / 4, r
    assert maps == bulk_maps(r) > 50, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_counts(old) == (0, entries) and bulk_maps(old) == 0, old
    assert not BTRFS_BULK_RE.search(old.stdout), old
    assert findings(old) == findings(r), (old, r)
    assert walk_totals(old) == walk_totals(r), (old, r)


def test_btrfs_changed_after_bulk_read(image_factory):
    """As test_changed_after_bulk_read, on btrfs: the records of the root
    directory's getdents buffer are read from the tree, then
    (FSCRUB_DEBUG_AFTER_BULK) a symlink is replaced by a longer one, a
    file removed, an empty file given data, a file an attribute, a file
    truncated, a hard link made; the entries are visited with their stale
    records.  Nothing may be reported from them: the symlink's size is
    looked at again (a change, an info), and nothing, not the tree check
    after the walk either, is an error or a warning."""
    img, mnt = btrfs_mounted(image_factory)
    r = run_with_stale_records(img, mnt, " && sync")
    assert bulk_counts(r)[0] == 6 and bulk_maps(r) == 1, r


def test_btrfs_records_only_of_unchanged_inodes(image_factory):
    """A record is given only for an inode whose ctime and mtime are older
    than the scan and whose item is not newer than the commit the walk's
    first request makes: files written just before the scan (their
    delayed inode items not yet in the tree) are stat'ed, files written
    before that come from records."""
    img, mnt = btrfs_mounted(image_factory)
    for i in range(10):
        with open(os.path.join(mnt, "old%d" % i), "wb") as f:
            f.write(b"o" * 100)
    img.remount()
    time.sleep(1.1)
    for i in range(7):
        with open(os.path.join(mnt, "new%d" % i), "wb") as f:
            f.write(b"n" * 100)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert bulk_counts(r) == (10, 17), r


@pytest.mark.parametrize("what", ["nbytes", "nbytes_snapshot", "missing_file_extent", "nlink",
                                  "inode_ref_gone", "crosslink"])
def test_btrfs_tree_faults_same_with_records(image_factory, what):
    """test_btrfs_trees's faults in inode and file extent items (nbytes
    that disagrees with the extents, in the top subvolume and a snapshot;
    a deleted file extent item; a wrong link count; a name without its
    INODE_REF; two files' extents on one disk extent), on the mounted
    image: the walk takes what it can from the records (a map whose bytes
    are not nbytes is not given: FIEMAP) and the run finds what
    FSCRUB_DEBUG_NO_BULK=1 finds, with exit 4."""
    import test_btrfs_trees as tt
    need_tools("btrfs")
    img = tt.populated_image(image_factory)
    tt.inject(img, what)
    mnt = img.mount(tt.FAULT_OPTIONS)
    time.sleep(1.1)
    r = run_fscrub("-v", "-n", mnt)
    old = run_fscrub("-v", "-n", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert r.rc == old.rc == 4, (r, old)
    assert bulk_counts(r)[0] > 0 and bulk_counts(old)[0] == 0, (r, old)
    assert findings(old) == findings(r), (old, r)
    assert walk_totals(old) == walk_totals(r), (old, r)


ORPHANS_RE = re.compile(r"Phase 3: orphans: (\d+) allocated inodes not reached by the walk "
                        r"\(INUMBERS\), BULKSTAT'ed in (\d+) requests")


def test_xfs_orphans_from_inumbers(image_factory):
    """After the walk, only the allocated inodes INUMBERS gives that the
    walk did not reach are BULKSTAT'ed, not every inode: on a clean tree
    those are a handful (the metadata inodes BULKSTAT does not return),
    in one or two requests.  An orphan (xfs_dirent_ino, as test_xfs) is
    still found, exit 4, as FSCRUB_DEBUG_NO_BULK=1 (every inode
    BULKSTAT'ed) finds it."""
    from test_xfs import scrub, errors_of
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.remount()
    time.sleep(1.1)
    clean = run_fscrub("-v", mnt)
    assert clean.rc == 0 and clean.errors == [], clean
    m = ORPHANS_RE.search(clean.stdout)
    assert m and int(m.group(1)) < 8 and int(m.group(2)) <= int(m.group(1)), clean
    img.offline()
    f = faults.xfs_dirent_ino(img, target="existing")
    mnt, r = scrub(img, "-v")
    assert r.rc == 4, r
    assert [o.inode for o in errors_of(r, "xfs.orphan")] == [f["orphan_inode"]], r
    m2 = ORPHANS_RE.search(r.stdout)
    assert m2 and int(m2.group(1)) == int(m.group(1)) + 1, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert old.rc == 4 and not ORPHANS_RE.search(old.stdout), old
    # The entry now names an inode that has a name already: which of its
    # two names its nlink.count finding gives is the walk threads' order
    # (it differed between two runs 1 in 4), so that one is compared by
    # inode alone.
    def by_inode(r):
        return sorted((s, c, None if c == "nlink.count" else p, i)
                      for s, c, p, i in findings(r))
    assert by_inode(old) == by_inode(r), (old, r)


HEALTH_RE = re.compile(r"Phase 3: BULKSTAT health flags of (\d+) inodes \((\d+) of them "
                       r"BULKSTAT'ed after the walk\): (\d+) checked by the kernel since "
                       r"mount, (\d+) marked sick")
BS_TOTAL_RE = re.compile(r"Phase 3: (\d+) BULKSTAT requests since the scan began, (\d+) inodes "
                         r"returned")


def test_xfs_health_from_the_walks_records(xfs_tree):
    """Without the kernel scrub, phase 2 no longer BULKSTATs every inode
    for its health flags (bs_sick) before the walk: the walk's own
    BULKSTAT records give them, each inode's once, and on a quiet tree no
    inode is BULKSTAT'ed after the walk for them.  So the scan BULKSTATs
    each inode about once, not twice (a pass over every inode, then the
    walk's), and finds what FSCRUB_DEBUG_NO_BULK=1 (every entry stat'ed
    and compared with a BULKSTAT of it) finds."""
    img, mnt = xfs_tree
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [], r
    if "kernel online scrub" in r.stdout:
        pytest.skip("the kernel scrub BULKSTATs every inode in phase 2 to scrub it")
    found = int(re.search(r"(\d+) inodes found by name, (\d+) by BULKSTAT", r.stdout).group(1))
    h = HEALTH_RE.search(r.stdout)
    assert h and int(h.group(1)) == found and int(h.group(2)) == 0, r
    assert int(h.group(4)) == 0 and "Phase 2: BULKSTAT" not in r.stdout, r
    t = BS_TOTAL_RE.search(r.stdout)
    # The walk's records (a directory's inode in its parent's and its own
    # request too) and the orphan candidates: well under two per inode.
    assert t and found <= int(t.group(2)) < 1.5 * found, (found, r)
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    h2 = HEALTH_RE.search(old.stdout)
    assert h2 and h2.group(1) == h.group(1) and h2.group(2) == "0", old
    assert findings(old) == findings(r), (old, r)


def test_xfs_directory_record_from_its_entries_request(image_factory):
    """Each directory is compared with a BULKSTAT of itself at its end.
    XFS allocates a directory's files next to its inode, so the request
    for its files' bulk records brings the directory's record too: 20
    directories of 5 files each cost no request of their own (only the
    root, whose entries are all directories, asks for itself), where each
    asked for itself before.  Same findings as FSCRUB_DEBUG_NO_BULK=1."""
    need_fs("xfs")
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for d in range(20):
        os.mkdir(os.path.join(mnt, "d%02d" % d))
        for f in range(5):
            with open(os.path.join(mnt, "d%02d" % d, "f%d" % f), "wb") as fh:
                fh.write(b"x" * (100 * (f + 1)))
    mnt = img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [], r
    c = re.search(r"Phase 3: (\d+) inodes compared with BULKSTAT in (\d+) requests", r.stdout)
    assert c and int(c.group(1)) == 21 and int(c.group(2)) < 5, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    c2 = re.search(r"Phase 3: (\d+) inodes compared with BULKSTAT in (\d+) requests",
                   old.stdout)
    assert c2 and int(c2.group(1)) == 121 and int(c2.group(2)) >= 20, old
    assert findings(old) == findings(r), (old, r)


@pytest.mark.parametrize("fstype", ["xfs", "ext4"])
def test_data_scan_walk_takes_bulk_records(image_factory, fstype):
    """-x (issue 22's whole run): the walk takes the bulk records as -n does,
    and a file with a checksum record in an attribute is still opened, noted
    with its VFS size and verified by the ledger; --record (every file
    noted) keeps the old path."""
    need_fs(fstype)
    img = image_factory(fstype, size_mb=300).mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    with open(os.path.join(mnt, "recorded"), "wb") as f:
        f.write(b"r" * 20000)
    time.sleep(1.1)     # older than a second, or --record leaves the files for later
    r = run_fscrub("-x", "--record", mnt)
    assert r.rc == 0, r
    img.remount()
    time.sleep(1.1)
    meta = run_fscrub("-n", "-v", mnt)
    r = run_fscrub("-n", "-x", "-v", mnt)
    assert not r.errors and findings(r) == findings(meta), (meta, r)   # the tree's odd names warn
    assert bulk_counts(r) == bulk_counts(meta) and bulk_counts(r)[0] > 0, (meta, r)
    # every file has a record now: each is opened, noted and verified, as
    # without the bulk records
    got = re.search(r"checksum ledger \(xattrs\): (\d+) files verified", r.stdout)
    old = run_fscrub("-n", "-x", "-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    want = re.search(r"checksum ledger \(xattrs\): (\d+) files verified", old.stdout)
    assert got and want and int(got.group(1)) == int(want.group(1)) > 0, (r, old)
    assert findings(old) == findings(r), (old, r)
    rec = run_fscrub("-x", "-v", "--record", mnt)
    assert not rec.errors and bulk_counts(rec)[0] == 0, rec
