"""The run history (fscrub(8), RUN HISTORY and STATUS): runs recorded in
--state-dir's database, keyed by filesystem UUID; `fscrub status` in text
and JSON; a fault is open (exit 4) until a run after its repair no longer
finds it; a database that cannot be written is an operational error that
leaves the scan and its report alone; concurrent runs on two filesystems
are both recorded; the metrics read the history."""

import json
import os
import re
import signal
import sqlite3
import shutil
import subprocess
import time

import pytest

from conftest import FSCRUB, check_sanitizers, escaped, run_fscrub
import faults
import fsimage


def status(state_dir, *args):
    p = subprocess.run([FSCRUB, "status", "--state-dir", state_dir] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=120)
    check_sanitizers(p.stderr)
    return p


def status_json(state_dir, *args):
    p = status(state_dir, "--json", *args)
    return p.returncode, json.loads(p.stdout)


def errors_open(j):
    return [(o["check"], o["path"]) for o in j["filesystems"][0]["open_findings"]
            if o["severity"] == "error"]


@pytest.fixture
def state_dir(workdir):
    d = os.path.join(workdir, "state")
    os.mkdir(d)
    return d


@pytest.fixture
def tmpfs(workdir):
    fs = fsimage.make_tmpfs(workdir, populate=False)
    with open(os.path.join(fs.mnt, "file"), "wb") as f:
        f.write(os.urandom(100000))
    os.mkdir(os.path.join(fs.mnt, "dir"))
    time.sleep(1.1)     # fscrub treats inodes changed < 1 s before the scan as in flux
    yield fs
    fs.cleanup()


def test_history_text_and_json(tmpfs, state_dir):
    mnt = tmpfs.mnt
    rc, j = status_json(state_dir, mnt)
    assert rc == 0 and j["filesystems"][0]["last_run"] is None, j
    assert j["filesystems"][0]["overdue"] == {"metadata": True, "data": True}

    assert run_fscrub("--state-dir", state_dir, mnt).rc == 0
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert rc == 0 and fs["last_run"]["status"] == "complete", j
    assert fs["last_complete"] and fs["last_data_verified"] is None
    assert fs["overdue"] == {"metadata": False, "data": True}

    assert run_fscrub("--state-dir", state_dir, "-x", mnt).rc == 0
    assert run_fscrub("--state-dir", state_dir, "-n", mnt).rc == 0
    rc, j = status_json(state_dir, "--history", "5")
    assert rc == 0 and len(j["filesystems"]) == 1, j
    fs = j["filesystems"][0]
    assert fs["mountpoint"] == mnt and fs["type"] == "tmpfs"
    assert fs["overdue"] == {"metadata": False, "data": False}
    assert fs["open_errors"] == 0 and fs["open_findings"] == []
    h = fs["history"]
    assert [r["verify_data"] for r in h] == [False, True, False]
    assert [r["options"]["check_only"] for r in h] == [True, False, False]
    assert h[0]["id"] > h[1]["id"] > h[2]["id"]
    x = h[1]
    assert x["status"] == "complete" and x["exit_code"] == 0 and x["backend"] == "generic"
    assert x["bytes_verified"] == 100000 and x["inodes"] >= 3
    assert x["duration"] >= 0 and x["started"] <= x["ended"]
    assert fs["last_data_verified"] == x["ended"]

    p = status(state_dir, "--history", "2", mnt)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^%s \(tmpfs, \S+\):$" % re.escape(mnt), p.stdout, re.M), p.stdout
    assert re.search(r"^  last run: +started \S+, [\d.]+ s, complete, exit 0: 0 errors, "
                     r"0 warnings$",
                     p.stdout, re.M), p.stdout
    assert re.search(r"^  data verified: +\S+ \(0\.0 days ago\)$", p.stdout, re.M), p.stdout
    assert "overdue" not in p.stdout
    assert len(re.findall(r"^    #\d+ ", p.stdout, re.M)) == 2, p.stdout

    # the phases, and the options as JSON, are in the database as documented
    db = sqlite3.connect(os.path.join(state_dir, "state.sqlite"))
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == 8
    titles = [t for (t,) in db.execute("SELECT title FROM phases WHERE run = ? ORDER BY phase",
                                       (x["id"],))]
    assert titles[0] == "Find the filesystem" and "Verify file data" in titles, titles
    db.close()


