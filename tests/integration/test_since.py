"""--since DATE: -x reads back only the files changed since DATE (mtime or
ctime, and with --ledger those not hashed since); the metadata checks run
in full, and the run is not a full data verification in the history.

Files are written before and after a timestamp T (whole seconds, with more
than a second on either side, so that coarse timestamps cannot blur it);
bad sectors come from eiofs, as in test_media.py.
"""

import json
import os
import time

import pytest

from conftest import run_fscrub
import fsimage
from test_media import BLOCK, bad_media, write  # noqa: F401 (bad_media: a fixture)
from test_state import state_dir, status, status_json  # noqa: F401 (state_dir: a fixture)

OLD = {"old/a": 1 << 20, "old/b": 2 << 20}
NEW = {"new/c": 512 << 10, "new/d": 256 << 10}


def _write_all(mnt, files, seed):
    for i, (rel, size) in enumerate(sorted(files.items())):
        os.makedirs(os.path.dirname(os.path.join(mnt, rel)), exist_ok=True)
        write(os.path.join(mnt, rel), size, seed + i)


def _before_and_after(mnt):
    """OLD written, then T, then NEW; returns T (Unix seconds)."""
    _write_all(mnt, OLD, 1)
    time.sleep(1.2)
    t = int(time.time())
    time.sleep(1.2)
    _write_all(mnt, NEW, 10)
    os.sync()
    time.sleep(1.2)     # fscrub treats inodes changed < 1 s before the scan as in flux
    return t


def _stats(workdir, *args):
    out = os.path.join(workdir, "r.json")
    r = run_fscrub("--json", out, *args)
    with open(out) as f:
        return r, json.load(f)["stats"]


FSTYPES = ["ext4", "xfs"]


@pytest.mark.parametrize("fstype", FSTYPES)
def test_since_reads_only_the_newer_files(image_factory, workdir, fstype):
    img = image_factory(fstype, size_mb=320).mkfs()
    mnt = img.mount()
    t = _before_and_after(mnt)
    r, st = _stats(workdir, "-n", "-x", "--no-state", "--since", "@%d" % t, "-v", mnt)
    assert r.rc == 0, r
    assert st["bytes_read"] == sum(NEW.values()), st
    assert st["files_unchanged_not_read"] == len(OLD), st
    assert "--since @%d: %d bytes read from 2 files; 2 files (%d bytes) skipped as " \
        "unchanged" % (t, sum(NEW.values()), sum(OLD.values())) in r.stdout, r.stdout
    assert "--since @%d: %d bytes read, 2 unchanged files not read." \
        % (t, sum(NEW.values())) in r.stdout, r.stdout
    # the metadata phases still see every file
    assert st["files"] == len(OLD) + len(NEW), st
    r, st = _stats(workdir, "-n", "-x", "--no-state", mnt)
    assert r.rc == 0 and st["bytes_read"] >= sum(OLD.values()) + sum(NEW.values()), st
    assert st["files_unchanged_not_read"] == 0, st


@pytest.mark.parametrize("fstype", FSTYPES)
def test_since_misses_old_faults_and_finds_new_ones(image_factory, bad_media, fstype):
    img = image_factory(fstype, size_mb=320).mkfs()
    mnt = img.mount()
    t = _before_and_after(mnt)
    bad = []
    for rel in ("old/a", "new/c"):
        ext = fsimage.fiemap(os.path.join(mnt, rel))[0]
        bad.append((ext["physical"] + (128 << 10), BLOCK))
    m = bad_media(img, bad)
    r = run_fscrub("-n", "-x", "--no-state", "--since", "@%d" % t, m.mnt)
    assert r.rc == 4, r
    assert [(e.check, e.path) for e in r.errors] == \
        [("data.read", os.path.join(m.mnt, "new/c"))], r
    r = run_fscrub("-n", "-x", "--no-state", m.mnt)
    assert r.rc == 4, r
    assert sorted(e.path for e in r.errors) == \
        [os.path.join(m.mnt, "new/c"), os.path.join(m.mnt, "old/a")], r


@pytest.fixture
def tmpfs(workdir):
    fs = fsimage.make_tmpfs(workdir, populate=False)
    yield fs
    fs.cleanup()


