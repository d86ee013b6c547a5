"""Healthy filesystems whose documented behaviour looks like damage to a
naive check (issue 18, items 5-8 and 14): compressed extents whose FIEMAP
length is the uncompressed one (erofs, btrfs), overlayfs's broken hard
links after a copy-up (index=off), FUSE filesystems without stable inode
numbers (squashfuse), statfs counters invented by a FUSE daemon (ntfs-3g,
tests/tools/eiofs.c) and FUSE readdir's d_ino of -1 in name findings.

Each is scrubbed as it comes, with -n and -n -x: exit 0, no error; and
where a neighbouring case must still be found, it is."""

import errno
import os
import re
import subprocess
import time

import pytest

from conftest import FSCRUB, need_fs, need_tools, run_fscrub
import faults
import fsimage
from fsimage import run

MiB = 1 << 20
FIEMAP_EXTENT_ENCODED = 0x8


def assert_clean(r, allow=()):
    assert r.rc == 0, r
    assert r.errors == [], r
    assert all(w.check in allow for w in r.warnings), r
    assert "fscrub:" not in r.stderr, r


def compressible(i, size):
    return (b"compressible line %d of a healthy file\n" % i) * (size // 40)


# ---- item 5: compressed extents ----------------------------------------------

@pytest.mark.parametrize("mkfs_args", [["-zlz4hc"],
                                       ["-zlz4", "-Eztailpacking,fragments,dedupe"]])
def test_compressed_erofs(workdir, cleanups, mkfs_args):
    """mkfs.erofs -zlz4hc: FIEMAP reports each compressed cluster with its
    uncompressed length (1 MiB of data "at" byte 4096 of a 200 KiB image)
    and no FIEMAP flag; statx says STATX_ATTR_COMPRESSED.  Not past the
    device, not cross-linked; -x reads those files through the file, the
    plain ones from the device.  A hard link, a plain and a tiny file too;
    also with packed tails, fragments and deduplicated clusters."""
    need_fs("erofs")
    stage = fsimage.make_tmpfs(workdir, name="stage", populate=False)
    cleanups.append(stage.cleanup)
    src = stage.mnt
    os.mkdir(os.path.join(src, "d"))
    for i in range(4):
        fsimage._write(os.path.join(src, "text%d" % i), compressible(i, 3 * MiB))
    os.link(os.path.join(src, "text0"), os.path.join(src, "d", "text0.link"))
    fsimage._write(os.path.join(src, "random"), os.urandom(300000))
    fsimage._write(os.path.join(src, "d", "small"), b"small\n")
    fs = fsimage.make_erofs(workdir, src, extra_args=mkfs_args)
    cleanups.append(fs.cleanup)
    size = os.path.getsize(fs.image)
    ext = fsimage.fiemap(os.path.join(fs.mnt, "text1"))
    # the fault this test is about: FIEMAP lengths beyond the image
    assert ext and max(e["physical"] + e["length"] for e in ext) > size, (size, ext)
    r = run_fscrub("-n", "-v", fs.mnt)
    assert_clean(r)
    assert "7 files" in r.stdout, r
    r = run_fscrub("-n", "-x", "-v", fs.mnt)
    assert_clean(r)
    # every byte of every file was read: the compressed ones file by file
    total = sum(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)
                if os.path.isfile(os.path.join(src, n))) + len(b"small\n")
    assert r.data_bytes_read >= total, (total, r)
    assert "file by file" in r.stdout, r


