"""-x --time-budget DURATION and the regions a stopped rotating scan keeps
(regions.h): a budget run reads the device regions least recently read
first and stops reading when the run has taken its budget -- a planned
partial scan: exit 0, status 'complete' -- recording the regions it read
to their end, so that successive budget runs cover the device; a --portion
run cancelled by SIGTERM keeps the regions it completed.

The images are filled as in test_portion.py (four 64 MiB regions of about
equal data); --limit makes the reads take a known time.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import FSCRUB, check_sanitizers, run_fscrub
import fsimage
from test_portion import ENV, REGION_MB, _fill
from test_state import state_dir, status_json  # noqa: F401 (state_dir: a fixture)

MB = 1000 * 1000


def _budget_run(state, mnt, workdir, budget, *args):
    out = os.path.join(workdir, "b.json")
    r = run_fscrub("-n", "-v", "--time-budget", budget, "--state-dir", state, "--json", out,
                   *args, mnt, env=ENV)
    with open(out) as f:
        j = json.load(f)
    return r, j


def _shares(state, mnt):
    rc, j = status_json(state, mnt)
    fs = j["filesystems"][0]
    return fs, fs["regions"]["verified_share"] if fs["regions"] else None


@pytest.mark.slow
def test_budget_stops_and_successive_runs_cover_everything(image_factory, state_dir,
                                                           workdir):
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    before = 0.0
    runs = []
    # ~57 MB of file data a region at 20 MB/s: about 3 s each; 5 s: one or two regions
    for i in range(8):
        t = time.monotonic()
        r, j = _budget_run(state_dir, mnt, workdir, "5s", "--limit", "20M")
        took = time.monotonic() - t
        d = j["data_regions"]
        runs.append((r.rc, d, took))
        assert r.rc == 0 and j["cancelled"] is False and j["exit_code"] == 0, r
        assert d["regions"] == 4 and d["region_size"] == REGION_MB << 20, d
        assert d["time_budget"] == 5
        fs, share = _shares(state_dir, mnt)
        assert fs["last_run"]["status"] == "complete" and fs["last_run"]["portion"], fs
        if d["budget_spent"]:
            assert "The time budget ended the data scan." in r.stdout, r.stdout
            assert "--time-budget: 5 s spent, no further reads" in r.stdout, r.stdout
            assert 0 < d["regions_verified"] < 4, d
            assert took < 5 + 4, runs   # stops about when the budget is spent
        assert "%d of 4 regions with file data verified (%d of %d bytes)." % (
            d["regions_verified"], d["bytes_verified"], d["bytes"]) in r.stdout, r.stdout
        # the regions it read are recorded, and they were the never-read ones
        after = share["7d"]
        assert after == pytest.approx(min(1.0, before + d["bytes_verified"] / d["bytes"])), runs
        before = after
        if share["never"] == 0:
            break
    assert before == pytest.approx(1.0), runs
    assert len(runs) >= 2 and runs[0][1]["budget_spent"], runs
    assert fs["data_coverage"] is not None, fs


@pytest.mark.slow
def test_budget_shorter_than_a_region_goes_on(image_factory, state_dir, workdir):
    """A region the budget ends in keeps its part read (regions.h, read_to):
    the next run goes on from there, so budgets shorter than a region's
    read still cover the device run after run, reading each byte about
    once -- where a region read in part was read again from its start,
    a region holding more than one budget reads was never verified."""
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    # 20 MB/s for 3 s, phases 1-4 included: under 60 MB a run, and a region
    # (64 MiB) holds up to 67 MB of file data here
    runs, read, said = [], 0, 0
    for i in range(10):
        r, j = _budget_run(state_dir, mnt, workdir, "3s", "--limit", "20M")
        d = j["data_regions"]
        assert r.rc == 0 and d["budget_spent"], (r, d)
        runs.append((d["regions_verified"], j["stats"]["bytes_read"]))
        read += j["stats"]["bytes_read"]
        said += "1 region read in part: the next run goes on from there." in r.stdout
        fs, share = _shares(state_dir, mnt)
        if share["never"] == 0:
            break
    assert share["never"] == 0 and share["7d"] == pytest.approx(1.0), (runs, share)
    assert said >= len(runs) - 1, runs      # each run but perhaps the last ends in a region
    # each byte about once: one pass, and what the last run read again of its first regions
    assert read < 1.5 * d["bytes"], (runs, d)


def test_budget_with_portion_whichever_ends_first(image_factory, state_dir, workdir):
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    # a long budget: --portion ends the run (one region)
    r, j = _budget_run(state_dir, mnt, workdir, "1h", "--portion", "25%")
    d = j["data_regions"]
    assert r.rc == 0 and d["regions_verified"] == 1 and not d["budget_spent"], (r, d)
    # a short budget: it ends the run before --portion's three regions are read
    r, j = _budget_run(state_dir, mnt, workdir, "3s", "--portion", "75%", "--limit", "20M")
    d = j["data_regions"]
    assert r.rc == 0 and d["budget_spent"] and d["regions_verified"] < 3, (r, d)


@pytest.mark.parametrize("value", ["", "5", "0s", "-5m", "1.5h", "2x", "h", "367d",
                                   "1h30", "99999999999999999999s"])
def test_bad_budget_is_a_usage_error(state_dir, value):
    r = run_fscrub("--time-budget", value, "--state-dir", state_dir, "/")
    assert r.rc == 16 and "--time-budget needs a duration such as 2h" in r.stderr, r


def test_budget_refuses_what_it_cannot_go_with(state_dir):
    r = run_fscrub("--time-budget", "1h", "--no-state", "/")
    assert r.rc == 16 and "--time-budget reads when each region was last verified" \
        in r.stderr, r
    r = run_fscrub("--time-budget", "1h", "--record", "--state-dir", state_dir, "/")
    assert r.rc == 16 and "not with --record, --ledger or --manifest" in r.stderr, r


def test_sigterm_keeps_the_regions_completed(image_factory, state_dir, workdir):
    """--portion 75% (three regions, in device order) read at 20 MB/s one
    read at a time (-b): SIGTERM once 80 MB were read, when the first
    region (at most 64 MiB of data) is read and the third is not.  The run
    is cancelled (32), and the regions it read to their end are recorded:
    the next run takes the never-read ones first."""
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    rfd, wfd = os.pipe()
    p = subprocess.Popen([FSCRUB, "-n", "-b", "-v", "--portion", "75%", "--limit", "20M",
                          "--state-dir", state_dir, "-C", str(wfd), mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         pass_fds=(wfd,), env=dict(os.environ, **ENV))
    os.close(wfd)
    sent = False
    with os.fdopen(rfd) as progress:
        for line in progress:
            phase, done = line.split()[:2]
            if phase == "5" and int(done) >= 80 * MB and not sent:
                p.send_signal(signal.SIGTERM)
                sent = True
    out, err = p.communicate(timeout=120)
    check_sanitizers(err)
    assert sent and p.returncode == 32, (p.returncode, out, err)
    fs, share = _shares(state_dir, mnt)
    assert fs["last_run"]["status"] == "cancelled", fs
    assert share is not None and 0 < share["7d"] < 0.75, fs
    assert fs["data_coverage"] is None, fs
    kept = share["7d"]
    # the next run reads the regions never read, not the ones the cancelled run kept
    out = os.path.join(workdir, "n.json")
    r = run_fscrub("-n", "-v", "--portion", "25%", "--state-dir", state_dir, "--json", out,
                   mnt, env=ENV)
    assert r.rc == 0, r
    fs, share = _shares(state_dir, mnt)
    with open(out) as f:
        d = json.load(f)["data_regions"]
    assert share["7d"] == pytest.approx(kept + d["bytes_verified"] / d["bytes"]), (kept, share)


class Reads:
    """inotify IN_ACCESS on every file below a directory: which files a
    run read (a read through fscrub's private clone of the mount is an
    access of the same inode)."""
    IN_ACCESS, IN_NONBLOCK = 0x1, 0o4000

    def __init__(self, root):
        import ctypes
        import ctypes.util
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK)
        assert self.fd >= 0
        self.wd = {}
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                wd = self.libc.inotify_add_watch(self.fd, p.encode(), self.IN_ACCESS)
                assert wd >= 0, p
                self.wd[wd] = p

    def take(self):
        """The files read since the last call."""
        import struct
        got = set()
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return got
            off = 0
            while off < len(buf):
                wd, mask, _, n = struct.unpack_from("iIII", buf, off)
                off += 16 + n
                if mask & self.IN_ACCESS:
                    got.add(self.wd[wd])

    def close(self):
        os.close(self.fd)


def _files_tree(root, subvolumes=False):
    """40 files of distinct sizes; on btrfs half of them in two subvolumes
    (inode numbers repeat there)."""
    dirs = [root]
    if subvolumes:
        for sv in ("a", "b"):
            fsimage.run(["btrfs", "subvolume", "create", os.path.join(root, sv)])
            dirs.append(os.path.join(root, sv))
    sizes = {}
    for i in range(40):
        p = os.path.join(dirs[i % len(dirs)], "f%02d" % i)
        with open(p, "wb") as f:
            f.write(os.urandom((i + 1) * 10000))
        sizes[p] = (i + 1) * 10000
    os.sync()
    time.sleep(1.1)
    return sizes


@pytest.mark.parametrize("fstype", ["tmpfs", "btrfs"])
def test_portion_by_file_four_quarters_read_every_file_once(image_factory, state_dir,
                                                             workdir, fstype):
    """Where phase 5 reads file by file, --portion 25% rotates over buckets
    of files (regions.h): four runs read each file exactly once, the
    fifth starts over; status shows the buckets' ages."""
    if fstype == "tmpfs":
        fs = fsimage.make_tmpfs(workdir, populate=False)
        mnt, cleanup = fs.mnt, fs.cleanup
    else:
        img = image_factory("btrfs", size_mb=300).mkfs()
        mnt, cleanup = img.mount(), lambda: None
    try:
        sizes = _files_tree(mnt, subvolumes=fstype == "btrfs")
        reads = Reads(mnt)
        seen = []
        for i in range(5):
            out = os.path.join(workdir, "p.json")
            r = run_fscrub("-n", "-v", "--portion", "25%", "--state-dir", state_dir,
                           "--json", out, mnt)
            assert r.rc == 0, r
            assert "--portion: 256 of 1024 buckets of files" in r.stdout, r.stdout
            got = reads.take()
            with open(out) as f:
                j = json.load(f)
            assert j["stats"]["bytes_read"] == sum(sizes[p] for p in got), (got, j["stats"])
            assert j["data_regions"]["region_size"] == 0, j
            seen.append(got)
        reads.close()
        first4 = seen[:4]
        assert set().union(*first4) == set(sizes), (len(set().union(*first4)), len(sizes))
        assert sum(len(s) for s in first4) == len(sizes), [len(s) for s in seen]
        assert seen[4] == seen[0], "the fifth run starts over with the first one's"
        rc, j = status_json(state_dir, mnt)
        fs_ = j["filesystems"][0]
        assert fs_["regions"]["size"] == 0, fs_
        assert fs_["regions"]["verified_share"]["7d"] == pytest.approx(1.0), fs_
        assert fs_["data_coverage"] is not None, fs_
    finally:
        cleanup()


