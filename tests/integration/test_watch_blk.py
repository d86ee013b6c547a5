"""fscrub watch: the block layer's I/O errors in the kernel log, followed
down to the files.

A filesystem on a loop device whose backing file lives on eiofs (the FUSE
file of test_media.py that fails chosen byte ranges with EIO) is watched
by a real `fscrub watch`; the range under a known file is then switched on
and the file read with O_DIRECT (the page cache would hide it), so that
the kernel logs `I/O error, dev loopN, sector S ...`.  The watcher must
map the sector to the file, record an event naming the file, its inode
and byte range (checked through `fscrub status --json`), and report the
bytes that still fail as media.file.  A line forged into /dev/kmsg by
userspace is no event; an error in free space is a free-space event.

The kernel rate-limits these lines (10 in 5 s, for the whole machine):
where a neighbour's test used them up, the read is repeated until the
watcher has heard one, within a bound.
"""

import json
import os
import re
import subprocess
import time

import pytest

from conftest import FSCRUB, check_sanitizers
from test_media import bad_media  # noqa: F401 (a fixture)
from test_watch import watcher  # noqa: F401 (a fixture)
import fsimage

# The watcher listens to every mounted filesystem: never beside other tests.
pytestmark = pytest.mark.alone

BLOCK = 4096
HEARD_TIMEOUT = 30      # seconds for the kernel to log a line the watcher maps
OPTS = {"ext4": ["errors=continue"], "xfs": ["nouuid"]}


def victim(image_factory, fstype):
    """An image with d/victim (256 KiB of random bytes, one extent) and a
    64 KiB hole punched in d/holed: (img, the device offset of the victim's
    byte 65536, a free device offset).  btrfs: FIEMAP gives logical
    addresses, so the victim's bytes are found in the image, and its free
    space is the device's last block (no chunk is allocated there in an
    image of this size; a punched extent stays allocated)."""
    img = image_factory(fstype, size_mb=300).mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    data = {}
    for name, size in (("victim", 256 << 10), ("holed", 192 << 10)):
        data[name] = os.urandom(size)
        with open(os.path.join(mnt, "d", name), "wb") as f:
            f.write(data[name])
            f.flush()
            os.fsync(f.fileno())
    [ext] = fsimage.fiemap(os.path.join(mnt, "d", "victim"))
    [hol] = fsimage.fiemap(os.path.join(mnt, "d", "holed"))
    subprocess.run(["fallocate", "--punch-hole", "-o", "64KiB", "-l", "64KiB",
                    os.path.join(mnt, "d", "holed")], check=True)
    subprocess.run(["sync"], check=True)
    if fstype != "btrfs":
        return img, ext["physical"] + (64 << 10), hol["physical"] + (64 << 10)
    img.offline()
    with open(img.path, "rb") as f:
        disk = f.read()
    at = disk.find(data["victim"][64 << 10:(64 << 10) + BLOCK])
    assert at >= 0 and at % BLOCK == 0, "the victim's bytes are not in the image"
    return img, at, len(disk) - BLOCK


def mount_as(m, fstype, how):
    """The eiofs-backed filesystem as fsimage.Image.MOUNT_KINDS names it."""
    if how == "ro":
        fsimage.run(["mount", "-o", "remount,ro", m.mnt])
    elif how == "settled":
        time.sleep(fsimage.Image.SETTLE_S)
        fsimage._umount(m.mnt)
        m.mounted = False
        fsimage.mount(fstype, m.dev, m.mnt, OPTS.get(fstype, []))
        m.mounted = True