def test_compressed_btrfs(workdir, cleanups):
    """btrfs -o compress=zstd: compressible files get FIEMAP_EXTENT_ENCODED
    extents whose length is the uncompressed one; -n and -n -x exit 0."""
    need_fs("btrfs")
    img = fsimage.Image(workdir, "btrfs", size_mb=300)
    cleanups.append(lambda: img.cleanup(remove=True))
    img.mkfs()
    mnt = img.mount("compress=zstd")
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(4):
        fsimage._write(os.path.join(mnt, "text%d" % i), compressible(i, 3 * MiB))
    os.link(os.path.join(mnt, "text0"), os.path.join(mnt, "d", "text0.link"))
    fsimage._write(os.path.join(mnt, "random"), os.urandom(300000))
    img.remount("compress=zstd")
    ext = fsimage.fiemap(img.mnt + "/text1")
    assert any(e["flags"] & FIEMAP_EXTENT_ENCODED for e in ext), ext
    for args in (("-n",), ("-n", "-x")):
        r = run_fscrub("-v", *args, img.mnt)
        assert_clean(r)


# ---- item 6: overlayfs hard links after a copy-up ---------------------------

def overlay_with_copied_up_link(workdir, cleanups, options, name="ov"):
    """make_overlay's lower layer has merged/lowerfile with a second name,
    merged/lowerfile.link; append to the first through the overlay (a data
    copy-up).  Returns (overlay, stat of both names)."""
    need_fs("overlay")
    need_fs("ext4")
    ov = fsimage.make_overlay(workdir, name=name, options=options, tree=False)
    cleanups.append(lambda: ov.cleanup(remove=True))
    a, b = (os.path.join(ov.mnt, "merged", n) for n in ("lowerfile", "lowerfile.link"))
    assert os.stat(b).st_nlink == 2
    with open(a, "ab") as f:
        f.write(b"copied up\n")
    os.sync()
    return ov, os.stat(a), os.stat(b)


def test_overlay_index_off_copied_up_hard_link(workdir, cleanups):
    """index=off (the default: /sys/module/overlay/parameters/index is N
    here, the mount options then say nothing): the copied-up name becomes a
    new inode with one link, the other keeps the lower inode and its count
    of 2 (Documentation/filesystems/overlayfs.rst, "Non-standard
    behavior").  Not an error: an info that says why; exit 0.  The same
    with index=off written out."""
    for options, name in (("", "ovdefault"), ("index=off", "ovoff")):
        ov, sa, sb = overlay_with_copied_up_link(workdir, cleanups, options, name)
        # what the kernel does: the names no longer share an inode
        assert sa.st_ino != sb.st_ino and sa.st_nlink == 1 and sb.st_nlink == 2, (sa, sb)
        time.sleep(1.1)
        for args in (("-n",), ("-n", "-x")):
            r = run_fscrub("-v", *args, ov.mnt)
            assert_clean(r)
            info = [f for f in r.of("Info", "nlink.count")
                    if f.path.endswith("/merged/lowerfile.link")]
            assert len(info) == 1 and "index=on" in info[0].message, r
        ov.cleanup(remove=True)


def test_overlay_index_on_keeps_link_counts(workdir, cleanups):
    """index=on: the copy-up is indexed, both names show one inode with
    2 links, no finding at all -- and the link-count check is on: a
    lower file whose link count was broken with debugfs is an error."""
    ov, sa, sb = overlay_with_copied_up_link(workdir, cleanups, "index=on", "ovon")
    assert sa.st_ino == sb.st_ino and sa.st_nlink == sb.st_nlink == 2, (sa, sb)
    time.sleep(1.1)
    r = run_fscrub("-v", "-n", ov.mnt)
    assert_clean(r)
    assert not r.of(check="nlink.count"), r
    ov.cleanup(remove=True)

    # a real fault below an index=on overlay
    lower = fsimage.Image(workdir, "ext4", size_mb=64, name="faultlower")
    cleanups.append(lambda: lower.cleanup(remove=True))
    lower.mkfs()
    fault = faults.ext4_wrong_nlink(lower)
    lmnt = lower.mount()
    up = fsimage.make_tmpfs(workdir, name="faultupper", populate=False)
    cleanups.append(up.cleanup)
    for d in ("u", "w"):
        os.mkdir(os.path.join(up.mnt, d))
    mnt = os.path.join(workdir, "faultov")
    os.makedirs(mnt)
    for index in ("on", "off"):
        run(["mount", "-t", "overlay", "-o", "lowerdir=%s,upperdir=%s/u,workdir=%s/w,index=%s"
             % (lmnt, up.mnt, up.mnt, index), "fscrub-faultov", mnt])
        # the mount sets xattrs on the upper root: its ctime must be older
        # than "changed during the scan"
        time.sleep(1.1)
        try:
            r = run_fscrub("-n", "-v", mnt)
        finally:
            fsimage._umount(mnt)
        hits = [f for f in r.findings if f.check == "nlink.count"
                and f.path == os.path.join(mnt, fault["path"])]
        assert len(hits) == 1, r
        if index == "on":
            assert r.rc == 4 and hits[0].severity == "Error", r
        else:
            assert r.rc == 0 and hits[0].severity == "Info", r