def test_budget_by_file_successive_runs_cover_everything(state_dir, workdir):
    """--time-budget where phase 5 reads file by file: the buckets are read
    oldest first in up to eight walks; those of the walks that ended are
    recorded, so successive runs read every file."""
    fs = fsimage.make_tmpfs(workdir, populate=False)
    try:
        sizes = _files_tree(fs.mnt)     # 8.2 MB
        reads = Reads(fs.mnt)
        read = set()
        before = 0.0
        for i in range(10):
            out = os.path.join(workdir, "b.json")
            # 2 MB/s for 3 s: less than the data
            r = run_fscrub("-n", "-v", "--time-budget", "3s", "--limit", "2M",
                           "--state-dir", state_dir, "--json", out, fs.mnt)
            assert r.rc == 0, r
            with open(out) as f:
                d = json.load(f)["data_regions"]
            read |= reads.take()
            rc, j = status_json(state_dir, fs.mnt)
            share = j["filesystems"][0]["regions"]["verified_share"]
            if i == 0:
                assert d["budget_spent"] and 0 < d["bytes_verified"] < d["bytes"], d
            assert share["7d"] > before or share["never"] == 0, (i, d, share)
            before = share["7d"]
            if share["never"] == 0:
                break
        reads.close()
        assert share["never"] == 0 and read == set(sizes), (i, share)
    finally:
        fs.cleanup()