def test_bind_mount_of_a_subdirectory_is_its_own_history(tmpfs, state_dir, workdir, cleanups):
    """One filesystem (one UUID), two mount roots: a run of the bind mount
    of dir/ saw only dir/, and is kept apart (like btrfs subvolumes)."""
    bind = os.path.join(workdir, "bind")
    os.mkdir(bind)
    fsimage.run(["mount", "--bind", os.path.join(tmpfs.mnt, "dir"), bind])
    cleanups.append(lambda: fsimage.run(["umount", bind]))
    assert run_fscrub("--state-dir", state_dir, "-x", tmpfs.mnt).rc == 0
    assert run_fscrub("--state-dir", state_dir, bind).rc == 0
    rc, j = status_json(state_dir, "--history", "5")
    got = {fs["fsroot"]: fs for fs in j["filesystems"]}
    assert sorted(got) == ["/", "/dir"], j
    assert got["/"]["uuid"] == got["/dir"]["uuid"]
    assert got["/dir"]["mountpoint"] == bind and got["/"]["mountpoint"] == tmpfs.mnt
    assert [len(fs["history"]) for fs in (got["/"], got["/dir"])] == [1, 1]
    assert got["/"]["last_data_verified"] and got["/dir"]["last_data_verified"] is None
    rc, j = status_json(state_dir, bind)
    assert j["filesystems"][0]["fsroot"] == "/dir" and j["filesystems"][0]["last_run"], j
    p = status(state_dir, bind)
    assert "(tmpfs, %s, root /dir):" % got["/"]["uuid"] in p.stdout, p.stdout
    # status names a filesystem as the scan does
    p = status(state_dir, os.path.join(tmpfs.mnt, "dir"))
    assert p.returncode == 16 and "is not a mount point" in p.stderr, p.stderr