def test_since_with_ledger_reads_files_not_hashed_as_they_are(tmpfs, workdir):
    """With --ledger, a file unchanged since DATE is read still if the
    ledger has no record of its current version: none (old/e), or one taken
    before its last change (old/b, rewritten after --record)."""
    mnt = tmpfs.mnt
    ledger = os.path.join(workdir, "ledger")
    os.mkdir(ledger)
    _write_all(mnt, OLD, 1)
    time.sleep(1.2)
    assert run_fscrub("--no-state", "--record", "--ledger", ledger, mnt).rc == 0
    write(os.path.join(mnt, "old/b"), OLD["old/b"], 7)
    write(os.path.join(mnt, "old/e"), 64 << 10, 8)
    time.sleep(1.2)
    t = int(time.time())
    time.sleep(1.2)
    args = ("-n", "-x", "--no-state", "--since", "@%d" % t, mnt)
    r, st = _stats(workdir, "--ledger", ledger, *args)
    assert r.rc == 0 and st["bytes_read"] == OLD["old/b"] + (64 << 10), (r, st)
    assert st["files_unchanged_not_read"] == 1, st
    # without the ledger, only the timestamps count
    r, st = _stats(workdir, *args)
    assert r.rc == 0 and st["bytes_read"] == 0, (r, st)
    assert st["files_unchanged_not_read"] == 3, st
    # once recorded again, nothing is left to read
    assert run_fscrub("--no-state", "--record", "--ledger", ledger, mnt).rc == 0
    r, st = _stats(workdir, "--ledger", ledger, *args)
    assert r.rc == 0 and st["bytes_read"] == 0, (r, st)


@pytest.mark.parametrize("date,why", [
    ("yesterday", "--since needs a date such as"),
    ("2026-13-01", "--since needs a date such as"),
    ("2026-02-30", "--since needs a date such as"),
    ("2026-12-01T25:00", "--since needs a date such as"),
    ("2026-12-01T10:00:00+2", "--since needs a date such as"),
    ("@12abc", "--since needs a date such as"),
    ("7x", "--since needs a date such as"),
    ("d", "--since needs a date such as"),
    ("", "--since needs a date such as"),
    ("2999-01-01", "is in the future"),
    ("@an hour ahead", "is in the future"),
])
def test_since_bad_dates(tmpfs, date, why):
    # made here, not in the list: test ids must not change between workers
    date = date.replace("@an hour ahead", "@%d" % (time.time() + 3600))
    r = run_fscrub("-n", "--no-state", "--since", date, tmpfs.mnt)
    assert r.rc == 16 and why in r.stderr and "'%s'" % date in r.stderr, r


def test_since_usage(tmpfs, workdir):
    for args, why in ((["--rescan-errors", "--state-dir", workdir], "use one"),
                      (["--no-state", "--record"], "not with --record or --manifest")):
        r = run_fscrub("--since", "1d", *args, tmpfs.mnt)
        assert r.rc == 16 and why in r.stderr, r
    for good in ("7d", "12h", "2026-12-01", "2026-12-01T10:00:00Z", "2026-12-01T10:00",
                 "2026-12-01T10:00:00+02:00", "@1764547200"):
        r = run_fscrub("-n", "--no-state", "--since", good, tmpfs.mnt)
        assert r.rc == 0, (good, r)


def test_since_is_not_a_full_data_verification(tmpfs, state_dir):  # noqa: F811
    mnt = tmpfs.mnt
    with open(os.path.join(mnt, "f"), "wb") as f:
        f.write(os.urandom(100000))
    time.sleep(1.2)
    assert run_fscrub("--state-dir", state_dir, "-n", "--since", "1d", mnt).rc == 0
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert fs["last_data_verified"] is None and fs["last_complete"] is not None, j
    assert fs["last_run"]["since"] and not fs["last_run"]["rescan"], j
    assert fs["last_run"]["verify_data"] and fs["last_run"]["bytes_verified"] == 100000, j
    assert fs["last_run"]["options"]["since"] == "1d", j
    assert "(-x --since)" in status(state_dir, mnt).stdout

    assert run_fscrub("--state-dir", state_dir, "-n", "-x", mnt).rc == 0
    rc, j = status_json(state_dir, mnt)
    full = j["filesystems"][0]["last_data_verified"]
    assert full is not None and not j["filesystems"][0]["last_run"]["since"], j
    time.sleep(1.1)
    assert run_fscrub("--state-dir", state_dir, "-n", "--since", "1h", mnt).rc == 0
    rc, j = status_json(state_dir, mnt)
    fs = j["filesystems"][0]
    assert fs["last_data_verified"] == full and fs["last_complete"] != full, j
