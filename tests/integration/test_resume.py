"""--resume: a run stopped by SIGTERM leaves a checkpoint in the run
history (checkpoint.h) and the next --resume run continues from it.

A run stopped in phase 3 resumes with the metadata phases in full; a run
stopped in the media scan (by the device, and file by file) resumes with
phase 5 reading only what was not verified.  Either way the resumed run
reports the findings an uninterrupted run reports -- media errors found
before the stop included -- and together the two runs read no more than
one uninterrupted run (stats.bytes_read of the JSON reports).  Bad sectors
come from eiofs (test_media.py); the media scan is slowed by --limit so
that SIGTERM catches it midway, once the checkpoint, saved every 200 ms
here (FSCRUB_DEBUG_CHECKPOINT_MS), shows it past the first bad sector.
"""

import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import FSCRUB, check_sanitizers, run_fscrub
import faults
import fsimage
from test_media import BLOCK, bad_media, write  # noqa: F401 (bad_media: a fixture)
from test_state import squashfuse_mount, state_dir, status_json  # noqa: F401 (state_dir: a fixture)

ENV = {"FSCRUB_DEBUG_CHECKPOINT_MS": "200"}
FILE = 4 << 20


def checkpoint(state):
    """The checkpoint row (run, saved, phase, cursor as a dict), or None."""
    db = sqlite3.connect(os.path.join(state, "state.sqlite"), timeout=30)
    try:
        row = db.execute("SELECT run, saved, phase, cursor FROM checkpoints").fetchone()
    except sqlite3.OperationalError:        # not made yet
        row = None
    finally:
        db.close()
    return row and (row[0], row[1], row[2], json.loads(row[3]))


def _fill(mnt, n=30):
    """n files of 4 MiB; returns [(name, first device offset)] in device order."""
    os.makedirs(os.path.join(mnt, "d"), exist_ok=True)
    for i in range(n):
        write(os.path.join(mnt, "d", "f%02d" % i), FILE, i + 1)
    os.sync()
    where = [(name, fsimage.fiemap(os.path.join(mnt, "d", name))[0]["physical"])
             for name in sorted(os.listdir(os.path.join(mnt, "d")))]
    time.sleep(1.1)     # ctime more than 1 s before the scan: not "changed"
    return sorted(where, key=lambda x: x[1])


def _report(path):
    with open(path) as f:
        j = json.load(f)
    errors = sorted((x["check"], x["path"], x["offset"]) for x in j["findings"]
                    if x["severity"] == "error")
    return j, errors


def _bytes_read(path):
    with open(path) as f:
        return json.load(f)["stats"]["bytes_read"]


def _stop_when(args, state, ready, env, timeout=120, cmd=(FSCRUB,)):
    """Start fscrub ARGS (or cmd ARGS); SIGTERM it once ready(checkpoint)
    holds; its result."""
    p = subprocess.Popen(list(cmd) + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, **env))
    saves = set()
    deadline = time.monotonic() + timeout
    try:
        while p.poll() is None and time.monotonic() < deadline:
            cp = checkpoint(state) if os.path.exists(os.path.join(state, "state.sqlite")) \
                else None
            if cp:
                saves.add(cp[1])
            if cp and ready(cp):
                p.send_signal(signal.SIGTERM)
                break
            time.sleep(0.05)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()            # ours
            p.wait()
    check_sanitizers(err)
    return p.returncode, out, err, saves


def _media_case(image_factory, bad_media, workdir, fstype, env, victims=(3, -3)):
    """A bad block in each of the files at *victims* in device order: the
    mount, those files [(name, offset)], the uninterrupted run's report."""
    img = image_factory(fstype, size_mb=256).mkfs()
    where = _fill(img.mount())
    bad = [where[i] for i in victims]
    m = bad_media(img, [(off + (1 + k % 2) * BLOCK, BLOCK) for k, (_, off) in enumerate(bad)])
    full = os.path.join(workdir, "full.json")
    r = run_fscrub("-n", "-x", "--no-state", "--json", full, m.mnt, env=env)
    assert r.rc == 4, r
    return m, bad, _report(full)


