"""pytest glue for the fscrub integration tests.

The tests build real filesystems (fsimage.py), break them with each
filesystem's own offline tools (faults.py) and run the fscrub binary named
by $FSCRUB (default: build/fscrub).  They need root and loop devices; a
test skips only when something it needs is truly missing, and says what.
"""

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fsimage  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FSCRUB = os.environ.get("FSCRUB", os.path.join(TOP, "build", "fscrub"))

# Severity: PATH (inode N): message [check.id] [file.c:line]?
FINDING = re.compile(r"^(Error|Warning|Info|Repaired): (.*?)(?: \(inode (\d+)\))?: (.*) "
                     r"\[([a-z0-9_]+\.[a-z0-9_]+)\](?: \[[^\]]+:\d+\])?$")
SUMMARY = re.compile(r"^(.*): (?:scan cancelled; so far |stopped after \d+ errors? \(-a\); so far )?"
                     r"(\d+) errors? and (\d+) warnings? found\.")
SANITIZER = re.compile(r"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:)")



def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: takes over 10 s, or (a VM boot, a variant) repeats the code paths of a "
        "faster case; the sanitizer pass of tests/run leaves it out (the plain pass runs it)")
    config.addinivalue_line(
        "markers", "alone: must not run beside other tests (tests/run runs the rest two at a "
        "time, then these one by one): it drops the page cache, reads every mount, holds "
        "copies of every mount in a private mount namespace (a neighbour's XFS, unmounted "
        "meanwhile, cannot be mounted again: duplicate UUID) or measures I/O rates, load "
        "or timing that a neighbour would disturb")
    # fscrub records every run by root in the system's store (fscrub(8), RUN
    # HISTORY): the suite's runs go to a store of their own instead, as
    # systemd's StateDirectory= would place it, so that no test reads or
    # writes /var/lib/fscrub.  Tests of the store pass --state-dir.
    if "STATE_DIRECTORY" not in os.environ:
        state = tempfile.mkdtemp(prefix="fscrub-test-state-")
        os.chmod(state, 0o700)
        os.environ["STATE_DIRECTORY"] = state
        config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))

class Finding:
    def __init__(self, m):
        self.severity, self.path, ino, self.message, self.check = m.groups()
        self.inode = int(ino) if ino else None

    def __repr__(self):
        return "%s %s %s (inode %s): %s" % (self.severity, self.check, self.path,
                                            self.inode, self.message)


class Result:
    def __init__(self, proc, args):
        self.args = args
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.findings = []
        self.summary = None
        for line in self.stdout.splitlines():
            m = FINDING.match(line)
            if m:
                self.findings.append(Finding(m))
                continue
            m = SUMMARY.match(line)
            if m:
                self.summary = (m.group(1), int(m.group(2)), int(m.group(3)))

    def of(self, severity=None, check=None):
        return [f for f in self.findings
                if (severity is None or f.severity == severity)
                and (check is None or f.check == check)]

    @property
    def errors(self):
        return self.of("Error")

    @property
    def warnings(self):
        return self.of("Warning")

    @property
    def data_bytes_read(self):
        """Phase 5's total from -v: what the data verification read."""
        m = re.search(r"^Phase 5: (\d+) bytes read", self.stdout, re.M)
        assert m, "no Phase 5 total in -v output:\n%s" % self.stdout
        return int(m.group(1))

    def __repr__(self):
        # Errors and warnings first: a report of thousands of infos is cut
        # short in CI's log, and the line that failed the test must survive.
        worst = "".join("%s\n" % f for f in self.errors + self.warnings)
        return "fscrub %s -> %d\n--- errors and warnings\n%s--- stdout\n%s--- stderr\n%s" % (
            " ".join(self.args), self.rc, worst, self.stdout, self.stderr)


def scan_paused(args, at, while_stopped, timeout=600):
    """Run fscrub -C FD ARGS and stop it (SIGSTOP) at its first progress
    line for which at(phase, done) holds; while_stopped(pid) runs, then it
    goes on (SIGCONT).  The report goes to files, not pipes: the loop reads
    only the progress pipe, and a full report pipe would stall fscrub."""
    args = [str(a) for a in args]
    rfd, wfd = os.pipe()
    out_f = tempfile.TemporaryFile("w+", errors="surrogateescape")
    err_f = tempfile.TemporaryFile("w+", errors="surrogateescape")
    p = subprocess.Popen([FSCRUB, "-C", str(wfd)] + args, pass_fds=(wfd,),
                         stdout=out_f, stderr=err_f)
    os.close(wfd)
    stopped = False
    with os.fdopen(rfd) as progress:
        for line in progress:
            phase, done = (int(x) for x in line.split()[:2])
            if not stopped and at(phase, done):
                p.send_signal(signal.SIGSTOP)
                try:
                    while_stopped(p.pid)
                finally:
                    p.send_signal(signal.SIGCONT)
                stopped = True
    p.wait(timeout=timeout)
    out_f.seek(0)
    err_f.seek(0)
    out, err = out_f.read(), err_f.read()
    check_sanitizers(err)
    return Result(subprocess.CompletedProcess(p.args, p.returncode, out, err), args[:-1])


