"""The XFS backend's kernel scrub and repair paths, in a VM: the host kernel
has no XFS online scrub, ../shared/vm/vmrun boots one that has (Linux 6.12,
CONFIG_XFS_ONLINE_SCRUB and _REPAIR) with the image as /dev/vda and runs a
script there (the host's root is visible read-only, so the fscrub under
test runs unchanged; the working directory is shared for the results).

One boot per test (2-4 s under TCG plus the scrubs): a clean image exits 0;
a free space btree and a file's data fork map, broken with xfs_db -x, are
reported under -n with the object named, stay broken (xfs_db reads the
same bytes afterwards: -n set no repair flag), are repaired without -n
(exit 1, "Repaired"), and a second run exits 0; xfs_repair -n agrees at
the end.  Skipped, with the reason, where the harness or qemu is missing."""

import os
import re
import shlex
import shutil
import subprocess
import time
import warnings
from types import SimpleNamespace

import pytest

from conftest import FSCRUB, TOP, Result, check_sanitizers, escaped
import faults
import fsimage

VMRUN = os.path.join(os.path.dirname(TOP), "shared", "vm", "vmrun")
MNT = "/mnt/x"


def vm_missing():
    if not os.access(VMRUN, os.X_OK):
        return "no VM harness at %s" % VMRUN
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 is not installed (Debian: qemu-system-x86 qemu-system-data)"
    # Without a usable /dev/kvm vmrun falls back to TCG: slower, but it works.
    return None


@pytest.fixture(autouse=True)
def need_vm():
    why = vm_missing()
    if why:
        pytest.skip(why)


# A TCG guest running a sanitizer build on a loaded 2-CPU host took more
# than 300 s for one boot in CI: the limit is for hangs, not for speed.
VM_TIMEOUT = 900


STARTED = "vm.started"


def boot_vm(cmd, workdir, timeout):
    """Run vmrun, whose guest command creates STARTED in workdir first thing.
    The console (kernel messages of level error and worse: no -q) goes into
    the failure message.  A guest kernel that panics while it boots, before
    the command starts (an int3 Oops in sched_clock_idle_wakeup_event under
    TCG, 1 boot in 42 on the 2-CPU host, once in CI), is booted once more,
    with a warning that carries the first console: nothing in the guest
    touches the disks before the command, so they are as they were.  A
    guest lost after the command started (the command may have caused it),
    a second loss, or any other failure fails the test."""
    marker = os.path.join(workdir, STARTED)
    for attempt in (1, 2):
        if os.path.exists(marker):
            os.unlink(marker)
        p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout)
        lost = p.returncode == 125 and "did not report an exit status" in p.stderr
        if attempt == 1 and lost and not os.path.exists(marker):
            warnings.warn("vmrun: the guest was lost before its command started; "
                          "booting again.  Its console:\n%s\n%s" % (p.stdout[-4000:], p.stderr))
            continue
        break
    assert p.returncode == 0, "vmrun failed (%d):\n%s\n%s" % (p.returncode, p.stdout[-8000:],
                                                               p.stderr)


