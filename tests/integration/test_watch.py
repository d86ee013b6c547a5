"""fscrub watch: the kernel's filesystem error events turned into checks.

A mounted ext4 is watched by a real `fscrub watch` (started here, killed
in a finaliser); a directory block is overwritten underneath it on the
loop device (after sync and drop_caches, so that the next read comes from
the device), the directory is read, and the watcher must log the kernel's
FAN_FS_ERROR event with the directory's path and inode within seconds,
check the directory, and run --on-error once: a second event within
--min-interval does not run it again.  btrfs has no such event: its device
error counters are polled, and a rise is the event.
"""

import fcntl
import json
import os
import re
import shlex
import signal
import struct
import subprocess
import time

import pytest

from conftest import FSCRUB, TOP, check_sanitizers, need_root, need_tools
from fsimage import run
from test_btrfs import btrfs_factory, corrupt_data  # noqa: F401 (a fixture)
from test_media import bad_media  # noqa: F401 (a fixture)
import fsimage

# The watcher listens to every mounted filesystem and these tests drop the
# page cache: never beside other tests (tests/run runs them after the rest).
pytestmark = pytest.mark.alone

EVENT_TIMEOUT = 10      # seconds: the event comes within milliseconds; slack for a busy host


def kernel_at_least(major, minor):
    k = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    return k >= (major, minor)


class Watcher:
    """`fscrub watch ARGS` with stdout and stderr in files, stopped by stop()."""

    def __init__(self, workdir, *args):
        self.err_path = os.path.join(workdir, "watch.err")
        self.out_path = os.path.join(workdir, "watch.out")
        self.proc = subprocess.Popen([FSCRUB, "watch"] + [str(a) for a in args],
                                     stdout=open(self.out_path, "w"),
                                     stderr=open(self.err_path, "w"))

    def stderr(self):
        with open(self.err_path, errors="surrogateescape") as f:
            return f.read()

    def stdout(self):
        with open(self.out_path, errors="surrogateescape") as f:
            return f.read()

    def wait_for(self, pattern, timeout=EVENT_TIMEOUT, count=1):
        """The first `count` matches of pattern in stderr; fails after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            ended = self.proc.poll() is not None     # before reading: nothing comes after
            found = re.findall(pattern, self.stderr(), re.M)
            if len(found) >= count:
                return found
            if ended or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        raise AssertionError("no %r (x%d) within %s s; rc %s\n--- stderr\n%s" % (
            pattern, count, timeout, self.proc.poll(), self.stderr()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        check_sanitizers(self.stderr())
        return self.proc.returncode


@pytest.fixture
def watcher(workdir):
    """Starts `fscrub watch`; its events go to workdir/state (not the
    machine's /var/lib/fscrub) unless the test names a --state-dir."""
    made = []

    def start(*args):
        if "--state-dir" not in args:
            os.makedirs(os.path.join(workdir, "state"), exist_ok=True)
            args = ("--state-dir", os.path.join(workdir, "state")) + args
        w = Watcher(workdir, *args)
        made.append(w)
        return w

    yield start
    for w in made:
        w.stop()


def drop_caches():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def corrupt_dir_block(img, path):
    """Overwrite the first block of directory path on img's loop device, under
    the mounted filesystem; return its inode number."""
    ino = os.stat(path).st_ino
    bs = os.statvfs(img.mnt).f_bsize
    os.sync()
    out = run(["debugfs", "-R", "bmap <%d> 0" % ino, img.dev]).stdout
    block = int(out.split()[-1])
    assert block > 0, out
    drop_caches()
    fd = os.open(img.dev, os.O_WRONLY)
    try:
        os.pwrite(fd, os.urandom(bs), block * bs)
        os.fsync(fd)
    finally:
        os.close(fd)
    drop_caches()
    return ino


@pytest.fixture
def ext4_dir(image_factory):
    need_tools("debugfs")
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount()
    d = os.path.join(mnt, "victim dir")
    os.mkdir(d)
    for i in range(20):
        open(os.path.join(d, "f%02d" % i), "w").close()
    return img, d


def read_dir(path):
    try:
        return os.listdir(path)
    except OSError as e:
        return e


def test_event_path_check_and_one_scrub(ext4_dir, watcher, workdir):
    img, d = ext4_dir
    ran = os.path.join(workdir, "ran")
    w = watcher("--on-error", 'printf "%s %s %s %s\\n" "$FSCRUB_EVENT" "$FSCRUB_INODE" '
                '"$FSCRUB_UNIT" "$FSCRUB_PATH" >> ' + ran, img.mnt)
    w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(img.mnt))
    ino = corrupt_dir_block(img, d)

    t0 = time.monotonic()
    read_dir(d)
    event = r"^fscrub watch: %s: filesystem error: .* \(errno (\d+)\), \d+ errors?, " \
        r"inode %d, path %s$" % (re.escape(img.mnt), ino, re.escape(d))
    errno_seen = w.wait_for(event)[0]
    latency = time.monotonic() - t0
    print("event latency: %.3f s" % latency)
    assert int(errno_seen) in (74, 117), errno_seen          # EBADMSG, EUCLEAN
    # the targeted check of that directory, and the scrub command, once
    w.wait_for(r"^fscrub watch: %s: checked %s \(inode %d\): " % (
        re.escape(img.mnt), re.escape(d), ino))
    deadline = time.monotonic() + EVENT_TIMEOUT
    while not os.path.exists(ran) and time.monotonic() < deadline:
        time.sleep(0.02)
    unit = run(["systemd-escape", "--path", "--template=fscrub@.service", img.mnt]).stdout \
        .strip() if need_systemd_escape() else None
    with open(ran) as f:
        lines = f.read().splitlines()
    assert len(lines) == 1, lines
    kind, inode, unit_seen, path = lines[0].split(" ", 3)
    assert (kind, int(inode), path) == ("fs_error", ino, d), lines
    if unit:
        assert unit_seen == unit

    # a second event: logged, not checked again at once, no second scrub
    before = len(re.findall(event, w.stderr(), re.M))
    time.sleep(0.2)
    drop_caches()
    read_dir(d)
    w.wait_for(event, count=before + 1)
    w.wait_for(r"not starting the scrub again: started \d+ s ago \(--min-interval 3600\)")
    time.sleep(0.5)
    with open(ran) as f:
        assert len(f.read().splitlines()) == 1
    # the check's own read of the directory is an event too, but the
    # directory is not checked again within a minute: no endless loop
    assert len(re.findall(r": checked ", w.stderr())) == 1, w.stderr()
    settled = len(re.findall(event, w.stderr(), re.M))
    time.sleep(1)
    assert len(re.findall(event, w.stderr(), re.M)) == settled, w.stderr()
    assert w.proc.poll() is None, w.stderr()
    assert w.stop() == 0
    assert w.stderr().endswith("fscrub watch: stopped\n"), w.stderr()


