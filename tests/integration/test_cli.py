"""The command line and bad input: every mistake gets one clear line and
the documented fsck(8) exit code (16 usage, 8 operational), never a crash
or a silent success."""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import FSCRUB, TOP, need_root, need_tools, run_fscrub
import fsimage


def one_line_error(r, code, text):
    assert r.rc == code, r
    lines = [l for l in r.stderr.splitlines() if l.startswith("fscrub: ")]
    assert lines and text in lines[0], r
    assert r.stdout == "" or "Usage" not in r.stdout


def test_no_argument():
    one_line_error(run_fscrub(), 16, "missing MOUNTPOINT or DEVICE")


def test_unknown_option():
    one_line_error(run_fscrub("-q", "/"), 16, "unknown option -q")
    one_line_error(run_fscrub("--frobnicate", "/"), 16, "unknown option '--frobnicate'")


def test_too_many_arguments():
    one_line_error(run_fscrub("/", "/tmp"), 16, "too many arguments")


@pytest.mark.parametrize("args,text", [
    (("-j", "0"), "-j needs a number of threads"),
    (("-j", "abc"), "-j needs a number of threads"),
    (("-j", "5000"), "-j needs a number of threads"),
    (("-a", "-1"), "-a needs a positive number"),
    (("-a", "0"), "-a needs a positive number"),
    (("-C", "x"), "-C needs a file descriptor"),
    (("-C", "987"), "file descriptor 987 is not open"),
    (("-t", "nosuchfs"), "unknown filesystem type 'nosuchfs'"),
    (("-m", "/nonexistent/mtab"), "cannot read the mount table '/nonexistent/mtab'"),
    (("-x", "--limit", "0"), "--limit needs a positive rate such as 200M, auto[:RATE] or none, not '0'"),
    (("-x", "--limit", "fast"), "--limit needs a positive rate such as 200M, auto[:RATE] or none, not 'fast'"),
    (("-x", "--limit", "200Q"), "--limit needs a positive rate such as 200M, auto[:RATE] or none, not '200Q'"),
    (("-x", "--limit", "-5M"), "--limit needs a positive rate such as 200M, auto[:RATE] or none, not '-5M'"),
    (("-x", "--limit", "99999999T"), "--limit needs a positive rate such as 200M"),
    (("--limit", "200M"), "--limit caps the data scan's reads: use it with -x"),
    (("-x", "--limit", "auto:0"), "--limit needs a positive rate such as 200M, auto[:RATE] or none, not 'auto:0'"),
    (("--limit", "auto"), "--limit caps the data scan's reads: use it with -x"),
])
def test_bad_option_values(args, text):
    one_line_error(run_fscrub(*args, "/"), 16, text)


def test_missing_option_argument():
    one_line_error(run_fscrub("/", "-j"), 16, "option -j needs an argument")


def test_help_and_version():
    r = run_fscrub("--help")
    assert r.rc == 0 and r.stdout.startswith("Usage: fscrub")
    # every option in the usage text is in the man page
    man = open(os.path.join(os.path.dirname(FSCRUB), "..", "man", "fscrub.8")).read()
    for opt in ("max-errors", "background", "progress-fd", "debug", "threads", "mtab",
                "no-modify", "type", "times", "verbose", "version", "verify-data",
                "json", "metrics"):
        assert "--" + opt in r.stdout
        assert "\\-\\-" + opt.replace("-", "\\-") in man, opt
    r = run_fscrub("-V")
    assert r.rc == 0 and r.stdout.startswith("fscrub version ")


def test_every_check_id_has_a_man_page_entry():
    """Each check id of src/report/checks.h is the tag of an entry (.TP) of
    fscrub(8), alone or beside others ('.B a ", " b')."""
    top = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(top, "src", "report", "checks.h")) as f:
        ids = set(re.findall(r'#define CHECK_\w+\s+"([^"]+)"', f.read()))
    with open(os.path.join(top, "man", "fscrub.8")) as f:
        tags = " ".join(re.findall(r"^\.TP\n\.BR? (.*)$", f.read(), re.M))
    assert len(ids) > 100
    missing = sorted(i for i in ids if not re.search(r"(^|[\s\"])%s($|[\s\"])"
                                                     % re.escape(i), tags))
    assert not missing, missing


TOP = os.path.join(os.path.dirname(__file__), "..", "..")
# A row of src/report/advice.c's table: { CHECK_X, ADVICE_Y, NULL or "text" "text" },
ADVICE_ROW = re.compile(r'\{\s*(CHECK_\w+),\s*ADVICE_(\w+),\s*(NULL|(?:"(?:[^"\\]|\\.)*"\s*)+)\s*\}')
# The offline checker's sentence is made for the filesystem at hand; fscrub(8) says it so.
MAN_OFFLINE = "Unmount and run the filesystem's offline checker (WHAT TO DO)."


