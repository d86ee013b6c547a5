"""-x --portion P%: rotating media scans.  Each run reads the device
regions (regions.h) least recently read, until their file data comes
closest to P % of it; four runs of 25 % read every region once, the fifth
starts over with the oldest, and a bad sector is found by the run whose
regions hold it.  status shows the regions' age histogram.

The images are filled with files so that the four 64 MiB regions
(FSCRUB_DEBUG_REGION_MB=64) of a 256 MiB filesystem hold about as much data
each; bad sectors come from eiofs, as in test_media.py.
"""

import json
import os
import re
import time

import pytest

from conftest import run_fscrub
import fsimage
from test_media import BLOCK, bad_media, write  # noqa: F401 (bad_media: a fixture)
from test_state import state_dir, status_json  # noqa: F401 (state_dir: a fixture)

REGION_MB = 64
ENV = {"FSCRUB_DEBUG_REGION_MB": str(REGION_MB)}
CHOSEN = re.compile(r"--portion (\d+)%: regions ([\d,]+) \((\d+) of the (\d+) with file data")
DATA = re.compile(r"(\d+) bytes of file data in (\d+) bytes read")


def _fill(mnt):
    """Files of 4 MiB until the filesystem is about 90 % full."""
    os.makedirs(os.path.join(mnt, "d"), exist_ok=True)
    st = os.statvfs(mnt)
    n = int(st.f_blocks * st.f_frsize * 0.9 - (st.f_blocks - st.f_bfree) * st.f_frsize) \
        // (4 << 20)
    for i in range(n):
        write(os.path.join(mnt, "d", "f%03d" % i), 4 << 20, i + 1)
    os.sync()
    time.sleep(1.1)     # ctime more than 1 s before the scan: not "changed"


def _portion(state, mnt, workdir, *args, pct="25%"):
    """One --portion run: (result, regions read, file data bytes, bytes read)."""
    out = os.path.join(workdir, "r.json")
    r = run_fscrub("-n", "-v", "--portion", pct, "--state-dir", state, "--json", out,
                   *args, mnt, env=ENV)
    m = CHOSEN.search(r.stdout)
    assert m, r.stdout
    d = DATA.search(r.stdout)
    with open(out) as f:
        stats = json.load(f)["stats"]
    assert d and int(d.group(2)) == stats["bytes_read"], (r.stdout, stats)
    return r, [int(i) for i in m.group(2).split(",")], int(d.group(1)), stats["bytes_read"]


def _full_data(mnt):
    r = run_fscrub("-n", "-x", "-v", "--no-state", mnt, env=ENV)
    assert r.rc == 0, r
    return int(DATA.search(r.stdout).group(1))