def test_event_recorded_status_health_metrics(ext4_dir, watcher, workdir):
    """The event goes to the run history: status lists it (text and JSON)
    and exits 4, health counts it, the metrics give it as
    fscrub_watch_events; a complete run that starts after it closes it."""
    import json
    from conftest import run_fscrub
    img, d = ext4_dir
    state = os.path.join(workdir, "state")
    wprom = os.path.join(workdir, "watch.prom")
    w = watcher("--on-error", "true", "-v", "--metrics", wprom, img.mnt)
    w.wait_for(r"FAN_FS_ERROR$")
    deadline = time.monotonic() + EVENT_TIMEOUT     # written after the "watching" lines
    while not os.path.exists(wprom) and time.monotonic() < deadline:
        time.sleep(0.02)
    sample = r'^fscrub_watch_events_total\{mountpoint="%s",fstype="ext4"\} (\d+)$' % \
        re.escape(img.mnt)
    with open(wprom) as f:          # written at start: the counter is there before any event
        assert re.findall(sample, f.read(), re.M) == ["0"]
    ino = corrupt_dir_block(img, d)
    read_dir(d)
    w.wait_for(r"^fscrub watch: %s: fs_error event recorded in %s/state.sqlite$" % (
        re.escape(img.mnt), re.escape(state)))
    assert w.stop() == 0
    with open(wprom) as f:
        text = f.read()
    assert "# TYPE fscrub_watch_events_total counter\n" in text
    assert int(re.findall(sample, text, re.M)[0]) >= 1, text

    p = subprocess.run([FSCRUB, "status", "--state-dir", state, "--json", img.mnt],
                       capture_output=True, text=True)
    check_sanitizers(p.stderr)
    assert p.returncode == 4, p
    [fs] = json.loads(p.stdout)["filesystems"]
    assert fs["last_run"] is None and fs["open_errors"] == 0
    assert fs["open_events"] >= 1 and len(fs["events"]) == fs["open_events"]
    e = fs["events"][0]
    assert (e["kind"], e["inode"], e["path"]) == ("fs_error", ino, d), e
    assert e["errno"] in (74, 117) and e["error_count"] >= 1 and e["time"].endswith("Z")
    # listed without naming it too, though it was never scrubbed
    p = subprocess.run([FSCRUB, "status", "--state-dir", state, "--json"],
                       capture_output=True, text=True)
    [listed] = json.loads(p.stdout)["filesystems"]
    assert p.returncode == 4 and (listed["uuid"], listed["open_events"]) == \
        (fs["uuid"], fs["open_events"]), p.stdout
    p = subprocess.run([FSCRUB, "status", "--state-dir", state, img.mnt],
                       capture_output=True, text=True)
    assert p.returncode == 4
    assert re.search(r"^  watch events:  %d since the last complete run began$"
                     % fs["open_events"], p.stdout, re.M), p.stdout
    assert re.search(r"^    \S+Z fs_error: .* \(errno \d+\), inode %d, %s$" % (
        ino, re.escape(d)), p.stdout, re.M), p.stdout

    p = subprocess.run([FSCRUB, "health", "--state-dir", state, "--json", img.mnt],
                       capture_output=True, text=True)
    check_sanitizers(p.stderr)
    assert p.returncode & 4, p
    [h] = json.loads(p.stdout)["filesystems"]
    assert h["last_scan"]["open_events"] == fs["open_events"] and h["last_scan"]["run"] is None

    # a run stopped by -a at the first error answers nothing: the gauge counts the events
    prom = os.path.join(workdir, "m.prom")
    r = run_fscrub("--state-dir", state, "--metrics", prom, "-a", "1", img.mnt)
    assert r.rc & 4, r
    with open(prom) as f:
        assert re.search(r"^fscrub_watch_events\{.*\} %d$" % fs["open_events"], f.read(),
                         re.M)
    # a complete run after the event: the event is answered, the gauge is 0
    r = run_fscrub("--state-dir", state, "--metrics", prom, img.mnt)
    assert r.rc in (0, 4), r
    with open(prom) as f:
        assert re.search(r"^fscrub_watch_events\{.*\} 0$", f.read(), re.M)
    p = subprocess.run([FSCRUB, "status", "--state-dir", state, "--json", img.mnt],
                       capture_output=True, text=True)
    [fs] = json.loads(p.stdout)["filesystems"]
    assert (fs["open_events"], fs["events"]) == (0, [])
    assert fs["last_run"]["status"] == "complete"


