"""Phase 3's bulk inode records (backend.h, bulk_inodes; walk.c): on XFS
the walk takes a single-link non-directory's inode from a BULKSTAT record
of its getdents buffer instead of a statx, opens only files with blocks
to map, and lists attributes only of inodes that may have some.  These
tests show that the bulk path is taken (-v counts the entries), that it
finds what the per-file path finds, and that an inode changed between the
bulk read and the visit of its entry is looked at again through the VFS,
never reported from its record."""

import os
import re
import stat
import subprocess
import time

import pytest

from conftest import FSCRUB, need_fs, need_tools, run_fscrub
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
    mnt = img.mount()
    os.symlink("a", os.path.join(mnt, "sym"))
    for name in ("gone", "empty", "xa", "hl"):
        open(os.path.join(mnt, name), "w").close()
    with open(os.path.join(mnt, "data"), "wb") as f:
        f.write(b"d" * 65536)
    img.remount()
    time.sleep(1.1)
    cmd = ("cd %s && ln -s bbbbbbbbbbbbbbbbbbbb sym.new && mv -T sym.new sym && rm gone && "
           "echo more >> empty && sync empty && setfattr -n user.x -v 1 xa && "
           "truncate -s 0 data && ln hl hl2" % mnt)
    r = run_fscrub("-v", "-j", "1", mnt, env={"FSCRUB_DEBUG_AFTER_BULK": cmd})
    assert os.readlink(os.path.join(mnt, "sym")) == "b" * 20, "the changes did not run"
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert bulk_counts(r)[0] == 6, r
    changed = r.of("Info", "symlink.size")
    assert len(changed) == 1 and "changed while being checked" in changed[0].message, r


def syscalls(out):
    """{syscall: calls} from strace -c's table."""
    calls = {}
    for line in open(out):
        f = line.split()
        if len(f) >= 5 and re.match(r"^[\d.]+$", f[0]) and f[-1] != "total":
            calls[f[-1]] = int(f[3])
    return calls


NR_DATA, NR_EMPTY = 600, 200


@pytest.mark.parametrize("fstype", ["xfs", "ext4"])
def test_syscalls_per_file(image_factory, workdir, fstype):
    """What a file costs phase 3, counted with strace -c on 600 small
    files with data and 200 empty ones.  Before the bulk records a file
    cost a statx by name, an open, a statx of the open file, a FIEMAP, an
    xattr listing and a close, and on ext4 the backend's own FIEMAP and
    statx on top: now XFS does not stat a file by name nor open an empty
    one, nor, with the rmapbt, one with data (its map from GETFSMAP's
    owner records), and ext4's backend takes phase
    3's map (one FIEMAP per file, empty or not: ext4 has no bulk records
    yet)."""
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
    if fstype == "xfs":
        # No statx, open or FIEMAP per file: files with data are mapped
        # from GETFSMAP (rmapbt); a few dozen for the directories and
        # phases 1-2.  Was two statx, an open and a FIEMAP per file.
        assert c["statx"] < 100, c
        assert c["openat"] < 100, c
        assert c["ioctl"] < files / 8 + 100, c
    else:
        # FIEMAP: one per file (was two), statx two per file (was three).
        assert c["ioctl"] < files + 100, c
        assert c["statx"] < 2 * files + 100, c


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
    c = re.search(r"Phase 3: (\d+) inodes compared with BULKSTAT", r.stdout)
    # the files with data (opened without the rmapbt), and 2 directories
    assert c and int(c.group(1)) == 50 * (1 - rmapbt) + 2, r


# ------------------------------------- extent maps from GETFSMAP (XFS rmapbt)

MAP_FALLBACK_RE = re.compile(
    r"Phase 3: (\d+) files' extent maps from (\d+) GETFSMAP owner records; mapped with "
    r"FIEMAP instead: (\d+) not covered by their records alone, (\d+) without an on-disk "
    r"data fork read, (\d+) whose on-disk data fork differs")


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
    assert m and int(m.group(1)) == 21 and int(m.group(5)) == 1, r
    assert bulk_maps(r) == 21, r
    a = os.path.join(mnt, f["a"])
    assert [(e.check, e.path, e.inode) for e in r.errors if e.check.startswith("xfs.rmap")] \
        == [("xfs.rmap_missing", a, f["ino_a"]), ("xfs.rmap_extra", a, f["ino_a"])], r
    assert any(e.check == "extent.crosslinked" and e.path == a for e in r.errors), r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_maps(old) == 0 and old.rc == 4, old
    assert findings(old) == findings(r), (old, r)


def test_extents_changed_after_getfsmap(image_factory):
    """Files rewritten (new blocks, same inode) after the GETFSMAP pass
    and their BULKSTAT records, before the walk visits them
    (FSCRUB_DEBUG_AFTER_BULK), and new files in a directory read later
    that may take their old blocks: their maps are stale, yet nothing is
    an error or a warning -- every suspect (a cross-link, a reverse
    mapping the map lacks) is looked at again through the VFS."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "sub"))
    for i in range(10):
        with open(os.path.join(mnt, "r%d" % i), "wb") as f:
            f.write(os.urandom(65536))
    img.remount()
    time.sleep(1.1)
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
    # again through the VFS: changed while being checked, infos only.
    assert bulk_maps(r) >= 10, r
    assert {e.path for e in r.of("Info", "xfs.rmap_missing")} == \
        {os.path.join(mnt, "r%d" % i) for i in range(10)}, r


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