# ---- items 7, 8, 14: FUSE -----------------------------------------------------

CONTROL_NAME = "ctl\x01name"
BAD_INO = 0xFFFFFFFF        # FUSE_UNKNOWN_INO: readdir's d_ino without use_ino


def need_fuse(*tools):
    need_fs("squashfs")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    need_tools(*tools)


class FuseMount:
    """A FUSE daemon mounted on *mnt*; it daemonizes, umount ends it."""

    def __init__(self, cmd, mnt):
        os.makedirs(mnt, exist_ok=True)
        run(cmd)
        self.mnt = mnt

    def cleanup(self):
        if self.mnt and fsimage._is_mountpoint(self.mnt):
            fsimage._umount(self.mnt)
        self.mnt = None


def squashfuse_with_links(workdir, cleanups):
    """A squashfs of hard links (three names of one file, two of another),
    plain files and a name with a control character, mounted with
    squashfuse."""
    need_fuse("squashfuse", "mksquashfs")
    src = os.path.join(workdir, "sqsrc")
    os.makedirs(os.path.join(src, "d"))
    fsimage._write(os.path.join(src, "a"), b"three names\n")
    os.link(os.path.join(src, "a"), os.path.join(src, "b"))
    os.link(os.path.join(src, "a"), os.path.join(src, "d", "c"))
    fsimage._write(os.path.join(src, "x"), b"two names\n")
    os.link(os.path.join(src, "x"), os.path.join(src, "d", "y"))
    fsimage._write(os.path.join(src, "plain"), b"one name\n")
    fsimage._write(os.path.join(src, CONTROL_NAME), b"odd name\n")
    img = os.path.join(workdir, "fuse.sqfs")
    run(["mksquashfs", src, img, "-quiet", "-noappend"])
    fm = FuseMount(["squashfuse", img, os.path.join(workdir, "sqfuse")],
                   os.path.join(workdir, "sqfuse"))
    cleanups.append(fm.cleanup)
    # squashfuse shows the source's times: older than "changed during the scan"
    time.sleep(1.1)
    return fm.mnt


def test_squashfuse_hard_links_per_name_inodes(workdir, cleanups):
    """squashfuse gives each name its own inode number, with the file's
    link count: every hard link looked like a count with one name found
    (nlink.count errors).  One info says link counts are not checked and
    why; exit 0, -n and -n -x."""
    mnt = squashfuse_with_links(workdir, cleanups)
    sa, sb = os.stat(os.path.join(mnt, "a")), os.stat(os.path.join(mnt, "b"))
    # the quirk: two names of one inode, two inode numbers, nlink 3
    assert sa.st_ino != sb.st_ino and sa.st_nlink == sb.st_nlink == 3, (sa, sb)
    for args in (("-n",), ("-n", "-x")):
        r = run_fscrub("-v", *args, mnt)
        assert_clean(r, allow=("name.control",))
        info = r.of("Info", "nlink.count")
        assert len(info) == 1, r
        assert info[0].message.startswith("5 files have more links than names, and no two "
                                          "names share an inode number"), r


