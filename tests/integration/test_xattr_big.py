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
import re
import struct
import time

import pytest

from conftest import escaped, run_fscrub
import fsimage

# Two names whose btrfs name hashes (crc32c(~1, name)) are the same,
# 0x425ca1d1: btrfs keeps them in one XATTR_ITEM (one key), one entry after
# the other.  Found by trying user.collide_%08d in order; the test checks
# that both values are read.
COLLIDING = ("user.collide_01371838", "user.collide_02000402")


def set_many(path, n, ns):
    for i in range(n):
        os.setxattr(path, "%s.attr_%016d" % (ns, i), b"value %d" % i,
                    follow_symlinks=False)


# A POSIX access ACL (version 2; user::rw-, user:1000:r--, group::r--,
# mask::r--, other::r--): XFS keeps it as the root-namespace attribute
# SGI_ACL_FILE, which the listing must give as system.posix_acl_access.
ACL = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in
                                      ((1, 6, 0xffffffff), (2, 4, 1000), (4, 4, 0xffffffff),
                                       (0x10, 4, 0xffffffff), (0x20, 4, 0xffffffff)))
# Besides the n, on the file: 5 trusted.*, 5 security.* and the ACL.
EXTRA = 11


def populate(mnt, n):
    """A file and a directory with n user.* attributes each (the file with
    EXTRA more in the other namespaces), a symlink with n trusted.* ones
    (the VFS refuses user.* on symlinks); each listing is over the VFS
    limit.  Returns the paths."""
    f = os.path.join(mnt, "file")
    d = os.path.join(mnt, "dir")
    l = os.path.join(mnt, "link")
    with open(f, "w") as out:
        out.write("data\n")
    os.mkdir(d)
    os.symlink("file", l)
    set_many(f, n, "user")
    set_many(d, n, "user")
    set_many(l, n, "trusted")
    for i in range(5):
        os.setxattr(f, "trusted.fscrub_%d" % i, b"t")
        os.setxattr(f, "security.fscrub_%d" % i, b"s")
    os.setxattr(f, "system.posix_acl_access", ACL)
    for p in (f, d, l):
        with pytest.raises(OSError) as e:
            os.listxattr(p, follow_symlinks=False)
        assert e.value.errno == errno.E2BIG, p
    return f, d, l


def attribute_counts(r):
    m = re.search(r"^Phase 3: .* (\d+) attributes \((\d+) values read\)", r.stdout, re.M)
    assert m, r
    return int(m.group(1)), int(m.group(2))


# 30 000 names take the same paths as 3 000, ten times over: the sanitizer
# pass (tests/run) leaves them out.
@pytest.mark.parametrize("n", [3000, pytest.param(30000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("fstype", ["xfs", "btrfs"])
def test_many_attributes_listed_and_read(image_factory, workdir, fstype, n):
    img = image_factory(fstype, size_mb=300)
    img.mkfs()
    mnt = img.mount()
    f, _, _ = populate(mnt, n)
    expected = 3 * n + EXTRA
    if fstype == "btrfs":
        for name in COLLIDING:
            os.setxattr(f, name, name.encode())
        expected += 2
    img.remount()         # everything on disk: btrfs's tree check reads it
    time.sleep(1.1)       # past the changed-during-scan margin
    out = os.path.join(workdir, "report.json")
    t0 = time.monotonic()
    r = run_fscrub("-n", "-v", "--json", out, mnt)
    took = time.monotonic() - t0
    print("%s, %d attributes on each of 3 inodes: scan %.2f s" % (fstype, n, took))
    assert r.rc == 0 and r.errors == [] and "fscrub:" not in r.stderr, r
    assert "with %s backend" % fstype in r.stdout, r
    assert attribute_counts(r) == (expected, expected), r
    assert r.of("Info", "xattr.too_many") == [], r
    with open(out) as j:
        stats = json.load(j)["stats"]
    assert stats["xattrs"] == expected and stats["xattr_values"] == expected, stats
    assert stats["xattrs_unlisted"] == 0, stats


@pytest.mark.parametrize("more, name", [(3000, "user.remote"),
                                        (0, "user.re\x1b[31mmote\u202e")])
def test_xfs_unreadable_value_of_big_inode(image_factory, more, name):
    """A remote value (8000 bytes: a block of its own) of a file with 3000
    more names, its block's data changed offline: the CRC check refuses it,
    and the listing that XFS_IOC_ATTRLIST_BY_HANDLE gave still leads to it.
    Without the other names (listxattr lists it), a name with a terminal
    escape and a bidi override is printed escaped, as paths are."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    p = os.path.join(mnt, "file")
    with open(p, "w") as out:
        out.write("data\n")
    if more:
        set_many(p, more, "user")
    marker = b"FSCRUB-REMOTE-VALUE-"
    os.setxattr(p, name, (marker * 400)[:8000])
    ino = os.stat(p).st_ino
    img.offline()
    with open(img.path, "r+b") as dev:
        data = dev.read()
        at = data.find(marker * 4)
        assert at > 0 and data.find(marker * 4, at + 8000) < 0
        dev.seek(at + 100)
        dev.write(b"XXXX")
    del data
    mnt = img.mount()
    time.sleep(1.1)
    r = run_fscrub("-n", "-v", mnt)
    assert r.rc == 4 and "fscrub:" not in r.stderr, r
    hits = r.of("Error", "xattr.unreadable")
    assert [(h.path, h.inode) for h in hits] == [(escaped(p), ino)], r
    assert "'%s'" % escaped(name) in hits[0].message, r
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout, r
    # the others were read
    assert attribute_counts(r) == (more + 1, more), r


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


def test_xfs_unprivileged_is_an_info(image_factory, workdir):
    """Without CAP_SYS_ADMIN the XFS backend (and its listing) is out: the
    generic checks give one xattr.too_many info for the file and one for
    the directory (the symlink's trusted.* names are not listed to a user
    at all); exit 0."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    f, d, _ = populate(mnt, 3000)
    os.chmod(workdir, 0o755)
    time.sleep(1.1)

    def nobody():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    r = run_fscrub("-n", "-v", mnt, preexec_fn=nobody)
    assert r.rc == 0 and r.errors == [], r
    hits = r.of("Info", "xattr.too_many")
    assert sorted(h.path for h in hits) == sorted([escaped(d), escaped(f)]), r
    assert "2 inodes have more attribute names than the VFS can list: not checked." \
        in r.stdout, r