@pytest.mark.parametrize("fstype", ["ext4", "xfs"])
def test_four_quarters_cover_every_region_once(image_factory, state_dir, workdir, fstype):
    img = image_factory(fstype, size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    runs = []
    for i in range(5):
        r, regions, data, read = _portion(state_dir, mnt, workdir)
        assert r.rc == 0, r
        assert read > 0, r.stdout
        runs.append((regions, data))
        if i == 0:
            rc, j = status_json(state_dir, mnt)
            fs = j["filesystems"][0]
            share = fs["regions"]["verified_share"]
            assert fs["regions"]["count"] == 4 and fs["regions"]["size"] == REGION_MB << 20, fs
            assert 0 < share["7d"] < 1 and abs(share["7d"] + share["never"] - 1) < 1e-9, fs
            assert fs["data_coverage"] is None and fs["last_data_verified"] is None, fs
            assert fs["last_run"]["portion"] is True, fs
    first4 = [set(r) for r, _ in runs[:4]]
    union = set().union(*first4)
    assert union == {0, 1, 2, 3}, runs
    assert sum(len(s) for s in first4) == 4, "a region read twice in four runs: %s" % runs
    # together, the four read exactly the file data a full -x reads
    assert sum(d for _, d in runs[:4]) == _full_data(mnt), runs
    # the fifth starts over with the regions read longest ago
    assert runs[4][0] == runs[0][0], runs
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert fs["regions"]["verified_share"]["7d"] == pytest.approx(1.0), fs
    assert fs["regions"]["verified_share"]["never"] == 0, fs
    assert fs["data_coverage"] is not None and fs["overdue"]["data"] is False, fs
    assert fs["last_data_verified"] is None, fs   # no single run read it all
    p = run_fscrub("status", "--state-dir", state_dir, mnt)
    assert "data regions:  4 regions of 64 MiB, by the age of their last read: 100% < 7 days" \
        in p.stdout, p.stdout


def test_metrics_share_verified(image_factory, state_dir, workdir):
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    prom = os.path.join(workdir, "m.prom")
    r, regions, _, _ = _portion(state_dir, mnt, workdir, "--metrics", prom)
    assert r.rc == 0, r
    with open(prom) as f:
        text = f.read()
    m = re.search(r'fscrub_data_verified_share\{[^}]*within="7d"\} (\S+)', text)
    assert m and 0 < float(m.group(1)) < 1, text
    assert re.search(r'fscrub_data_verified_share\{[^}]*within="90d"\} ', text), text
    assert re.search(r"fscrub_data_verified_age_seconds\{[^}]*\} \+Inf", text), text


def _victim(mnt, region):
    """A file wholly inside *region*, and a device offset in it."""
    for name in sorted(os.listdir(os.path.join(mnt, "d"))):
        ext = fsimage.fiemap(os.path.join(mnt, "d", name))
        if all(e["physical"] // (REGION_MB << 20) == region and
               (e["physical"] + e["length"] - 1) // (REGION_MB << 20) == region for e in ext):
            return name, ext[0]["physical"] + (64 << 10)
    pytest.fail("no file wholly in region %d" % region)


def test_fault_found_by_the_run_that_reads_its_region(image_factory, state_dir, workdir,
                                                      bad_media):
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    victim, bad = _victim(mnt, 2)
    m = bad_media(img, [(bad, BLOCK)])
    seen = []
    for _ in range(4):
        r, regions, _, _ = _portion(state_dir, m.mnt, workdir)
        seen.append((regions, r.rc, [(e.check, e.path) for e in r.errors]))
    for regions, rc, errors in seen:
        if 2 in regions:
            assert rc == 4 and errors == [("media.file", os.path.join(m.mnt, "d", victim))], \
                seen
        else:
            assert rc == 0 and not errors, seen
    assert sum(2 in regions for regions, _, _ in seen) == 1, seen


def test_stopped_run_records_no_region(image_factory, state_dir, workdir, bad_media):
    """-a 1 stops the run at the bad sector: its regions are not recorded
    as read, and the next run reads them again."""
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt)
    victim, bad = _victim(mnt, 0)       # region 0: the first chosen (ties by offset)
    m = bad_media(img, [(bad, BLOCK)])
    r, first, _, _ = _portion(state_dir, m.mnt, workdir, "-a", "1")
    assert r.rc & 4 and 0 in first, r
    rc, j = status_json(state_dir, m.mnt)
    assert j["filesystems"][0]["last_run"]["status"] == "stopped", j
    r, again, _, _ = _portion(state_dir, m.mnt, workdir)
    assert again == first and r.rc == 4, (first, again, r)
    r, after, _, _ = _portion(state_dir, m.mnt, workdir)
    assert not set(after) & set(first), (first, after)


@pytest.mark.parametrize("value", ["0%", "101%", "abc", "", "25%%", "-5", "12.5%"])
def test_bad_portion_is_a_usage_error(state_dir, value):
    r = run_fscrub("--portion", value, "--state-dir", state_dir, "/")
    assert r.rc == 16 and "--portion needs a share of the data" in r.stderr, r


@pytest.mark.parametrize("args,why", [
    (["--no-state"], "reads when each region was last verified from the run history"),
    (["--since", "7d"], "--rescan-errors and --since choose files"),
    (["--rescan-errors"], "--rescan-errors and --since choose files"),
    (["--record"], "not with --record, --ledger or --manifest"),
    (["--manifest", "/dev/null"], "not with --record, --ledger or --manifest"),
])
def test_portion_refuses_what_it_cannot_go_with(state_dir, args, why):
    extra = [] if "--no-state" in args else ["--state-dir", state_dir]
    r = run_fscrub("--portion", "25%", *extra, *args, "/")
    assert r.rc == 16 and why in r.stderr, r