def test_squashfuse_empty_attribute_is_not_an_error(workdir, cleanups):
    """squashfuse (0.1.105) lists an attribute whose value is empty, then
    getxattr gives ENODATA: on the source and in the image the file is
    fine, yet xattr.missing was an error (exit 4).  On FUSE it is a warning
    that says the daemon, not the disk, answered so; a value there is read."""
    need_fuse("squashfuse", "mksquashfs")
    src = os.path.join(workdir, "sqxattr")
    os.makedirs(src)
    f = os.path.join(src, "f")
    fsimage._write(f, b"hello\n")
    os.setxattr(f, "user.empty", b"")
    os.setxattr(f, "user.full", b"abc")
    img = os.path.join(workdir, "xattr.sqfs")
    run(["mksquashfs", src, img, "-quiet", "-noappend", "-xattrs"])
    fm = FuseMount(["squashfuse", img, os.path.join(workdir, "sqxfuse")],
                   os.path.join(workdir, "sqxfuse"))
    cleanups.append(fm.cleanup)
    time.sleep(1.1)     # (as squashfuse_with_links)
    g = os.path.join(fm.mnt, "f")
    # the quirk: listed, not returned
    assert "user.empty" in os.listxattr(g) and os.getxattr(g, "user.full") == b"abc"
    with pytest.raises(OSError):
        os.getxattr(g, "user.empty")
    r = run_fscrub("-n", g.rsplit("/", 1)[0])
    assert r.rc == 0 and not r.errors, r
    w = r.of("Warning", "xattr.missing")
    assert [x.path for x in w] == [g] and "user.empty" in w[0].message, r
    assert "daemon" in w[0].message, r


def test_fuse_names_show_the_stat_inode(workdir, cleanups):
    """A name.control warning on FUSE named inode 4294967295: FUSE readdir
    gives d_ino FUSE_UNKNOWN_INO without use_ino.  The warning names the
    inode statx gives."""
    mnt = squashfuse_with_links(workdir, cleanups)
    d_ino = {e.name: e.inode() for e in os.scandir(mnt)}
    assert d_ino[CONTROL_NAME] == BAD_INO, d_ino       # what readdir says
    r = run_fscrub("-n", mnt)
    w = r.of("Warning", "name.control")
    assert len(w) == 1 and w[0].inode not in (None, BAD_INO), r
    # squashfuse numbers its inodes as they are looked up: any but -1


def ntfs_image(workdir, cleanups):
    """A 64 MiB NTFS image (mkntfs) mounted with ntfs-3g, with files, a
    hard link and a name with a control character."""
    need_fuse("ntfs-3g", "mkntfs")
    img = os.path.join(workdir, "ntfs.img")
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    run(["mkntfs", "-F", "-q", "-f", img])
    fm = FuseMount(["ntfs-3g", img, os.path.join(workdir, "ntfs")],
                   os.path.join(workdir, "ntfs"))
    cleanups.append(fm.cleanup)
    mnt = fm.mnt
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(20):
        fsimage._write(os.path.join(mnt, "d", "f%02d" % i), b"ntfs file %d\n" % i)
    os.link(os.path.join(mnt, "d", "f00"), os.path.join(mnt, "link"))
    fsimage._write(os.path.join(mnt, CONTROL_NAME), b"odd name\n")
    os.sync()
    time.sleep(1.1)
    return mnt


def test_ntfs3g(workdir, cleanups):
    """ntfs-3g: its statfs reports more free inodes than inodes once files
    were written (measured: inodes 95752, free 95795), which is the
    daemon's arithmetic, not the disk's: statfs.counters is an info on FUSE.
    Its inode numbers are stable (both names of the hard link show one),
    so link counts stay checked, and the name warning shows st_ino."""
    mnt = ntfs_image(workdir, cleanups)
    sv = os.statvfs(mnt)
    for args in (("-n",), ("-n", "-x")):
        r = run_fscrub("-v", *args, mnt)
        assert_clean(r, allow=("name.control",))
        if sv.f_ffree > sv.f_files:
            assert r.of("Info", "statfs.counters"), r
        assert not r.of(check="nlink.count"), r
        w = r.of("Warning", "name.control")
        assert len(w) == 1 and w[0].inode == os.lstat(os.path.join(mnt, CONTROL_NAME)).st_ino, r
        assert "statfs reports 1844674407" not in r.stdout, r      # no negative "in use"
    print("ntfs-3g statfs: files %d, free %d" % (sv.f_files, sv.f_ffree))


