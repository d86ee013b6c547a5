"""-x reads the device alongside the metadata scan (issue 22, item 4).

With -x, the device reads in physical order start at the beginning of
phase 3 from the space map (GETFSMAP), while the walk runs; phase 5 joins
them and reads what the walk mapped besides (src/data/devverify.h).  The order
of events is shown without wall-clock thresholds: the JSON report gives
each phase's start ("began_seconds"), and FSCRUB_DEBUG_OVERLAP_WAIT=1 makes
phase 3 wait for the early reads before it ends, so that the -v line's
"N of them alongside" is all the early pass read, however fast the walk.
"""

import json
import os
import re
import time

import pytest

from conftest import run_fscrub
from test_media import BLOCK, FSTYPES, bad_media, populated, write  # noqa: F401 (a fixture)

WAIT = {"FSCRUB_DEBUG_OVERLAP_WAIT": "1"}
READ = re.compile(r"(\d+) reads of up to 8 MiB alongside phases 3 and 4 and (\d+) after "
                  r"them, .*, (\d+) bytes of file data in (\d+) bytes read, (\d+) of them "
                  r"alongside")


def _phases(path):
    with open(path) as f:
        return {p["number"]: p for p in json.load(f)["phases"]}


@pytest.mark.parametrize("fstype", FSTYPES)
def test_data_reads_begin_before_phase_3_ends(image_factory, bad_media, workdir, fstype):
    img, layout = populated(image_factory, fstype)
    m = bad_media(img, [])
    out = os.path.join(workdir, "r.json")
    r = run_fscrub("-n", "-x", "-v", "-T", "--json", out, m.mnt, env=WAIT)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    p = _phases(out)
    # phase 5's reads began inside phase 3, after its start
    assert p[3]["began_seconds"] <= p[5]["began_seconds"], p
    assert p[5]["began_seconds"] < p[3]["began_seconds"] + p[3]["wall_seconds"], p
    assert "Phase 5: wall" in r.stdout and "(from its first reads, during phase 3)" in r.stdout
    got = READ.search(r.stdout)
    assert got, r.stdout
    early, data, total, alongside = (int(got.group(i)) for i in (1, 3, 4, 5))
    want = sum(x["length"] for n, v in layout.items() if n != "hole" for x in v)
    assert data == want, (want, r.stdout)
    # every byte of file data was read before phase 3 ended
    assert early > 0 and alongside >= data, r.stdout
    assert data <= total < data + (1 << 20), r.stdout     # directories, gaps: small
    with open(out) as f:
        assert json.load(f)["stats"]["bytes_read"] == total


@pytest.mark.parametrize("fstype", FSTYPES)
def test_media_error_found_alongside_is_reported_after_the_walk(image_factory, bad_media,
                                                                fstype):
    img, layout = populated(image_factory, fstype)
    ext = layout["d/victim"][0]
    bad_off = ext["physical"] + (256 << 10)
    m = bad_media(img, [(bad_off, 2 * BLOCK)])
    r = run_fscrub("-n", "-x", "-v", m.mnt, env=WAIT)
    assert r.rc == 4, r
    got = READ.search(r.stdout)
    assert got and int(got.group(5)) > 0, r.stdout
    errs = r.errors
    assert len(errs) == 1 and errs[0].check == "media.file", r
    assert errs[0].path == m.mnt + "/d/victim", r
    want_off = ext["logical"] + (256 << 10)
    assert ("device offset %d (%d bytes): file offset %d is unreadable"
            % (bad_off, 2 * BLOCK, want_off)) in errs[0].message, r
    assert not r.warnings, r
    # the line order is the sequential run's: findings after phase 5's lines
    seq = run_fscrub("-n", "-x", m.mnt, env={"FSCRUB_DEBUG_NO_OVERLAP": "1"})
    assert seq.rc == 4 and [e.message for e in seq.errors] == [e.message for e in errs], seq


def test_modes_that_cannot_overlap_say_why(image_factory, bad_media, workdir):
    img, _ = populated(image_factory, "ext4")
    m = bad_media(img, [])
    db = os.path.join(workdir, "ledger")
    os.makedirs(db)
    r = run_fscrub("-n", "-x", "-v", "--ledger", db, m.mnt)
    assert r.rc == 0, r
    assert ("the reads did not overlap phases 3 and 4: the checksum ledger hashes every "
            "file's bytes as they are read") in r.stdout, r.stdout
    assert "alongside" not in r.stdout, r.stdout
    r = run_fscrub("-n", "-x", "-v", m.mnt, env={"FSCRUB_DEBUG_NO_OVERLAP": "1"})
    assert "did not overlap phases 3 and 4: FSCRUB_DEBUG_NO_OVERLAP is set" in r.stdout, r


def test_checksum_records_met_by_the_walk_read_again_hashing(image_factory, bad_media):
    """Files with a record in an attribute (from an earlier --record): the
    early reads stop and phase 5 reads everything again, hashing."""
    img, _ = populated(image_factory, "xfs")
    m = bad_media(img, [])
    r = run_fscrub("-x", "--record", m.mnt)
    assert r.rc == 0, r
    time.sleep(1.1)     # the records' ctime more than 1 s before the scan
    r = run_fscrub("-n", "-x", "-v", m.mnt, env=WAIT)
    assert r.rc == 0 and not r.errors, r
    assert "read again: files have checksum records to compare" in r.stdout, r.stdout
    assert re.search(r"checksum ledger \(.*\): 3 files verified", r.stdout), r.stdout


def test_ext4_group_tails_are_read_alongside(image_factory, bad_media):
    """ext4's GETFSMAP (6.18) gives no record for a group's blocks after
    its last free extent: three files of 50 MB written together leave a
    group ending in file data after a free gap (a map of the records alone
    held 24 of the 150 MB), which must still be read alongside the walk
    (spacemap.c counts what no record covers as in use), none of it after."""
    img = image_factory("ext4", size_mb=1024).mkfs()
    mnt = img.mount()
    for i in range(3):
        with open(os.path.join(mnt, "f%d" % i), "wb") as f:
            for k in range(50000000 // 1000000):
                f.write(bytes([i + 1 + k % 7]) * 1000000)
    os.sync()
    time.sleep(1.1)
    m = bad_media(img, [])
    r = run_fscrub("-n", "-x", "-v", m.mnt, env=WAIT)
    assert r.rc == 0 and not r.errors, r
    got = READ.search(r.stdout)
    assert got, r.stdout
    assert int(got.group(2)) == 0 and int(got.group(5)) >= int(got.group(3)), r.stdout


def test_phase5_progress_counts_the_reads_done_alongside(image_factory, bad_media):
    """-C: phase 5 counts what was read during phases 3 and 4 as done (its
    first line is a resumed run's head start only, test_resume.py), and its
    last line says DONE == TOTAL."""
    img, _ = populated(image_factory, "xfs")
    m = bad_media(img, [])
    r = run_fscrub("-n", "-x", "-v", "-C", "1", m.mnt, env=WAIT)
    assert r.rc == 0, r
    early = int(READ.search(r.stdout).group(5))
    five = [[int(x) for x in l.split()[1:3]] for l in r.stdout.splitlines()
            if l.startswith("5 ")]
    assert five and five[-1][0] == five[-1][1] >= early > 0, (early, five)