def test_overdue_option(tmpfs, state_dir):
    assert run_fscrub("--state-dir", state_dir, "-x", tmpfs.mnt).rc == 0
    time.sleep(1)
    # the last complete run is 0.00001 days old: not overdue after 1 day
    rc, j = status_json(state_dir, "--overdue", "1,2")
    assert j["filesystems"][0]["overdue"] == {"metadata": False, "data": False}
    p = status(state_dir, "--overdue", "0")
    assert p.returncode == 16 and "--overdue" in p.stderr
    for bad in (["--history", "0"], ["--history"], ["--bogus"], ["--overdue", "1,2,3"]):
        p = status(state_dir, *bad)
        assert p.returncode == 16, (bad, p.stderr)
    p = subprocess.run([FSCRUB, "status", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "Usage: fscrub status" in p.stdout


def test_no_state_records_nothing(tmpfs, state_dir):
    assert run_fscrub("--no-state", tmpfs.mnt).rc == 0
    r = run_fscrub("--no-state", "--state-dir", state_dir, tmpfs.mnt)
    assert r.rc == 16, r
    assert os.listdir(state_dir) == []
    r = run_fscrub("--state-dir", os.path.join(state_dir, "missing"), tmpfs.mnt)
    assert r.rc == 16 and "--state-dir needs an existing directory" in r.stderr, r


def _ext4_fix_nlink(img, ino):
    faults.debugfs(img, "set_inode_field <%d> links_count 1" % ino, write=True)


def _xfs_fix_nlink(img, ino):
    faults.xfs_db(img, "inode %d" % ino, "write core.nlinkv2 1")


# XFS with -n: without it the XFS backend may repair through the kernel.
@pytest.mark.parametrize("fstype,size,args,inject,fix", [
    ("ext4", 64, (), faults.ext4_wrong_nlink, _ext4_fix_nlink),
    ("xfs", 300, ("-n",), faults.xfs_wrong_nlink, _xfs_fix_nlink)])
def test_fault_open_until_fixed(image_factory, state_dir, workdir, fstype, size, args, inject,
                                fix):
    img = image_factory(fstype, size_mb=size)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.remount()
    assert run_fscrub("--state-dir", state_dir, *args, mnt).rc == 0
    img.offline()
    f = inject(img, nlink=3)
    time.sleep(1.1)
    mnt = img.mount()
    path = escaped(os.path.join(mnt, f["path"]))
    prom = os.path.join(workdir, "m.prom")
    r = run_fscrub("--state-dir", state_dir, "--metrics", prom, *args, mnt)
    assert r.rc == 4, r
    assert re.search(r'^fscrub_open_findings\{.*severity="error"\} 1$', open(prom).read(), re.M)

    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert rc == 4 and fs["open_errors"] == 1, j
    o = fs["open_findings"][0]
    assert (o["severity"], o["check"], o["path"], o["inode"]) == \
        ("error", "nlink.count", path, f["inode"]), o
    assert "link count is 3 but 1 name was found" in o["message"]
    assert o["run"] == fs["last_run"]["id"] and fs["last_run"]["exit_code"] == 4
    p = status(state_dir)
    assert p.returncode == 4
    assert "    Error: %s (inode %d): link count is 3" % (path, f["inode"]) in p.stdout, p.stdout

    # a run stopped by -a did not look at everything: the finding stays open
    r = run_fscrub("--state-dir", state_dir, "-a", "1", *args, mnt)
    assert r.rc == 4
    rc, j = status_json(state_dir, mnt)
    assert rc == 4 and j["filesystems"][0]["last_run"]["status"] == "stopped"
    assert errors_open(j) == [("nlink.count", path)], j

    # repaired offline, then a complete run: nothing open
    img.offline()
    fix(img, f["inode"])
    time.sleep(1.1)
    mnt = img.mount()
    r = run_fscrub("--state-dir", state_dir, "--metrics", prom, *args, mnt)
    assert r.rc == 0, r
    assert re.search(r'^fscrub_open_findings\{.*severity="error"\} 0$', open(prom).read(), re.M)
    rc, j = status_json(state_dir, mnt)
    assert rc == 0 and errors_open(j) == [] and j["filesystems"][0]["open_errors"] == 0, j
    # the fixture tree's awkward names stay open warnings
    assert j["filesystems"][0]["open_warnings"] > 0, j
    assert status(state_dir, mnt).returncode == 0
    # ...and the history still has the finding, with all its fields
    db = sqlite3.connect(os.path.join(state_dir, "state.sqlite"))
    rows = db.execute("SELECT severity, check_id, path, ino, message FROM findings "
                      "WHERE check_id = 'nlink.count'").fetchall()
    assert len(rows) == 2 and rows[0][:4] == ("error", "nlink.count", path, f["inode"]), rows
    db.close()


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_status_lists_the_files_to_restore(image_factory, state_dir, how):
    """Issue 39 item 3: `fscrub status` names the files whose open findings
    call for a restore from a backup (an unreadable file: data.read), each
    once however many findings it has, and not the files of metadata
    findings (nlink.count: the offline checker's)."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    img.mount()
    img.offline()
    nl = faults.ext4_wrong_nlink(img, nlink=3)
    rd = faults.ext4_read_error(img)
    time.sleep(1.1)
    mnt = img.mount_as(how)
    r = run_fscrub("--state-dir", state_dir, "-x", mnt)
    assert r.rc == 4 and r.of("Error", "data.read") and r.of("Error", "nlink.count"), r
    victim = escaped(os.path.join(mnt, rd["path"]))
    p = status(state_dir, mnt)
    assert p.returncode == 4, p
    assert "  to restore:    1 file from a backup" in p.stdout, p.stdout
    assert "\n    %s (inode %d) [data.read]\n" % (victim, rd["inode"]) in p.stdout, p.stdout
    listed = p.stdout.split("to restore:")[1]
    assert escaped(os.path.join(mnt, nl["path"])) not in listed, p.stdout
    rc, j = status_json(state_dir, mnt)
    assert j["filesystems"][0]["restore"] == [
        {"path": victim, "inode": rd["inode"], "check": "data.read"}], j
    # a run without -x does not close a content finding: the file is still to restore
    assert run_fscrub("--state-dir", state_dir, mnt).rc == 4
    rc, j = status_json(state_dir, mnt)
    assert [f["path"] for f in j["filesystems"][0]["restore"]] == [victim], j


def test_no_files_to_restore(tmpfs, state_dir):
    """Nothing to restore: no "to restore:" line, and JSON "restore" is empty."""
    assert run_fscrub("--state-dir", state_dir, tmpfs.mnt).rc == 0
    assert "to restore:" not in status(state_dir, tmpfs.mnt).stdout
    rc, j = status_json(state_dir, tmpfs.mnt)
    assert rc == 0 and j["filesystems"][0]["restore"] == [], j


def test_readonly_state_dir(tmpfs, workdir, cleanups):
    ro = os.path.join(workdir, "ro")
    os.mkdir(ro)
    fsimage.run(["mount", "-t", "tmpfs", "-o", "ro", "fscrub-ro", ro])
    cleanups.append(lambda: fsimage.run(["umount", ro]))
    js = os.path.join(workdir, "r.json")
    r = run_fscrub("--state-dir", ro, "--json", js, "-x", tmpfs.mnt)
    assert r.rc == 8, r
    assert re.search(r"^fscrub: cannot record the run: .*'%s/state.sqlite'.*; the scan goes on "
                     r"unrecorded" % re.escape(ro), r.stderr, re.M), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.summary is not None and "%s: 0 errors and 0 warnings found." % tmpfs.mnt in r.stdout
    with open(js) as f:
        assert json.load(f)["exit_code"] == 8
    p = status(ro)
    assert p.returncode == 0 and "No run recorded" in p.stdout


def test_unwritable_database(tmpfs, state_dir, workdir):
    """A database that opens but cannot be written (another user's)."""
    os.chmod(workdir, 0o755)
    assert run_fscrub("--state-dir", state_dir, tmpfs.mnt).rc == 0
    os.chmod(state_dir, 0o555)
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        FSCRUB, "--state-dir", state_dir, tmpfs.mnt],
                       capture_output=True, text=True, timeout=120)
    check_sanitizers(p.stderr)
    assert p.returncode == 8, p.stdout + p.stderr
    assert "fscrub: cannot record the run: " in p.stderr
    assert "0 errors and 0 warnings found." in p.stdout
    # without --state-dir another user's run is not recorded, and says nothing
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        FSCRUB, tmpfs.mnt], capture_output=True, text=True, timeout=120)
    check_sanitizers(p.stderr)
    assert p.returncode == 0 and "fscrub:" not in p.stderr, p.stdout + p.stderr


