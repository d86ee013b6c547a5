"""No false alarms on a busy filesystem: while churn.py's workers create,
write, truncate, rename (files and whole directories), hard-link, unlink
and replace symlinks, fscrub (with and without -x) reports no error and
no warning beyond the fixture's deliberately odd names.  Each mode must
see at least one scan during which 10 000 operations ran; every scan,
short or long, must be clean.  bench/churn_soak.py repeats this 20 times
per filesystem."""

import os
import time

import pytest

from conftest import need_fs, run_fscrub
import churn
import fsimage

MIN_OPS = 10000
ATTEMPTS = 6


def scan_under_churn(c, mnt, *args):
    """Run fscrub until one scan overlapped MIN_OPS operations; return the
    list of (ops during scan, result) of all scans made."""
    scans = []
    for _ in range(ATTEMPTS):
        before = c.ops()
        r = run_fscrub(*args, mnt)
        scans.append((c.ops() - before, r))
        if scans[-1][0] >= MIN_OPS:
            break
    return scans


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
    c = churn.Churn(mnt, workers=2, dirs=400, files=40)
    time.sleep(1.1)     # the fixture's own files are not "changed during the scan"
    with c:
        time.sleep(0.3)
        for mode in ((), ("-x",)):
            scans = scan_under_churn(c, mnt, "-b", "-v", *mode)
            for ops, r in scans:
                assert r.rc == 0 and r.errors == [], "%d ops during the scan\n%r" % (ops, r)
                assert all(w.check in ("name.control", "name.encoding")
                           for w in r.warnings), r
                assert "fscrub:" not in r.stderr, r
            print("%s %s: ops per scan %s" % (fstype, " ".join(mode) or "-",
                                               [ops for ops, _ in scans]))
            assert max(ops for ops, _ in scans) >= MIN_OPS, [ops for ops, _ in scans]
    assert c.ops() > MIN_OPS
