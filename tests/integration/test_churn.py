"""No false alarms on a busy filesystem: while churn.py's workers create,
write, truncate, rename (files and whole directories), hard-link, unlink
and replace symlinks, fscrub (with and without -x) reports no error and
no warning beyond the fixture's deliberately odd names.

At least 10 000 operations run during every scan: the scan is frozen
(SIGSTOP) in the middle of its tree walk -- at its first progress line
that shows inodes done -- until the workers have done that many since it
started, then it goes on.  bench/churn_soak.py repeats this unfrozen, 20
rounds per filesystem."""

import os
import re
import time

import pytest

from conftest import need_fs, scan_paused
import churn
import fsimage

MIN_OPS = 10000


def frozen_scan(c, mnt, *args):
    """Run fscrub; freeze it mid-walk until MIN_OPS operations ran."""
    start = c.ops()

    def churn_meanwhile(pid):
        deadline = time.monotonic() + 120
        while c.ops() - start < MIN_OPS and time.monotonic() < deadline:
            time.sleep(0.05)
    r = scan_paused(list(args) + [mnt], lambda phase, done: (phase == 3 and done > 0) or phase >= 4,
                    churn_meanwhile)
    return c.ops() - start, r


@pytest.mark.parametrize("fstype", ["xfs", "ext4", "btrfs", "tmpfs"])
def test_no_false_alarms_under_churn(fstype, workdir, request):
    need_fs(fstype)
    if fstype == "tmpfs":
        fs = fsimage.make_tmpfs(workdir, populate=False, size_mb=1024)
        request.addfinalizer(fs.cleanup)
        mnt = fs.mnt
    else:
        img = fsimage.Image(workdir, fstype, size_mb=1024)
        request.addfinalizer(lambda: img.cleanup(remove=True))
        img.mkfs()
        mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    c = churn.Churn(mnt, workers=2, dirs=100, files=20)
    time.sleep(1.1)     # the fixture's own files are not "changed during the scan"
    with c:
        time.sleep(0.3)
        for mode in ((), ("-x",)):
            ops, r = frozen_scan(c, mnt, "-v", *mode)
            print("%s %s: %d operations during the scan" % (fstype, " ".join(mode) or "-", ops))
            assert ops >= MIN_OPS, ops
            assert r.rc == 0 and r.errors == [], "%d ops during the scan\n%r" % (ops, r)
            assert all(w.check in ("name.control", "name.encoding") for w in r.warnings), r
            assert "fscrub:" not in r.stderr, r
            if fstype == "btrfs":   # the logical tree check ran, under churn
                assert "btrfs trees (first pass)" in r.stdout, r.stdout


def test_no_false_alarms_under_reflink_churn(workdir, request):
    """XFS with reflink and without the rmapbt (mkfs.xfs's default), the
    workers cloning whole files and ranges, into others and into
    themselves, besides the rest: the reference counts, taken from the
    files' extents after the walk against the refcountbt on the disk
    (xfs_refcount.c), give no error.  Some files are reflinked before the
    scan: unchanged themselves, their blocks' counts change when the
    workers clone them."""
    need_fs("xfs")
    img = fsimage.Image(workdir, "xfs", size_mb=1024)
    request.addfinalizer(lambda: img.cleanup(remove=True))
    with open(img.path, "wb") as fh:
        fh.truncate(img.size_mb << 20)
    # fsimage's mkfs gives -m rmapbt=1, which cannot be overridden.
    fsimage.run(["mkfs.xfs", "-f", "-q", "-m", "crc=1,reflink=1,rmapbt=0", img.path],
                env=dict(os.environ, **fsimage._XFS_SMALL_ENV))
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    c = churn.Churn(mnt, workers=2, dirs=100, files=20, reflink=True)
    for area in c.areas:        # the workers clone these too
        for k in range(10):
            src = os.path.join(area, "shared%d" % k)
            with open(src, "wb") as fh:
                fh.write(os.urandom(64 << 10))
            fsimage.run(["cp", "--reflink=always", src, src + ".copy"])
    time.sleep(1.1)     # the fixture's own files are not "changed during the scan"
    with c:
        time.sleep(0.3)
        ops, r = frozen_scan(c, mnt, "-v")
        print("xfs reflink churn: %d operations during the scan" % ops)
        assert ops >= MIN_OPS, ops
        assert r.rc == 0 and r.errors == [], "%d ops during the scan\n%r" % (ops, r)
        assert all(w.check in ("name.control", "name.encoding") for w in r.warnings), r
        assert "fscrub:" not in r.stderr, r
        assert re.search(r"reference counts of \d+ AGs against the files' extents", r.stdout), \
            r.stdout