def in_vm(workdir, image, steps, timeout=VM_TIMEOUT, smp=None, more_disks=()):
    """Boot once with image as /dev/vda and run steps in order: ("mount",),
    ("umount",), ("fscrub", args...) or ("sh", command).  Returns the list of
    results of the fscrub and sh steps (Result, or namespace rc/stdout).
    smp: the guest's CPUs (vmrun's default: 2); more_disks: images attached
    as /dev/vdb, /dev/vdc, ..."""
    # The guest's / is the host's under an overlay: its /var/lib/fscrub is
    # the host's, which another checkout's fscrub may have made newer.
    lines = ["set -u", ": > %s" % STARTED, "mkdir -p %s" % MNT,
             "export STATE_DIRECTORY=/run/fscrub-test-state", "mkdir -p $STATE_DIRECTORY"]
    outs = []
    for i, step in enumerate(steps):
        if step[0] == "mount":
            lines.append("mount /dev/vda %s || exit 99" % MNT)
        elif step[0] == "umount":
            lines.append("umount %s || exit 98" % MNT)
        else:
            if step[0] == "fscrub":
                cmd = " ".join([FSCRUB] + [str(a) for a in step[1:]] + [MNT])
            else:
                cmd = step[1]
            lines.append("%s >out.%d 2>err.%d; echo $? >rc.%d" % (cmd, i, i, i))
            outs.append((i, step))
    lines.append("mountpoint -q %s && umount %s; exit 0" % (MNT, MNT))
    with open(os.path.join(workdir, "vm.sh"), "w") as f:
        f.write("\n".join(lines) + "\n")
    cpus = ["--smp", str(smp)] if smp else []
    disks = ["--disk", image]
    for d in more_disks:
        disks += ["--disk", d]
    boot_vm([VMRUN, "--timeout", str(timeout)] + cpus + disks + ["--", "bash", "vm.sh"],
            workdir, timeout + 60)
    results = []
    for i, step in outs:
        def read(name):
            with open(os.path.join(workdir, "%s.%d" % (name, i)), errors="surrogateescape") as f:
                return f.read()
        proc = SimpleNamespace(returncode=int(read("rc")), stdout=read("out"),
                               stderr=read("err"))
        if step[0] == "fscrub":
            check_sanitizers(proc.stderr)
            results.append(Result(proc, [str(a) for a in step[1:]]))
        else:
            results.append(SimpleNamespace(rc=proc.returncode, stdout=proc.stdout))
    return results


# A stand-in for vmrun: each call appends to calls; the first LOSE calls
# end as a lost guest does (after the command started and wrote on the
# image if STARTED), later ones exit 0 if the image is as it was.
FAKE_VMRUN = r"""#!/bin/sh
echo x >> calls
if [ $(wc -l < calls) -le %(lose)d ]; then
    [ %(started)d = 1 ] && { : > vm.started; echo scribbled > disk.img; }
    echo "vmrun: guest did not report an exit status (qemu status 0; kernel panic or init failure?)" >&2
    exit 125
fi
: > vm.started
[ "$(cat disk.img)" = original ] || { echo "image changed" >&2; exit 3; }
exit 0
"""


def fake_vmrun(workdir, lose, started=False):
    path = os.path.join(workdir, "fake-vmrun")
    with open(path, "w") as f:
        f.write(FAKE_VMRUN % {"lose": lose, "started": int(started)})
    os.chmod(path, 0o755)
    img = os.path.join(workdir, "disk.img")
    with open(img, "w") as f:
        f.write("original\n")
    return path, img


def calls(workdir):
    with open(os.path.join(workdir, "calls")) as f:
        return len(f.readlines())


def test_boot_vm_boots_a_guest_lost_before_its_command_again(workdir):
    fake, _ = fake_vmrun(workdir, lose=1)
    with pytest.warns(UserWarning, match="lost before its command started"):
        boot_vm([fake], workdir, 30)
    assert calls(workdir) == 2


def test_boot_vm_fails_when_the_guest_is_lost_twice(workdir):
    fake, _ = fake_vmrun(workdir, lose=2)
    with pytest.warns(UserWarning), pytest.raises(AssertionError, match="vmrun failed \\(125\\)"):
        boot_vm([fake], workdir, 30)
    assert calls(workdir) == 2


def test_boot_vm_does_not_boot_again_when_the_command_had_started(workdir):
    fake, _ = fake_vmrun(workdir, lose=1, started=True)
    with pytest.raises(AssertionError, match="vmrun failed \\(125\\)"):
        boot_vm([fake], workdir, 30)
    assert calls(workdir) == 1


def test_boot_vm_does_not_boot_again_after_other_failures(workdir):
    fake, img = fake_vmrun(workdir, lose=0)
    with open(img, "w") as f:
        f.write("not the original\n")
    with pytest.raises(AssertionError, match="vmrun failed \\(3\\)"):
        boot_vm([fake], workdir, 30)
    assert calls(workdir) == 1