def test_metrics_file_that_cannot_be_written(ext4_dir, watcher):
    img, _ = ext4_dir
    p = subprocess.run([FSCRUB, "watch", "--metrics", "/nonexistent/dir/w.prom", img.mnt],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 16 and "cannot write the metrics file" in p.stderr, p


def need_systemd_escape():
    import shutil
    return shutil.which("systemd-escape") is not None


def test_min_interval_zero_runs_every_time(ext4_dir, watcher, workdir):
    img, d = ext4_dir
    ran = os.path.join(workdir, "ran")
    w = watcher("--min-interval", "0", "--on-error", "echo x >> " + ran, img.mnt)
    w.wait_for(r"FAN_FS_ERROR$")
    corrupt_dir_block(img, d)
    for n in (1, 2):
        drop_caches()
        read_dir(d)
        w.wait_for(r"starting the scrub: echo", count=n)
    deadline = time.monotonic() + EVENT_TIMEOUT
    while time.monotonic() < deadline:
        if os.path.exists(ran) and len(open(ran).read().split()) >= 2:
            break
        time.sleep(0.05)
    assert len(open(ran).read().split()) >= 2


def test_clean_fs_no_event(ext4_dir, watcher, workdir):
    """Reading a healthy directory is no event and runs nothing."""
    img, d = ext4_dir
    ran = os.path.join(workdir, "ran")
    w = watcher("--on-error", "echo x >> " + ran, img.mnt)
    w.wait_for(r"FAN_FS_ERROR$")
    drop_caches()
    assert len(read_dir(d)) == 20
    time.sleep(1)
    assert "filesystem error" not in w.stderr()
    assert not os.path.exists(ran)


def test_xfs_needs_linux_7(image_factory, watcher):
    """No health monitor (before Linux 7.0: ENOTTY) and no FAN_FS_ERROR for
    XFS: said once in -v, and the filesystem is watched only through the
    kernel log's block-layer errors."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    img.mount()
    w = watcher("-v", img.mnt)
    if kernel_at_least(7, 0):
        w.wait_for(r"watching %s \(xfs\): XFS health monitor$" % re.escape(img.mnt))
        return
    w.wait_for(r"not watching %s \(xfs\): xfs reports errors to fanotify from Linux 7\.0, "
               r"this is \d+\.\d+$" % re.escape(img.mnt))
    # its device's I/O errors in the kernel log are still followed (test_watch_blk.py)
    w.wait_for(r"^fscrub watch: watching %s \(xfs\): only block-layer errors of %s and the "
               r"devices under it in the kernel log$" % (re.escape(img.mnt),
                                                       os.path.basename(img.dev)))
    assert w.proc.poll() is None and "nothing to watch" not in w.stderr()
    no_monitor = r"^fscrub watch: %s \(xfs\): this kernel has no XFS health monitor " \
        r"\(XFS_IOC_HEALTH_MONITOR: Inappropriate ioctl for device; from Linux 7\.0\)$" % \
        re.escape(img.mnt)
    assert len(re.findall(no_monitor, w.stderr(), re.M)) == 1, w.stderr()


class ChrootWatcher(Watcher):
    """`fscrub watch ARGS` alone in a mount namespace of its own, chrooted
    into a tmpfs that holds only the binary and its libraries, with /proc:
    its mount table has no ext4, XFS or btrfs until the test mounts one
    there (mount(), into the watcher's namespace, on ROOT/mnt: /mnt to it)."""

    def __init__(self, workdir, *args):
        self.err_path = os.path.join(workdir, "watch.err")
        self.out_path = os.path.join(workdir, "watch.out")
        self.root = os.path.join(workdir, "root")
        os.makedirs(self.root)
        libs = re.findall(r"(/\S+) \(0x", subprocess.run(
            ["ldd", FSCRUB], capture_output=True, text=True, check=True).stdout)
        r = shlex.quote(self.root)
        script = ["set -e", "mount -t tmpfs tmpfs %s" % r,
                  "mkdir -p %s/proc %s/mnt %s/state" % (r, r, r),
                  "cp %s %s/fscrub" % (shlex.quote(FSCRUB), r)]
        for lib in libs:
            script.append("mkdir -p %s%s && cp -L %s %s%s" % (
                r, shlex.quote(os.path.dirname(lib)), shlex.quote(lib), r, shlex.quote(lib)))
        script += ["mount -t proc proc %s/proc" % r,
                   "exec chroot %s /fscrub watch --state-dir /state %s" % (
                       r, " ".join(shlex.quote(str(a)) for a in args))]
        self.proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(script)],
            stdout=open(self.out_path, "w"), stderr=open(self.err_path, "w"))

    def nsenter(self, *cmd):
        return subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m"] + list(cmd),
                              capture_output=True, text=True)


