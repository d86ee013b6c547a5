"""The walk's boundaries: other mounts are never entered, covered
directories are still seen (the private clone), what cannot be seen makes
link-count shortfalls infos rather than errors, symlinks are never
followed, device nodes and FIFOs are never opened, and depth is not
limited by PATH_MAX or by the open file limit."""

import os
import re
import resource
import shutil
import subprocess
import time

import pytest

from conftest import FSCRUB, escaped, need_fs, need_tools, run_fscrub
import faults
import fsimage
from test_clean import expected_name_warnings


def mount(cleanups, *args):
    subprocess.run(["mount"] + list(args), check=True)
    cleanups.append(lambda: subprocess.run(["umount", args[-1]], check=True))


@pytest.fixture
def covered(image_factory, cleanups, workdir):
    """ext4 with cov/link2 a hard link of top/file, and a tmpfs mounted on
    cov/ that holds a name fscrub would warn about if it entered it."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "top"))
    os.makedirs(os.path.join(mnt, "cov"))
    with open(os.path.join(mnt, "top", "file"), "w") as f:
        f.write("two names\n")
    os.link(os.path.join(mnt, "top", "file"), os.path.join(mnt, "cov", "link2"))
    mount(cleanups, "-t", "tmpfs", "fscrub-cover", os.path.join(mnt, "cov"))
    os.mkfifo(os.path.join(mnt, "cov", "inside\ntmpfs"))
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    return mnt


def test_covered_directory_seen_through_clone(covered):
    r = run_fscrub("-v", covered)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert "walking a private read-only, noatime clone of the mount" in r.stdout
    assert "not entering %s/cov (tmpfs)" % covered in r.stdout, r
    assert not r.of(check="nlink.count"), r


def test_covered_directory_without_clone(covered):
    """Without the clone the covered name is invisible: the link count
    shortfall is an info saying why, and the submount is not entered."""
    r = run_fscrub("-v", covered, env={"FSCRUB_DEBUG_NO_CLONE": "1"})
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert "cannot clone the mount" in r.stdout
    sub = r.of("Info", "walk.submount")
    assert [f.path for f in sub] == [covered + "/cov"], r
    info = r.of("Info", "nlink.count")
    assert info and "the others may be in places the walk could not see" in info[0].message


def test_bind_mount_of_a_subdirectory(image_factory, cleanups, workdir):
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "sub"))
    with open(os.path.join(mnt, "outside"), "w") as f:
        f.write("x\n")
    os.link(os.path.join(mnt, "outside"), os.path.join(mnt, "sub", "inside"))
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    bind = os.path.join(workdir, "bind")
    os.mkdir(bind)
    mount(cleanups, "--bind", os.path.join(mnt, "sub"), bind)
    r = run_fscrub("-v", bind)
    assert r.rc == 0 and r.errors == [], r
    assert "the mount shows only /sub of the filesystem" in r.stdout
    info = r.of("Info", "nlink.count")
    assert info and "the others may be in places the walk could not see" in info[0].message


def test_ext4_bind_mount_of_a_subdirectory_summarises_unreached(image_factory, cleanups,
                                                                workdir):
    """ext4 seen through a bind mount of a 1-file subdirectory: the 3000
    inodes outside it are not reached, which proves nothing; one info
    counts them (no per-inode suspect, each confirmed by re-reads)."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "sub"))
    with open(os.path.join(mnt, "sub", "only"), "w") as f:
        f.write("x\n")
    for d in range(30):
        os.makedirs(os.path.join(mnt, "else", str(d)))
        for i in range(100):
            open(os.path.join(mnt, "else", str(d), str(i)), "w").close()
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    bind = os.path.join(workdir, "bind")
    os.mkdir(bind)
    mount(cleanups, "--bind", os.path.join(mnt, "sub"), bind)
    r = run_fscrub("-n", "-v", bind)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert "Phase 3: 1 directories, 1 files" in r.stdout, r
    unreached = r.of("Info", "ext4.orphan")
    assert len(unreached) == 1, r
    n = int(unreached[0].message.split()[0])
    assert n >= 3031, r        # 3000 files and 31 directories, at least
    assert "the mount shows only /sub of the filesystem" in unreached[0].message, r


# fscrypt ioctls (linux/fscrypt.h): _IOR/_IOWR('f', nr, size)
FS_IOC_SET_ENCRYPTION_POLICY = 0x800c6613       # 19, the v1 struct's 12 bytes
FS_IOC_ADD_ENCRYPTION_KEY = 0xc0506617          # 23, struct fscrypt_add_key_arg
FS_IOC_REMOVE_ENCRYPTION_KEY = 0xc0406618       # 24, struct fscrypt_remove_key_arg