EIOFS = os.environ.get("FSCRUB_EIOFS", os.path.join(os.path.dirname(
    os.environ.get("FSCRUB", "build/fscrub")), "eiofs"))


def eiofs(workdir, cleanups, procs=None, **knobs):
    """tests/tools/eiofs.c serving a 1 MiB file, with EIOFS_* knobs; its
    process is appended to procs (a list) if given."""
    need_fuse("fusermount3")
    if not os.access(EIOFS, os.X_OK):
        pytest.skip("%s was not built (libfuse3-dev missing at build time)" % EIOFS)
    img = os.path.join(workdir, "eio.img")
    with open(img, "wb") as f:
        f.truncate(MiB)
    mnt = os.path.join(workdir, "eio")
    os.makedirs(mnt)
    env = dict(os.environ, EIOFS_IMAGE=img, EIOFS_BAD="",
               **{"EIOFS_" + k.upper(): v for k, v in knobs.items()})
    proc = subprocess.Popen([EIOFS, "-f", mnt], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)

    def stop():
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()         # ours: started by this test
            proc.wait()
        if fsimage._is_mountpoint(mnt):     # killed: its mount has no daemon now
            fsimage.run(["fusermount3", "-u", "-z", mnt])
    cleanups.append(stop)
    if procs is not None:
        procs.append(proc)
    for _ in range(100):
        if os.path.exists(os.path.join(mnt, "disk")):
            break
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(1.1)
    return mnt


@pytest.mark.parametrize("counters,why", [
    ("1000:10:10:500:600", "more free inodes than inodes"),
    ("1000:2000:10:500:5", "more free blocks than blocks"),
    ("1000:10:20:500:5", "more blocks available than free"),
])
def test_fuse_statfs_counters_are_the_daemons(workdir, cleanups, counters, why):
    """eiofs with EIOFS_STATFS reports impossible statfs counters: on FUSE
    that is an info naming the daemon, never an error."""
    mnt = eiofs(workdir, cleanups, statfs=counters)
    r = run_fscrub("-n", "-v", mnt)
    assert_clean(r)
    info = r.of("Info", "statfs.counters")
    assert len(info) == 1 and why in info[0].message and "daemon" in info[0].message, r


def test_fuse_dangling_entry_without_inode_number(workdir, cleanups):
    """A FUSE entry that readdir lists (d_ino 4294967295) and lookup
    refuses: still dirent.dangling, and with the name.control warning it
    names no inode rather than 4294967295."""
    name = "gone\x01x"
    mnt = eiofs(workdir, cleanups, dangling=name)
    assert {e.name: e.inode() for e in os.scandir(mnt)}[name] == BAD_INO
    r = run_fscrub("-n", mnt)
    assert r.rc == 4, r
    hits = r.of("Error", "dirent.dangling") + r.of("Warning", "name.control")
    assert len(hits) == 2 and all(h.inode is None for h in hits), r
    assert all("4294967295" not in h.message for h in hits), r


@pytest.mark.parametrize("err,damage", [(errno.EIO, True), (errno.EINVAL, False),
                                       (errno.EPERM, False), (errno.ENODATA, False)],
                         ids=["EIO", "EINVAL", "EPERM", "ENODATA"])
def test_fuse_refused_lookup_is_the_daemons(workdir, cleanups, err, damage):
    """A daemon that refuses a name with EINVAL, EPERM or ENODATA says so
    for its own reasons (QUIRK_ERRORS_RELAYED): an operational error, not
    the inode.unreadable that ext4 gets for them; EIO is damage anywhere."""
    mnt = eiofs(workdir, cleanups, refused="odd:%d" % err)
    r = run_fscrub("-n", mnt)
    hits = r.of("Error", "inode.unreadable")
    if damage:
        assert r.rc == 4 and [h.path for h in hits] == [os.path.join(mnt, "odd")], r
    else:
        assert r.rc == 8 and hits == [] and "odd: cannot stat" in r.stderr, r