def test_nothing_mounted_yet_keeps_waiting(image_factory, workdir):
    """Started by systemd before its filesystems are mounted, `fscrub watch`
    (no mount point named) finds nothing to watch: it says so once and
    waits -- not exit 8, which the unit does not restart on -- and watches
    the ext4 mounted later; when that one is unmounted it says again that
    it waits."""
    need_tools("unshare", "nsenter", "chroot", "ldd")
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    dev = img.attach()
    w = ChrootWatcher(workdir, "-v")
    try:
        waiting = r"^fscrub watch: nothing to watch now: waiting for an ext4, XFS or " \
                  r"btrfs filesystem to be mounted$"
        w.wait_for(waiting)
        time.sleep(0.5)
        assert w.proc.poll() is None, w.stderr()
        p = w.nsenter("mount", "-t", "ext4", dev, os.path.join(w.root, "mnt"))
        assert p.returncode == 0, p.stderr
        w.wait_for(r"^fscrub watch: watching /mnt \(ext4\): FAN_FS_ERROR$")
        p = w.nsenter("umount", os.path.join(w.root, "mnt"))
        assert p.returncode == 0, p.stderr
        w.wait_for(r"^fscrub watch: no longer watching /mnt \(ext4\): unmounted$")
        w.wait_for(waiting, count=2)
        assert "nothing to watch\n" not in w.stderr()
    finally:
        rc = w.stop()
    assert rc == 0, w.stderr()


