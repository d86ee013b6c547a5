"""What fscrub writes besides the text report: the JSON report (--json),
Prometheus metrics (--metrics) and progress (-C FD: fsck lines, or a bar
on a terminal; -v status lines).  Each is parsed and checked against the
text report of the same run."""

import json
import os
import pty
import re
import socket
import stat
import subprocess
import threading
import time

import pytest

from conftest import FSCRUB, FINDING, check_sanitizers, run_fscrub
import faults
import fsimage


@pytest.fixture
def faulty_ext4(image_factory):
    """ext4 with a wrong link count, an unreadable file and a newline name."""
    img = image_factory("ext4", size_mb=128)
    img.mkfs()
    mnt = img.mount()
    os.mkfifo(os.path.join(mnt, "odd\nname"))
    img.offline()
    nl = faults.ext4_wrong_nlink(img, nlink=4)
    rd = faults.ext4_read_error(img)
    time.sleep(1.1)     # past the changed-during-scan margin
    img.mount()
    return img.mnt, nl, rd


def findings_of_json(doc):
    return [(f["severity"].capitalize(), f["path"], f["inode"], f["message"], f["check"])
            for f in doc["findings"]]


def findings_of_text(text):
    out = []
    for line in text.splitlines():
        m = FINDING.match(line)
        if m:
            sev, path, ino, msg, check = m.groups()
            out.append((sev, path, int(ino) if ino else None, msg, check))
    return out


def test_json_agrees_with_text(faulty_ext4, workdir):
    mnt, nl, rd = faulty_ext4
    out = os.path.join(workdir, "report.json")
    r = run_fscrub("-v", "-x", "--json", out, mnt)
    assert r.rc == 4, r
    doc = json.load(open(out))
    assert findings_of_json(doc) == findings_of_text(r.stdout)
    assert doc["exit_code"] == 4 and doc["cancelled"] is False
    assert doc["filesystem"]["mountpoint"] == mnt and doc["filesystem"]["type"] == "ext4"
    assert doc["backend"] == "ext4" and doc["options"]["verify_data"] is True
    assert doc["counts"]["errors"] == r.summary[1] and doc["counts"]["warnings"] == r.summary[2]
    assert [p["number"] for p in doc["phases"]] == [1, 2, 3, 4, 5, 6]
    assert all(p["wall_seconds"] >= 0 for p in doc["phases"])
    assert doc["stats"]["bytes_read"] > 0 and doc["stats"]["inodes"] > 5
    reads = [f for f in doc["findings"] if f["check"] == "data.read"]
    assert reads and reads[0]["offset"] == 0 and reads[0]["length"] == rd["size"]
    assert [f for f in doc["findings"] if f["check"] == "nlink.count"][0]["inode"] == nl["inode"]
    # written atomically: no temporary file is left
    assert not [n for n in os.listdir(workdir) if ".tmp." in n]