def fscrypt_ioctl(path, req, arg):
    import fcntl
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, req, arg)
    finally:
        os.close(fd)


def test_encrypted_directory_without_its_key(image_factory):
    """ext4 -O encrypt, a v2 policy whose key is added, files written, and
    the key removed: each locked directory holding files is one info, the
    encoded no-key names raise no name warning, nothing is an error or an
    operational failure."""
    import struct
    img = image_factory("ext4", size_mb=64, mkfs_args=["-O", "encrypt"])
    img.mkfs()
    mnt = img.mount()
    # key_spec {type IDENTIFIER, reserved, u[32]}, raw_size, key_id, reserved[8], raw
    raw = os.urandom(64)
    add = bytearray(struct.pack("=II32sII32x", 2, 0, b"", len(raw), 0) + raw)
    try:
        fscrypt_ioctl(mnt, FS_IOC_ADD_ENCRYPTION_KEY, add)
    except OSError as e:
        pytest.skip("the kernel cannot add an fscrypt key: %s" % e)
    ident = bytes(add[8:24])
    locked = os.path.join(mnt, "locked")
    os.mkdir(locked)
    # v2, AES-256-XTS contents, AES-256-CTS names, 32-byte name padding
    fscrypt_ioctl(locked, FS_IOC_SET_ENCRYPTION_POLICY,
                  struct.pack("=BBBB4x16s", 2, 1, 4, 2, ident))
    os.makedirs(os.path.join(locked, "sub", "empty"))
    for i in range(5):
        with open(os.path.join(locked, "file%d" % i), "w") as f:
            f.write("secret %d\n" % i * 1000)
    with open(os.path.join(locked, "sub", "inner"), "w") as f:
        f.write("x")
    os.symlink("file0", os.path.join(locked, "link"))
    os.link(os.path.join(locked, "file1"), os.path.join(locked, "sub", "hard"))
    with open(os.path.join(mnt, "plain"), "w") as f:
        f.write("not encrypted\n")
    os.sync()
    rm = bytearray(struct.pack("=II16s16sI20x", 2, 0, ident, b"", 0))
    fscrypt_ioctl(mnt, FS_IOC_REMOVE_ENCRYPTION_KEY, rm)
    assert struct.unpack("=I", rm[40:44])[0] == 0     # fully removed, nothing busy
    assert not os.path.exists(os.path.join(locked, "file0"))    # names are encoded now
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    for args in (["-n", "-v"], ["-n", "-v", "-x"]):
        r = run_fscrub(*args, mnt)
        assert r.rc == 0 and r.errors == [] and r.warnings == [], r
        assert "fscrub:" not in r.stderr, r
        assert not [f for f in r.findings if f.check.startswith("name.")], r
        infos = sorted((f.path, f.message) for f in r.of("Info", "dir.locked"))
        assert len(infos) == 3, r       # locked/, sub/ and sub/empty/
        assert infos[0][0] == locked and infos[1][0].startswith(locked + "/"), r
        assert "files (5 here) are not checked" in dict(infos)[locked], r
        assert sorted(m.split("(")[1].split()[0] for p, m in infos) == ["0", "2", "5"], r
        assert "Phase 3: 5 directories, 8 files, 1 symlinks" in r.stdout, r
    # The key loaded again: nothing is locked, every file is opened and mapped.
    fscrypt_ioctl(mnt, FS_IOC_ADD_ENCRYPTION_KEY,
                  bytearray(struct.pack("=II32sII32x", 2, 0, b"", len(raw), 0) + raw))
    assert os.path.exists(os.path.join(locked, "file0"))
    r = run_fscrub("-n", "-v", "-x", mnt)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert not r.of(check="dir.locked"), r
    m = re.search(r"^Phase 3: 5 directories, 8 files, 1 symlinks, 0 special files, "
                  r"(\d+) extents", r.stdout, re.M)
    assert m and int(m.group(1)) >= 7, r     # 7 inodes with data; none while locked