@pytest.fixture
def small_xfs(image_factory):
    """A 300 MiB XFS image with a few files, unmounted, aged past 1 s."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(20):
        with open(os.path.join(mnt, "d", "f%d" % i), "wb") as f:
            f.write(os.urandom(4096 * (1 + i % 4)))
    fsimage.run(["cp", "--reflink=always", os.path.join(mnt, "d", "f3"),
                 os.path.join(mnt, "d", "f3.copy")])
    img.offline()
    time.sleep(1.1)
    return img


def test_vm_clean(small_xfs, workdir):
    r, rn = in_vm(workdir, small_xfs.path, [("mount",), ("fscrub", "-v"), ("fscrub", "-n", "-v")])
    for x in (r, rn):
        assert x.rc == 0 and x.errors == [] and x.warnings == [], x
        assert not x.of(check="xfs.scrub_unsupported"), x
        calls = re.search(r"Phase 2: (\d+) kernel scrub calls over (\d+) AGs and (\d+) inodes",
                          x.stdout)
        assert calls and int(calls.group(1)) > 100 and int(calls.group(3)) >= 23, x
    assert "kernel online scrub and repair available" in r.stdout, r
    assert "check only (-n): nothing is repaired" in rn.stdout, rn
    # Types past the newest fscrub knows are asked for and, unknown to this
    # 6.12 kernel (ENOENT), skipped: no finding, no operational error.
    for x in (r, rn):
        assert re.search(r"scrub types 29 to 63 \(newer than fscrub\): 0 known", x.stdout), x


BNO_COUNT = "agf 0", "addr bnoroot", "print recs[1].blockcount"


def bno_count(text):
    return int(re.search(r"recs\[1\]\.blockcount = (\d+)", text).group(1))


@pytest.mark.slow
def test_vm_free_space_btree(small_xfs, workdir):
    """AG 0's free space by block btree loses 100 blocks of its first
    record (the CRC is recomputed: only cross-referencing can tell)."""
    good = bno_count(faults.xfs_db(small_xfs, *BNO_COUNT, write=False))
    faults.xfs_db(small_xfs, "agf 0", "addr bnoroot",
                  "write recs[1].blockcount %d" % (good - 100))
    db = "xfs_db -r " + " ".join("-c '%s'" % c for c in BNO_COUNT) + " /dev/vda"
    n1, n2, after_n, fix, again, db_end, repair = in_vm(workdir, small_xfs.path, [
        ("mount",), ("fscrub", "-n"), ("fscrub", "-n"), ("umount",), ("sh", db),
        ("mount",), ("fscrub",), ("fscrub",), ("umount",), ("sh", db),
        ("sh", "xfs_repair -n /dev/vda"),
    ])
    for n in (n1, n2):
        assert n.rc == 4, n
        bno = [e for e in n.of("Error", "xfs.scrub") if "AG 0 free space by block btree "
               "(bnobt)" in e.message]
        assert bno and bno[0].path == MNT and bno[0].inode is None, n
        assert not n.of("Repaired"), n
    # -n set no repair flag: the record still says what xfs_db wrote.
    assert bno_count(after_n.stdout) == good - 100, after_n.stdout
    assert fix.rc == 1, fix
    # The kernel rebuilds the AGF or the bnobt first; either fixes both.
    rep = fix.of("Repaired", "xfs.scrub")
    assert any(re.match(r"AG 0 free space (header \(agf\)|by block btree \(bnobt\))", e.message)
               and e.message.endswith(": repaired") for e in rep), fix.stdout
    assert any("(bnobt)" in e.message for e in rep), fix.stdout
    assert fix.errors == [] and fix.warnings == [], fix
    assert again.rc == 0 and again.errors == [] and again.warnings == [], again
    # The rebuilt btree need not have the old layout: xfs_repair -n judges it.
    assert db_end.rc == 0, db_end.stdout
    assert repair.rc == 0, repair.stdout


@pytest.mark.slow
def test_vm_data_fork_map(small_xfs, workdir):
    """d/f1's only extent is pointed at d/f2's block: the kernel's data fork
    scrub (cross-referenced with the rmapbt) names the file, as do the
    userspace cross-link and GETFSMAP checks; the repair rebuilds the map
    from the reverse mappings."""
    mnt = small_xfs.mount()
    a, b = os.path.join(mnt, "d", "f1"), os.path.join(mnt, "d", "f2")
    ino_a, ino_b = fsimage.inode_of(a), fsimage.inode_of(b)
    small_xfs.offline()

    def startblock(ino):
        out = faults.xfs_db(small_xfs, "inode %d" % ino, "print u3.bmx[0].startblock",
                            write=False)
        return int(re.search(r"startblock = (\d+)", out).group(1))

    old = startblock(ino_a)
    faults.xfs_db(small_xfs, "inode %d" % ino_a, "write u3.bmx[0].startblock %d"
                  % startblock(ino_b))
    time.sleep(1.1)
    n, fix, again, repair = in_vm(workdir, small_xfs.path, [
        ("mount",), ("fscrub", "-n"), ("fscrub",), ("fscrub",), ("umount",),
        ("sh", "xfs_repair -n /dev/vda"),
    ])
    path_a = escaped(os.path.join(MNT, "d", "f1"))
    assert n.rc == 4, n
    fork = [e for e in n.of("Error", "xfs.scrub") if "(bmapbtd)" in e.message]
    assert [(e.path, e.inode) for e in fork] == [(path_a, ino_a)], n
    assert any(e.path == path_a for e in n.of("Error", "xfs.rmap_missing")), n
    assert n.of("Error", "extent.crosslinked"), n
    assert fix.rc == 1, fix
    rep = [e for e in fix.of("Repaired", "xfs.scrub") if "(bmapbtd)" in e.message]
    assert [(e.path, e.inode) for e in rep] == [(path_a, ino_a)], fix
    assert fix.errors == [], fix
    assert again.rc == 0 and again.errors == [] and again.warnings == [], again
    assert repair.rc == 0, repair.stdout
    assert startblock(ino_a) == old


# ------------------------------------------------------------------ quota
#
# The host kernel has no XFS quota (CONFIG_XFS_QUOTA): the quota tests
# mount in the VM.  QUOTA_TREE runs there on a fresh quota mount: files of
# users 1000-1003 and group 2000, a project 42 directory, a reflinked copy
# (charged in full to both owners), a sparse file, blocks preallocated past
# EOF, a 500-extent file (bmbt blocks) and an attribute fork with a block.

QUOTA_MOUNT = "mount -o uquota,gquota,pquota /dev/vda %s" % MNT

QUOTA_TREE = r"""set -e
cd %(mnt)s
mkdir u; chown 1000:2000 u
dd if=/dev/urandom of=u/f bs=64k count=10 status=none; chown 1000:2000 u/f
cp --reflink=always u/f u/g; chown 1000 u/g
setfattr -n user.big -v "$(head -c 3000 /dev/zero | tr '\0' a)" u/f
xfs_io -f -c "pwrite -q 0 4k" -c "falloc -k 4k 1m" p; chown 1001 p
xfs_io -f -c "pwrite -q 0 4k" -c "pwrite -q 10m 4k" s; chown 1002:2000 s
xfs_io -f -c "pwrite -q 0 4m" -c fsync frag
for i in $(seq 0 2 1000); do echo "fpunch $((i * 4096)) 4096"; done | xfs_io frag >/dev/null
chown 1003 frag
mkdir proj; xfs_quota -x -c 'project -s -p %(mnt)s/proj 42' %(mnt)s >/dev/null
dd if=/dev/zero of=proj/x bs=1k count=100 status=none; chown 1001 proj/x
ln proj/x proj/x.link
sync
""" % {"mnt": MNT}

# A writer for the whole scan, as user 1000 (group 2000): files appended
# to, rewritten and deleted, in project 42 too, never synced (delayed
# allocations are charged in the in-core dquots).
QUOTA_WRITER = r"""mkdir -p %(mnt)s/busy %(mnt)s/proj/busy
chown 1000:2000 %(mnt)s/busy %(mnt)s/proj/busy
/usr/bin/python3 -c '
import os, time
os.chdir("%(mnt)s")
os.setgid(2000)
os.setuid(1000)
if os.fork():
    os._exit(0)