OFFLINE_EXT4 = "Unmount and run e2fsck -fn, then e2fsck -f to repair."
RESTORE_FILES = "Restore the damaged files from a backup (fscrub status lists them)."


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_advice_per_finding_and_in_the_summary(image_factory, workdir, how):
    """Issue 39 item 3: each finding's advice by its check -- metadata
    damage (nlink.count) the offline checker of ext4, an unreadable file
    (data.read) a restore, a name with a newline (name.control) a rename --
    after each finding under -v and in the JSON report; the summary names
    the most serious action, then the files to restore."""
    img = image_factory("ext4", size_mb=128)
    img.mkfs()
    os.mkfifo(os.path.join(img.mount(), "odd\nname"))
    img.offline()
    nl = faults.ext4_wrong_nlink(img, nlink=4)
    rd = faults.ext4_read_error(img)
    time.sleep(1.1)     # past the changed-during-scan margin
    mnt = img.mount_as(how)
    out = os.path.join(workdir, "report.json")
    r = run_fscrub("-v", "-x", "--json", out, mnt)
    assert r.rc == 4, r
    lines = r.stdout.splitlines()
    want = {"nlink.count": OFFLINE_EXT4, "data.read": "Restore this file from a backup.",
            "name.control": "Nothing is damaged: rename it if you want to."}
    said = {}
    for i, line in enumerate(lines[:-1]):
        m = FINDING.match(line)
        if m and m.group(5) in want:
            said[m.group(5)] = lines[i + 1]
        elif m and m.group(1) == "Info":    # an info needs nothing: no advice line
            assert not lines[i + 1].startswith("    Advice:"), r
    assert said == {c: "    Advice: " + a for c, a in want.items()}, r
    summary = [l for l in lines if l.startswith(mnt + ": ")][-1]
    advice = "%s Then r%s" % (OFFLINE_EXT4, RESTORE_FILES[1:])
    assert " found. " + advice + " (" in summary, summary     # then -v's count of infos

    doc = json.load(open(out))
    by_check = {f["check"]: f for f in doc["findings"] if f["severity"] != "info"}
    for check, sentence in want.items():
        assert by_check[check]["advice"] == sentence, by_check[check]
    assert (by_check["nlink.count"]["action"], by_check["data.read"]["action"],
            by_check["name.control"]["action"]) == ("offline", "restore", "rename")
    assert by_check["data.read"]["path"] == os.path.join(mnt, rd["path"])
    assert by_check["nlink.count"]["inode"] == nl["inode"]
    assert all(f["action"] == "none" and f["advice"] == "Nothing to do."
               for f in doc["findings"] if f["severity"] == "info")
    assert doc["action"] == "offline" and doc["advice"] == advice, doc


def test_clean_run_has_no_advice(image_factory, workdir):
    """Nothing found: no advice in the summary, JSON action "none" and advice null."""
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    out = os.path.join(workdir, "report.json")
    r = run_fscrub("--json", out, mnt)
    assert r.rc == 0, r
    assert r.stdout.splitlines()[-1] == "%s: 0 errors and 0 warnings found." % mnt, r
    doc = json.load(open(out))
    assert doc["action"] == "none" and doc["advice"] is None, doc


def test_json_to_stdout_moves_the_text_to_stderr(faulty_ext4):
    mnt, nl, rd = faulty_ext4
    r = run_fscrub("--json", "-", mnt)
    assert r.rc == 4
    doc = json.loads(r.stdout)
    assert doc["counts"]["errors"] >= 2
    assert "Unmount and run e2fsck -fn, then e2fsck -f to repair." in r.stderr
    # without -v infos are not in the text, but JSON has every finding
    text = findings_of_text(r.stderr)
    assert [f for f in findings_of_json(doc) if f[0] != "Info"] == text


def test_json_unwritable_is_a_usage_error(faulty_ext4):
    mnt, _, _ = faulty_ext4
    r = run_fscrub("--json", "/nonexistent/dir/r.json", mnt)
    assert r.rc == 16 and "cannot write the JSON report" in r.stderr


def test_json_enospc_is_operational_and_keeps_the_text(faulty_ext4, workdir, cleanups):
    mnt, _, _ = faulty_ext4
    full = os.path.join(workdir, "full")
    os.mkdir(full)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "fscrub-full", full], check=True)
    cleanups.append(lambda: subprocess.run(["umount", full], check=True))
    subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(full, "filler"), "bs=4k"],
                   capture_output=True)
    r = run_fscrub("-v", "--json", os.path.join(full, "r.json"), mnt)
    assert r.rc == 4 | 8, r
    assert "cannot write the JSON report" in r.stderr and "No space left" in r.stderr
    assert "Unmount and run e2fsck -fn" in r.stdout     # the text report is whole
    assert not [n for n in os.listdir(full) if n.startswith("r.json")]


