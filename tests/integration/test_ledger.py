"""The checksum ledger (--record, -x, --ledger) and external manifests
(--manifest, FSCRUB_MANIFEST): silent corruption of file data found on
filesystems that keep no data checksums.

Corruption is injected the way it happens: bytes of a file's data extent
changed on the unmounted image (at the FIEMAP physical offset), so size,
mtime and ctime stay as recorded.  fscrub's "changed during the scan" rule
skips files whose ctime is within 1 s before a scan began, hence the
pauses between writing and recording.
"""

import hashlib
import os
import re
import shutil
import time

import pytest

from conftest import run_fscrub, need_root
import faults
import fsimage

XATTR = "trusted.fscrub.ledger"
MiB = 1 << 20


def settle():
    """Let timestamps fall out of the next scan's "changed during it" window."""
    time.sleep(1.2)


def populate(mnt):
    files = {}
    for name, size in (("a", 3 * MiB + 123), ("b", 3 * MiB + 77), ("dir/c", 2 * MiB),
                       ("small", 700)):
        path = os.path.join(mnt, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        files[name] = path
    open(os.path.join(mnt, "empty"), "w").close()
    with open(os.path.join(mnt, "sparse"), "wb") as f:
        f.truncate(10 * MiB)
        f.write(b"tail")
    os.link(files["a"], os.path.join(mnt, "a-link"))
    os.sync()
    settle()
    return files


def flip_byte(img, rel, offset):
    """Change one byte of *rel* at file *offset* on the unmounted image."""
    faults.flip_file_byte(img, rel, offset)
    settle()


@pytest.fixture(params=["xfs", "ext4"])
def fs(request, image_factory):
    need_root()
    img = image_factory(request.param, size_mb=300)
    img.mkfs()
    img.mount()
    return img


def record(mnt, *extra):
    r = run_fscrub("--record", "-v", *extra, mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    assert "0 recorded" not in r.stdout, r
    settle()
    return r


@pytest.mark.parametrize("store", ["xattr", "sqlite"])
def test_bitrot_names_the_file_and_chunk(fs, workdir, store):
    populate(fs.mnt)
    extra = ()
    if store == "sqlite":
        db = os.path.join(workdir, "ledger")
        os.mkdir(db)
        extra = ("--ledger", db)
    record(fs.mnt, *extra)
    if store == "xattr":
        assert os.getxattr(os.path.join(fs.mnt, "b"), XATTR)[:4] == b"FSL1"
    else:
        assert os.path.exists(os.path.join(workdir, "ledger", "fscrub-ledger.sqlite"))
        with pytest.raises(OSError):
            os.getxattr(os.path.join(fs.mnt, "b"), XATTR)
    clean = run_fscrub("-n", "-x", "-v", *extra, fs.mnt)
    assert clean.rc == 0 and not clean.errors, clean
    assert "6 files verified" in clean.stdout, clean      # a (two names), b, c, small, empty, sparse
    flip_byte(fs, "b", 2 * MiB + 4321)
    r = run_fscrub("-n", "-x", *extra, fs.mnt)
    assert r.rc == 4, r
    assert len(r.errors) == 1, r
    e = r.errors[0]
    assert e.check == "ledger.bitrot" and e.path == os.path.join(fs.mnt, "b"), r
    assert "at offset 2097152" in e.message, r
    assert "Restore the damaged files from a backup" in r.stdout, r


def test_record_on_a_read_only_mount_is_an_operational_error(fs, workdir):
    """--record keeps its records in the files' attributes: a read-only
    mount takes none.  Said once, plainly, exit 8 -- not a warning and 0;
    the records already there are still checked, and --ledger DIR on
    another filesystem records."""
    populate(fs.mnt)
    record(fs.mnt)
    with open(os.path.join(fs.mnt, "new"), "wb") as f:
        f.write(os.urandom(MiB))        # a file without a record
    fs.remount("ro")
    settle()
    r = run_fscrub("--record", "-v", fs.mnt)
    assert r.rc == 8 and not r.errors and not r.warnings, r
    assert "--record: the filesystem is mounted read-only: nothing was recorded" in r.stderr, r
    assert "6 files verified" in r.stdout, r
    db = os.path.join(workdir, "ledger")
    os.mkdir(db)
    r = run_fscrub("--record", "-v", "--ledger", db, fs.mnt)
    assert r.rc == 0 and not r.warnings, r
    assert "nothing was recorded" not in r.stderr, r


def test_bitrot_found_by_the_per_file_reader(fs):
    populate(fs.mnt)
    record(fs.mnt)
    flip_byte(fs, "dir/c", 5)
    r = run_fscrub("-n", "-x", fs.mnt, env={"FSCRUB_DEBUG_NO_DEVREAD": "1"})
    assert r.rc == 4 and len(r.errors) == 1, r
    assert r.errors[0].check == "ledger.bitrot", r
    assert r.errors[0].path == os.path.join(fs.mnt, "dir", "c"), r
    assert "at offset 0" in r.errors[0].message, r


def snapshot(mnt):
    """Every regular file's record and ctime."""
    out = {}
    for name in ("a", "b", "dir/c", "small", "empty", "sparse"):
        p = os.path.join(mnt, name)
        try:
            rec = os.getxattr(p, XATTR)
        except OSError:
            rec = None
        out[name] = (rec, os.stat(p).st_ctime_ns)
    return out


def test_modified_file_is_not_reported_and_n_changes_nothing(fs):
    files = populate(fs.mnt)
    record(fs.mnt)
    with open(files["a"], "ab") as f:
        f.write(b"a legitimate change")
    os.sync()
    settle()
    before = snapshot(fs.mnt)
    r = run_fscrub("-n", "-x", "-v", fs.mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    assert snapshot(fs.mnt) == before, "-n -x changed a record or a ctime"
    r = run_fscrub("-x", "-v", fs.mnt)
    assert r.rc == 0 and not r.errors, r
    assert "1 records refreshed" in r.stdout, r
    after = snapshot(fs.mnt)
    assert after["a"][0] != before["a"][0]
    assert {k: v for k, v in after.items() if k != "a"} == \
        {k: v for k, v in before.items() if k != "a"}
    settle()
    r = run_fscrub("-n", "-x", "-v", fs.mnt)
    assert r.rc == 0 and not r.errors and "6 files verified" in r.stdout, r


def test_a_copy_with_the_record_is_not_bitrot(fs):
    """cp --preserve=all copies the xattr to another inode: not its record."""
    files = populate(fs.mnt)
    record(fs.mnt)
    copy = os.path.join(fs.mnt, "copy")
    fsimage.run(["cp", "--preserve=all", files["b"], copy])
    with open(copy, "r+b") as f:           # different content, same times kept
        f.write(b"different")
    os.utime(copy, ns=(os.stat(files["b"]).st_atime_ns, os.stat(files["b"]).st_mtime_ns))
    os.sync()
    settle()
    r = run_fscrub("-n", "-x", fs.mnt)
    assert r.rc == 0 and not r.errors, r


def test_open_for_writing_is_skipped(fs):
    files = populate(fs.mnt)
    record(fs.mnt)
    with open(files["small"], "r+b"):
        r = run_fscrub("-n", "-x", "-v", fs.mnt)
    assert r.rc == 0 and not r.errors, r
    skipped = [f for f in r.of("Info", "ledger.record") if "open for writing" in f.message]
    assert [f.path for f in skipped] == [files["small"]], r


@pytest.mark.alone
def test_record_right_after_writing_says_next_time(fs):
    """--record straight after the files were written: their ctime is in
    the second before the scan, too close to tell from a change during it,
    so they are skipped; -v says so (not "changed during the scan") and
    that the next --record records them, which it does 2 s later."""
    for i in range(5):
        with open(os.path.join(fs.mnt, "new%d" % i), "wb") as f:
            f.write(os.urandom(64 * 1024))
    r = run_fscrub("--record", "-v", fs.mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    assert re.search(r"\b0 recorded, 0 records refreshed, 0 skipped \(changed during", r.stdout), r
    assert ("5 files skipped because they changed within the last second before the scan "
            "began (too close to tell from a change during it); the next --record records "
            "them") in r.stdout, r
    time.sleep(2)
    r = run_fscrub("--record", "-v", fs.mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    assert re.search(r"\b5 recorded, 0 records refreshed, 0 skipped", r.stdout), r
    assert "within the last second" not in r.stdout, r


def test_busy_filesystem_gives_no_false_bitrot(fs):
    """Files rewritten, appended and renamed while recording and verifying."""
    import threading
    files = populate(fs.mnt)
    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            p = os.path.join(fs.mnt, "churn%d" % (i % 8))
            with open(p, "wb") as f:
                f.write(os.urandom(256 << 10))
            with open(files["b"], "r+b") as f:
                f.seek((i * 4096) % (3 * MiB))
                f.write(os.urandom(4096))
            os.rename(p, p + ".r")
            i += 1

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(2):
            r = run_fscrub("--record", fs.mnt)
            assert r.rc == 0 and not r.errors, r
            r = run_fscrub("-x", fs.mnt)
            assert r.rc == 0 and not r.errors, r
    finally:
        stop.set()
        t.join()


def write_manifest(path, mnt, names, algo, bad=None, prefix=""):
    with open(path, "w") as out:
        for name in names:
            with open(os.path.join(mnt, name), "rb") as f:
                digest = hashlib.new(algo, f.read()).hexdigest()
            if name == bad:
                digest = ("0" if digest[0] != "0" else "1") + digest[1:]
            out.write("%s  %s%s\n" % (digest, prefix, name))


@pytest.mark.parametrize("algo,prefix", [("sha256", "./"), ("md5", "")])
def test_manifest_with_one_wrong_line(fs, workdir, algo, prefix):
    populate(fs.mnt)
    manifest = os.path.join(workdir, "list." + algo)
    names = ["a", "b", "dir/c", "small", "empty", "sparse", "missing"]
    open(os.path.join(fs.mnt, "missing"), "w").close()
    write_manifest(manifest, fs.mnt, names, algo, bad="dir/c", prefix=prefix)
    os.unlink(os.path.join(fs.mnt, "missing"))
    settle()
    r = run_fscrub("-n", "-x", "-v", "--manifest", manifest, fs.mnt)
    assert r.rc == 4, r
    assert [(e.check, e.path) for e in r.errors] == \
        [("manifest.mismatch", os.path.join(fs.mnt, "dir", "c"))], r
    assert "line 3" in r.errors[0].message, r
    assert "6 files match" not in r.stdout and "5 files match" in r.stdout, r
    assert [f.check for f in r.of("Info", "manifest.missing")] == ["manifest.missing"], r
    # The same list from the environment: the default manifest of every -x.
    r = run_fscrub("-n", "-x", fs.mnt, env={"FSCRUB_MANIFEST": manifest})
    assert r.rc == 4 and len(r.errors) == 1, r


def test_manifest_older_than_the_file_is_a_warning(fs, workdir):
    populate(fs.mnt)
    manifest = os.path.join(workdir, "list.sha256")
    write_manifest(manifest, fs.mnt, ["a", "b"], "sha256")
    settle()
    with open(os.path.join(fs.mnt, "b"), "r+b") as f:
        f.write(b"changed after the manifest")
    os.sync()
    settle()
    r = run_fscrub("-n", "-x", "--manifest", manifest, fs.mnt)
    assert r.rc == 0 and not r.errors, r
    assert [(w.check, w.path) for w in r.warnings] == \
        [("manifest.mismatch", os.path.join(fs.mnt, "b"))], r


def test_clean_manifest_and_ledger_exit_0(fs, workdir):
    populate(fs.mnt)
    manifest = os.path.join(workdir, "list.sha256")
    write_manifest(manifest, fs.mnt, ["a", "b", "dir/c"], "sha256")
    record(fs.mnt)
    r = run_fscrub("-n", "-x", "-v", "--manifest", manifest, fs.mnt)
    assert r.rc == 0 and not r.errors and not r.warnings, r
    assert "3 files match" in r.stdout and "6 files verified" in r.stdout, r


def test_usage_errors(fs, workdir):
    bad = os.path.join(workdir, "bad.sha256")
    with open(bad, "w") as f:
        f.write("not a checksum line\n")
    cases = [
        (["-n", "--record"], {}, "not with -n"),
        (["--ledger", workdir], {}, "use it with -x"),
        (["-x", "--ledger", os.path.join(workdir, "nonexistent")], {}, "existing directory"),
        (["-x", "--ledger", fs.mnt], {}, "on the filesystem being checked"),
        (["--manifest", bad], {}, "use it with -x"),
        (["-n", "-x", "--manifest", bad], {}, "bad.sha256:1"),
        (["-n", "-x", "--manifest", os.path.join(workdir, "none")], {}, "cannot read"),
        (["-n", "-x"], {"FSCRUB_MANIFEST": os.path.join(workdir, "none")}, "FSCRUB_MANIFEST"),
    ]
    for args, env, says in cases:
        r = run_fscrub(*args, fs.mnt, env=env)
        assert r.rc == 16 and says in r.stderr, (args, r)


@pytest.mark.parametrize("first,then", [("device", "per-file"),
                                        pytest.param("per-file", "device", marks=pytest.mark.slow)])
def test_device_and_per_file_readers_agree(fs, first, then):
    """A record made from the device read verifies from the file read and
    the other way round: hard links, holes, a tail block, empty files and a
    fragmented file hash alike whichever reader met their blocks."""
    populate(fs.mnt)
    fsimage._make_fragmented(os.path.join(fs.mnt, "frag1"), os.path.join(fs.mnt, "frag2"),
                             300)
    os.sync()
    settle()
    env = {"device": {}, "per-file": {"FSCRUB_DEBUG_NO_DEVREAD": "1"}}
    r = run_fscrub("--record", "-v", fs.mnt, env=env[first])
    assert r.rc == 0 and "8 recorded" in r.stdout, r
    settle()
    r = run_fscrub("-n", "-x", "-v", fs.mnt, env=env[then])
    assert r.rc == 0 and not r.errors and "8 files verified" in r.stdout, r


def test_manifest_finding_names_the_listed_path(fs, workdir):
    """issue 18 item 13: a file is read at the first of its names the walk
    reaches ("first", in the root), but a finding about a manifest line
    names the line's path.  Every line of a file is checked: the file's
    two listed names, one with a wrong digest, give one error, for it."""
    populate(fs.mnt)
    os.mkdir(os.path.join(fs.mnt, "d e"))
    with open(os.path.join(fs.mnt, "first"), "wb") as f:
        f.write(os.urandom(300000))
    for name in ("hard1", "hard2"):
        os.link(os.path.join(fs.mnt, "first"), os.path.join(fs.mnt, "d e", name))
    manifest = os.path.join(workdir, "list.sha256")
    write_manifest(manifest, fs.mnt, ["b", "d e/hard1", "d e/hard2"], "sha256",
                   bad="d e/hard2")
    settle()
    r = run_fscrub("-n", "-x", "-v", "--manifest", manifest, fs.mnt)
    assert r.rc == 4, r
    assert [(e.check, e.path) for e in r.errors] == \
        [("manifest.mismatch", os.path.join(fs.mnt, "d e", "hard2"))], r
    assert "line 3" in r.errors[0].message, r
    assert "2 files match" in r.stdout, r
    # The same with only the bad line: still its path, not "first".
    write_manifest(manifest, fs.mnt, ["d e/hard2"], "sha256", bad="d e/hard2")
    settle()
    r = run_fscrub("-n", "-x", "--manifest", manifest, fs.mnt)
    assert [(e.check, e.path) for e in r.errors] == \
        [("manifest.mismatch", os.path.join(fs.mnt, "d e", "hard2"))], r


def test_old_ledger_database_is_converted(fs, workdir):
    """A database of the first schema (key: fsid, inode, generation) is read
    as it is under -n, and converted, its records kept (subvolume 0), by
    the first run that writes."""
    import sqlite3
    populate(fs.mnt)
    db = os.path.join(workdir, "ledger")
    os.mkdir(db)
    record(fs.mnt, "--ledger", db)
    path = os.path.join(db, "fscrub-ledger.sqlite")
    con = sqlite3.connect(path)
    rows = con.execute("SELECT fsid, ino, gen, rec FROM records").fetchall()
    assert len(rows) == 6 and \
        {r[0] for r in con.execute("SELECT subvol FROM records")} == {0}, rows
    con.executescript("DROP TABLE records; CREATE TABLE records (fsid TEXT NOT NULL, "
                      "ino INTEGER NOT NULL, gen INTEGER NOT NULL, rec BLOB NOT NULL, "
                      "PRIMARY KEY (fsid, ino, gen)) WITHOUT ROWID;")
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    r = run_fscrub("-n", "-x", "-v", "--ledger", db, fs.mnt)
    assert r.rc == 0 and not r.errors, r
    assert "6 files verified, 0 recorded" in r.stdout, r
    r = run_fscrub("-x", "-v", "--ledger", db, fs.mnt)
    assert r.rc == 0 and not r.errors, r
    assert "6 files verified, 0 recorded, 0 records refreshed" in r.stdout, r
    con = sqlite3.connect(path)
    cols = [c[1] for c in con.execute("PRAGMA table_info(records)")]
    assert cols == ["fsid", "subvol", "ino", "gen", "rec"], cols
    assert sorted(con.execute("SELECT fsid, ino, gen, rec FROM records").fetchall()) == \
        sorted(rows)
    con.close()


def test_records_hidden_from_an_unprivileged_run_are_said(fs, workdir):
    """Issue 35 item 7: root's --record keeps records in trusted.fscrub.ledger,
    which the kernel hides from a process without CAP_SYS_ADMIN (ENODATA,
    and listxattr leaves it out): an unprivileged -x on a file root finds
    damaged said "0 errors" and nothing about the records it could not
    compare.  It cannot find the damage, but says once how many files it
    could not compare (an info, and a line on stderr without -v)."""
    from test_cli import run_unprivileged
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    os.chmod(workdir, 0o755)        # mkdtemp's 0700 would keep nobody out
    populate(fs.mnt)
    for dirpath, dirnames, filenames in os.walk(fs.mnt):
        os.chmod(dirpath, 0o755)    # lost+found is 0700
    record(fs.mnt)
    flip_byte(fs, "b", 5)
    assert run_fscrub("-n", "-x", fs.mnt).rc == 4       # root sees it
    r = run_unprivileged("-n", "-x", fs.mnt)
    assert r.rc == 0 and not r.errors, r
    said = [l for l in r.stderr.splitlines() if "not compared with checksum records" in l]
    # a (two names), b, dir/c, small, empty, sparse
    assert len(said) == 1 and ": 6 regular files were not compared" in said[0], r
    assert "CAP_SYS_ADMIN" in said[0] and XATTR in said[0], r
    r = run_unprivileged("-n", "-x", "-v", fs.mnt)
    info = [i for i in r.of("Info", "ledger.record") if "not compared" in i.message]
    assert len(info) == 1 and info[0].message.startswith("6 regular files"), r
    assert "not compared with checksum records" not in r.stderr, r