def c_string(literals):
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', literals))


def advice_table():
    """{check id: (action, sentence)} from src/report/advice.c, the sentence as
    fscrub(8) gives it (the action's own where the row has none)."""
    with open(os.path.join(TOP, "src", "report", "checks.h")) as f:
        ids = dict(re.findall(r'#define (CHECK_\w+)\s+"([^"]+)"', f.read()))
    with open(os.path.join(TOP, "src", "report", "advice.c")) as f:
        src = f.read()
    defaults = {a: c_string(t) for a, t in re.findall(
        r'^\t\[ADVICE_(\w+)\] = ((?:"(?:[^"\\]|\\.)*"\s*)+),$',
        src.split("action_text[")[1].split("};")[0], re.M)}
    defaults["OFFLINE"] = MAN_OFFLINE
    table = {}
    for name, action, text in ADVICE_ROW.findall(src):
        assert name in ids, name
        assert ids[name] not in table, "two rows for %s" % ids[name]
        table[ids[name]] = (action, defaults[action] if text == "NULL" else c_string(text))
    return ids, table


def man_entries():
    """{check id: the text of its .TP entry in CHECKS, troff escapes undone}."""
    with open(os.path.join(TOP, "man", "fscrub.8")) as f:
        man = f.read()
    checks = man.split("\n.SH CHECKS\n")[1].split("\n.SH ")[0] + "\n"
    entries = {}
    for tag, body in re.findall(r"^\.TP\n\.BR? (.*)\n((?:(?!\.TP\n).*\n)*)", checks, re.M):
        text = " ".join(l for l in body.splitlines() if not l.startswith("."))
        text = re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-").replace("\\e", "\\")
        for i in re.findall(r"[a-z0-9_]+\.[a-z0-9_]+", tag):
            entries[i] = text
    return entries


def test_every_check_id_has_advice_and_the_man_page_says_it():
    """Issue 39: each check id of src/report/checks.h has its own row in
    src/report/advice.c (an id added without one fails here, though fscrub gives
    it its class's advice by prefix), and its fscrub(8) entry says that
    row's sentence after "Advice:"."""
    ids, table = advice_table()
    assert len(table) > 100
    assert sorted(set(ids.values()) - set(table)) == []
    entries = man_entries()
    wrong = sorted(i for i, (_, sentence) in table.items()
                   if "Advice: " + sentence not in entries.get(i, ""))
    assert not wrong, [(i, table[i][1]) for i in wrong]


def test_nonexistent_path():
    one_line_error(run_fscrub("/nonexistent/fscrub"), 16,
                   "cannot access '/nonexistent/fscrub': No such file or directory")


def test_regular_file(workdir):
    p = os.path.join(workdir, "file")
    open(p, "w").close()
    one_line_error(run_fscrub(p), 16, "is not a mount point or a block device")


def test_directory_not_a_mountpoint(workdir):
    one_line_error(run_fscrub(workdir), 16, "'%s' is not a mount point" % workdir)


def cwd_holder(path, cleanups):
    """A process (ours) whose working directory is path; killed afterwards."""
    proc = subprocess.Popen(["sleep", "600"], cwd=path)

    def stop():
        proc.kill()
        proc.wait()
    cleanups.append(stop)
    return proc


@pytest.mark.parametrize("fstype", ["tmpfs", "ext4-ro"])
def test_detached_mount_is_refused(workdir, image_factory, cleanups, fstype):
    """Issue 35 item 4: a mount detached by umount -l that a process keeps
    as its cwd is reached as /proc/PID/cwd, whose realpath() is "/": fscrub
    scrubbed the root filesystem and exited 0.  The mount the path reaches
    is compared with the one the table names there: refused (16), saying
    so, for the scan and for status, and nothing is scanned."""
    if fstype == "tmpfs":
        fs = fsimage.make_tmpfs(workdir, populate=False)
        cleanups.append(fs.cleanup)
        mnt = fs.mnt
    else:
        img = image_factory("ext4", size_mb=32)
        img.mkfs()
        mnt = img.mount()
        fsimage._write(os.path.join(mnt, "f"), b"data\n")
        img.remount("ro")
    holder = cwd_holder(mnt, cleanups)
    subprocess.run(["umount", "-l", mnt], check=True)
    if fstype != "tmpfs":
        img.mounted = False     # detached: it goes when the holder does
    arg = "/proc/%d/cwd" % holder.pid
    assert os.readlink(arg) == "/"
    r = run_fscrub("-n", "--no-state", arg, timeout=120)
    one_line_error(r, 16, "'%s' is on a mount that is not in the mount table" % arg)
    assert "shows another filesystem" in r.stderr and r.summary is None, r
    st = subprocess.run([FSCRUB, "status", "--state-dir", workdir, arg], capture_output=True,
                        text=True, timeout=60)
    assert st.returncode == 16 and "not in the mount table" in st.stderr, st