def parse_prom(text):
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'^(fscrub_[a-z_]+)\{(.*)\} (\S+)$', line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        samples[m.group(1)] = (labels, float(m.group(3)))
    return samples


def test_metrics(faulty_ext4, workdir):
    mnt, _, _ = faulty_ext4
    out = os.path.join(workdir, "fscrub.prom")
    r = run_fscrub("-x", "--metrics", out, mnt)
    assert r.rc == 4
    m = parse_prom(open(out).read())
    labels, code = m["fscrub_last_run_exit_code"]
    assert code == 4 and labels == {"mountpoint": mnt, "fstype": "ext4", "backend": "ext4"}
    assert m["fscrub_last_run_errors"][1] == r.summary[1]
    assert m["fscrub_last_run_warnings"][1] == r.summary[2]
    assert m["fscrub_last_run_bytes_checked"][1] > 0
    assert m["fscrub_last_run_inodes_checked"][1] > 5
    assert abs(m["fscrub_last_run_end_time_seconds"][1] - time.time()) < 60
    assert 0 < m["fscrub_last_run_duration_seconds"][1] < 60
    assert not [n for n in os.listdir(workdir) if ".tmp." in n]
    r = run_fscrub("--metrics", "/nonexistent/x.prom", mnt)
    assert r.rc == 16 and "cannot write the metrics file" in r.stderr


