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
import time

import pytest

from conftest import need_fs, run_fscrub
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