def test_stacked_mount_point_scrubs_the_top(image_factory, cleanups):
    """A mount point names what the path shows: the top of the stack, said
    on stderr with the way to the one below (the device)."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    mount(cleanups, "-t", "tmpfs", "fscrub-top", mnt)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0, r
    assert "scrubbing %s (tmpfs)" % mnt in r.stdout
    assert "2 mounts are stacked on %s; scrubbing the top one, which the path shows " \
        "(tmpfs, fscrub-top); name a device to scrub one below" % mnt in r.stderr, r


def mountinfo_lines(under):
    """This test's mounts (other sessions mount and unmount meanwhile)."""
    with open("/proc/self/mountinfo") as f:
        return sorted(" ".join(l.split()[2:]) for l in f if l.split()[4].startswith(under))


def device_with_files(image_factory, name="ext4"):
    """ext4 with 2 directories and 3 files (4 directories with its root and
    lost+found), past the changed-during-scan margin."""
    img = image_factory("ext4", size_mb=64, name=name)
    img.mkfs()
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "d1", "d2"))
    for p in ("f1", "d1/f2", "d1/d2/f3"):
        with open(os.path.join(mnt, p), "w") as f:
            f.write("on the device\n")
    return img


DEVICE_COUNTS = "Phase 3: 4 directories, 3 files"


@pytest.mark.parametrize("cover", ["tmpfs", "bind of another ext4"])
def test_covered_device_argument_scrubs_the_device(image_factory, cleanups, workdir, cover):
    """fscrub DEVICE whose mount point another mount covers scrubs the
    device's filesystem (a clone from a private mount namespace), not what
    the path shows, and leaves the system's mounts as they were."""
    img = device_with_files(image_factory)
    if cover == "tmpfs":
        mount(cleanups, "-t", "tmpfs", "fscrub-cover", img.mnt)
    else:
        other = image_factory("ext4", size_mb=32, name="other")
        other.mkfs()
        os.makedirs(os.path.join(other.mount(), "x"))
        mount(cleanups, "--bind", os.path.join(other.mnt, "x"), img.mnt)
    os.mkfifo(os.path.join(img.mnt, "on the cover"))
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    before = mountinfo_lines(workdir)
    assert len(before) == 2 + (cover != "tmpfs"), before
    r = run_fscrub("-n", "-v", img.dev)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert "%s is mounted on %s, which another mount covers: scrubbing it through a " \
        "private clone of its mount" % (img.dev, img.mnt) in r.stderr, r
    assert "scrubbing %s (ext4) with ext4 backend" % img.mnt in r.stdout, r
    assert DEVICE_COUNTS in r.stdout, r
    assert "walking a private read-only, noatime clone" in r.stdout, r
    assert mountinfo_lines(workdir) == before