def test_pseudo_filesystem():
    one_line_error(run_fscrub("/proc"), 16, "is a proc filesystem")


@pytest.mark.parametrize("backend", ["xfs", "btrfs"])
def test_type_forced_on_another_filesystem(image_factory, backend):
    """-t picks among the backends that fit: forcing one on a filesystem it
    does not handle is an operational error, before anything is scanned."""
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    r = run_fscrub("-t", backend, mnt)
    one_line_error(r, 8, "-t %s: '%s' is not %s (it is ext4)" % (backend, mnt, backend))
    # the summary does not count what was never looked at
    assert r.stdout == "%s: the scan did not run: nothing was checked.\n" % mnt, r


def test_type_forced_on_tmpfs(workdir, cleanups):
    fs = fsimage.make_tmpfs(workdir, populate=False)
    cleanups.append(fs.cleanup)
    for backend in ("xfs", "ext4"):
        one_line_error(run_fscrub("-t", backend, fs.mnt), 8,
                       "-t %s: '%s' is not %s (it is tmpfs)" % (backend, fs.mnt, backend))
    # The generic backend fits everything.
    assert run_fscrub("-t", "generic", fs.mnt).rc == 0


def test_unmounted_device(image_factory):
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    dev = img.attach()
    one_line_error(run_fscrub(dev), 16, "'%s' is not mounted" % dev)


def test_device_argument_mounted_twice(image_factory, mounts, workdir):
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    mounts.mount(mnt, os.path.join(workdir, "bind"), "--bind")
    r = run_fscrub(img.dev)
    assert r.rc == 0, r
    assert "is mounted in 2 places; scrubbing %s" % mnt in r.stderr, r
    assert r.summary[0] == mnt


def test_btrfs_device_argument(image_factory):
    """btrfs shows an anonymous device number (0:N) in mountinfo: the
    device is found by the mount's source instead."""
    img = image_factory("btrfs", size_mb=320)
    img.mkfs()
    mnt = img.mount()
    r = run_fscrub("-n", "-v", img.dev)
    assert r.rc == 0, r
    assert "scrubbing %s (btrfs) with btrfs backend" % mnt in r.stdout, r


def test_mount_table_from_file(image_factory, workdir):
    """-m: the table named decides what is a mount point."""
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    table = os.path.join(workdir, "mtab")
    with open(table, "w") as f:
        f.write("%s %s ext4 rw 0 0\n" % (img.dev, mnt))
    r = run_fscrub("-m", table, "-v", img.dev)
    assert r.rc == 0, r
    assert "scrubbing %s (ext4)" % mnt in r.stdout
    with open(table, "w") as f:
        f.write("/dev/nothing /elsewhere ext4 rw 0 0\n")
    one_line_error(run_fscrub("-m", table, mnt), 16, "is not a mount point")


def test_verbose_and_timing(image_factory):
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    r = run_fscrub("-v", "-T", "-b", mnt)
    assert r.rc == 0, r
    assert "scrubbing %s (ext4) with ext4 backend" % mnt in r.stdout
    assert "1 threads" in r.stdout          # -b: one thread
    for n in (1, 2, 3, 4, 6):
        assert "Phase %d: wall " % n in r.stdout, r
    assert "peak RSS" in r.stdout and "entries" in r.stdout


def test_debug_prints_source_location(image_factory):
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    os.mkfifo(os.path.join(mnt, "bad\nname"))
    r = run_fscrub("-d", mnt)
    assert r.rc == 0, r
    line = [l for l in r.stdout.splitlines() if l.startswith("Warning:")][0]
    # The file as the source tree names it below src/ (tree/, backends/xfs/ ...).
    assert line.endswith("[name.control] [tree/inode_check.c:%s]"
                         % line.rsplit(":", 1)[1][:-1])


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]


def run_unprivileged(*args):
    """fscrub as uid/gid 65534 with no capabilities, parsed like run_fscrub."""
    from conftest import Result, check_sanitizers
    proc = subprocess.run(NOBODY + [FSCRUB] + [str(a) for a in args], capture_output=True,
                          text=True, errors="surrogateescape", timeout=600)
    check_sanitizers(proc.stderr)
    return Result(proc, [str(a) for a in args])


