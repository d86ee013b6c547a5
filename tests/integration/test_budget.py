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