def test_covered_device_argument_below_a_covered_parent(image_factory, cleanups, workdir):
    """The device is mounted at P/a/b and a tmpfs covers P/a: the same."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    parent = os.path.join(workdir, "p")
    deep = os.path.join(parent, "a", "b")
    os.makedirs(deep)
    mount(cleanups, "-t", "tmpfs", "fscrub-parent", parent)
    os.makedirs(deep)
    subprocess.run(["mount", img.attach(), deep], check=True)
    cleanups.append(lambda: subprocess.run(["umount", deep], check=True))
    with open(os.path.join(deep, "f"), "w") as f:
        f.write("x\n")
    mount(cleanups, "-t", "tmpfs", "fscrub-cover", os.path.join(parent, "a"))
    time.sleep(1.1)
    r = run_fscrub("-n", "-v", img.dev)
    assert r.rc == 0 and r.errors == [], r
    assert "scrubbing %s (ext4)" % deep in r.stdout, r
    assert "Phase 3: 2 directories, 1 files" in r.stdout, r


def test_device_mounted_twice_one_covered(image_factory, cleanups, workdir):
    """Of two mounts of the device, the one whose path shows it is used."""
    img = device_with_files(image_factory)
    second = os.path.join(workdir, "second")
    os.mkdir(second)
    mount(cleanups, img.dev, second)
    mount(cleanups, "-t", "tmpfs", "fscrub-cover", img.mnt)
    time.sleep(1.1)
    r = run_fscrub("-n", "-v", img.dev)
    assert r.rc == 0 and r.errors == [], r
    assert "is mounted in 2 places; scrubbing %s" % second in r.stderr, r
    assert "another mount covers" not in r.stderr, r
    assert DEVICE_COUNTS in r.stdout, r


def test_covered_device_argument_unprivileged(image_factory, cleanups, workdir):
    """Without the privilege to make a mount namespace: exit 8 and why,
    never a scrub of the covering filesystem."""
    need_tools("setpriv")
    img = device_with_files(image_factory)
    os.chmod(workdir, 0o755)
    mount(cleanups, "-t", "tmpfs", "fscrub-cover", img.mnt)
    os.chmod(img.dev, 0o666)        # nobody may name it; mode restored by detach
    cleanups.append(lambda: os.chmod(img.dev, 0o660))
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", os.environ.get("FSCRUB", FSCRUB), "-n", img.dev],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 8, p
    assert "%s is mounted on %s, but another mount covers it, and it cannot be reached " \
        "otherwise (making a private mount namespace: Operation not permitted)" \
        % (img.dev, img.mnt) in p.stderr, p
    assert "errors and" not in p.stdout, p


def test_symlinks_not_followed(image_factory):
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    os.symlink("/", os.path.join(mnt, "to-root"))
    os.symlink("..", os.path.join(mnt, "loop"))
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [], r
    assert "Phase 3: 2 directories, 0 files, 2 symlinks" in r.stdout, r


def test_special_files_never_opened(image_factory):
    """xattrs of FIFOs, device nodes and symlinks are read by path: strace
    shows no open of them, yet their attributes are counted."""
    need_tools("strace", "setfattr")
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    os.mkfifo(os.path.join(mnt, "fifo"))
    os.mknod(os.path.join(mnt, "null"), 0o600 | 0o020000, os.makedev(1, 3))
    os.symlink("fifo", os.path.join(mnt, "link"))
    for name in ("fifo", "null", "link"):
        subprocess.run(["setfattr", "-h", "-n", "trusted.fscrub", "-v", "1",
                        os.path.join(mnt, name)], check=True)
    from conftest import FSCRUB
    # LeakSanitizer cannot run under ptrace: off for this one run
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat,openat2",
                        FSCRUB, "-v", mnt], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    opens = [l for l in p.stderr.splitlines() if "open" in l]
    for name in ("fifo", "null", "link"):
        assert not [l for l in opens if '"%s"' % name in l], opens
    assert "3 attributes" in p.stdout, p.stdout


def test_deep_chain_with_32_descriptors(workdir, cleanups):
    """3000 nested directories (a path of ~12 KB) with RLIMIT_NOFILE 32:
    the descriptor cache reopens evicted parents one level at a time."""
    mnt = os.path.join(workdir, "deep")
    os.mkdir(mnt)
    mount(cleanups, "-t", "tmpfs", "fscrub-deep", mnt)
    fd = os.open(mnt, os.O_RDONLY)
    for i in range(3000):
        os.mkdir("d%03d" % (i % 1000), dir_fd=fd)
        nfd = os.open("d%03d" % (i % 1000), os.O_RDONLY, dir_fd=fd)
        if i % 500 == 0:
            os.mkdir("side", dir_fd=nfd)      # a branch to evict the chain's fds
        os.close(fd)
        fd = nfd
    os.mknod("bottom\x01", 0o600 | 0o010000, dir_fd=fd)
    os.close(fd)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    r = run_fscrub("-v", "-j", "2", mnt, preexec_fn=limit)
    assert r.rc == 0 and r.errors == [], r
    assert "Phase 3: 3007 directories" in r.stdout, r
    w = r.of("Warning", "name.control")
    assert len(w) == 1 and w[0].path.endswith("/d999/bottom\\x01"), r
    assert len(w[0].path) > 12000


def test_xattr_block_unreadable(image_factory):
    """An ext4 file whose attributes live in an external block (3000-byte
    value); the block is zeroed offline: listing them fails."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    p = os.path.join(mnt, "attrs")
    with open(p, "w") as f:
        f.write("x\n")
    os.setxattr(p, "user.big", b"v" * 3000)
    ino = os.stat(p).st_ino
    img.offline()
    out = faults.debugfs(img, "stat <%d>" % ino)
    acl = int(out.split("File ACL: ")[1].split()[0])
    assert acl > 0, out
    bs = 4096
    with open(img.path, "r+b") as f:
        f.seek(acl * bs)
        f.write(b"\0" * bs)
    time.sleep(1.1)   # past the changed-during-scan margin
    mnt = img.mount()
    r = run_fscrub(mnt)
    assert r.rc == 4, r
    hits = r.of("Error", "xattr.unreadable")
    assert [h.path for h in hits] == [escaped(p)] and hits[0].inode == ino, r