def test_first_runs_at_once_create_the_database(workdir, tmpfs):
    """Runs started together on a state directory with no database yet
    (the timer units of several filesystems at boot): turning the new
    database into WAL takes an exclusive lock that SQLite does not wait
    for, and one of them said "database is locked" and went unrecorded
    (exit 8; 4 of 120 runs here, 3 at a time).  Each is recorded."""
    for round in range(15):
        d = os.path.join(workdir, "state-%d" % round)
        os.mkdir(d)
        procs = [subprocess.Popen([FSCRUB, "--state-dir", d, "-j", "1", tmpfs.mnt],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            check_sanitizers(err)
            assert p.returncode == 0 and err == "", (round, out + err)
        with sqlite3.connect(os.path.join(d, "state.sqlite")) as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 3


def test_concurrent_runs_on_two_filesystems(workdir, state_dir):
    fss = [fsimage.make_tmpfs(workdir, name="t%d" % i, populate=False) for i in range(2)]
    try:
        for fs in fss:
            for d in range(20):
                os.mkdir(os.path.join(fs.mnt, "d%d" % d))
                for i in range(250):
                    open(os.path.join(fs.mnt, "d%d" % d, str(i)), "w").close()
        time.sleep(1.1)
        reader = None
        for round in range(3):
            if round == 1:
                # a status reading meanwhile, in a transaction: WAL, so nobody waits
                reader = sqlite3.connect(os.path.join(state_dir, "state.sqlite"),
                                         isolation_level=None)
                reader.execute("BEGIN")
                assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
            procs = [subprocess.Popen([FSCRUB, "--state-dir", state_dir, "-j", "1", fs.mnt],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for fs in fss]
            outs = [p.communicate(timeout=300) for p in procs]
            for p, (out, err) in zip(procs, outs):
                check_sanitizers(err)
                assert p.returncode == 0 and err == "", out + err
        reader.execute("COMMIT")
        reader.close()
        rc, j = status_json(state_dir, "--history", "10")
        assert rc == 0
        got = {fs["mountpoint"]: fs for fs in j["filesystems"]}
        assert sorted(got) == sorted(fs.mnt for fs in fss), j
        for fs in got.values():
            assert [r["status"] for r in fs["history"]] == ["complete"] * 3
            assert fs["last_run"]["inodes"] == 20 * 251 + 1
        assert len({fs["uuid"] for fs in got.values()}) == 2
    finally:
        for fs in fss:
            fs.cleanup()


def test_killed_run_loses_only_itself(workdir, state_dir):
    """SIGKILL mid-run: the run stays 'running', the earlier ones and their
    findings are intact.  SIGTERM: recorded as cancelled, findings kept
    open from the last complete run."""
    fs = fsimage.make_tmpfs(workdir, populate=False)
    try:
        with open(os.path.join(fs.mnt, "big"), "wb") as f:
            f.write(os.urandom(8 << 20))
        time.sleep(1.1)
        assert run_fscrub("--state-dir", state_dir, "-x", fs.mnt).rc == 0
        for sig, want in ((signal.SIGKILL, "running"), (signal.SIGTERM, "cancelled")):
            # 8 MiB at 1 MiB/s: phase 5 takes 8 s
            p = subprocess.Popen([FSCRUB, "--state-dir", state_dir, "-x", "--limit", "1M",
                                  fs.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(2)
            p.send_signal(sig)
            p.communicate(timeout=60)
            rc, j = status_json(state_dir, "--history", "5", fs.mnt)
            f = j["filesystems"][0]
            assert f["last_run"]["status"] == want, j
            assert f["history"][-1]["status"] == "complete"
            assert f["last_data_verified"] == f["history"][-1]["ended"]
        p = status(state_dir, "--history", "5", fs.mnt)
        assert "running (or interrupted)" in p.stdout, p.stdout
    finally:
        fs.cleanup()


def test_run_that_cannot_go_on_is_failed(workdir, state_dir):
    """A lazy unmount during the scan ends it (exit 8): recorded 'failed',
    so it closes nothing; status without arguments still lists it."""
    fs = fsimage.make_tmpfs(workdir, populate=False)
    try:
        with open(os.path.join(fs.mnt, "big"), "wb") as f:
            f.write(os.urandom(4 << 20))
        time.sleep(1.1)
        assert run_fscrub("--state-dir", state_dir, fs.mnt).rc == 0
        p = subprocess.Popen([FSCRUB, "--state-dir", state_dir, "-v", "-x", "-j", "1", fs.mnt],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in p.stdout:
            if line.startswith("Phase 5: Verify file data."):
                p.send_signal(signal.SIGSTOP)
                break
        fsimage.run(["umount", "-l", fs.mnt])
        p.send_signal(signal.SIGCONT)
        out, err = p.communicate(timeout=120)
        check_sanitizers(err)
        assert p.returncode == 8 and "unmounted during the scan" in err, out + err
        rc, j = status_json(state_dir, "--history", "3")
        f = j["filesystems"][0]
        assert [r["status"] for r in f["history"]] == ["failed", "complete"], j
        assert f["last_run"]["exit_code"] == 8 and f["last_complete"] == f["history"][1]["ended"]
    finally:
        fs.cleanup()


def _flip_byte(img, rel, offset):
    """XOR one byte of *rel* at file *offset* on the unmounted image (twice:
    the file is as it was, a restore from a backup)."""
    faults.flip_file_byte(img, rel, offset)
    time.sleep(1.2)


def test_rescan_errors_reads_only_the_open_ones(image_factory, state_dir):
    """Bit rot found by the checksum ledger (ledger.bitrot, a content
    finding); --rescan-errors reads back only that file: still there ->
    still open; restored -> closed.  Neither rescan counts as a full data
    verification."""
    img = image_factory("ext4", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for name in ("a", "b"):
        with open(os.path.join(mnt, name), "wb") as f:
            f.write(os.urandom(1 << 20))
    os.sync()
    time.sleep(1.2)
    assert run_fscrub("--state-dir", state_dir, "--record", mnt).rc == 0
    time.sleep(1.2)
    assert run_fscrub("--state-dir", state_dir, "-n", "-x", mnt).rc == 0
    _flip_byte(img, "b", 12345)
    r = run_fscrub("--state-dir", state_dir, "-n", "-x", mnt)
    assert r.rc == 4 and [(e.check, e.path) for e in r.errors] == \
        [("ledger.bitrot", os.path.join(mnt, "b"))], r
    rc, j = status_json(state_dir, mnt)
    full = j["filesystems"][0]["last_data_verified"]
    assert rc == 4 and errors_open(j) == [("ledger.bitrot", os.path.join(mnt, "b"))], j

    r = run_fscrub("--state-dir", state_dir, "-n", "--rescan-errors", mnt)
    assert r.rc == 4 and [e.check for e in r.errors] == ["ledger.bitrot"], r
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert rc == 4 and len(errors_open(j)) == 1 and fs["open_findings"][0]["run"] == \
        fs["last_run"]["id"], j
    assert fs["last_run"]["rescan"] and fs["last_run"]["bytes_verified"] == 1 << 20, j
    assert fs["last_data_verified"] == full

    _flip_byte(img, "b", 12345)             # restored
    r = run_fscrub("--state-dir", state_dir, "-n", "--rescan-errors", "-v", mnt)
    assert r.rc == 0 and not r.errors, r
    assert "--rescan-errors: files with open findings: 1" in r.stdout, r.stdout
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert rc == 0 and errors_open(j) == [] and fs["last_data_verified"] == full, j
    assert status(state_dir, mnt).returncode == 0
    # nothing open: a rescan reads nothing
    r = run_fscrub("--state-dir", state_dir, "-n", "--rescan-errors", mnt)
    assert r.rc == 0
    rc, j = status_json(state_dir, mnt)
    assert j["filesystems"][0]["last_run"]["bytes_verified"] == 0, j


def test_rescan_errors_usage(tmpfs, state_dir):
    for args, why in ((["--rescan-errors", "--no-state"], "from the run history"),
                      (["--rescan-errors", "--record"], "not with --record or --manifest")):
        r = run_fscrub(*args, tmpfs.mnt)
        assert r.rc == 16 and why in r.stderr, r
    assert run_fscrub("--rescan-errors", "--state-dir", state_dir, tmpfs.mnt).rc == 0


# The version 1 schema as fscrub 0.x (before fscrub watch recorded events) made it.
SCHEMA_V1 = """
CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL, fsroot TEXT NOT NULL,
  mountpoint TEXT, source TEXT, fstype TEXT, backend TEXT, options TEXT, version TEXT,
  started REAL NOT NULL, ended REAL, status TEXT NOT NULL, exit_code INTEGER,
  verify_data INTEGER NOT NULL, rescan INTEGER NOT NULL DEFAULT 0, errors INTEGER,
  warnings INTEGER, infos INTEGER, repaired INTEGER, operational INTEGER, inodes INTEGER,
  bytes_verified INTEGER, findings_dropped INTEGER);
CREATE INDEX runs_by_fs ON runs (uuid, fsroot, id);
CREATE TABLE phases (run INTEGER NOT NULL REFERENCES runs (id), phase INTEGER NOT NULL,
  title TEXT, wall REAL, user REAL, sys REAL, items INTEGER, PRIMARY KEY (run, phase));
CREATE TABLE findings (run INTEGER NOT NULL REFERENCES runs (id), seq INTEGER NOT NULL,
  severity TEXT NOT NULL, check_id TEXT NOT NULL, content INTEGER NOT NULL, path TEXT,
  ino INTEGER, offset INTEGER, length INTEGER, message TEXT, PRIMARY KEY (run, seq));
CREATE TABLE rescanned (run INTEGER NOT NULL REFERENCES runs (id), ino INTEGER NOT NULL,
  PRIMARY KEY (run, ino));
PRAGMA user_version = 1;
"""


def test_upgrade_from_version_1(tmpfs, state_dir):
    """A version 1 database (no events table) is read by status as it is,
    and upgraded to version 2 by the first run that writes it, its runs kept;
    the events table then takes fscrub watch's rows, which status counts."""
    assert run_fscrub("--state-dir", state_dir, tmpfs.mnt).rc == 0
    rc, j = status_json(state_dir, tmpfs.mnt)
    uuid = j["filesystems"][0]["uuid"]
    path = os.path.join(state_dir, "state.sqlite")
    os.unlink(path)
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_V1)
    db.execute("INSERT INTO runs (uuid, fsroot, mountpoint, fstype, started, ended, status, "
               "exit_code, verify_data, errors, warnings) VALUES (?, '/', ?, 'tmpfs', "
               "1000000000, 1000000010, 'complete', 0, 0, 0, 0)", (uuid, tmpfs.mnt))
    db.execute("INSERT INTO findings (run, seq, severity, check_id, content, path, ino, "
               "message) VALUES (1, 0, 'info', 'x.y', 0, '/p', 12, 'm')")
    db.execute("INSERT INTO rescanned (run, ino) VALUES (1, 12)")
    db.commit()
    db.close()

    rc, j = status_json(state_dir, tmpfs.mnt)         # read-only: not upgraded
    fs = j["filesystems"][0]
    assert rc == 0 and fs["last_run"]["id"] == 1 and (fs["open_events"], fs["events"]) == (0, [])
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone() == (1,)
    db.close()

    assert run_fscrub("--state-dir", state_dir, tmpfs.mnt).rc == 0
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone() == (8,)
    assert [r[0] for r in db.execute("SELECT id FROM runs ORDER BY id")] == [1, 2]
    # version 4: the subvolume of findings and rescanned files; the rows of
    # before are the mount's own subvolume (0)
    assert [r[0] for r in db.execute("SELECT subvol FROM findings WHERE run = 1")] == [0]
    assert db.execute("SELECT run, subvol, ino FROM rescanned").fetchall() == [(1, 0, 12)]
    # version 3's tables of rotating media scans (--portion) came with it
    assert db.execute("SELECT count(*) FROM regions").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM region_sizes").fetchone() == (0,)
    # and version 5's checkpoints of stopped runs (--resume): a complete run leaves none
    assert db.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
    # and version 6's parts of regions read
    assert db.execute("SELECT count(*) FROM regions WHERE read_to > 0 OR partial IS NOT NULL"
                      ).fetchone() == (0,)
    # an event after the last complete run began: open, an error for the exit status
    # version 8: the events' byte range (a kernel log line's), NULL for the others
    db.execute("INSERT INTO events (uuid, fsroot, time, kind, errno, error_count, ino, path) "
               "VALUES (?, '/', ?, 'fs_error', 117, 1, 12, ?)",
               (uuid, time.time(), tmpfs.mnt + "/dir"))
    db.commit()
    db.close()
    rc, j = status_json(state_dir, tmpfs.mnt)
    fs = j["filesystems"][0]
    assert rc == 4 and fs["open_events"] == 1 and fs["open_errors"] == 0, j
    assert (fs["events"][0]["kind"], fs["events"][0]["errno"], fs["events"][0]["inode"],
            fs["events"][0]["path"]) == ("fs_error", 117, 12, tmpfs.mnt + "/dir")
    assert (fs["events"][0]["offset"], fs["events"][0]["length"]) == (None, None), j
    # a complete run that starts after it answers it
    assert run_fscrub("--state-dir", state_dir, tmpfs.mnt).rc == 0
    rc, j = status_json(state_dir, tmpfs.mnt)
    assert rc == 0 and j["filesystems"][0]["open_events"] == 0, j


def squashfuse_mount(workdir, cleanups, name, files):
    """A squashfs of files {name: bytes} mounted with squashfuse on
    workdir/name; unmounted afterwards (which ends the daemon)."""
    if not os.path.exists("/dev/fuse") or not shutil.which("squashfuse") or \
            not shutil.which("mksquashfs"):
        pytest.skip("needs /dev/fuse, squashfuse and mksquashfs")
    src = os.path.join(workdir, name + ".src")
    os.makedirs(src)
    for f, data in files.items():
        with open(os.path.join(src, f), "wb") as out:
            out.write(data)
    img = os.path.join(workdir, name + ".sqfs")
    fsimage.run(["mksquashfs", src, img, "-quiet", "-noappend"])
    mnt = os.path.join(workdir, name)
    os.makedirs(mnt)
    fsimage.run(["squashfuse", img, mnt])
    cleanups.append(lambda: fsimage._umount(mnt))
    return mnt


def test_fuse_filesystems_have_histories_of_their_own(workdir, state_dir, cleanups):
    """Issue 35 item 5: FUSE mounts have f_fsid 0, and every one was keyed
    fsid-0000000000000000: status listed one of two, a clean run of B
    closed A's open warning and health showed B's scan for A.  Each is
    keyed by its mount (source, mount point, options) now."""
    a = squashfuse_mount(workdir, cleanups, "fa", {"ctl\x01name": b"odd\n", "f": b"a\n"})
    b = squashfuse_mount(workdir, cleanups, "fb", {"g": b"b\n"})
    assert os.statvfs(a).f_fsid == os.statvfs(b).f_fsid == 0     # the quirk
    time.sleep(1.1)     # older than "changed while being checked"
    ra = run_fscrub("-n", "--state-dir", state_dir, a)
    assert ra.rc == 0 and len(ra.of("Warning", "name.control")) == 1, ra
    rb = run_fscrub("-n", "--state-dir", state_dir, b)
    assert rb.rc == 0 and not rb.warnings, rb
    rc, j = status_json(state_dir)
    assert sorted(fs["mountpoint"] for fs in j["filesystems"]) == [a, b], j
    keys = {fs["mountpoint"]: fs["uuid"] for fs in j["filesystems"]}
    assert keys[a] != keys[b] and "fsid-0000000000000000" not in keys.values(), keys
    rc, ja = status_json(state_dir, a)
    assert [o["check"] for o in ja["filesystems"][0]["open_findings"]] == ["name.control"], ja
    rc, jb = status_json(state_dir, b)
    assert jb["filesystems"][0]["open_findings"] == [], jb
    h = subprocess.run([FSCRUB, "health", "--state-dir", state_dir, "--json", a],
                       capture_output=True, text=True, timeout=60)
    check_sanitizers(h.stderr)
    assert ('"%s"' % b) not in h.stdout and '"uuid":"%s"' % keys[a] in h.stdout.replace(" ", ""), h


def test_incomplete_run_is_not_complete(image_factory, state_dir, workdir):
    """Issue 35 item 12: a run that ended with exit 8 ("the scan is
    incomplete": here another user's -x, which cannot open lost+found)
    showed in status as "complete (-x)", counted as data verified and
    closed what the last complete run found; "last run" gave a run's start
    and "last complete" its end with nothing saying which; and "open: 1
    error" next to the last run's "0 errors" said nothing of why.  The run
    is 'incomplete' now, with its operational errors, and status says
    which times and why the counts differ."""
    from test_cli import run_unprivileged
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    f = faults.ext4_wrong_nlink(img, nlink=3)
    mnt = img.mount()
    os.chmod(workdir, 0o755)        # mkdtemp's 0700 would keep nobody out
    os.chmod(state_dir, 0o777)      # nobody records its run there too
    time.sleep(1.1)
    r = run_fscrub("--state-dir", state_dir, mnt)
    assert r.rc == 4 and [e.check for e in r.errors] == ["nlink.count"], r
    for name in os.listdir(state_dir):      # root's database: nobody writes it too
        os.chmod(os.path.join(state_dir, name), 0o666)
    r = run_unprivileged("-n", "-x", "--state-dir", state_dir, mnt)
    assert r.rc == 8 and "the scan is incomplete" in r.stdout, r
    assert "cannot record" not in r.stderr, r
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    last = fs["last_run"]
    assert last["status"] == "incomplete" and last["exit_code"] == 8, last
    assert last["operational_errors"] == 1 and last["verify_data"], last
    assert fs["last_data_verified"] is None and fs["data_coverage"] is None, fs
    assert fs["last_complete"] is not None and fs["last_complete"] <= last["started"], fs
    assert rc == 4 and errors_open(j) == [("nlink.count", escaped(os.path.join(mnt, f["path"])))]
    p = status(state_dir, mnt)
    assert re.search(r"^  last run: +started \S+, [\d.]+ s, incomplete \(-x\), exit 8: 0 errors, "
                     r"\d+ warnings?, 1 operational error$", p.stdout, re.M), p.stdout
    assert re.search(r"^  last complete: ended \S+ \(0\.0 days ago\)$", p.stdout, re.M), p.stdout
    assert re.search(r"^  data verified: never, overdue", p.stdout, re.M), p.stdout
    assert re.search(r"^  open: +1 error, \d+ warnings? \(the last run reported 0 errors, "
                     r"\d+ warnings?: each finding is counted once by check and object, over "
                     r"the last complete run and those after it\)$", p.stdout, re.M), p.stdout


def test_unconfirmed_findings_are_counted(image_factory, state_dir, workdir):
    """A finding whose object changed while it was being checked is an info
    (exit 0), but it is not silent: the summary line counts it, the JSON
    report marks it and counts it, and the run history keeps the count,
    which status shows.  Here a symlink is replaced after the walk's bulk
    records were read (XFS, FSCRUB_DEBUG_AFTER_BULK): its size is looked at
    again and has changed."""
    from conftest import need_fs
    need_fs("xfs")
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.symlink("a", os.path.join(mnt, "sym"))
    img.remount()
    time.sleep(1.1)
    cmd = "cd %s && ln -s bbbbbbbbbbbbbbbbbbbb sym.new && mv -T sym.new sym" % mnt
    report = os.path.join(workdir, "report.json")
    r = run_fscrub("--state-dir", state_dir, "--json", report, "-j", "1", mnt,
                   env={"FSCRUB_DEBUG_AFTER_BULK": cmd})
    assert os.readlink(os.path.join(mnt, "sym")) == "b" * 20, "the change did not run"
    assert r.rc == 0 and not r.errors, r
    assert "0 errors and 0 warnings found. 1 finding could not be confirmed: the " \
           "filesystem kept changing (-v lists them)." in r.stdout, r.stdout
    with open(report) as f:
        j = json.load(f)
    assert j["counts"]["unconfirmed"] == 1, j["counts"]
    changed = [f for f in j["findings"] if f["unconfirmed"]]
    assert [f["check"] for f in changed] == ["symlink.size"], j["findings"]
    assert "changed while being checked" in changed[0]["message"]
    rc, s = status_json(state_dir, mnt)
    assert rc == 0 and s["filesystems"][0]["last_run"]["unconfirmed"] == 1, s
    p = status(state_dir, mnt)
    assert "1 finding could not be confirmed (the filesystem kept changing)" in p.stdout, p.stdout
