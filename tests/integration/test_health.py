"""fscrub health: what the kernel already knows, without a scan.

ext4 with errors in its superblock record (set offline with debugfs, and
caused live by a corrupted directory block), btrfs with a device
corruption counter raised by a bad data checksum, and clean ext4, XFS and
btrfs.  That nothing is scanned is shown by strace: no directory is read
(getdents64) and nothing but the mount point and sysfs is opened.
"""

import json
import os
import re
import subprocess
import time

import pytest

from conftest import FSCRUB, TOP, check_sanitizers, need_fs, need_tools
from fsimage import run
from test_btrfs import btrfs_factory, corrupt_data, mount_degraded  # noqa: F401 (a fixture)
from test_watch import corrupt_dir_block, drop_caches, read_dir


def health(*args, timeout=60):
    p = subprocess.run([FSCRUB, "health"] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    check_sanitizers(p.stderr)
    return p


def health_json(*args):
    p = health("--json", *args)
    return p, json.loads(p.stdout)


def mounted(image_factory, fstype, populate=True):
    size = {"xfs": 300}.get(fstype, 128)
    img = image_factory(fstype, size_mb=size)
    img.mkfs()
    mnt = img.mount()
    if populate:
        for i in range(50):
            os.makedirs(os.path.join(mnt, "d%d" % (i % 5)), exist_ok=True)
            with open(os.path.join(mnt, "d%d" % (i % 5), "f%d" % i), "w") as f:
                f.write("x" * i)
    return img


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_clean(image_factory, fstype):
    img = mounted(image_factory, fstype)
    p = health(img.mnt)
    assert p.returncode == 0, p
    assert p.stdout.startswith("%s: %s on %s: healthy (" % (img.mnt, fstype, img.dev)), p.stdout
    assert "problem:" not in p.stdout
    p, j = health_json(img.mnt)
    assert p.returncode == 0 and j["exit_code"] == 0
    [fs] = j["filesystems"]
    assert (fs["mountpoint"], fs["type"], fs["status"], fs["problems"]) == \
        (img.mnt, fstype, "healthy", [])
    assert fs["last_scan"] is None
    if fstype == "ext4":
        assert fs["detail"]["errors_count"] == 0
    elif fstype == "xfs":
        assert fs["detail"]["sick"] == [] and fs["detail"]["sick_ags"] == []
        assert fs["detail"]["inodes"]["complete"] is True
        assert fs["detail"]["inodes"]["looked_at"] >= 50
    else:
        assert [d["corruption_errs"] for d in fs["detail"]["devices"]] == [0]


def test_ext4_error_count_from_superblock(image_factory):
    need_tools("debugfs")
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    run(["debugfs", "-w", "-R", "ssv error_count 3", img.path])
    img.mount()
    p = health(img.mnt)
    assert p.returncode == 4, p
    assert "%s: ext4 on %s: sick (ext4 sysfs)" % (img.mnt, img.dev) in p.stdout
    assert "problem: 3 errors recorded in the superblock" in p.stdout
    p, j = health_json(img.mnt)
    assert p.returncode == 4 and j["exit_code"] == 4
    fs = j["filesystems"][0]
    assert fs["status"] == "sick" and fs["detail"]["errors_count"] == 3


@pytest.mark.alone
def test_ext4_live_error(image_factory):
    """A corrupted directory block read on the live filesystem: the kernel
    records the error, and health reports where it was."""
    need_tools("debugfs")
    img = mounted(image_factory, "ext4", populate=False)
    d = os.path.join(img.mnt, "dir")
    os.mkdir(d)
    for i in range(10):
        open(os.path.join(d, "f%d" % i), "w").close()
    assert health(img.mnt).returncode == 0
    ino = corrupt_dir_block(img, d)
    read_dir(d)
    # the superblock's record is updated by a work item, right after the error
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        p, j = health_json(img.mnt)
        if j["filesystems"][0]["detail"]["errors_count"]:
            break
        time.sleep(0.1)
    assert p.returncode == 4, p
    det = j["filesystems"][0]["detail"]
    assert det["errors_count"] >= 1
    assert det["first_error"]["ino"] == ino and det["first_error"]["time"] > 0
    assert det["first_error"]["func"], det
    p = health(img.mnt)
    assert re.search(r"first error: \d{4}-\d\d-\d\dT\S+Z in \w+:\d+, inode %d," % ino,
                     p.stdout), p.stdout


@pytest.mark.alone
def test_btrfs_device_counters(btrfs_factory):  # noqa: F811
    fs = btrfs_factory()
    corrupt_data(fs)
    fs.mount()
    assert health(fs.mnt).returncode == 0
    drop_caches()
    with pytest.raises(OSError):
        with open(os.path.join(fs.mnt, "victim"), "rb") as f:
            f.read()
    p = health(fs.mnt)
    assert p.returncode == 4, p
    assert re.search(r"problem: devid 1 \S+: write_io_errs 0, read_io_errs 0, flush_io_errs 0, "
                     r"corruption_errs [1-9]\d*, generation_errs 0", p.stdout), p.stdout
    p, j = health_json(fs.mnt)
    assert j["filesystems"][0]["detail"]["devices"][0]["corruption_errs"] >= 1


def test_btrfs_missing_device(btrfs_factory):  # noqa: F811
    """A btrfs mounted degraded: the missing device is a problem (exit 4),
    and the device that is there is listed with its counters."""
    mnt = mount_degraded(btrfs_factory(ndev=2))
    p = health(mnt)
    assert p.returncode == 4, p
    assert "problem: devid 2 is missing: the filesystem is mounted without it" in p.stdout, p
    assert re.search(r"devid 1 \S+: write_io_errs 0", p.stdout), p.stdout
    p, j = health_json(mnt)
    devs = j["filesystems"][0]["detail"]["devices"]
    assert [(d["devid"], d["missing"]) for d in devs] == [(1, False), (2, True)], j


def test_no_health_source(workdir, mounts):
    need_fs("tmpfs")
    mnt = mounts.mount("tmpfs", os.path.join(workdir, "tmp"), "-t", "tmpfs")
    state = os.path.join(workdir, "state")
    os.mkdir(state)
    p = health("--state-dir", state, mnt)
    assert p.returncode == 0, p
    assert p.stdout == "%s: tmpfs on tmpfs: no health source\n" \
        "  last scan: none recorded; open: 0 errors, 0 warnings, 0 watch events\n" % mnt
    p, j = health_json(mnt)
    assert j["filesystems"][0]["status"] == "no health source"


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_does_not_scan(image_factory, fstype):
    """No directory read, nothing opened on the filesystem but its root, and
    quick (a generous bound: the point is the strace, not the clock)."""
    need_tools("strace")
    img = mounted(image_factory, fstype)
    t0 = time.monotonic()
    assert health(img.mnt).returncode == 0
    elapsed = time.monotonic() - t0
    assert elapsed < 5, elapsed
    log = os.path.join(os.path.dirname(img.mnt), "strace.log")
    # LeakSanitizer cannot run under ptrace (the run above had it)
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    p = subprocess.run(["strace", "-f", "-o", log, "-e", "trace=getdents64,openat,open",
                        FSCRUB, "health", img.mnt], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p
    calls = open(log).read().splitlines()
    assert not [c for c in calls if "getdents64(" in c], calls
    on_fs = [c for c in calls if img.mnt in c and '"%s"' % img.mnt not in c]
    assert on_fs == [], on_fs


def test_last_scan_from_the_run_history(image_factory, workdir):
    """health shows the last scan the run history holds for the filesystem
    (by the key status uses) in text and JSON, and exits 4 when the history
    has open errors that the kernel knows nothing of (a wrong link count,
    injected offline, is no kernel error)."""
    import faults
    from conftest import run_fscrub
    state = os.path.join(workdir, "state")
    os.mkdir(state)
    img = mounted(image_factory, "ext4")
    # no database yet: no scan recorded, not an error
    p = health("--state-dir", state, img.mnt)
    assert p.returncode == 0, p
    assert "  last scan: none recorded; open: 0 errors, 0 warnings, 0 watch events\n" \
        in p.stdout, p.stdout
    p, j = health_json("--state-dir", state, img.mnt)
    assert j["filesystems"][0]["last_scan"] is None

    assert run_fscrub("--state-dir", state, img.mnt).rc == 0
    p, j = health_json("--state-dir", state, img.mnt)
    assert p.returncode == 0 and j["exit_code"] == 0, p
    last = j["filesystems"][0]["last_scan"]
    st = json.loads(subprocess.run([FSCRUB, "status", "--json", "--state-dir", state, img.mnt],
                                   capture_output=True, text=True).stdout)["filesystems"][0]
    assert (last["uuid"], last["fsroot"]) == (st["uuid"], "/")
    assert last["run"] == st["last_run"] and last["run"]["status"] == "complete"
    assert last["last_complete"] == st["last_complete"] is not None
    assert (last["open_errors"], last["open_events"]) == (0, 0)
    p = health("--state-dir", state, img.mnt)
    assert re.search(r"^  last scan: \S+Z, complete, exit 0; open: 0 errors, ", p.stdout,
                     re.M), p.stdout

    img.offline()
    f = faults.ext4_wrong_nlink(img, nlink=3)
    time.sleep(1.1)
    img.mount()
    assert run_fscrub("--state-dir", state, img.mnt).rc == 4
    p, j = health_json("--state-dir", state, img.mnt)
    fs = j["filesystems"][0]
    assert p.returncode == 4 and j["exit_code"] == 4, p
    assert fs["detail"]["errors_count"] == 0            # the kernel knows nothing of it
    assert fs["status"] == "sick" and fs["last_scan"]["open_errors"] == 1, fs
    assert fs["last_scan"]["run"]["exit_code"] == 4
    assert fs["problems"] == ["the run history has 1 open errors and 0 watch events "
                              "(fscrub status)"], fs
    p = health("--state-dir", state, img.mnt)
    assert p.returncode == 4 and ", complete, exit 4; open: 1 errors" in p.stdout, p.stdout
    assert f["inode"]
    # a history that cannot be read is an operational error
    with open(os.path.join(state, "state.sqlite"), "wb") as db:
        db.write(b"not a database " * 512)
    p = health("--state-dir", state, img.mnt)
    assert p.returncode & 8 and "state database" in p.stderr, p


def test_usage():
    p = health("--bogus")
    assert p.returncode == 16 and "unknown option" in p.stderr, p
    p = health("/nonexistent-fscrub-path")
    assert p.returncode == 16, p
    p = health("--help")
    assert p.returncode == 0 and p.stdout.startswith("Usage: fscrub health"), p
    man = open(os.path.join(TOP, "man", "fscrub.8")).read()
    assert r"\-\-json" in man and "fscrub health" in man.replace("\\", "")


def test_xfs_unprivileged(image_factory, workdir):
    """Without CAP_SYS_ADMIN, XFS's BULKSTAT is refused: the filesystem and
    AG flags are still read, and the inodes are said not to be looked at."""
    need_tools("setpriv")
    img = mounted(image_factory, "xfs")
    os.chmod(workdir, 0o755)
    os.chmod(img.mnt, 0o755)
    p = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                        FSCRUB, "health", img.mnt], capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == 0, p
    assert "healthy (xfs health flags)" in p.stdout, p.stdout
    assert "inodes not looked at: BULKSTAT needs CAP_SYS_ADMIN" in p.stdout, p.stdout


@pytest.mark.alone
def test_default_lists_every_fs_once(btrfs_factory, image_factory):  # noqa: F811
    """Without arguments: every ext4, XFS and btrfs, once each, a btrfs
    mounted only by a subvolume included, tmpfs not.  Run in a private mount
    namespace from which every other such mount but / is unmounted (the
    host's mounts are not touched), so that only these are looked at.  (A
    mount under one unmounted before it is gone already: its umount fails.)"""
    need_tools("unshare", "findmnt")
    fs = btrfs_factory()
    mnt = fs.mount()
    run(["btrfs", "subvolume", "create", os.path.join(mnt, "sv")])
    run(["umount", mnt])
    run(["mount", "-o", "subvol=sv", fs.devs[0], mnt])
    img = mounted(image_factory, "ext4", populate=False)
    bind = img.mnt + ".bind"
    os.mkdir(bind)
    script = """set -e
mount --make-rprivate /
findmnt -rn -t ext4,xfs,btrfs -o TARGET | while read -r t; do
  t=$(printf '%b' "$t")
  case "$t" in /|"$1"|"$2") ;; *) umount -l "$t" 2>/dev/null || : ;; esac
done
mount --bind "$2" "$3"
exec "$4" health --json"""
    p = subprocess.run(["unshare", "--mount", "--", "sh", "-c", script, "sh", mnt, img.mnt,
                        bind, FSCRUB], capture_output=True, text=True, timeout=60)
    check_sanitizers(p.stderr)
    assert p.returncode == 0, p
    seen = [(f["mountpoint"], f["type"]) for f in json.loads(p.stdout)["filesystems"]]
    assert (mnt, "btrfs") in seen and (img.mnt, "ext4") in seen, seen
    assert (bind, "ext4") not in seen, seen            # the same filesystem once
    assert {t for _, t in seen} <= {"ext4", "xfs", "btrfs"}, seen
    assert len(seen) == len({m for m, _ in seen}), seen
    assert {m for m, _ in seen} - {"/"} == {mnt, img.mnt}, seen
