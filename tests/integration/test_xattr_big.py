"""Inodes with more extended-attribute names than listxattr() can return.

The VFS lists at most 64 KiB of names (E2BIG beyond: 3000 names
``user.attr_%016d`` are 81 000 bytes), but XFS, btrfs and tmpfs hold more,
legally.  XFS lists them with XFS_IOC_ATTRLIST_BY_HANDLE, btrfs from the
inode's XATTR_ITEMs; every value is then read back by name (counted by -v's
"N attributes (M values read)").  Where no such listing exists (tmpfs), one
xattr.too_many info per inode, counted in the summary line and the JSON
report -- never an operational error (exit 8), which is what fscrub gave
for all of them before."""

import errno
import json
import os
import time

import pytest

from conftest import escaped, run_fscrub
import fsimage

def set_many(path, n, ns):
    for i in range(n):
        os.setxattr(path, "%s.attr_%016d" % (ns, i), b"value %d" % i,
                    follow_symlinks=False)


def test_tmpfs_too_many_names_is_an_info(workdir):
    """tmpfs keeps any number of trusted.* attributes and has no other
    listing: one xattr.too_many info, counted in the summary line and the
    JSON report; exit 0."""
    fs = fsimage.make_tmpfs(workdir, populate=False)
    with fs:
        p = os.path.join(fs.mnt, "file")
        with open(p, "w") as out:
            out.write("data\n")
        set_many(p, 3000, "trusted")
        with pytest.raises(OSError) as e:
            os.listxattr(p)
        assert e.value.errno == errno.E2BIG
        ino = os.stat(p).st_ino
        out = os.path.join(workdir, "report.json")
        time.sleep(1.1)
        r = run_fscrub("-n", "-v", "--json", out, fs.mnt)
        assert r.rc == 0 and r.errors == [] and "fscrub:" not in r.stderr, r
        hits = r.of("Info", "xattr.too_many")
        assert [(h.path, h.inode) for h in hits] == [(escaped(p), ino)], r
        assert hits[0].message == "more attribute names than the VFS can list: not checked"
        assert "1 inode has more attribute names than the VFS can list: not checked." \
            in r.stdout, r
        with open(out) as j:
            doc = json.load(j)
        assert doc["stats"]["xattrs_unlisted"] == 1, doc["stats"]
        assert [x["check"] for x in doc["findings"]].count("xattr.too_many") == 1
        # without -v the summary line still says it
        r = run_fscrub("-n", fs.mnt)
        assert r.rc == 0 and "1 inode has more attribute names" in r.stdout, r