@pytest.mark.parametrize("fstype", ["ext4", "xfs"])
def test_media_scan_by_the_device_resumes(image_factory, bad_media, workdir, state_dir,
                                          fstype):
    m, (early, late), (jfull, want) = _media_case(image_factory, bad_media, workdir, fstype, {})
    assert {e[1] for e in want} == {os.path.join(m.mnt, "d", early[0]),
                                    os.path.join(m.mnt, "d", late[0])}, want
    one = os.path.join(workdir, "one.json")
    rc, out, err, saves = _stop_when(
        ["-n", "-x", "-v", "--limit", "16M", "--state-dir", state_dir, "--json", one, m.mnt],
        state_dir, lambda cp: early[1] + 2 * BLOCK < cp[3]["watermark"] < late[1], ENV)
    assert rc == 32, out + err
    assert len(saves) >= 2, "no periodic checkpoint before the stop: %s" % saves
    j1, _ = _report(one)
    run, _, phase, cursor = checkpoint(state_dir)
    assert phase == 5 and cursor["bad"] and cursor["watermark"] < late[1], cursor

    two = os.path.join(workdir, "two.json")
    r = run_fscrub("-n", "-x", "-v", "-C", "1", "--resume", "--state-dir", state_dir,
                   "--json", two, m.mnt, env=ENV)
    assert r.rc == 4, r
    assert "resuming run %d from phase 5 at " % run in r.stderr, r.stderr
    j2, got = _report(two)
    assert got == want, (got, want)
    assert j2["resume"]["resumed"] and j2["resume"]["run"] == run, j2["resume"]
    # -C: phase 5 starts with what the checkpoint covers done
    done = [int(x.split()[1]) for x in r.stdout.splitlines() if x.startswith("5 ")]
    assert done and done[0] == j2["resume"]["bytes_before"] == _bytes_read(one), (done, j2["resume"])
    # no region read twice: the two runs read no more than one whole run
    b1, b2, full = (j["stats"]["bytes_read"] for j in (j1, j2, jfull))
    assert 0 < b1 < full and 0 < b2 < full and b1 + b2 <= full, (b1, b2, full)
    assert b1 + b2 >= full - (8 << 20), (b1, b2, full)  # at most one merge gap less
    assert checkpoint(state_dir) is None        # a complete run deletes it
    db = sqlite3.connect(os.path.join(state_dir, "state.sqlite"))
    runs = db.execute("SELECT id, status, options FROM runs ORDER BY id").fetchall()
    db.close()
    assert [(i, s, json.loads(o)["resume"]) for i, s, o in runs] == \
        [(run, "cancelled", False), (run + 1, "complete", True)], runs
    # the history of the resumed run holds both, the one found before the stop too
    rc, j = status_json(state_dir, m.mnt)
    assert sorted((o["check"], o["path"]) for o in j["filesystems"][0]["open_findings"]) == \
        [(c, p) for c, p, _ in want], j


def read_some(cp, victims):
    """The checkpoint has a file with a bad block read to its end (its finding
    is carried), another file (a victim whose bad block is its first read
    nothing: with it alone the resumed run would read all the bytes an
    uninterrupted one reads), and fewer than 25 files."""
    done = {i for _, i in cp[3]["files"]}
    return done & victims and done - victims and len(cp[3]["files"]) < 25