end = time.time() + 60
i = 0
while time.time() < end and not os.path.exists("/tmp/stop"):
    i += 1
    with open("busy/a%%d" %% (i %% 7), "ab") as f:
        f.write(b"x" * 4096 * (i %% 13 + 1))
    with open("proj/busy/b%%d" %% (i %% 5), "wb") as f:
        f.write(b"y" * 32768)
    try:
        os.unlink("busy/a%%d" %% ((i + 3) %% 7))
    except FileNotFoundError:
        pass
' </dev/null >/dev/null 2>&1
sleep 1
""" % {"mnt": MNT}

QUOTA_REPORT = "xfs_quota -x -c 'report -ubn' -c 'report -pbn' %s" % MNT


@pytest.fixture
def quota_xfs(image_factory, workdir):
    """A 300 MiB XFS image made in the VM with QUOTA_TREE on a quota mount,
    unmounted (the quota flags say "checked": no quotacheck at the next
    mount), aged past 1 s."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    made, = in_vm(workdir, img.path, [("sh", QUOTA_MOUNT + " && bash -c %s" %
                                       shlex.quote(QUOTA_TREE))])
    assert made.rc == 0, made.stdout
    time.sleep(1.1)
    return img


def quota_findings(r):
    return r.of(check="xfs.quota")


