"""Data verification by the device in physical order (-x), media errors
mapped to files, and --limit.

Bad sectors come from a loop device whose backing file lives on eiofs
(tests/tools/eiofs.c), a one-file FUSE filesystem that fails reads of
chosen byte ranges with EIO.  The filesystem is built and populated on a
plain loop device, unmounted, then mounted again through eiofs, so the
only reads that fail are those of the ranges a test names.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import FSCRUB, Result, check_sanitizers, run_fscrub, need_root
import fsimage

EIOFS = os.environ.get("FSCRUB_EIOFS", os.path.join(os.path.dirname(FSCRUB), "eiofs"))
BLOCK = 4096


def need_eiofs():
    need_root()
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse: the media-error tests need FUSE for eiofs")
    if not os.access(EIOFS, os.X_OK):
        pytest.skip("%s was not built (libfuse3-dev missing at build time)" % EIOFS)
    if not shutil.which("fusermount3"):
        pytest.skip("fusermount3 (Debian's fuse3) is not installed")


class BadMedia:
    """The image *path* as a block device with unreadable *ranges*
    [(offset, length)], mounted as *fstype* on *mnt*."""

    def __init__(self, workdir, path, fstype, ranges, name="bad", armed=True):
        self.fuse = os.path.join(workdir, name + ".fuse")
        self.mnt = os.path.join(workdir, name + ".mnt")
        # unarmed: the ranges read fine until arm() (after the mount)
        self.armed_path = os.path.join(workdir, name + ".armed")
        self.proc = None
        self.dev = None
        self.mounted = False
        try:
            self._start(path, fstype, ranges, armed)
        except BaseException:
            self.cleanup()      # what came up before the failure: no one else knows it
            raise

    def _start(self, path, fstype, ranges, armed):
        os.makedirs(self.fuse, exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)
        env = dict(os.environ, EIOFS_IMAGE=path, EIOFS_ARMED=self.armed_path,
                   EIOFS_BAD=",".join("%d:%d" % r for r in ranges))
        if armed:
            self.arm()
        self.proc = subprocess.Popen([EIOFS, "-f", self.fuse], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        disk = os.path.join(self.fuse, "disk")
        for _ in range(100):
            if os.path.exists(disk):
                break
            if self.proc.poll() is not None:
                raise RuntimeError("eiofs exited: %s" % self.proc.stderr.read())
            time.sleep(0.05)
        else:
            raise RuntimeError("eiofs did not come up")
        self.dev = fsimage.run(["losetup", "-f", "--show", disk]).stdout.strip()
        # nouuid: the image was mounted directly just before; should a
        # neighbour test's private mount namespace still hold that mount (it
        # copied every mount when it was made), XFS would refuse this one as
        # a duplicate UUID
        opts = {"ext4": ["errors=continue"], "xfs": ["nouuid"]}.get(fstype, [])
        fsimage.mount(fstype, self.dev, self.mnt, opts)
        self.mounted = True

    def arm(self):
        open(self.armed_path, "w").close()

    def cleanup(self):
        """Undo what is up, last first; every step is tried even when one
        before it failed (the first failure is raised at the end)."""
        failed = []
        for step in (self._disarm, self._umount, self._detach, self._stop_eiofs):
            try:
                step()
            except Exception as e:      # keep cleaning up
                failed.append(e)
        if failed:
            raise failed[0]

    def _disarm(self):
        if os.path.exists(self.armed_path):
            os.unlink(self.armed_path)

    def _umount(self):
        if self.mounted:
            fsimage._umount(self.mnt)
            self.mounted = False

    def _detach(self):
        if self.dev:
            fsimage._losetup_detach(self.dev)
            self.dev = None

    def _stop_eiofs(self):
        """Unmount the FUSE filesystem, which ends eiofs.  The loop device's
        detach is deferred while anything (udev's probe) still has it open,
        and holds the disk file until then: fusermount3 -u fails with EBUSY
        meanwhile, so it is retried.  A daemon that does not end is killed,
        and its mount, left with no daemon behind it, unmounted lazily."""
        if not self.proc:
            return
        for i in range(10):     # 5.5 s in all: udev's probe takes well under one
            if not fsimage._is_mountpoint(self.fuse) or self.proc.poll() is not None:
                break
            subprocess.run(["fusermount3", "-u", self.fuse], capture_output=True)
            if fsimage._is_mountpoint(self.fuse):
                time.sleep(0.1 * (i + 1))
        try:
            self.proc.wait(timeout=0 if fsimage._is_mountpoint(self.fuse) else 10)
        except subprocess.TimeoutExpired:
            self.proc.kill()        # ours: started by this test
            self.proc.wait()
        self.proc = None
        if fsimage._is_mountpoint(self.fuse):
            fsimage.run(["fusermount3", "-u", "-z", self.fuse])


@pytest.fixture
def bad_media(workdir):
    made = []

    def make(img, ranges, name="bad", armed=True):
        need_eiofs()
        img.offline()
        m = BadMedia(workdir, img.path, img.fstype, ranges, name=name, armed=armed)
        made.append(m)
        return m

    yield make
    failed = []
    for m in reversed(made):
        try:
            m.cleanup()
        except Exception as e:      # the others still cleaned up
            failed.append(e)
    if failed:
        raise failed[0]


INNER_FAILURES = r"""
import os

from test_media import bad_media  # noqa: F401 (a fixture)


def note(workdir):
    with open(os.environ["FSCRUB_INNER_NOTE"], "a") as f:
        f.write(workdir + "\n")


def test_fails_with_the_media_up(image_factory, bad_media, workdir):
    note(workdir)
    img = image_factory("ext4", size_mb=64).mkfs()
    m = bad_media(img, [(1 << 20, 4096)])
    assert os.path.ismount(m.mnt) and os.path.ismount(m.fuse)
    assert False, "fails on purpose"


HELD = []


def test_fails_with_the_loop_device_held(image_factory, bad_media, workdir):
    note(workdir)
    img = image_factory("ext4", size_mb=64).mkfs()
    m = bad_media(img, [])
    # open until this pytest ends: the loop device's detach is deferred, as
    # while udev probes it, and the disk file stays busy through the teardown
    HELD.append(os.open(m.dev, os.O_RDONLY))
    assert False, "fails on purpose"


def test_fails_while_mounting(image_factory, bad_media, workdir):
    note(workdir)
    img = image_factory("ext4", size_mb=64).mkfs()
    img.fstype = "xfs"      # mount -t xfs of an ext4 fails, with eiofs and the loop up
    bad_media(img, [])
"""


def left_behind(workdir):
    """Mounts under workdir, loop devices backed by a file in it, eiofs
    processes serving it."""
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f
                  if line.split()[4].startswith(workdir + "/")]
    loops = [line for line in subprocess.run(
        ["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"], capture_output=True,
        text=True).stdout.splitlines() if workdir + "/" in line]
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) == b"eiofs" and any(
                a.startswith(workdir.encode() + b"/") for a in argv):
            procs.append(pid)
    return mounts, loops, procs


def test_bad_media_cleans_up_after_failures(workdir):
    """The fixture's finaliser leaves nothing mounted, attached or running
    when the test fails -- after the media came up, with the loop device
    still open at the teardown, and inside the set-up itself (eiofs and the
    loop device up, the mount failing) -- in a pytest of its own, whose
    failures are on purpose."""
    need_eiofs()
    inner = os.path.join(workdir, "test_inner_failures.py")
    with open(inner, "w") as f:
        f.write(INNER_FAILURES)
    note = os.path.join(workdir, "workdirs")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, FSCRUB_INNER_NOTE=note, PYTHONPATH=here + os.pathsep +
               os.environ.get("PYTHONPATH", ""), FSCRUB=FSCRUB, FSCRUB_EIOFS=EIOFS)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "conftest", "--rootdir", workdir, inner], capture_output=True,
                       text=True, env=env, cwd=workdir, timeout=600)
    assert p.returncode == 1 and "3 failed" in p.stdout, p.stdout + p.stderr
    assert "fails on purpose" in p.stdout, p.stdout
    with open(note) as f:
        inner_dirs = f.read().split()
    assert len(inner_dirs) == 3, inner_dirs
    for d in inner_dirs:
        assert left_behind(d) == ([], [], []), (d, p.stdout + p.stderr)


def write(path, size, seed):
    """A file of *size* bytes, written and synced so its blocks are placed."""
    block = (bytes([seed % 251]) * 4096)
    with open(path, "wb") as f:
        for _ in range(size // 4096):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def populated(image_factory, fstype):
    """An image with a few files; returns (img, {name: extents}).

    d/holed had 192 KiB, and its middle 64 KiB were punched out: those
    blocks are free space between two extents of one file, well within the
    device reader's merge gap, wherever the allocator put the file.  Their
    old place is layout["hole"].
    """
    img = image_factory(fstype, size_mb=320).mkfs()
    mnt = img.mount()
    os.makedirs(os.path.join(mnt, "d"))
    layout = {}
    for i, (name, size) in enumerate([("d/holed", 192 << 10), ("d/victim", 2 << 20),
                                      ("d/big", 24 << 20)]):
        write(os.path.join(mnt, name), size, i + 1)
        layout[name] = fsimage.fiemap(os.path.join(mnt, name))
    holed = os.path.join(mnt, "d/holed")
    whole = layout["d/holed"]
    if len(whole) != 1 or whole[0]["length"] != 192 << 10:
        pytest.fail("d/holed is not one 192 KiB extent: %s" % whole)
    subprocess.run(["fallocate", "--punch-hole", "-o", "64KiB", "-l", "64KiB", holed],
                   check=True)
    layout["hole"] = whole[0]["physical"] + (64 << 10)
    layout["d/holed"] = fsimage.fiemap(holed)
    subprocess.run(["sync"], check=True)
    time.sleep(1.1)     # ctime more than 1 s before the scan: not "changed"
    return img, layout


FSTYPES = ["xfs", "ext4"]


@pytest.mark.parametrize("fstype", FSTYPES)
@pytest.mark.parametrize("engine", ["io_uring", "pread"])
def test_media_error_names_the_file_and_offset(image_factory, bad_media, fstype, engine):
    img, layout = populated(image_factory, fstype)
    ext = layout["d/victim"][0]
    assert ext["length"] >= 512 << 10, layout["d/victim"]
    bad_off = ext["physical"] + (256 << 10)
    m = bad_media(img, [(bad_off, 2 * BLOCK)])
    env = {"FSCRUB_DEBUG_NO_URING": "1"} if engine == "pread" else {}
    r = run_fscrub("-n", "-x", "-v", m.mnt, env=env)
    assert r.rc == 4, r
    errs = r.errors
    assert len(errs) == 1 and errs[0].check == "media.file", r
    e = errs[0]
    assert e.path == m.mnt + "/d/victim", r
    assert e.inode == os.stat(os.path.join(m.mnt, "d/victim")).st_ino
    want_off = ext["logical"] + (256 << 10)
    assert ("device offset %d (%d bytes): file offset %d is unreadable"
            % (bad_off, 2 * BLOCK, want_off)) in e.message, r
    assert not r.warnings, r
    assert "in device order" in r.stdout and "(%s)" % engine in r.stdout, r


@pytest.mark.parametrize("fstype", FSTYPES)
def test_media_error_in_free_space_is_a_warning(image_factory, bad_media, fstype):
    img, layout = populated(image_factory, fstype)
    hole = layout["hole"]
    m = bad_media(img, [(hole, BLOCK)])
    r = run_fscrub("-n", "-x", "-v", m.mnt)
    assert r.rc == 0, r
    assert not r.errors, r
    w = r.of("Warning", "media.unowned")
    assert len(w) == 1 and len(r.warnings) == 1, r
    assert "device offset %d (%d bytes) in free space" % (hole, BLOCK) \
        in w[0].message, r


FSMAP_LINE = re.compile(r"^\s*\d+: \S+ \[(\d+)\.\.(\d+)\]: (.*?) \d+$")


def fsmap(mnt):
    """xfs_io's GETFSMAP listing of *mnt*: [(start, end, owner)] in bytes."""
    out = subprocess.run(["xfs_io", "-c", "fsmap -d", mnt], capture_output=True,
                         text=True, check=True).stdout
    return [(int(m.group(1)) * 512, (int(m.group(2)) + 1) * 512, m.group(3))
            for m in map(FSMAP_LINE.match, out.splitlines()) if m]


@pytest.mark.parametrize("owner,says", [("inodes", "an inode cluster"),
                                        ("extent map", "in the extent map (data fork)")])
def test_media_error_in_metadata_is_an_error(image_factory, bad_media, owner, says):
    """File a and a deleted file b written in turns, 4 KiB at a time: a's
    extents have 4 KiB gaps, and its extent map (bmbt) block and an inode
    cluster lie among them.  The device reader passes over them; a bad
    sector there is metadata according to GETFSMAP (rmapbt): an error that
    names no file."""
    img = image_factory("xfs", size_mb=320).mkfs()      # the suite's mkfs: rmapbt=1
    mnt = img.mount()
    fds = [os.open(os.path.join(mnt, n), os.O_WRONLY | os.O_CREAT) for n in "ab"]
    for i in range(64):
        for fd in fds:
            os.pwrite(fd, b"m" * BLOCK, i * BLOCK)
            os.fsync(fd)
    for fd in fds:
        os.close(fd)
    os.unlink(os.path.join(mnt, "b"))
    subprocess.run(["sync"], check=True)
    data = sorted((x["physical"], x["physical"] + x["length"])
                  for x in fsimage.fiemap(os.path.join(mnt, "a")))
    inside = [(s, e) for s, e, o in fsmap(mnt) if o.endswith(owner)
              and any(a_end <= s and e <= b_start and b_start - a_end < 128 << 10
                      for (_, a_end), (b_start, _) in zip(data, data[1:]))]
    if not inside:
        pytest.fail("no %s block between two of a's extents: %s" % (owner, fsmap(mnt)))
    bad = inside[0][0]
    time.sleep(1.1)
    m = bad_media(img, [(bad, BLOCK)], armed=False)
    # The kernel caches what it reads: a's inode and extent map are read
    # now, before the sector goes bad, as a disk fails under a mounted fs.
    # Held open, so that they stay: another test's drop_caches would
    # otherwise evict them, and the walk's look at a would read the bad
    # cluster again (an inode.unreadable error besides the expected one).
    held = os.open(os.path.join(m.mnt, "a"), os.O_RDONLY)
    try:
        fsimage.fiemap(os.path.join(m.mnt, "a"))
        m.arm()
        # -t generic: the XFS backend reads inode clusters itself (xfs.ondisk)
        r = run_fscrub("-n", "-x", "-v", "-t", "generic", m.mnt)
    finally:
        os.close(held)
    assert r.rc == 4, r
    errs = r.errors
    assert [e.check for e in errs] == ["media.metadata"], r
    assert errs[0].inode is None, r
    assert ("media error at device offset %d (%d bytes)" % (bad, BLOCK)) in errs[0].message, r
    assert says in errs[0].message, r
    assert not r.warnings, r


@pytest.mark.parametrize("fstype", FSTYPES)
def test_clean_device_read_exits_0(image_factory, bad_media, fstype):
    img, layout = populated(image_factory, fstype)
    m = bad_media(img, [])
    r = run_fscrub("-n", "-x", "-v", m.mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    data = sum(x["length"] for n, v in layout.items() if n != "hole" for x in v)
    got = re.search(r"(\d+) bytes of file data in (\d+) bytes read", r.stdout)
    assert got, r
    assert int(got.group(1)) == data, (data, r)
    assert int(got.group(2)) < data + (1 << 20), r   # gaps read: small


def test_per_file_fallback_still_finds_the_error(image_factory, bad_media):
    img, layout = populated(image_factory, "xfs")
    ext = layout["d/victim"][0]
    m = bad_media(img, [(ext["physical"] + (128 << 10), BLOCK)])
    r = run_fscrub("-n", "-x", "-v", m.mnt, env={"FSCRUB_DEBUG_NO_DEVREAD": "1"})
    assert r.rc == 4, r
    assert "reading file by file: FSCRUB_DEBUG_NO_DEVREAD is set" in r.stdout, r
    errs = r.errors
    assert [e.check for e in errs] == ["data.read"], r
    assert errs[0].path == m.mnt + "/d/victim"
    assert "read error at offset %d" % (ext["logical"] + (128 << 10)) in errs[0].message


def test_open_media_errors_metric(image_factory, bad_media, workdir):
    """A read error found by -x is an open media error in the run history:
    the metrics give fscrub_open_media_errors (the alert 'media errors' of
    contrib/prometheus/fscrub.rules.yml), beside the other open errors."""
    img, layout = populated(image_factory, "xfs")
    ext = layout["d/victim"][0]
    m = bad_media(img, [(ext["physical"] + (128 << 10), BLOCK)])
    state = os.path.join(workdir, "state")
    os.mkdir(state)
    prom = os.path.join(workdir, "m.prom")
    r = run_fscrub("-n", "-x", "--state-dir", state, "--metrics", prom, m.mnt,
                   env={"FSCRUB_DEBUG_NO_DEVREAD": "1"})
    assert r.rc == 4 and [e.check for e in r.errors] == ["data.read"], r
    text = open(prom).read()
    assert re.search(r"^fscrub_open_media_errors\{.*\} 1$", text, re.M), text
    assert re.search(r'^fscrub_open_findings\{.*severity="error"\} 1$', text, re.M), text


def test_tmpfs_reads_file_by_file(workdir):
    t = fsimage.make_tmpfs(workdir)
    try:
        r = run_fscrub("-n", "-x", "-v", t.mnt)
        assert r.rc == 0, r
        assert "reading file by file: extent offsets are not offsets on one block device" \
            in r.stdout, r
    finally:
        t.cleanup(remove=True)


@pytest.mark.alone
def test_limit_caps_the_read_rate(image_factory):
    img = image_factory("xfs", size_mb=320).mkfs()
    mnt = img.mount()
    write(os.path.join(mnt, "f"), 48 << 20, 7)
    time.sleep(1.1)
    t0 = time.monotonic()
    r = run_fscrub("-n", "-x", "--limit", "16M", mnt)
    took = time.monotonic() - t0
    assert r.rc == 0, r
    # 48 MiB at 16 MiB/s, less the bucket's 0.1 s burst: at least 2.5 s.
    assert took >= 2.5, (took, r)


def _sectors_read(dev):
    with open("/sys/block/%s/stat" % os.path.basename(dev)) as f:
        return int(f.read().split()[2])


@pytest.mark.parametrize("knob", [None, "65536"])
def test_debug_fixed_read_size(image_factory, knob):
    """FSCRUB_DEBUG_FIXED_READ (bench/adaptive_io.sh's fixed --limit at
    --limit auto's average): a fixed --limit reads that many bytes at a
    time.  The token bucket takes a read's bytes before it starts: at
    128 KiB/s the 8 MiB file's one read waits a minute, so the device
    reads nothing in phase 5's first 3 s without the knob; in 64 KiB
    reads, one every 0.5 s.  (The -v and -C counts move at a read's end:
    the device's own count of sectors read is what shows.)"""
    img = image_factory("xfs", size_mb=320).mkfs()
    mnt = img.mount()
    write(os.path.join(mnt, "f"), 8 << 20, 5)
    time.sleep(1.1)
    env = dict(os.environ)
    if knob:
        env["FSCRUB_DEBUG_FIXED_READ"] = knob
    rfd, wfd = os.pipe()
    p = subprocess.Popen([FSCRUB, "-n", "-x", "--limit", "128K", "-C", str(wfd), mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         pass_fds=(wfd,), env=env)
    os.close(wfd)
    read = None
    with os.fdopen(rfd) as progress:
        for line in progress:
            if line.split()[0] == "5":     # phase 5 began: its reads from here
                s0 = _sectors_read(img.dev)
                time.sleep(3)
                read = (_sectors_read(img.dev) - s0) * 512
                p.send_signal(signal.SIGTERM)
                break
        out, err = p.communicate(timeout=60)
    check_sanitizers(err)
    assert read is not None, (p.returncode, out, err)
    if knob:
        assert 128 << 10 <= read <= 1 << 20, (read, out)
    else:
        assert read < 64 << 10, (read, out)


# --- --limit auto (issue 24): the scan yields to other I/O -----------------

@pytest.mark.parametrize("reader", ["io_uring", "pread", "per-file"])
def test_limit_auto_finds_the_same_media_error(image_factory, bad_media, reader):
    img, layout = populated(image_factory, "xfs")
    ext = layout["d/victim"][0]
    bad_off = ext["physical"] + (256 << 10)
    m = bad_media(img, [(bad_off, 2 * BLOCK)])
    env = {"io_uring": {}, "pread": {"FSCRUB_DEBUG_NO_URING": "1"},
           "per-file": {"FSCRUB_DEBUG_NO_DEVREAD": "1"}}[reader]
    plain = run_fscrub("-n", "-x", m.mnt, env=env)
    auto = run_fscrub("-n", "-x", "-v", "--limit", "auto", m.mnt, env=env)
    assert plain.rc == auto.rc == 4, (plain, auto)
    key = lambda r: sorted((f.check, f.path, f.message) for f in r.errors + r.warnings)
    assert key(auto) == key(plain) and len(auto.errors) == 1, (plain, auto)
    assert re.search(r"--limit auto: \d+ bytes in [\d.]+ s, average [\d.]+ MiB/s",
                     auto.stdout), auto


@pytest.mark.alone
@pytest.mark.parametrize("reader", ["io_uring", "pread"])
def test_limit_auto_rereads_are_not_another_load(image_factory, bad_media, reader):
    """The 4 KiB re-reads that look for a media error's blocks are the
    scan's own requests: they go through the rate limiter and --limit auto
    counts them as ours.  Before, they bypassed it, and the device's
    request counts took them for another load's: the scan dropped to its
    floor on its own re-reads."""
    img, layout = populated(image_factory, "xfs")
    ext = layout["d/victim"][0]
    m = bad_media(img, [(ext["physical"] + (256 << 10), 2 * BLOCK)])
    env = {"io_uring": {}, "pread": {"FSCRUB_DEBUG_NO_URING": "1"}}[reader]
    r = run_fscrub("-n", "-x", "-v", "--limit", "auto", m.mnt, env=env)
    assert r.rc == 4 and len(r.errors) == 1, r
    assert not re.search(r"--limit auto: back-off .*: another load's requests", r.stdout), r
    got = re.search(r"--limit auto: \d+ bytes in [\d.]+ s, average [\d.]+ MiB/s; "
                    r"\d+ back-offs \((\d+) for another load's requests,", r.stdout)
    assert got and got.group(1) == "0", r


class DirectReader:
    """A competing load: dd reading *dev* 4 KiB at a time with O_DIRECT,
    over and over, in a process group of its own (stopped by stop())."""

    def __init__(self, dev):
        self.proc = subprocess.Popen(
            ["sh", "-c", "while :; do dd if=%s of=/dev/null bs=4096 iflag=direct "
             "status=none || exit 1; done" % dev], start_new_session=True)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)      # ours: its own session
        self.proc.wait(timeout=10)


def _scan_with_a_load_in_phase5(mnt, dev, env, after=0.6, secs=2.5):
    """fscrub -n -x -v --limit auto:40M on *mnt*; *after* seconds into
    phase 5 (its -C progress says when it begins) a DirectReader of *dev*
    starts, for *secs* seconds.  The result as run_fscrub gives it."""
    args = ["-n", "-x", "-v", "--limit", "auto:40M", mnt]
    rfd, wfd = os.pipe()
    p = subprocess.Popen([FSCRUB, "-C", str(wfd)] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="surrogateescape",
                         pass_fds=(wfd,), env=dict(os.environ, **env))
    os.close(wfd)
    load = None
    try:
        with os.fdopen(rfd) as progress:
            for line in progress:
                if line.split()[0] == "5":
                    time.sleep(after)
                    load = DirectReader(dev)
                    time.sleep(secs)
                    assert load.proc.poll() is None, "the dd load stopped early"
                    load.stop()
                    break
            out, err = p.communicate(timeout=600)
    finally:
        if load:
            load.stop()
        if p.poll() is None:
            p.kill()
            p.wait()
    check_sanitizers(err)
    r = Result(subprocess.CompletedProcess(p.args, p.returncode, out, err), args)
    assert load, ("phase 5 never began", r)
    return r


@pytest.mark.alone
@pytest.mark.parametrize("signal", ["psi", "requests",
                                    pytest.param("device", marks=pytest.mark.slow)])
def test_limit_auto_backs_off_under_a_competing_load(image_factory, signal):
    """120 MiB read at most at 40 MiB/s (auto:40M): at least three seconds,
    the first probe after 0.3 s and one a second after that.  A reader of
    the same device that stalls on it all the time, started 0.6 s into
    phase 5 (after the probe that sets the idle baseline) and stopped 2.5 s
    later, is seen: by its requests on the loop device (its stat file's
    completed requests less ours, signal "requests"); with those counts
    left out, by the probes in /proc/pressure/io, or (signal "device": as
    on a kernel without PSI) in the loop device's busy time.  When the load
    started before the scan, the baseline took in its stalls and the back-off
    was now for PSI, now for read latency (2 of 6 runs here, one CI run).  After the load
    the scan ramps up again and ends in seconds (with the load on throughout
    it stayed near its 1 MiB/s floor: 192 s for 200 MiB in one CI run)."""
    env = {"psi": {"FSCRUB_DEBUG_NO_DEVREQS": "1"}, "requests": {},
           "device": {"FSCRUB_DEBUG_NO_PSI": "1", "FSCRUB_DEBUG_NO_DEVREQS": "1"}}[signal]
    if signal == "psi" and not os.path.exists("/proc/pressure/io"):
        pytest.skip("this kernel has no PSI (/proc/pressure/io)")
    img = image_factory("xfs", size_mb=320).mkfs()
    mnt = img.mount()
    write(os.path.join(mnt, "f"), 120 << 20, 3)
    time.sleep(1.1)
    r = _scan_with_a_load_in_phase5(mnt, img.dev, env)
    assert r.rc == 0, r
    if signal == "device":
        assert re.search(r"--limit auto: no /proc/pressure/io, the read latency and the "
                         r"device's busy time \(/sys/dev/block/\d+:\d+/stat\)", r.stdout), r
    # -v shows at most one rate change a second (the first back-off can
    # hide behind the slow start's ramp-up): the summary counts them all.
    cause = {"psi": "other tasks stalled on I/O", "device": "the device busy with other I/O",
             "requests": "another load's requests"}[signal]
    got = re.search(r"--limit auto: (\d+) bytes in [\d.]+ s, average [\d.]+ MiB/s; "
                    r"(\d+) back-offs \((\d+) for another load's requests, (\d+) for "
                    r"(other tasks stalled on I/O|the device busy with other I/O), "
                    r"(\d+) for read latency\)", r.stdout)
    assert got and int(got.group(1)) == 120 << 20, r
    downs = {"another load's requests": int(got.group(3)), got.group(5): int(got.group(4)),
             "read latency": int(got.group(6))}
    assert int(got.group(2)) == sum(downs.values()) and downs.get(cause, 0) >= 1, (downs, r)
    for why in re.findall(r"--limit auto: back-off [\d.]+ MiB/s -> [\d.]+ MiB/s: ([^;]*);",
                          r.stdout):
        assert re.match(r"another load's requests on the device \(\d+ or more per 100 ms\)"
                        r"|other tasks stalled on I/O \d+% of the time \(baseline \d+%\)"
                        r"|the device busy with other I/O \d+% of the time \(baseline \d+%\)"
                        r"|read latency [\d.]+x the idle baseline$", why), (why, r)


@pytest.mark.alone
def test_background_defaults_to_limit_auto(image_factory):
    img = image_factory("xfs", size_mb=320).mkfs()
    mnt = img.mount()
    write(os.path.join(mnt, "f"), 8 << 20, 4)
    time.sleep(1.1)
    r = run_fscrub("-n", "-b", "-x", "-v", mnt)
    assert r.rc == 0 and "--limit auto: %d bytes in" % (8 << 20) in r.stdout, r
    r = run_fscrub("-n", "-b", "-x", "-v", "--limit", "none", mnt)
    assert r.rc == 0 and "--limit auto" not in r.stdout, r
    r = run_fscrub("-n", "-b", "-x", "-v", "--limit", "64M", mnt)
    assert r.rc == 0 and "--limit auto" not in r.stdout, r