def test_media_scan_file_by_file_resumes(image_factory, bad_media, workdir, state_dir):
    """FSCRUB_DEBUG_NO_DEVREAD: the per-file reader; the files read to their
    end are not read again, the findings in them are carried."""
    env = dict(ENV, FSCRUB_DEBUG_NO_DEVREAD="1")
    # four files with a bad block: one of them is read before the 25th file
    # whatever the order of the walk (all four among the last six: 1 in 1827)
    m, bad, (jfull, want) = _media_case(image_factory, bad_media, workdir, "ext4", env,
                                        victims=(3, 10, 18, -3))
    assert len(want) == 4, want
    victims = {os.stat(os.path.join(m.mnt, "d", n)).st_ino for n, _ in bad}
    one = os.path.join(workdir, "one.json")
    rc, out, err, _ = _stop_when(
        ["-n", "-x", "-v", "-j", "1", "--limit", "16M", "--state-dir", state_dir, "--json",
         one, m.mnt], state_dir,
        lambda cp: read_some(cp, victims), env)
    assert rc == 36, out + err      # cancelled, after an error
    j1, _ = _report(one)
    cursor = checkpoint(state_dir)[3]
    assert cursor["findings"], cursor
    two = os.path.join(workdir, "two.json")
    r = run_fscrub("-n", "-x", "-v", "-j", "1", "--resume", "--state-dir", state_dir,
                   "--json", two, m.mnt, env=env)
    assert r.rc == 4, r
    j2, got = _report(two)
    assert got == want, (got, want)
    b1, b2, full = (j["stats"]["bytes_read"] for j in (j1, j2, jfull))
    # the file being read at the stop is read again, nothing else
    assert b2 < full and b1 + b2 <= full + FILE, (b1, b2, full)


def _nlink_fault(image_factory, fstype):
    img = image_factory(fstype, size_mb=300).mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.offline()
    f = (faults.ext4_wrong_nlink if fstype == "ext4" else faults.xfs_wrong_nlink)(img)
    time.sleep(1.1)
    return img.mount(), f


def _findings(r):
    return sorted((e.check, e.path) for e in r.errors + r.warnings)


# -n: without it the XFS backend may repair through the kernel.
@pytest.mark.parametrize("fstype", ["ext4", "xfs"])
def test_stopped_in_phase3_resumes(image_factory, state_dir, fstype):
    mnt, f = _nlink_fault(image_factory, fstype)
    full = run_fscrub("-n", "-x", "--no-state", mnt)
    assert full.rc == 4 and ("nlink.count", os.path.join(mnt, f["path"])) in _findings(full)
    p = subprocess.Popen([FSCRUB, "-n", "-x", "-v", "-j", "1", "--state-dir", state_dir, mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("Phase 3: "):
            p.send_signal(signal.SIGSTOP)
            break
    p.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    check_sanitizers(err)
    assert p.returncode & 32, out + err
    run, _, phase, cursor = checkpoint(state_dir)
    assert phase == 3 and cursor["watermark"] == 0, cursor
    r = run_fscrub("-n", "-x", "--resume", "--state-dir", state_dir, mnt)
    assert "resuming run %d from phase 3 at 0 %%" % run in r.stderr, r.stderr
    assert r.rc == 4 and _findings(r) == _findings(full), (r, full)
    assert checkpoint(state_dir) is None


def _stopped_run(image_factory, state_dir, *args):
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt, n=20)
    rc, out, err, _ = _stop_when(["-n", "-x", "--limit", "16M", "--state-dir", state_dir]
                                 + list(args) + [mnt], state_dir,
                                 lambda cp: cp[3]["bytes"] > 0, ENV)
    assert rc == 32, out + err
    return mnt


def test_stale_checkpoint_is_ignored(image_factory, state_dir, workdir):
    mnt = _stopped_run(image_factory, state_dir)
    db = sqlite3.connect(os.path.join(state_dir, "state.sqlite"))
    with db:
        db.execute("UPDATE checkpoints SET saved = saved - 8 * 86400")
    db.close()
    out = os.path.join(workdir, "r.json")
    r = run_fscrub("-n", "-x", "--resume", "--state-dir", state_dir, "--json", out, mnt)
    assert r.rc == 0, r
    assert "is stale: saved 8.0 days ago, more than 7: running from the start" in r.stderr, r
    j, _ = _report(out)
    assert j["resume"]["resumed"] is False and "stale" in j["resume"]["reason"], j["resume"]
    assert j["stats"]["bytes_read"] >= 20 * FILE, j["stats"]


def test_checkpoint_of_other_options_is_ignored(image_factory, state_dir):
    """Issue 35 item 15: the checkpoint refused named the options by an
    internal key ("x=1 n=1 portion=0 ..."); it names the option that
    differs, as the user gives it."""
    mnt = _stopped_run(image_factory, state_dir)
    r = run_fscrub("-x", "--resume", "--state-dir", state_dir, mnt)   # not -n
    assert r.rc == 0, r
    assert "is of other options: -n (the stopped run: on; this one: off): running from " \
        "the start" in r.stderr, r.stderr
    assert "x=1" not in r.stderr, r.stderr


def test_resume_with_checksum_records_says_it_reads_from_the_start(image_factory, state_dir):
    """Issue 35 item 15: with checksum records (the ledger compares whole
    files), --resume said "phase 5 reads only what was not verified" and
    then, with -v, that the device is read from its start.  Phase 1 says
    only what it knows; phase 5 says once, on stderr, that it starts over
    and why."""
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt, n=20)
    r = run_fscrub("--record", "--no-state", mnt)
    assert r.rc == 0, r
    time.sleep(1.1)     # the records' ctime: out of the next runs' "changed" window
    rc, out, err, _ = _stop_when(["-n", "-x", "--limit", "16M", "--state-dir", state_dir, mnt],
                                 state_dir, lambda cp: cp[3]["bytes"] > 0, ENV)
    assert rc == 32, out + err
    r = run_fscrub("-n", "-x", "--resume", "--state-dir", state_dir, mnt)
    assert r.rc == 0, r
    assert "reads only what" not in r.stderr, r.stderr
    said = [l for l in r.stderr.splitlines() if "phase 5 reads" in l]
    assert len(said) == 1 and "from its start" in said[0] and "checksum records" in said[0], r