@pytest.mark.slow
def test_vm_quota_clean(quota_xfs, workdir):
    _, rep, r = in_vm(workdir, quota_xfs.path, [("sh", QUOTA_MOUNT), ("sh", QUOTA_REPORT),
                                             ("fscrub", "-n", "-v")])
    # The tree is what it says: every owner is charged something.
    for owner in ("#1000", "#1001", "#1002", "#1003", "#42"):
        assert re.search(r"^%s +[1-9]" % owner, rep.stdout, re.M), rep.stdout
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert quota_findings(r) == [], r
    assert "quota accounting: user on, group on, project on" in r.stdout, r
    # Users 0 1000-1003, groups 0 2000, projects 0 42: all agree at once.
    m = re.search(r"Phase 3: quota of (\d+) ids against BULKSTAT: 0 to look at again",
                  r.stdout)
    assert m and int(m.group(1)) == 9, r


def test_vm_quota_counter_corrupt(quota_xfs, workdir):
    """User 1000's dquot on disk is charged 25 blocks more (xfs_db; the
    dquot CRC is recomputed).  The superblock's quota flags still say
    "checked", so the mount runs no quotacheck and the in-core dquot
    carries the bad count."""
    dq = ("dquot -u 1000", "print diskdq.bcount diskdq.icount")

    def dquot():
        out = faults.xfs_db(quota_xfs, *dq, write=False)
        return [int(re.search(r"diskdq\.%s = (\d+)" % f, out).group(1))
                for f in ("bcount", "icount")]

    bcount, icount = dquot()
    faults.xfs_db(quota_xfs, "dquot -u 1000", "write diskdq.bcount %d" % (bcount + 25))
    assert dquot() == [bcount + 25, icount]
    _, r, again = in_vm(workdir, quota_xfs.path, [("sh", QUOTA_MOUNT), ("fscrub", "-n"),
                                               ("fscrub", "-n")])
    for x in (r, again):
        assert x.rc == 4, x
        got = x.of("Error", "xfs.quota")
        kib = bcount * 4
        # The user's name, if the host's passwd has one, in parentheses.
        want = (r"user quota of uid 1000( \(\S+\))?: quota says %d inodes and %d KiB, the "
                r"inodes it owns add up to %d inodes and %d KiB"
                % (icount, kib + 100, icount, kib))
        assert len(got) == 1 and got[0].path == MNT, x
        assert re.fullmatch(want, got[0].message), x
        # The kernel's own quotacheck scrub (Linux 6.10) agrees.
        assert any("quotacheck" in e.message for e in x.of("Error", "xfs.scrub")), x
        assert [e for e in x.errors if e.check not in ("xfs.quota", "xfs.scrub")] == [], x