def test_metrics_actions(faulty_ext4, workdir):
    """fscrub_last_run_action: one series per action (fscrub(8), WHAT TO
    DO), 1 exactly for the actions the run's findings ask for, as the JSON
    report gives them finding by finding, and 0 for the others."""
    mnt, _, _ = faulty_ext4
    out, rep = os.path.join(workdir, "a.prom"), os.path.join(workdir, "a.json")
    r = run_fscrub("-x", "--metrics", out, "--json", rep, mnt)
    assert r.rc == 4, r
    series = {}
    for line in open(out).read().splitlines():
        m = re.match(r'^fscrub_last_run_action\{(.*)\} (\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
            assert {"mountpoint", "fstype", "backend"} <= set(labels), labels
            series[labels["action"]] = float(m.group(2))
    assert set(series) == {"rename", "recheck", "restore", "offline", "device"}, series
    asked = {f["action"] for f in json.load(open(rep))["findings"]} - {"none"}
    assert asked and {a for a, v in series.items() if v == 1} == asked, (series, asked)
    assert {v for a, v in series.items() if a not in asked} == {0}, series


def test_progress_lines(faulty_ext4):
    """-C FD on a pipe: 'PHASE DONE TOTAL MOUNTPOINT', monotonic, each
    phase ending at its total."""
    mnt, _, _ = faulty_ext4
    rfd, wfd = os.pipe()
    p = subprocess.Popen([FSCRUB, "-x", "-C", str(wfd), mnt], pass_fds=(wfd,),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(wfd)
    lines = os.fdopen(rfd).read().splitlines()
    out, err = p.communicate()
    check_sanitizers(err)
    assert p.returncode == 4
    phases = {}
    for line in lines:
        ph, done, total, where = line.split(" ", 3)
        assert where == mnt
        phases.setdefault(int(ph), []).append((int(done), int(total)))
    assert sorted(phases) == [2, 3, 4, 5, 6], lines
    for ph, seq in phases.items():
        dones = [d for d, _ in seq]
        assert dones == sorted(dones), (ph, seq)
        assert all(d <= t for d, t in seq), (ph, seq)
        assert seq[-1][0] == seq[-1][1], (ph, seq)     # ends at its total
    st = os.statvfs(mnt)
    assert phases[3][0][1] == st.f_files - st.f_ffree    # total from statfs


# Phase 5's bar and status line need a phase 5 that takes a while: its reads
# wait for it here (they may all be done during phase 3 otherwise, devverify.h;
# test_overlap.py checks phase 5's progress after an overlap), and are capped
# at SLOW (768 MiB in about 2 s: a fast host reads them in 0.27 s, about one
# tick of the bar).  Two CI runs once drew no frame at all: the wall clock
# was set back during the run, and the progress thread's waits were on
# CLOCK_REALTIME (now on the monotonic clock: thread.h).
SEQUENTIAL = {"FSCRUB_DEBUG_NO_OVERLAP": "1"}
SLOW = ["--limit", "400M"]


def test_progress_bar_on_a_terminal(big_fs):
    master, slave = pty.openpty()
    p = subprocess.Popen([FSCRUB, "-x", "-j", "1", "-C", str(slave)] + SLOW + [big_fs],
                         pass_fds=(slave,), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, **SEQUENTIAL))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:         # EIO: the last writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, err = p.communicate()
    os.close(master)
    check_sanitizers(err.decode())
    assert p.returncode == 0, out + err
    tty = b"".join(chunks).decode()
    frames = [f for f in tty.split("\r") if f.startswith("Phase 5: Verify file data")]
    assert frames, repr(tty[:500])
    assert all(re.search(r"\d+\.\d%", f) and "/s" in f for f in frames), frames
    # an estimate from the first frame with bytes read (a busy host may draw 0 first)
    read = [f for f in frames if " 0/" not in f]
    assert read and "ETA" in read[0], frames
    assert tty.endswith("\r\x1b[K")           # erased at the end
    assert "\n" not in tty                    # one line, redrawn in place
    # at most a few redraws a second
    assert len(frames) < 20 * 60


def test_verbose_status_line(big_fs):
    r = run_fscrub("-v", "-x", "-j", "1", *SLOW, big_fs,
                   env=dict(SEQUENTIAL, FSCRUB_DEBUG_STATUS_MS="100"))
    assert r.rc == 0, r
    status = [l for l in r.stdout.splitlines()
              if re.match(r"^Phase 5: Verify file data +\d+\.\d% \d+/\d+ bytes \d+/s", l)]
    assert status, r


def test_status_lines_after_a_long_phase(image_factory):
    """-v's status lines are timed from each phase's start: a phase 3 held
    for 3 s (FSCRUB_DEBUG_AFTER_BULK sleeps in it, after XFS's first bulk
    records), then a phase 5 of about 1.5 s (160 MiB at 100 MiB/s) still
    has its own.  Before, the time of the last status line was kept across
    phases, and a phase shorter than a long one before it printed none
    (seen in CI under load)."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "many"))
    for i in range(50):
        open(os.path.join(mnt, "many", "f%d" % i), "w").close()
    with open(os.path.join(mnt, "big"), "wb") as f:
        for _ in range(160):
            f.write(os.urandom(1 << 20))
    mnt = img.remount()
    r = run_fscrub("-v", "-x", "-j", "1", "--limit", "100M", mnt,
                   env=dict(SEQUENTIAL, FSCRUB_DEBUG_STATUS_MS="100",
                            FSCRUB_DEBUG_AFTER_BULK="sleep 3"))
    assert r.rc == 0, r
    assert re.search(r"^Phase 3: .*\d+/s", r.stdout, re.M), r.stdout
    assert re.search(r"^Phase 5: Verify file data +\d+\.\d% \d+/\d+ bytes \d+/s",
                     r.stdout, re.M), r.stdout


# --- what --json and --metrics do to what their FILE already is ---

OUTPUTS = ["--json", "--metrics"]


@pytest.fixture
def small_fs(workdir, cleanups):
    """A clean tmpfs with one file: a scan of it takes a moment."""
    fs = fsimage.make_tmpfs(workdir, "scanned", size_mb=16, populate=False)
    cleanups.append(fs.cleanup)
    with open(os.path.join(fs.mnt, "f"), "w") as f:
        f.write("data\n")
    return fs.mnt


def check_output(opt, text, mnt):
    """text is a whole JSON report or metrics file of a clean scan of mnt."""
    if opt == "--json":
        doc = json.loads(text)
        assert doc["exit_code"] == 0 and doc["filesystem"]["mountpoint"] == mnt
    else:
        assert parse_prom(text)["fscrub_last_run_exit_code"][1] == 0


def no_tmp_files(d):
    return not [n for n in os.listdir(d) if ".tmp." in n]


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_to_a_character_device_writes_it_in_place(small_fs, workdir, opt):
    """A null device (a node like /dev/null, made here so that a failure
    cannot replace the system's) stays the device."""
    null = os.path.join(workdir, "null")
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    r = run_fscrub("-n", opt, null, small_fs)
    assert r.rc == 0 and r.summary, r
    st = os.lstat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert no_tmp_files(workdir)


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_to_a_full_device_is_a_write_error(small_fs, workdir, opt):
    """A node like /dev/full: ENOSPC, exit 8 after a whole text report, the
    device left a device."""
    full = os.path.join(workdir, "full")
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    r = run_fscrub("-n", opt, full, small_fs)
    what = "JSON report" if opt == "--json" else "metrics file"
    assert r.rc == 8, r
    assert "fscrub: cannot write the %s '%s': No space left on device" % (what, full) \
        in r.stderr, r
    assert r.summary == (small_fs, 0, 0), r
    st = os.lstat(full)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)
    assert no_tmp_files(workdir)


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_to_a_fifo_is_read_from_it(small_fs, workdir, opt):
    fifo = os.path.join(workdir, "fifo")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    r = run_fscrub("-n", opt, fifo, small_fs, timeout=120)
    reader.join(30)
    assert r.rc == 0, r
    assert got, "nothing was read from the FIFO"
    check_output(opt, got[0], small_fs)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert no_tmp_files(workdir)


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_through_a_symlink_replaces_its_target(small_fs, workdir, opt):
    """The link stays a link; the file it points to (through a relative
    and an absolute link) is replaced; a dangling link's target is created."""
    d = os.path.join(workdir, "out")
    os.mkdir(d)
    target = os.path.join(d, "report")
    with open(target, "w") as f:
        f.write("old\n")
    os.symlink("out/report", os.path.join(workdir, "rel"))
    os.symlink(os.path.join(workdir, "rel"), os.path.join(workdir, "abs"))
    r = run_fscrub("-n", opt, os.path.join(workdir, "abs"), small_fs)
    assert r.rc == 0, r
    assert os.readlink(os.path.join(workdir, "abs")) == os.path.join(workdir, "rel")
    assert os.readlink(os.path.join(workdir, "rel")) == "out/report"
    check_output(opt, open(target).read(), small_fs)
    assert no_tmp_files(workdir) and no_tmp_files(d)

    os.symlink("out/new", os.path.join(workdir, "dangling"))
    r = run_fscrub("-n", opt, os.path.join(workdir, "dangling"), small_fs)
    assert r.rc == 0, r
    assert os.path.islink(os.path.join(workdir, "dangling"))
    check_output(opt, open(os.path.join(d, "new")).read(), small_fs)


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_to_dev_stdout_is_standard_output(small_fs, workdir, opt):
    """/dev/stdout is a link to /proc/self/fd/1: it is fscrub's standard
    output, a pipe here.  (A link made here, the same as /dev/stdout, so that
    a failure cannot replace the system's.)  JSON there moves the text
    report to standard error, as "-" does; metrics follow the text."""
    out = os.path.join(workdir, "stdout")
    os.symlink("/proc/self/fd/1", out)
    r = run_fscrub("-n", opt, out, small_fs)
    assert r.rc == 0, r
    if opt == "--json":
        check_output(opt, r.stdout, small_fs)
        assert "%s: 0 errors and 0 warnings found." % small_fs in r.stderr
    else:
        text, prom = r.stdout.split("# HELP", 1)
        assert text.endswith("%s: 0 errors and 0 warnings found.\n" % small_fs), r
        check_output(opt, "# HELP" + prom, small_fs)
    assert os.readlink(out) == "/proc/self/fd/1"
    # /dev/fd/1 the same way
    r = run_fscrub("-n", "--json", "/dev/fd/1", small_fs)
    assert r.rc == 0, r
    check_output("--json", r.stdout, small_fs)


def refused(r, what, name, why):
    assert r.rc == 16, r
    assert r.stderr.startswith("fscrub: cannot write the %s '%s': %s" % (what, name, why)), r
    assert r.summary is None and "Phase" not in r.stdout, r    # before the scan


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_that_cannot_be_written_is_a_usage_error(small_fs, workdir, opt):
    what = "JSON report" if opt == "--json" else "metrics file"
    d = os.path.join(workdir, "dir")
    os.mkdir(d)
    refused(run_fscrub("-n", opt, d, small_fs), what, d, "it is a directory")
    assert os.listdir(d) == [] and no_tmp_files(workdir)
    missing = os.path.join(workdir, "missing", "r")
    refused(run_fscrub("-n", opt, missing, small_fs), what, missing,
            "cannot create a file in '%s': No such file or directory"
            % os.path.dirname(missing))
    blk = os.path.join(workdir, "blk")
    os.mknod(blk, stat.S_IFBLK | 0o600, os.makedev(7, 250))
    refused(run_fscrub("-n", opt, blk, small_fs), what, blk, "it is a block device")
    assert stat.S_ISBLK(os.lstat(blk).st_mode)
    sock = os.path.join(workdir, "sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock)
    refused(run_fscrub("-n", opt, sock, small_fs), what, sock, "it is a socket")
    s.close()
    assert stat.S_ISSOCK(os.lstat(sock).st_mode)
    loop = os.path.join(workdir, "loop")
    os.symlink("loop", loop)
    refused(run_fscrub("-n", opt, loop, small_fs), what, loop,
            "Too many levels of symbolic links")


@pytest.mark.parametrize("opt", OUTPUTS)
def test_output_name_planted_in_a_sticky_directory_is_refused(small_fs, workdir, opt):
    """In a directory like /tmp, a symlink or a FIFO someone else put there
    under the name is not followed or written to (the kernel's
    protected_symlinks and protected_fifos rule); root's own link is."""
    what = "JSON report" if opt == "--json" else "metrics file"
    tmp = os.path.join(workdir, "tmp")
    os.mkdir(tmp)
    os.chmod(tmp, 0o1777)
    victim = os.path.join(workdir, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    planted = os.path.join(tmp, "report")
    os.symlink(victim, planted)
    os.lchown(planted, 65534, 65534)
    refused(run_fscrub("-n", opt, planted, small_fs), what, planted,
            "it is a symlink in a sticky world-writable directory, owned by neither "
            "this user nor the directory's owner")
    assert open(victim).read() == "precious\n" and os.path.islink(planted)
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    os.chown(fifo, 65534, 65534)
    refused(run_fscrub("-n", opt, fifo, small_fs), what, fifo, "it is a FIFO in a sticky")
    own = os.path.join(tmp, "own")
    os.symlink(victim, own)
    r = run_fscrub("-n", opt, own, small_fs)
    assert r.rc == 0, r
    check_output(opt, open(victim).read(), small_fs)


def test_json_and_metrics_to_one_place_is_a_usage_error(small_fs, workdir):
    r = run_fscrub("-n", "--json", "-", "--metrics", "/dev/fd/1", small_fs)
    assert r.rc == 16 and "--json and --metrics would both write to '/dev/fd/1'" in r.stderr
    f = os.path.join(workdir, "both")
    r = run_fscrub("-n", "--json", f, "--metrics", f, small_fs)
    assert r.rc == 16 and "would both write" in r.stderr and not os.path.exists(f)