@pytest.mark.alone
def test_squashfuse_renumbered_inodes_by_cache_drops(workdir, cleanups, dropping_caches):
    """squashfuse numbers inodes as they are looked up and forgets them
    when the kernel evicts them (its file handles are those numbers): with
    caches dropped every 50 ms, directories were walk.moved and their
    subtrees skipped, and a file evicted between the walk's statx and its
    open for reading (1 or 2 of these 3000 in 1 run of 4) was skipped,
    unread, as replaced.  A directory or file met again under another
    number with nothing else changed is the same: every run reads every
    file and finds the one awkward name at the bottom."""
    need_fuse("squashfuse", "mksquashfs")
    src = os.path.join(workdir, "sqsrc")
    deep = os.path.join(src, "a", "b", "c", "d")
    os.makedirs(deep)
    nfiles = 1
    fsimage._write(os.path.join(deep, CONTROL_NAME), b"odd name\n")
    for i in range(3):
        os.makedirs(os.path.join(src, "d%d" % i))
        for k in range(1000):      # many opens: some land on a cache drop
            fsimage._write(os.path.join(src, "d%d" % i, "f%d" % k), b"file %d %d\n" % (i, k))
            nfiles += 1
        for j in range(4):
            sub = os.path.join(src, "d%d" % i, "e%d" % j)
            os.makedirs(sub)
            for k in range(5):
                fsimage._write(os.path.join(sub, "f%d" % k), b"file %d %d %d\n" % (i, j, k))
                nfiles += 1
    img = os.path.join(workdir, "renum.sqfs")
    run(["mksquashfs", src, img, "-quiet", "-noappend"])
    fm = FuseMount(["squashfuse", img, os.path.join(workdir, "sqrenum")],
                   os.path.join(workdir, "sqrenum"))
    cleanups.append(fm.cleanup)
    time.sleep(1.1)     # the source's times: older than "changed during the scan"
    for i in range(10):     # a file's window is short: 1 run in 4 lost one
        r = run_fscrub("-x", "-v", fm.mnt)
        assert_clean(r, allow=("name.control",))
        assert not r.of(check="walk.moved"), (i, r)
        w = r.of("Warning", "name.control")
        assert len(w) == 1 and w[0].path.endswith("/a/b/c/d/ctl\\x01name"), (i, r)
        assert re.search(r"^Phase 5: \d+ bytes read .* from %d files\)" % nfiles,
                         r.stdout, re.M), (i, r)


def test_fuse_daemon_died_is_operational(workdir, cleanups):
    """Issue 35 item 9: a FUSE mount whose daemon died answers every call
    with ENOTCONN; fscrub said "cannot access" with exit 16 (usage), as for
    a mistyped path.  The mount exists and cannot be checked: exit 8, with
    one line naming it and the daemon; status says the same."""
    procs = []
    mnt = eiofs(workdir, cleanups, procs=procs)
    procs[0].kill()         # ours: started by eiofs() for this test
    procs[0].wait()
    with pytest.raises(OSError) as e:
        os.stat(mnt)
    assert e.value.errno == errno.ENOTCONN
    r = run_fscrub("-n", "--no-state", mnt)
    assert r.rc == 8, r
    lines = [l for l in r.stderr.splitlines() if l.startswith("fscrub: ")]
    assert len(lines) == 1 and mnt in lines[0], r
    assert "Transport endpoint is not connected" in lines[0] and "FUSE daemon" in lines[0], r
    st = subprocess.run([FSCRUB, "status", "--state-dir",
                         workdir, mnt], capture_output=True, text=True, timeout=60)
    assert st.returncode & 8 and not st.returncode & 16, st