def read_direct(path, off):
    """One O_DIRECT read of BLOCK bytes at off: True if it failed with EIO."""
    r = subprocess.run(["dd", "if=" + path, "of=/dev/null", "iflag=direct", "bs=%d" % BLOCK,
                        "skip=%d" % (off // BLOCK), "count=1"], capture_output=True)
    return r.returncode != 0


def read_until_heard(w, path, off, pattern):
    """Read path at off directly until the watcher's stderr has pattern."""
    deadline = time.monotonic() + HEARD_TIMEOUT
    while True:
        assert read_direct(path, off), "the read of %s at %d did not fail" % (path, off)
        try:
            return w.wait_for(pattern, timeout=2)
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def wait_stdout(w, pattern, timeout=10):
    """pattern in the watcher's stdout (its findings come after its log lines)."""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, w.stdout(), re.M):
        assert time.monotonic() < deadline, (pattern, w.stdout(), w.stderr())
        time.sleep(0.02)


def events(workdir, mnt):
    p = subprocess.run([FSCRUB, "status", "--state-dir", os.path.join(workdir, "state"),
                        "--json", mnt], capture_output=True, text=True)
    check_sanitizers(p.stderr)
    [fs] = json.loads(p.stdout)["filesystems"]
    return p.returncode, fs["events"]


def start(watcher, m):  # noqa: F811
    w = watcher("-v", "--on-error", "true", "--min-interval", "0", m.mnt)
    dev = os.path.basename(m.dev)
    w.wait_for(r"^fscrub watch: (watching )?%s \(\w+\): (only|also) block-layer errors of %s "
               r"and the devices under it in the kernel log$" % (re.escape(m.mnt), dev))
    return w


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_io_error_names_the_file(image_factory, bad_media, watcher, workdir,  # noqa: F811
                                 fstype, how):
    img, bad, _ = victim(image_factory, fstype)    # bad: the file's bytes 65536-69631
    m = bad_media(img, [(bad, BLOCK)], armed=False)
    mount_as(m, fstype, how)
    f = os.path.join(m.mnt, "d", "victim")
    ino = os.stat(f).st_ino
    w = start(watcher, m)
    m.arm()
    mm, ff = re.escape(m.mnt), re.escape(f)
    read_until_heard(w, f, 64 << 10, r"^fscrub watch: %s: kernel log: request error on %s "
                     r"\(sector %d\)" % (mm, os.path.basename(m.dev), bad // 512))
    w.wait_for(r"^fscrub watch: %s: kernel log: device bytes %d-%d: file %s \(inode %d\), "
               r"data bytes 65536-69631$" % (mm, bad, bad + BLOCK - 1, ff, ino))
    w.wait_for(r"^fscrub watch: %s: checked %s \(inode %d\): bytes 65536-69631 read "
               r"directly, 1 unreadable block$" % (mm, ff, ino))
    wait_stdout(w, r"^Error: %s \(inode %d\): bytes 65536-69631 cannot be read: "
                r"Input/output error \[media\.file\]$" % (ff, ino))
    # the watcher's own re-read, and the reads repeated, are folded into one
    assert len(re.findall(r"kernel log: device bytes", w.stderr())) == 1, w.stderr()
    assert w.stop() == 0
    rc, evs = events(workdir, m.mnt)
    assert rc == 4
    got = [(e["kind"], e["inode"], e["path"], e["offset"], e["length"]) for e in evs]
    assert got == [("blk_file", ino, f, 65536, BLOCK)], got


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_forged_line_ignored_free_space_event(image_factory, bad_media, watcher,  # noqa: F811
                                              workdir, fstype, how):
    """A line written to /dev/kmsg by userspace, naming the file's sector,
    is no event; then a real error in free space (read from the loop
    device itself) is the free-space event and warning, and the only one."""
    img, bad, free = victim(image_factory, fstype)
    m = bad_media(img, [(bad, BLOCK), (free, BLOCK)], armed=False)
    mount_as(m, fstype, how)
    w = start(watcher, m)
    m.arm()
    dev = os.path.basename(m.dev)
    with open("/dev/kmsg", "w") as k:
        k.write("<3>I/O error, dev %s, sector %d op 0x0:(READ) flags 0x0 phys_seg 1 "
                "prio class 2\n" % (dev, bad // 512))
    mm = re.escape(m.mnt)
    read_until_heard(w, m.dev, free, r"^fscrub watch: %s: kernel log: request error on %s "
                     r"\(sector %d\)" % (mm, dev, free // 512))
    # btrfs: a device's space no chunk holds is its "unallocated space"
    free_is = "unallocated space" if fstype == "btrfs" else "free space"
    w.wait_for(r"^fscrub watch: %s: kernel log: device bytes %d-%d: %s$"
               % (mm, free, free + BLOCK - 1, free_is))
    wait_stdout(w, r"^Warning: %s: device %s bytes %d-%d \(%s\) cannot be read; no "
                r"file holds them \[media\.unowned\]$" % (mm, re.escape(m.dev), free,
                                                          free + BLOCK - 1, free_is))
    assert "d/victim" not in w.stderr() + w.stdout()
    assert w.stop() == 0
    rc, evs = events(workdir, m.mnt)
    got = [(e["kind"], e["inode"], e["path"], e["offset"], e["length"]) for e in evs]
    assert got == [("blk_free", None, None, free, BLOCK)], got


# The superblock's block: ext4's at byte 1024 (in block 0 with 4 KiB blocks, block 1 with
# 1 KiB ones), XFS's at 0 (with the AG headers), btrfs's primary copy at 64 KiB.
SUPER = {"ext4": 0, "xfs": 0, "btrfs": 64 << 10}


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_metadata_is_an_error(image_factory, bad_media, watcher, workdir,  # noqa: F811
                              fstype, how):
    """An error under the superblock, read from the loop device: metadata
    events (no file), and the bytes that still fail are media.metadata."""
    img, _, _ = victim(image_factory, fstype)
    at = SUPER[fstype]
    m = bad_media(img, [(at, BLOCK)], armed=False)
    mount_as(m, fstype, how)
    w = start(watcher, m)
    m.arm()
    mm, dev = re.escape(m.mnt), os.path.basename(m.dev)
    read_until_heard(w, m.dev, at, r"^fscrub watch: %s: kernel log: request error on %s "
                     r"\(sector %d\)" % (mm, dev, at // 512))
    w.wait_for(r"^fscrub watch: %s: kernel log: device bytes \d+-\d+: metadata: " % mm)
    wait_stdout(w, r"^Error: %s: device %s bytes \d+-\d+ \(metadata: [^\n]+\) cannot be "
                r"read: Input/output error \[media\.metadata\]$" % (mm, re.escape(m.dev)))
    assert w.stop() == 0
    rc, evs = events(workdir, m.mnt)
    kinds = [e["kind"] for e in evs]
    assert rc == 4 and "blk_metadata" in kinds and "blk_file" not in kinds, evs
    for e in evs:
        assert e["path"] is None and at <= e["offset"] < at + BLOCK and e["length"], evs


def test_no_kernel_log_access_said_once(image_factory, watcher, workdir):  # noqa: F811
    """Without CAP_SYSLOG under kernel.dmesg_restrict /dev/kmsg cannot be
    read: said once as an info, and the filesystem is watched with its
    other sources (ext4: FAN_FS_ERROR)."""
    with open("/proc/sys/kernel/dmesg_restrict") as f:
        if f.read().strip() != "1":
            pytest.skip("kernel.dmesg_restrict is 0: /dev/kmsg is readable without CAP_SYSLOG")
    img = image_factory("ext4", size_mb=64).mkfs()
    mnt = img.mount()
    state = os.path.join(workdir, "state")
    os.makedirs(state, exist_ok=True)
    err_path = os.path.join(workdir, "nosyslog.err")
    with open(err_path, "w") as err:
        proc = subprocess.Popen(["setpriv", "--bounding-set", "-syslog", "--inh-caps", "-syslog",
                                 "--", FSCRUB, "watch", "-v", "--state-dir", state, mnt],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 10
        want = r"^fscrub watch: %s \(ext4\): FAN_FS_ERROR$" % re.escape("watching " + mnt)
        while time.monotonic() < deadline:
            with open(err_path) as f:
                text = f.read()
            if re.search(want, text, re.M):
                break
            assert proc.poll() is None, text
            time.sleep(0.05)
        time.sleep(0.3)
        assert proc.poll() is None, text
        said = re.findall(r"^fscrub watch: info: cannot read the kernel log \(/dev/kmsg: "
                          r"Operation not permitted; CAP_SYSLOG is needed under "
                          r"kernel\.dmesg_restrict\): block-layer errors are not followed$",
                          text, re.M)
        assert len(said) == 1, text
        assert re.search(want, text, re.M) and "block-layer errors of" not in text, text
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with open(err_path) as f:
        check_sanitizers(f.read())
    assert proc.returncode == 0


def test_loop_on_a_file_of_a_watched_fs(image_factory, bad_media, mounts, watcher, workdir):
    """An ext4 (upper) on a loop device whose backing file lives on another
    watched ext4 (lower, on eiofs): an error on the lower device under the
    backing file names that file on the lower filesystem, and is followed up
    through the loop device to the upper filesystem's file; the upper loop
    device's own line for the same bytes is folded into it (one event
    each)."""
    img = image_factory("ext4", size_mb=200).mkfs()
    lmnt = img.mount()
    upper = os.path.join(lmnt, "upper.img")
    with open(upper, "wb") as f:
        f.truncate(64 << 20)
    fsimage.run(["mkfs.ext4", "-q", "-F", "-b", "4096", upper])     # blocks on pages
    udev = mounts.loop(upper)
    umnt = mounts.mount(udev, os.path.join(workdir, "upper.mnt"))
    with open(os.path.join(umnt, "inner"), "wb") as f:
        f.write(os.urandom(64 << 10))
        os.fsync(f.fileno())
    [inner_ext] = fsimage.fiemap(os.path.join(umnt, "inner"))
    uat = inner_ext["physical"]         # the inner file's byte 0 in upper.img
    mounts.umount(umnt)
    mounts.detach(udev)
    [ext] = [e for e in fsimage.fiemap(upper) if e["logical"] <= uat < e["logical"] + e["length"]]
    lat = ext["physical"] + uat - ext["logical"]
    m = bad_media(img, [(lat, BLOCK)], armed=False)
    upper = os.path.join(m.mnt, "upper.img")
    udev = mounts.loop(upper)
    umnt = mounts.mount(udev, os.path.join(workdir, "upper.mnt"))
    inner = os.path.join(umnt, "inner")
    ino, uino = os.stat(inner).st_ino, os.stat(upper).st_ino
    w = watcher("-v", "--on-error", "true", "--min-interval", "0", m.mnt, umnt)
    for mnt, dev in ((m.mnt, m.dev), (umnt, udev)):
        w.wait_for(r"^fscrub watch: %s \(ext4\): also block-layer errors of %s "
                   % (re.escape(mnt), os.path.basename(dev)))
    m.arm()
    lname, uname = os.path.basename(m.dev), os.path.basename(udev)
    read_until_heard(w, inner, 0, r"^fscrub watch: %s: kernel log: request error on %s "
                     r"\(sector %d\): %s bytes %d-%d$" % (re.escape(umnt), lname, lat // 512,
                                                          uname, uat, uat + BLOCK - 1))
    w.wait_for(r"^fscrub watch: %s: kernel log: device bytes %d-%d: file %s \(inode %d\), "
               r"data bytes %d-%d$" % (re.escape(m.mnt), lat, lat + BLOCK - 1,
                                       re.escape(upper), uino, uat, uat + BLOCK - 1))
    w.wait_for(r"^fscrub watch: %s: kernel log: device bytes %d-%d: file %s \(inode %d\), "
               r"data bytes 0-4095$" % (re.escape(umnt), uat, uat + BLOCK - 1,
                                        re.escape(inner), ino))
    wait_stdout(w, r"^Error: %s \(inode %d\): bytes 0-4095 cannot be read: Input/output "
                r"error \[media\.file\]$" % (re.escape(inner), ino))
    time.sleep(0.5)     # the upper loop device's own lines, folded
    assert len(re.findall(r"kernel log: device bytes %d-" % uat, w.stderr())) == 1, w.stderr()
    assert w.stop() == 0
    _, evs = events(workdir, umnt)
    assert [(e["kind"], e["inode"], e["path"], e["offset"]) for e in evs] == \
        [("blk_file", ino, inner, 0)], evs
    _, evs = events(workdir, m.mnt)
    assert [(e["kind"], e["inode"], e["path"], e["offset"]) for e in evs] == \
        [("blk_file", uino, upper, uat)], evs
