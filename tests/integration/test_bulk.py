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
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_BULK": "1"})
    assert bulk_counts(old) == (0, entries), old
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
    one (one statx per file with data), and ext4's backend takes phase
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
    if fstype == "xfs":
        # statx: one per file with data (walk_open_file), a few dozen for
        # the directories and phases 1-2; was two per file.
        assert c["statx"] < NR_DATA + 100, c
        assert c["openat"] < NR_DATA + 100, c
        assert c["ioctl"] < NR_DATA + files / 8 + 100, c
    else:
        # FIEMAP: one per file (was two), statx two per file (was three).
        assert c["ioctl"] < files + 100, c
        assert c["statx"] < 2 * files + 100, c


def test_opened_files_still_compared_with_bulkstat(image_factory):
    """A file taken from its BULKSTAT record and opened (it has blocks to
    map) is still compared with BULKSTAT as the open file's statx shows
    it (xfs.bulkstat, xfs_walkstat.c); an empty file, never opened, has
    nothing but its record."""
    need_fs("xfs")
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
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
    c = re.search(r"Phase 3: (\d+) inodes compared with BULKSTAT", r.stdout)
    assert c and int(c.group(1)) == 50 + 2, r    # the files with data, and 2 directories