def test_xfs_without_monitor_keeps_other_sources(image_factory, ext4_dir, watcher):
    """An XFS without a health monitor next to an ext4: the ext4 is watched,
    the XFS's missing monitor is said once in -v, not without -v."""
    if kernel_at_least(7, 0):
        pytest.skip("this kernel has the XFS health monitor: the fallback is not taken")
    ext, _ = ext4_dir
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    img.mount()
    for verbose in (True, False):
        w = watcher(*((["-v"] if verbose else []) + [img.mnt, ext.mnt]))
        w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(ext.mnt))
        time.sleep(0.3)
        assert w.proc.poll() is None, w.stderr()
        said = re.findall(r"^fscrub watch: %s \(xfs\): this kernel has no XFS health monitor"
                          % re.escape(img.mnt), w.stderr(), re.M)
        assert len(said) == (1 if verbose else 0), w.stderr()
        assert w.stop() == 0


FAKE_HEALTHMON = os.environ.get("FSCRUB_FAKEHEALTHMON", os.path.join(
    os.path.dirname(FSCRUB), "libfakehealthmon.so"))


def hm_record(domain, type_, *fields):
    """One V0 record of the Linux 7.0 health monitor (64 bytes): domain,
    type, time, then (offset, struct format, value) in the 32-byte union."""
    rec = bytearray(64)
    struct.pack_into("=IIQ", rec, 0, domain, type_, 1767225600 * 10**9)
    for off, fmt, value in fields:
        struct.pack_into("=" + fmt, rec, off, value)
    return bytes(rec)