def test_fibmap_fallback(image_factory):
    """With FIEMAP disabled (knob), extent maps are checked with FIBMAP."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    r = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_FIEMAP": "1"})
    assert r.rc == 0 and r.errors == [], r
    assert "checked with FIBMAP" in r.stdout
    extents = int(r.stdout.split(" extents, ")[0].rsplit(" ", 1)[1])
    assert extents > 40, r     # FIBMAP mapped blocks: the fragmented file alone has 40


@pytest.mark.parametrize("fstype", ["xfs", "ext4"])
def test_attribute_fork_mapped_only_when_it_owns_blocks(image_factory, fstype):
    """The attribute fork is mapped (FIEMAP_FLAG_XATTR) when st_blocks counts
    more than the data fork maps: a 3000-byte value lives in a block of its
    own (an XFS remote value, an ext4 xattr block) and is one more extent.
    Files whose data fork covers st_blocks are mapped once."""
    img = image_factory(fstype, size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for i in range(4):
        with open(os.path.join(mnt, "f%d" % i), "wb") as f:
            f.write(b"x" * 4096)
    os.setxattr(os.path.join(mnt, "f3"), "user.big", b"v" * 3000)
    img.remount()
    time.sleep(1.1)   # past the changed-during-scan margin
    st = os.stat(os.path.join(mnt, "f3"))
    assert st.st_blocks * 512 > 4096, st   # the value's block is counted
    r = run_fscrub("-v", "-t", "generic", mnt)
    assert r.rc == 0 and r.errors == [], r
    # four one-extent data forks, and the one attribute block
    assert " 4 files, " in r.stdout and " 5 extents, " in r.stdout, r


@pytest.mark.alone
def test_overlay_directories_renumbered_by_cache_drops(workdir, cleanups, dropping_caches):
    """overlay with its layers on two filesystems and xino off numbers
    directories itself, anew each time an evicted inode is looked up
    again.  With caches dropped every 50 ms while fscrub runs, a directory
    met again under another number is still the one found (same file
    handle): every run sees the whole tree, its 4 awkward names included,
    and reports no walk.moved.  Every other run has 32 descriptors, so
    evicted parents are reopened by name too."""
    need_fs("overlay")
    ov = fsimage.make_overlay(workdir)
    cleanups.append(ov.cleanup)
    want = expected_name_warnings(ov.mnt, ov.tree, "tree/")
    assert len(want) == 4, want

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    for i in range(6):
        r = run_fscrub("-x", "-v", ov.mnt, preexec_fn=limit if i % 2 else None)
        assert r.rc == 0 and r.errors == [], r
        assert not r.of(check="walk.moved"), (i, r)
        assert {(w.check, w.path) for w in r.warnings} == want, (i, r)


OPEN_AHEAD_RE = re.compile(r"Phase 3: (\d+) directories opened as they were found, ahead of "
                           r"their reading; (\d+) descriptors open at most")


@pytest.mark.parametrize("fstype", ["xfs", "ext4"])
def test_directories_opened_as_found(image_factory, fstype):
    """Each directory is opened when its entry is found (XFS then reads its
    first block ahead, while the walk reads others), not right before it
    is read; the descriptor waits in the cache.  Every one but the root is
    so opened on a small tree, none with FSCRUB_DEBUG_NO_OPEN_AHEAD, and
    both runs find the same.  With RLIMIT_NOFILE 32 (a budget of a few
    descriptors) at most half the budget is opened ahead, and the walk of
    a wide directory is still whole and clean."""
    img = image_factory(fstype, size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for i in range(40):
        os.makedirs(os.path.join(mnt, "wide", "d%02d" % i, "sub"))
        with open(os.path.join(mnt, "wide", "d%02d" % i, "sub", "f"), "w") as f:
            f.write("x")
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    m = OPEN_AHEAD_RE.search(r.stdout)
    walked = int(re.search(r"Phase 3: (\d+) directories,", r.stdout).group(1))
    assert m and int(m.group(1)) == walked - 1 and walked >= 81, r
    off = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_OPEN_AHEAD": "1"})
    m = OPEN_AHEAD_RE.search(off.stdout)
    assert off.rc == 0 and m and int(m.group(1)) == 0, off
    assert [(f.check, f.path) for f in off.findings] == [(f.check, f.path) for f in r.findings]

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    few = run_fscrub("-v", mnt, preexec_fn=low_nofile)
    m = OPEN_AHEAD_RE.search(few.stdout)
    assert few.rc == 0 and not few.errors and not few.warnings, few
    assert m and 0 < int(m.group(1)) < walked - 1 and int(m.group(2)) < 32, few
    assert re.search(r"Phase 3: %d directories," % walked, few.stdout), few