# e2fsprogs' and btrfs-progs' own test images (tools/fsck-test-images:
# Debian's source packages through a private deb-src list), fetched once
# into this cache and kept for later runs.
FSCK_IMAGES_CACHE = os.environ.get("FSCRUB_FSCK_IMAGES", "/var/cache/fscrub-tests/fsck-images")
_fsck_images = None


def fsck_test_images(which):
    """The tests directory of e2fsprogs ("e2fsprogs") or btrfs-progs'
    tests/fsck-tests ("btrfs-progs"): E2FSPROGS_TESTS or BTRFS_PROGS_TESTS
    if set, else fetched into FSCK_IMAGES_CACHE (one worker at a time);
    skips, saying why, only where they cannot be had."""
    global _fsck_images
    env = {"e2fsprogs": "E2FSPROGS_TESTS", "btrfs-progs": "BTRFS_PROGS_TESTS"}[which]
    if os.environ.get(env):
        return os.environ[env]
    if _fsck_images is None:
        tool = os.path.join(TOP, "tools", "fsck-test-images")
        os.makedirs(FSCK_IMAGES_CACHE, exist_ok=True)
        with open(os.path.join(FSCK_IMAGES_CACHE, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            p = subprocess.run([tool, FSCK_IMAGES_CACHE], capture_output=True, text=True,
                               timeout=900)
        _fsck_images = p.stdout.split() if p.returncode == 0 else p.stderr.strip()
    if isinstance(_fsck_images, str):
        pytest.skip("e2fsprogs' and btrfs-progs' test images cannot be had (set %s, or "
                    "let tools/fsck-test-images fetch them): %s" % (env, _fsck_images))
    return _fsck_images[0 if which == "e2fsprogs" else 1]


def check_sanitizers(text):
    assert not SANITIZER.search(text), "sanitizer report:\n" + text


def run_fscrub(*args, env=None, timeout=600, **kw):
    """Run fscrub and parse its report; never hides a sanitizer report."""
    args = [str(a) for a in args]
    e = dict(os.environ)
    if env:
        e.update(env)
    proc = subprocess.run([FSCRUB] + args, capture_output=True, text=True,
                          errors="surrogateescape", env=e, timeout=timeout, **kw)
    check_sanitizers(proc.stderr)
    result = Result(proc, args)
    _record_run(result)
    return result


def _normalise(text):
    """A finding as it reads whatever scratch directory and loop device the
    run got, so two runs of the suite can be compared line by line."""
    text = re.sub(r"/tmp/fscrub-[A-Za-z0-9_.-]+", "TMP", text)
    return re.sub(r"/dev/loop\d+", "LOOP", text)


def _record_run(result):
    """FSCRUB_TEST_RECORD=FILE: append each run's exit code and findings to
    FILE (JSON lines, by test), for tools/compare-runs, which shows what a
    change that should not change behaviour changed."""
    path = os.environ.get("FSCRUB_TEST_RECORD")
    if not path:
        return
    import json
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
    findings = sorted("%s %s %s (inode %s): %s" % (f.severity, f.check, _normalise(f.path),
                                                  f.inode, _normalise(f.message))
                      for f in result.findings)
    with open(path, "a") as out:
        out.write(json.dumps({"test": test, "fscrub": FSCRUB,
                              "args": _normalise(" ".join(result.args)),
                              "rc": result.rc, "findings": findings}) + "\n")


def escaped(path):
    """A path as fscrub prints it (see names_escape in src/lib/names.c)."""
    if isinstance(path, str):
        path = path.encode("utf-8", "surrogateescape")
    out = []
    i = 0
    while i < len(path):
        c = path[i]
        n = _utf8_len(path, i)
        if n and not _is_control(path[i:i + n]) and c != 0x5c:
            out.append(path[i:i + n].decode())
            i += n
            continue
        for b in path[i:i + (n or 1)]:
            out.append({0x5c: "\\\\", 0x0a: "\\n", 0x09: "\\t", 0x0d: "\\r"}.get(
                b, "\\x%02x" % b))
        i += n or 1
    return "".join(out)


def _utf8_len(b, i):
    for n in (1, 2, 3, 4):
        try:
            b[i:i + n].decode("utf-8")
            return n
        except UnicodeDecodeError:
            continue
    return 0


# What names_cp_needs_escape() in src/lib/names.c escapes besides the controls:
# bidi controls, invisible characters, joiners, variation selectors, tags.
_ESCAPED_RANGES = ((0x202a, 0x202e), (0x2066, 0x2069), (0x00ad, 0x00ad), (0x034f, 0x034f),
                   (0x061c, 0x061c), (0x115f, 0x1160), (0x17b4, 0x17b5), (0x180e, 0x180e),
                   (0x200b, 0x200f), (0x2060, 0x2064), (0x206a, 0x206f), (0x3164, 0x3164),
                   (0xfeff, 0xfeff), (0xffa0, 0xffa0), (0xfff9, 0xfffb), (0x1d173, 0x1d17a),
                   (0xfe00, 0xfe0f), (0xe0000, 0xe0fff))


def _is_control(seq):
    cp = ord(seq.decode())
    return (cp < 0x20 or cp == 0x7f or 0x80 <= cp <= 0x9f or
            any(lo <= cp <= hi for lo, hi in _ESCAPED_RANGES))


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices and mounts)")


def need_tools(*tools):
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip("%s is not installed" % t)


MKFS_TOOL = {"xfs": "mkfs.xfs", "ext4": "mkfs.ext4", "btrfs": "mkfs.btrfs",
             "ext2": "mkfs.ext2", "ext3": "mkfs.ext3",
             "squashfs": "mksquashfs", "erofs": "mkfs.erofs"}


def need_fs(fstype):
    """Skip unless the kernel has fstype and its mkfs tool is installed."""
    need_root()
    if fstype in MKFS_TOOL:
        need_tools(MKFS_TOOL[fstype])
    kname = {"overlay": "overlay"}.get(fstype, fstype)
    with open("/proc/filesystems") as f:
        known = {line.split()[-1] for line in f if line.strip()}
    if kname not in known:
        subprocess.run(["modprobe", kname], capture_output=True)
        with open("/proc/filesystems") as f:
            known = {line.split()[-1] for line in f if line.strip()}
        if kname not in known:
            pytest.skip("the kernel has no %s" % kname)



XFS_SYNCD = "/proc/sys/fs/xfs/xfssyncd_centisecs"
FAST_XFS_SYNCD = "100"          # its minimum: 1 s
DEFAULT_XFS_SYNCD = "3000"      # the kernel's default (xfs_globals.c): 30 s


@pytest.fixture
def fast_xfs_log_worker():
    """The XFS log worker every second (fs.xfs.xfssyncd_centisecs = 100,
    its minimum) instead of every 30 s, restored afterwards.  fscrub's XFS
    on-disk check waits one period for it before its third look at an AG
    that looked damaged (xfs_ondisk.c): 1 s a test instead of 32 s.  Tests
    that must see the default wait do not use this."""
    if not os.path.exists(XFS_SYNCD):     # xfs not loaded yet: the default wait
        yield
        return
    with open(XFS_SYNCD) as f:
        old = f.read().strip()
    # Our own 100 is a leak, not a setting to restore: two runs whose tests
    # overlap (helpers, CI jobs on one machine) or a killed run leave it,
    # and every later run, on a machine "not fresh", then sees the log
    # written back within 1 s where a fresh machine waits 30 s.
    if old == FAST_XFS_SYNCD:
        old = DEFAULT_XFS_SYNCD
    with open(XFS_SYNCD, "w") as f:
        f.write(FAST_XFS_SYNCD + "\n")
    try:
        yield
    finally:
        with open(XFS_SYNCD, "w") as f:
            f.write(old + "\n")

@pytest.fixture
def workdir():
    """A scratch directory under /tmp, removed afterwards (mounts inside it
    are cleaned up by the fixtures that made them)."""
    d = tempfile.mkdtemp(prefix="fscrub-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def image_factory(workdir):
    """Make Image objects that are always unmounted and detached afterwards."""
    made = []

    def make(fstype, size_mb=256, mkfs_args=(), name=None):
        need_fs(fstype)
        img = fsimage.Image(workdir, fstype, size_mb=size_mb, mkfs_args=mkfs_args,
                            name=name)
        made.append(img)
        return img

    yield make
    for img in reversed(made):
        img.cleanup(remove=True)


@pytest.fixture
def dropping_caches():
    """Drop the kernel's caches (dentries and inodes too) every 50 ms until
    the test ends: inodes are evicted and looked up again under a running
    scan, as under memory pressure or another test's drop_caches."""
    need_root()
    stop = threading.Event()

    def drop():
        while not stop.wait(0.05):    # often enough to land inside every run
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
    dropper = threading.Thread(target=drop)
    dropper.start()
    yield
    stop.set()
    dropper.join()


@pytest.fixture
def cleanups():
    """A list of callables run (last first) at teardown, even on failure."""
    todo = []
    yield todo
    for fn in reversed(todo):
        try:
            fn()
        except Exception as e:  # keep cleaning up
            print("cleanup failed: %r" % e, file=sys.stderr)


@pytest.fixture
def mounts(cleanups):
    """fsimage.Mounts: mounts(...).loop(path, *losetup_args) and
    .mount(src, mnt, *mount_args), undone last first at teardown with the
    test's other cleanups."""
    return fsimage.Mounts(cleanups)


@pytest.fixture
def big_fs(image_factory):
    """ext4 on a direct-I/O loop device with 768 MiB of file data."""
    img = image_factory("ext4", size_mb=1024)
    img.mkfs()
    img.attach(direct_io=True)
    mnt = img.mount()
    block = os.urandom(1 << 20)
    for i in range(3):
        with open(os.path.join(mnt, "data%d" % i), "wb") as f:
            for _ in range(256):
                f.write(block)
    img.offline()
    img.attach(direct_io=True)      # reads go to the disk, not the host's cache
    img.mount()     # cold: the remount left nothing of it in memory
    return img.mnt