def generation(path):
    """The inode's generation (FS_IOC_GETVERSION), part of XFS's file handle."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return struct.unpack("=q", fcntl.ioctl(fd, 0x80087601, bytes(8)))[0] & 0xffffffff
    finally:
        os.close(fd)


@pytest.fixture
def fake_healthmon(monkeypatch, workdir):
    """LD_PRELOAD tests/tools/fakehealthmon.c into the watcher: its
    XFS_IOC_HEALTH_MONITOR returns a pipe with the records given."""
    if not os.path.exists(FAKE_HEALTHMON):
        pytest.skip("no %s (built with -Dtests)" % FAKE_HEALTHMON)
    monkeypatch.setenv("LD_PRELOAD", FAKE_HEALTHMON)
    # a sanitizer build: its runtime is not first in the library list then
    monkeypatch.setenv("ASAN_OPTIONS", "verify_asan_link_order=0")

    def feed(records=None, errno_=None):
        path = os.path.join(workdir, "healthmon.bin")
        with open(path, "wb") as f:
            f.write(b"".join(records or []))
        monkeypatch.setenv("FAKE_HEALTHMON_EVENTS", path)
        if errno_ is not None:
            monkeypatch.setenv("FAKE_HEALTHMON_ERRNO", str(errno_))
    return feed


def test_xfs_health_monitor_events(image_factory, watcher, workdir, fake_healthmon):
    """The health monitor path end to end on a real XFS, with the Linux 7.0
    monitor faked (this kernel has none): every event type is logged with
    what it said, the inodes resolved to paths through XFS's handles and
    checked, the events recorded with their kinds, the scrub started once,
    an unknown type skipped and counted, the end of the monitor seen."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    d = os.path.join(mnt, "sick dir")
    os.mkdir(d)
    for i in range(5):
        open(os.path.join(d, "f%d" % i), "w").close()
    f = os.path.join(mnt, "file")
    with open(f, "wb") as fh:
        fh.write(b"x" * 8192)
    dino, fino = os.stat(d).st_ino, os.stat(f).st_ino
    fake_healthmon([
        hm_record(0, 0),                                            # running
        hm_record(1, 3, (16, "I", 0x1)),                            # fs sick: counters
        hm_record(2, 4, (16, "I", 0x30), (20, "I", 0)),             # AG 0 corrupt
        hm_record(3, 3, (16, "I", 0x10), (20, "I", generation(d)), (24, "Q", dino)),
        hm_record(8, 8, (16, "Q", 4096), (24, "Q", 4096), (32, "Q", fino),
                  (40, "I", generation(f)), (44, "I", 5)),          # buffered read EIO
        hm_record(5, 7, (16, "Q", 2048), (24, "Q", 16)),            # media error
        hm_record(0, 6, (16, "I", 0x11)),                           # shutdown
        hm_record(0, 1, (16, "Q", 12)),                             # lost 12
        hm_record(0, 99, (16, "Q", 7)),                             # a later kernel's type
        hm_record(3, 5, (16, "I", 0x10), (20, "I", generation(d)), (24, "Q", dino)),
        hm_record(0, 2),                                            # unmount
    ])
    ran = os.path.join(workdir, "ran")
    w = watcher("-v", "--on-error", 'echo "$FSCRUB_EVENT $FSCRUB_PATH" >> ' + ran, mnt)
    m = re.escape(mnt)
    w.wait_for(r"^fscrub watch: watching %s \(xfs\): XFS health monitor$" % m)
    w.wait_for(r"^fscrub watch: %s: the XFS health monitor ended$" % m)
    err = w.stderr()
    for line in [
        r"XFS health monitor running",
        r"XFS metadata sick: filesystem: counters",
        r"XFS metadata corrupt \(a scrub found it\): AG 0: bnobt cntbt",
        r"XFS metadata sick: inode %d: directory, path %s" % (dino, re.escape(d)),
        r"XFS buffered read error: Input/output error \(errno 5\), inode %d, "
        r"bytes 4096-8191, path %s" % (fino, re.escape(f)),
        r"XFS media error on the data device: 512-byte sectors 2048-2063 \(16\)",
        r"XFS shut down: metadata I/O error, on-disk corruption",
        r"XFS the kernel lost 12 health events",
        r"XFS metadata healthy: inode %d: directory" % dino,
        r"XFS health monitor: unmounted",
    ]:
        assert re.search(r"^fscrub watch: %s: %s$" % (m, line), err, re.M), (line, err)
    assert re.search(r"^fscrub watch: %s: skipped 1 XFS health event of a type fscrub does "
                     r"not know \(1 in all\)$" % m, err, re.M), err
    # the directory is checked once (its entries read), the file statx()ed
    w.wait_for(r"^fscrub watch: %s: checked %s \(inode %d\): 5 entries, 0 errors$"
               % (m, re.escape(d), dino))
    w.wait_for(r"^fscrub watch: %s: checked %s \(inode %d\): 0 entries, 0 errors$"
               % (m, re.escape(f), fino))
    assert len(re.findall(r"not starting the scrub again", err)) == 6, err
    assert w.proc.poll() is None, err
    assert w.stop() == 0
    with open(ran) as fh:
        assert fh.read() == "xfs_sick \n"

    p = subprocess.run([FSCRUB, "status", "--state-dir", os.path.join(workdir, "state"),
                        "--json", mnt], capture_output=True, text=True)
    check_sanitizers(p.stderr)
    [fs] = json.loads(p.stdout)["filesystems"]
    got = [(e["kind"], e["inode"], e["path"], e["errno"]) for e in fs["events"]]
    assert got == [
        ("xfs_sick", None, None, None), ("xfs_corrupt", None, None, None),
        ("xfs_sick", dino, d, None), ("xfs_buffered_read", fino, f, 5),
        ("xfs_media_error", None, None, None), ("xfs_shutdown", None, None, None),
        ("xfs_lost_events", None, None, None)], got
    assert fs["events"][-1]["error_count"] == 12