@pytest.mark.slow
def test_vm_quota_busy(quota_xfs, workdir):
    """A writer changes the usage of user 1000, group 2000 and project 42
    throughout the scan: nothing is an error.  One guest CPU: with two,
    the 6.12 guest under TCG oopses on an int3 at a static-key site
    (xfs_dir_create_child, xfs_trans_apply_dquot_deltas) in the writer
    while the kernel scrub flips its live-update hooks on the other CPU."""
    runs = in_vm(workdir, quota_xfs.path, smp=1, steps=[
        ("sh", QUOTA_MOUNT), ("sh", "bash -c " + shlex.quote(QUOTA_WRITER)),
        ("fscrub", "-n", "-v"), ("fscrub", "-n", "-v"), ("sh", "touch /tmp/stop; sleep 1; " + QUOTA_REPORT)])
    for r in runs[2:4]:
        assert r.rc == 0 and r.errors == [], r
        assert "quota accounting: user on, group on, project on" in r.stdout, r
    assert re.search(r"^#1000 +[1-9]", runs[4].stdout, re.M), runs[4].stdout


def test_vm_realtime_files_are_not_cross_linked(workdir):
    """A realtime file's FIEMAP offsets are on the realtime device: they are
    not checked against the data device nor cross-linked with data files at
    the same offsets, and -x reads the file by itself (the host kernel has
    no CONFIG_XFS_RT; the VM's has)."""
    data, rt = os.path.join(workdir, "d.img"), os.path.join(workdir, "rt.img")
    for path, size in ((data, 300), (rt, 200)):
        with open(path, "wb") as f:
            f.truncate(size << 20)
    fsimage.run(["mkfs.xfs", "-q", "-f", "-m", "rmapbt=0,reflink=0", "-r", "rtdev=" + rt, data])
    setup = ("(mount -o rtdev=/dev/vdb /dev/vda %s && "
             "xfs_io -f -c 'chattr +r' -c 'pwrite -S 0x61 0 3m' -c fsync %s/rtfile && "
             "for i in 1 2 3 4; do xfs_io -f -c 'pwrite -S 0x62 0 1m' -c fsync %s/data$i; done "
             "&& xfs_io -c lsattr %s/rtfile && sleep 1.2)" % (MNT, MNT, MNT, MNT))
    made, r = in_vm(workdir, data, [("sh", setup), ("fscrub", "-n", "-x", "-v")],
                    more_disks=[rt])
    assert made.rc == 0 and "r-" in made.stdout, made.stdout
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert re.search(r"Phase 5: \d+ bytes read \(4194304 from the device in physical order, "
                     r"3145728 from 1 files\)", r.stdout), r


@pytest.mark.slow
def test_vm_cross_reference_failures_are_one_info_per_ag(small_xfs, workdir):
    """AG 0's first inode btree record marks half its inodes, in use, as a
    sparse hole: the kernel finds the inobt corrupt, and every object whose
    cross-check touches it cannot be cross-referenced (XFAIL).  xfs_scrub
    calls that an info; fscrub says it once per AG, with the count, and
    the damage itself is the error."""
    rec = faults.xfs_db(small_xfs, "agi 0", "addr root", "print recs[1]", write=False)
    free = int(re.search(r"^1:\[\d+,\d+,\d+,(\d+),", rec, re.M).group(1))
    # the chunk's last 4 inodes (free) become a hole: a record the btree
    # verifier still takes (count and freecount agree), misaligned for the
    # filesystem's sparse inode alignment
    faults.xfs_db(small_xfs, "agi 0", "addr root", "write recs[1].holemask 0x8000",
                  "write recs[1].count 60", "write recs[1].freecount %d" % (free - 4))
    n, = in_vm(workdir, small_xfs.path, [("mount",), ("fscrub", "-n", "-v")])
    assert n.rc == 4, n
    assert n.of("Error", "xfs.scrub"), n
    assert n.warnings == [], n
    xfail = [i for i in n.of("Info", "xfs.scrub_warning")
             if "could not be cross-referenced" in i.message]
    # one per AG (and one for the filesystem-wide objects), with the count
    where = [i.message.split(":")[0] for i in xfail]
    assert "AG 0" in where and len(where) == len(set(where)), n
    assert all(re.match(r"(AG \d+|filesystem-wide): \d+ metadata objects? could not be "
                        r"cross-referenced", i.message) for i in xfail), n
    ag0 = int(re.match(r"AG 0: (\d+)", xfail[where.index("AG 0")].message).group(1))
    assert ag0 >= 20, n         # the 20 files' inodes at least