def test_resume_without_checkpoint_runs_from_the_start(image_factory, state_dir, workdir):
    img = image_factory("ext4", size_mb=64).mkfs()
    mnt = img.mount()
    out = os.path.join(workdir, "r.json")
    r = run_fscrub("-x", "--resume", "--state-dir", state_dir, "--json", out, mnt)
    assert r.rc == 0, r
    # Issue 35 item 18: fscrub_all and fscrub@.service always pass --resume,
    # and every run said this on stderr: only -v says it.
    assert "no checkpoint" not in r.stderr, r.stderr
    r = run_fscrub("-x", "-v", "--resume", "--state-dir", state_dir, mnt)
    assert r.rc == 0 and "no checkpoint" not in r.stderr, r
    assert "Phase 1: --resume: no checkpoint of this filesystem: running from the start" \
        in r.stdout, r.stdout
    j, _ = _report(out)
    assert j["resume"] == {"requested": True, "resumed": False,
                           "reason": "no checkpoint of this filesystem"}, j["resume"]


def test_resume_needs_the_run_history():
    r = run_fscrub("--resume", "--no-state", "/")
    assert r.rc == 16 and "--resume continues from a checkpoint in the run history" \
        in r.stderr, r


def test_fuse_checkpoint_is_not_another_fuse_filesystems(workdir, state_dir, cleanups):
    """Issue 35 item 5: two FUSE filesystems (f_fsid 0) shared one key, so
    --resume on B took the checkpoint A's stopped run left.  B runs from
    the start; A still resumes its own."""
    files = {"f%02d" % i: os.urandom(FILE) for i in range(12)}
    a = squashfuse_mount(workdir, cleanups, "fa", files)
    b = squashfuse_mount(workdir, cleanups, "fb", files)
    time.sleep(1.1)     # older than "changed while being checked"
    rc, out, err, _ = _stop_when(["-n", "-x", "--limit", "8M", "--state-dir", state_dir, a],
                                 state_dir, lambda cp: cp[3]["bytes"] > 0, ENV)
    assert rc == 32, out + err
    r = run_fscrub("-n", "-x", "-v", "--resume", "--state-dir", state_dir, b)
    assert r.rc == 0 and "resuming" not in r.stderr, r
    assert "--resume: no checkpoint of this filesystem: running from the start" in r.stdout, r
    r = run_fscrub("-n", "-x", "--resume", "--state-dir", state_dir, a)
    assert r.rc == 0 and "resuming run 1 from phase 5" in r.stderr, r