def test_xfs_media_error_mapped_to_files(image_factory, bad_media, watcher,  # noqa: F811
                                        workdir, fake_healthmon):
    """A media error of the health monitor is a range of sectors: the
    watcher maps it with GETFSMAP to what it holds -- the file whose blocks
    it covers (path, file offsets), the superblock, free space -- records
    the file with its path, and reads the file's bad bytes again directly.
    The sectors are really unreadable here (eiofs under the loop device),
    so the check reports them; a media error of the log device is said not
    to be mapped."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    with open(os.path.join(mnt, "d", "victim"), "wb") as fh:
        fh.write(os.urandom(256 << 10))
        fh.flush()
        os.fsync(fh.fileno())
    [ext] = fsimage.fiemap(os.path.join(mnt, "d", "victim"))
    bad = ext["physical"] + (64 << 10)      # file bytes 65536-73727
    m = bad_media(img, [(bad, 8192)])
    f = os.path.join(m.mnt, "d", "victim")
    fino = os.stat(f).st_ino
    last = os.path.getsize(img.path) // 512 - 8      # the device's last 4 KiB: free
    fake_healthmon([
        hm_record(0, 0),                                            # running
        hm_record(5, 7, (16, "Q", bad // 512), (24, "Q", 16)),      # the file's blocks
        hm_record(5, 7, (16, "Q", 0), (24, "Q", 1)),                # the superblock
        hm_record(5, 7, (16, "Q", last), (24, "Q", 8)),             # free space
        hm_record(7, 7, (16, "Q", 64), (24, "Q", 8)),               # the log device
        hm_record(0, 2),                                            # unmount
    ])
    w = watcher("-v", "--on-error", "true", m.mnt)
    mm = re.escape(m.mnt)
    w.wait_for(r"^fscrub watch: %s: the XFS health monitor ended$" % mm)
    w.wait_for(r"^fscrub watch: %s: checked %s \(inode %d\): bytes 65536-73727 read "
               r"directly, 2 unreadable blocks$" % (mm, re.escape(f), fino))
    err = w.stderr()
    for line in [
        r"XFS media error: device bytes %d-%d: data of inode %d at bytes 65536-73727, "
        r"path %s" % (bad, bad + 8191, fino, re.escape(f)),
        r"XFS media error: device bytes 0-511: filesystem metadata: static filesystem "
        r"metadata \(superblock, AG headers\)",
        r"XFS media error: device bytes %d-%d: free space" % (last * 512, last * 512 + 4095),
        r"XFS media error: the sectors are not mapped to files: they are not on the data "
        r"device",
    ]:
        assert re.search(r"^fscrub watch: %s: %s$" % (mm, line), err, re.M), (line, err)
    assert re.search(r"^Error: %s \(inode %d\): bytes 65536-73727 cannot be read: "
                     r"Input/output error \[media\.file\]$" % (re.escape(f), fino),
                     w.stdout(), re.M), w.stdout()
    assert w.stop() == 0
    p = subprocess.run([FSCRUB, "status", "--state-dir", os.path.join(workdir, "state"),
                        "--json", m.mnt], capture_output=True, text=True)
    check_sanitizers(p.stderr)
    [fs] = json.loads(p.stdout)["filesystems"]
    got = [(e["kind"], e["inode"], e["path"]) for e in fs["events"]]
    assert got == [("xfs_media_error", fino, f), ("xfs_media_error", None, None),
                   ("xfs_media_error", None, None), ("xfs_media_error", None, None)], got


def test_xfs_health_monitor_taken(image_factory, watcher, fake_healthmon):
    """Another program holds the monitor (EEXIST): said always, and the
    filesystem falls back to FAN_FS_ERROR (itself from Linux 7.0); the
    kernel log's block-layer errors are followed still."""
    if kernel_at_least(7, 0):
        pytest.skip("FAN_FS_ERROR on XFS: the fallback watches, checked elsewhere")
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fake_healthmon([], errno_=17)
    w = watcher(mnt)
    w.wait_for(r"^fscrub watch: watching %s \(xfs\): only block-layer errors of " % re.escape(mnt))
    assert re.search(r"^fscrub watch: %s \(xfs\): cannot open the XFS health monitor: File "
                     r"exists \(another program, xfs_healer perhaps, has it\)$"
                     % re.escape(mnt), w.stderr(), re.M), w.stderr()
    assert "reports errors to fanotify from Linux 7.0" in w.stderr()


def umount_now(mnt, within=3):
    """umount(8), retried for `within` seconds and never lazy: the watcher
    opens the mount's root for a moment while it handles an event (the
    check's own read of a damaged directory is one more), but holds nothing
    open between events; a filesystem still busy after that is a failure."""
    deadline = time.monotonic() + within
    while True:
        p = subprocess.run(["umount", mnt], capture_output=True, text=True)
        if p.returncode == 0 or time.monotonic() > deadline:
            return p
        time.sleep(0.1)