@pytest.mark.parametrize("fstype,needs", [
    ("ext4", "the ext4 backend needs read access to the block device"),
    ("xfs", "the xfs backend needs CAP_SYS_ADMIN"),
    ("btrfs", "the btrfs backend needs CAP_SYS_ADMIN for the kernel scrub"),
])
def test_unprivileged_falls_back_to_the_generic_checks(image_factory, workdir, fstype, needs):
    """Not root: a backend that needs the device or CAP_SYS_ADMIN gives way
    to the generic checks, which walk the whole tree; the skipped checks
    are said once, and a clean filesystem exits 0."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    img = image_factory(fstype, size_mb=320)
    img.mkfs()
    mnt = img.mount()
    os.chmod(workdir, 0o755)        # mkdtemp's 0700 would keep nobody out
    os.makedirs(os.path.join(mnt, "d", "e"))
    for i in range(3):
        with open(os.path.join(mnt, "d", "f%d" % i), "w") as f:
            f.write("x" * 5000)
    for dirpath, dirnames, filenames in os.walk(mnt):
        os.chmod(dirpath, 0o755)    # lost+found is 0700
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    r = run_unprivileged("-n", "-v", mnt)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    said = [l for l in r.stderr.splitlines() if needs in l]
    assert len(said) == 1 and "only the generic checks are done" in said[0], r
    assert "%s: Permission denied" % img.dev in said[0] or \
        "%s: Operation not permitted" % img.dev in said[0], r
    dirs = 3 + (fstype == "ext4")   # the root, d, d/e and ext4's lost+found
    assert "Phase 3: %d directories, 3 files" % dirs in r.stdout, r
    assert "backend setup" not in r.stderr, r
    # -t demands the backend: what it cannot do is an operational error,
    # but the generic walk still runs.
    r = run_unprivileged("-n", "-v", "-t", fstype, mnt)
    assert r.rc == 8, r
    assert "-t %s: the %s backend needs" % (fstype, fstype) in r.stderr, r
    assert "Phase 3: %d directories, 3 files" % dirs in r.stdout, r


@pytest.mark.parametrize("args", [("-n",), ("-n", "-x")])
def test_unreadable_directory_said_once(image_factory, workdir, args):
    """Issue 35 item 17: as another user with -x, ext4's lost+found (0700,
    root's) was "cannot open directory" twice, by phase 3's walk and again
    by phase 5's, and counted as two operational errors.  Once, one."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed")
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    os.chmod(workdir, 0o755)        # mkdtemp's 0700 would keep nobody out
    with open(os.path.join(mnt, "f"), "w") as f:
        f.write("x" * 5000)
    time.sleep(1.1)   # past the changed-during-scan margin (src/scan/phase3.c)
    r = run_unprivileged(*args, mnt)
    assert r.rc == 8, r
    said = [l for l in r.stderr.splitlines() if "cannot open directory" in l]
    assert said == ["fscrub: %s/lost+found: cannot open directory: Permission denied" % mnt], r
    assert "1 operational error: the scan is incomplete" in r.stdout, r


@pytest.mark.parametrize("page", ["fscrub.8", "fscrub_all.8"])
def test_man_page_renders_without_warnings(page):
    """groff's warnings (a line that begins with a dot and is no macro,
    say: it vanishes from the page) are empty for each man page."""
    need_tools("man")
    p = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l",
                        os.path.join(TOP, "man", page)],
                       capture_output=True, text=True, env=dict(os.environ, LC_ALL="C.UTF-8",
                                                                MANWIDTH="80"))
    assert p.returncode == 0 and p.stdout, p.stderr
    assert p.stderr == "", p.stderr


def test_backends_include_only_their_interface(tmp_path):
    """tools/layout --check-backends: no backend file includes a core
    header past backends/backend.h's list (issue 37, item 4); a copy of
    src/ given one such include is refused, naming it."""
    top = TOP
    layout = os.path.join(top, "tools", "layout")
    p = subprocess.run([sys.executable, layout, "--check-backends", os.path.join(top, "src")],
                       capture_output=True, text=True)
    assert p.returncode == 0 and not p.stdout, p
    src = tmp_path / "src"
    shutil.copytree(os.path.join(top, "src"), src)
    victim = src / "backends" / "xfs" / "xfs_refcount.c"
    victim.write_text('#include "tree/walk.h"\n' + victim.read_text())
    p = subprocess.run([sys.executable, layout, "--check-backends", str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 1, p
    assert p.stdout == "src/backends/xfs/xfs_refcount.c includes tree/walk.h: not in " \
        "backends/backend.h's interface\n", p