def test_mounted_later_is_watched_and_unmount(image_factory, ext4_dir, watcher, workdir):
    """Every filesystem: one mounted after the watcher started is watched
    (the mount table is polled), its error is reported with the path; it
    can be unmounted while watched (the watcher holds nothing open on it),
    the watcher drops it and goes on."""
    first, _ = ext4_dir
    w = watcher("-v", "--on-error", "true")     # every mounted filesystem
    w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(first.mnt))

    later = image_factory("ext4", size_mb=64, name="later")
    later.mkfs()
    later.mount()
    d = os.path.join(later.mnt, "late dir")
    os.mkdir(d)
    for i in range(20):
        open(os.path.join(d, "f%02d" % i), "w").close()
    w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(later.mnt))
    ino = corrupt_dir_block(later, d)
    read_dir(d)
    w.wait_for(r"^fscrub watch: %s: filesystem error: .* \(errno \d+\), \d+ errors?, "
               r"inode %d, path %s$" % (re.escape(later.mnt), ino, re.escape(d)))
    w.wait_for(r"^fscrub watch: %s: checked %s \(inode %d\): " % (
        re.escape(later.mnt), re.escape(d), ino))

    p = umount_now(later.mnt)
    assert p.returncode == 0, p.stderr
    later.mounted = False
    w.wait_for(r"^fscrub watch: no longer watching %s \(ext4\): unmounted$"
               % re.escape(later.mnt))
    # mounted again: watched again
    later.mount()
    w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(later.mnt), count=2)
    assert w.proc.poll() is None, w.stderr()
    assert w.stop() == 0
    assert w.stderr().endswith("fscrub watch: stopped\n"), w.stderr()


def test_named_fs_unmounted_and_back(ext4_dir, watcher):
    """A filesystem named on the command line: unmounting it works while it
    is watched, it is dropped, and watched again when mounted there again;
    other filesystems mounted meanwhile are not watched."""
    img, d = ext4_dir
    w = watcher(img.mnt)
    w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(img.mnt))
    p = umount_now(img.mnt)
    assert p.returncode == 0, p.stderr
    img.mounted = False
    w.wait_for(r"^fscrub watch: no longer watching %s \(ext4\): unmounted$"
               % re.escape(img.mnt))
    assert w.proc.poll() is None, w.stderr()
    img.mount()
    w.wait_for(r"watching %s \(ext4\): FAN_FS_ERROR$" % re.escape(img.mnt), count=2)
    # the event path still works after the round trip
    ino = corrupt_dir_block(img, d)
    read_dir(d)
    w.wait_for(r"^fscrub watch: %s: filesystem error: .*inode %d, path %s$" % (
        re.escape(img.mnt), ino, re.escape(d)))
    assert len(re.findall(r"^fscrub watch: watching ", w.stderr(), re.M)) == 2, w.stderr()
    assert w.stop() == 0


def test_btrfs_counter_rise_is_an_event(btrfs_factory, watcher, workdir):  # noqa: F811
    fs = btrfs_factory()
    corrupt_data(fs)
    fs.mount()
    ran = os.path.join(workdir, "ran")
    w = watcher("--poll-interval", "1", "--on-error", 'echo "$FSCRUB_EVENT" >> ' + ran,
                fs.mnt)
    w.wait_for(r"watching %s \(btrfs\): device error counters every 1 s$" % re.escape(fs.mnt))
    drop_caches()
    with pytest.raises(OSError):
        with open(os.path.join(fs.mnt, "victim"), "rb") as f:
            f.read()
    w.wait_for(r"^fscrub watch: %s: devid 1 \S+: corruption_errs 0 -> [1-9]\d*$"
               % re.escape(fs.mnt))
    deadline = time.monotonic() + EVENT_TIMEOUT
    while not os.path.exists(ran) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open(ran).read() == "btrfs_dev_stats\n"


@pytest.mark.parametrize("args,msg", [
    (["--min-interval", "-1"], "--min-interval needs a number of seconds"),
    (["--poll-interval", "0"], "--poll-interval needs a number of seconds"),
    (["--bogus"], "unknown option"),
    (["/nonexistent-fscrub-path"], ""),
])
def test_usage_errors(args, msg):
    need_root()
    p = subprocess.run([FSCRUB, "watch"] + args, capture_output=True, text=True, timeout=30)
    assert p.returncode == 16, p
    assert msg in p.stderr, p.stderr


def test_help():
    p = subprocess.run([FSCRUB, "watch", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("Usage: fscrub watch"), p
    man = open(os.path.join(TOP, "man", "fscrub.8")).read()
    for opt in re.findall(r"(--[a-z-]+)", p.stdout):
        assert opt.replace("-", r"\-") in man, opt
