"""fscrub_all: what it chooses from a mount table (-m, mountinfo and fstab
format), how it groups filesystems by physical disk, what it passes to
fscrub, and what it returns, with a real fscrub on real images and with
stand-ins for fscrub and systemctl where timing, signals or systemd are
what is tested.

scripts/fscrub_all.in is run as it is (the path placeholders only matter
for the installed copy; $FSCRUB names the binary); test_ops_units.py
checks the copy meson generates and installs.  Crafted tables use major 0
device numbers and /dev paths that do not exist, so they choose the same
on any machine; the grouping tests use real loop devices and partitions.
"""

import json
import os
import re
import shlex
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import types

import pytest

from conftest import FSCRUB, TOP, check_sanitizers, need_root, need_tools
import fsimage

SCRIPT = os.path.join(TOP, "scripts", "fscrub_all.in")
PYTHON = sys.executable


def fscrub_all(*args, env=None, timeout=300, **kw):
    e = dict(os.environ)
    e["FSCRUB"] = FSCRUB
    if env:
        e.update(env)
    p = subprocess.run([PYTHON, SCRIPT] + [str(a) for a in args], capture_output=True,
                       text=True, env=e, timeout=timeout, **kw)
    check_sanitizers(p.stderr)
    return p


def load_module():
    """fscrub_all.in as a module, for the functions that need a fake sysfs
    (compiled here: no bytecode is written next to the script)."""
    mod = types.ModuleType("fscrub_all_under_test")
    mod.__file__ = SCRIPT
    with open(SCRIPT) as f:
        exec(compile(f.read(), SCRIPT, "exec"), mod.__dict__)
    return mod


class Plan:
    """The -n output: groups [(disks, [targets])], cmds {target: argv},
    skipped {target: [reason, ...]}."""
    GROUP = re.compile(r"^group (\d+): disks (.*)$")
    ITEM = re.compile(r"^  (scrub|skip) (.*?) \((\S+) on (.*?)\): (.*)$")

    def __init__(self, proc):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        self.text = proc.stdout
        self.groups, self.cmds, self.skipped, self.types = [], {}, {}, {}
        for line in proc.stdout.splitlines():
            m = self.GROUP.match(line)
            if m:
                disks = [] if m.group(2).startswith("none") else m.group(2).split(", ")
                self.groups.append((disks, []))
                continue
            m = self.ITEM.match(line)
            if not m:
                continue
            kind, target, fstype, _source, rest = m.groups()
            self.types[target] = fstype
            if kind == "scrub":
                self.groups[-1][1].append(target)
                self.cmds[target] = shlex.split(rest)
            else:
                self.skipped.setdefault(target, []).append(rest)

    @property
    def scrubbed(self):
        return [t for _, g in self.groups for t in g]

    def group_of(self, target):
        for disks, g in self.groups:
            if target in g:
                return disks, g
        raise KeyError(target)

    def __repr__(self):
        return self.text


def plan(*args, **kw):
    return Plan(fscrub_all("-n", *args, **kw))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# ----------------------------------------------------------------------------
# choosing from a crafted table
# ----------------------------------------------------------------------------

# ID PARENT MAJ:MIN ROOT TARGET OPTS [OPTIONAL] - TYPE SOURCE SUPEROPTS
MOUNTINFO = r"""20 1 0:101 / / rw,relatime shared:1 - ext4 /dev/fake-sda1 rw,errors=remount-ro
21 20 0:21 / /proc rw,nosuid - proc proc rw
22 20 0:22 / /sys rw,nosuid - sysfs sysfs rw
23 22 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
24 20 0:6 / /dev rw - devtmpfs udev rw,size=1000k
25 24 0:24 / /dev/pts rw - devpts devpts rw,mode=600
26 20 0:25 / /run rw,nosuid shared:5 - tmpfs tmpfs rw,mode=755
27 20 0:102 / /home rw,relatime - xfs /dev/fake-sda2 rw
28 20 0:40 / /net/nfs rw - nfs4 server:/export rw,vers=4.2
29 20 0:41 / /net/smb rw - cifs //server/share rw
30 20 0:42 / /mnt/ssh rw - fuse.sshfs user@host: rw
31 20 0:43 / /snap/core ro - squashfs /dev/fake-loop0 ro
32 20 0:44 / /media/cd ro - iso9660 /dev/fake-sr0 ro
33 20 0:45 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=/a,upperdir=/b
34 20 0:102 /data /srv/data rw,relatime - xfs /dev/fake-sda2 rw
35 20 0:103 / /mnt/btrfs rw - btrfs /dev/fake-sdb1 rw,subvol=/
36 20 0:103 /@home /mnt/btrfs-home rw - btrfs /dev/fake-sdb1 rw,subvol=/@home
37 20 0:104 /@a /mnt/sv-a rw - btrfs /dev/fake-sdc1 rw,subvol=/@a
38 20 0:104 /@b /mnt/sv-b rw - btrfs /dev/fake-sdc1 rw,subvol=/@b
39 20 0:104 /@a/sub /mnt/sv-a-sub rw - btrfs /dev/fake-sdc1 rw,subvol=/@a
40 20 0:105 / /mnt/stack rw - ext4 /dev/fake-sdd1 rw
41 40 0:106 / /mnt/stack rw - ext4 /dev/fake-sde1 rw
42 40 0:107 / /mnt/stack/below rw - ext4 /dev/fake-sdf1 rw
43 20 0:51 / /mnt/ntfs rw - fuseblk /dev/fake-sdg1 rw
44 20 0:52 / /tank/data rw - zfs tank/data rw
45 20 0:108 / /mnt/with\040space rw - ext4 /dev/fake-sdh1 rw
46 20 0:53 / /mnt/pool rw - fuse.mergerfs a:b rw
47 26 0:54 / /run/user/0 rw - tmpfs tmpfs rw
48 20 0:109 / /mnt/ro-ext4 ro - ext4 /dev/fake-sdi1 ro
"""

DEFAULT_SCRUBBED = ["/", "/home", "/mnt/btrfs", "/mnt/sv-a", "/mnt/sv-b", "/mnt/stack",
                    "/mnt/ntfs", "/tank/data", "/mnt/with space", "/mnt/ro-ext4"]


@pytest.fixture
def mountinfo(tmp_path):
    return write(tmp_path / "mountinfo", MOUNTINFO)


def test_default_choice_from_mountinfo(mountinfo):
    p = plan("-m", mountinfo)
    assert sorted(p.scrubbed) == sorted(DEFAULT_SCRUBBED), p
    s = p.skipped
    for t in ("/proc", "/sys", "/sys/fs/cgroup", "/dev", "/dev/pts"):
        assert s[t] == ["a pseudo filesystem (pseudo)"], p
    for t in ("/run", "/run/user/0"):
        assert s[t] == ["a memory filesystem (memory)"], p
    for t in ("/net/nfs", "/net/smb", "/mnt/ssh"):
        assert s[t] == ["a network or cluster filesystem (network)"], p
    for t in ("/snap/core", "/media/cd"):
        assert s[t] == ["read-only by nature (readonly)"], p
    for t in ("/var/lib/docker/overlay2/x/merged", "/mnt/pool"):
        assert s[t] == ["a virtual or layered filesystem (virtual)"], p
    # a bind mount of a subdirectory, a subvolume inside a mounted whole
    # btrfs, a subdirectory of a mounted subvolume: each one scrub
    assert s["/srv/data"][0].startswith("the same filesystem as /home"), p
    assert s["/mnt/btrfs-home"][0].startswith("the same filesystem as /mnt/btrfs "), p
    assert s["/mnt/sv-a-sub"][0].startswith("the same filesystem as /mnt/sv-a "), p
    # stacked at one place: the lower one and what hangs on it are hidden
    assert p.types["/mnt/stack"] == "ext4"
    assert s["/mnt/stack"] == ["hidden under /mnt/stack (ext4, line 22)"], p
    assert s["/mnt/stack/below"] == ["hidden under /mnt/stack (ext4, line 22)"], p
    assert p.cmds["/mnt/stack"] == [FSCRUB, "-b", "--resume", "/mnt/stack"]
    assert p.cmds["/mnt/with space"] == [FSCRUB, "-b", "--resume", "/mnt/with space"]
    assert set(p.skipped) | set(p.scrubbed) == {
        line.split()[4].replace("\\040", " ") for line in MOUNTINFO.splitlines()}


def test_all_includes_all_but_pseudo(mountinfo):
    p = plan("--all", "-m", mountinfo)
    extra = ["/run", "/run/user/0", "/net/nfs", "/net/smb", "/mnt/ssh", "/snap/core",
             "/media/cd", "/var/lib/docker/overlay2/x/merged", "/mnt/pool"]
    assert sorted(p.scrubbed) == sorted(DEFAULT_SCRUBBED + extra), p
    for t in ("/proc", "/sys", "/dev", "/dev/pts", "/sys/fs/cgroup"):
        assert "pseudo" in p.skipped[t][0], p
    assert "/srv/data" in p.skipped and "/mnt/stack/below" in p.skipped


def test_include_and_exclude_types(mountinfo):
    p = plan("--include-type", "tmpfs,proc", "--include-type=nfs4", "-m", mountinfo)
    assert sorted(p.scrubbed) == sorted(DEFAULT_SCRUBBED + ["/run", "/run/user/0", "/proc",
                                                            "/net/nfs"]), p
    p = plan("--exclude-type", "btrfs,zfs", "--all", "--exclude-type=tmpfs", "-m", mountinfo)
    for t in ("/mnt/btrfs", "/mnt/sv-a", "/mnt/sv-b", "/tank/data", "/run"):
        assert p.skipped[t] == ["excluded with --exclude-type"], p
    assert "/net/nfs" in p.scrubbed and "/" in p.scrubbed
    # the subvolume mounts are no longer "the same as" a kept one
    assert p.skipped["/mnt/btrfs-home"] == ["excluded with --exclude-type"]


FSTAB = r"""# /etc/fstab: static file system information.
#
# <file system> <mount point>   <type>  <options>       <dump>  <pass>
UUID=00000000-fscrub-test /             ext4    errors=remount-ro 0 1
/dev/fake-sda2  /home           xfs     defaults        0       2
/dev/fake-sda2  /srv/home-again xfs     defaults        0       2
/home/data      /srv/data       none    bind            0       0
/dev/fake-sda3  none            swap    sw              0       0
tmpfs           /tmp            tmpfs   size=1G         0       0
server:/export  /net/nfs        nfs     defaults,_netdev 0      0
/dev/fake-sr0   /media/cdrom0   udf,iso9660 user,noauto 0       0
proc            /proc           proc    defaults        0       0
/dev/fake-sda4  /mnt/tab\011and\040space ext4 defaults
/dev/fake-sdb1  /mnt/old        ext4    defaults        0       2
/dev/fake-sdc1  /mnt/old        ext4    defaults        0       2
/dev/fake-sdd1  /mnt/noauto     ext4    noauto          0       0
/dev/fake-sde1  /mnt/auto       vfat,ext4 defaults      0       0
"""


def test_choice_from_fstab_format(tmp_path):
    p = plan("-m", write(tmp_path / "fstab", FSTAB))
    assert sorted(p.scrubbed) == sorted(["/", "/home", "/mnt/tab\\011and space",
                                         "/mnt/old", "/mnt/auto"]), p
    s = p.skipped
    assert s["/srv/home-again"][0].startswith("the same filesystem as /home"), p
    assert s["/srv/data"] == ["a bind mount (fstab): its filesystem is scrubbed where "
                              "it is mounted"]
    assert s["none"] == ["swap space, not a filesystem"]
    assert "memory" in s["/tmp"][0] and "network" in s["/net/nfs"][0]
    assert "pseudo" in s["/proc"][0]
    assert s["/mnt/old"] == ["hidden under /mnt/old (ext4, line 15)"], p
    assert "read-only" in s["/media/cdrom0"][0]       # udf,iso9660: all read-only
    assert s["/mnt/noauto"][0].startswith("noauto (fstab)")
    assert p.cmds["/mnt/tab\\011and space"][-1] == "/mnt/tab\\011and space"   # as shown


@pytest.mark.alone
def test_proc_mounts_and_mountinfo_agree():
    """The kernel's two tables, one in each format, give the same choice.
    The three plans are read one after another: a mount made or removed
    between them by anything else on the machine (another test run, a
    desktop's automounter) is not a disagreement, so the three are read
    again while the table itself changed under them, a few times."""
    for _ in range(5):
        before = open("/proc/self/mountinfo").read()
        a = plan("-m", "/proc/self/mountinfo")
        b = plan("-m", "/proc/self/mounts")
        c = plan()
        if open("/proc/self/mountinfo").read() == before:
            break
        time.sleep(1)
    assert sorted(a.scrubbed) == sorted(b.scrubbed) == sorted(c.scrubbed), (a, b)
    assert "/" in a.scrubbed or not os.path.ismount("/"), a


def test_bad_tables_and_usage(tmp_path):
    p = fscrub_all("-n", "-m", tmp_path / "missing")
    assert p.returncode == 16 and "cannot read the mount table" in p.stderr
    bad = write(tmp_path / "bad", "20 1 0:1 / /\n")
    p = fscrub_all("-n", "-m", bad)
    assert p.returncode == 16 and "is not a mount table: line 1" in p.stderr, p.stderr
    p = fscrub_all("-n", "-m", write(tmp_path / "short", "/dev/x /mnt\n"))
    assert p.returncode == 16 and "fewer than 3 fields" in p.stderr
    p = fscrub_all("/mnt")
    assert p.returncode == 16 and "takes no mount points" in p.stderr
    p = fscrub_all("-m")
    assert p.returncode == 16 and "-m needs an argument" in p.stderr
    p = fscrub_all("--max-parallel", "0", "-n")
    assert p.returncode == 16
    p = fscrub_all("--systemd", "-x", "-n")
    assert p.returncode == 16 and "FSCRUB_OPTIONS" in p.stderr
    p = fscrub_all("-C", "x", "-n")
    assert p.returncode == 16
    p = fscrub_all("--help")
    assert p.returncode == 0 and p.stdout.startswith("Usage: fscrub_all")
    p = fscrub_all("-V")
    assert p.returncode == 0 and re.match(r"fscrub_all version \S+\n$", p.stdout)
    empty = write(tmp_path / "empty", "# nothing\n")
    p = fscrub_all("-m", empty)
    assert p.returncode == 0 and "no filesystem to scrub" in p.stderr


def test_options_pass_through(tmp_path):
    t = write(tmp_path / "t", "/dev/fake-a /srv/a ext4 defaults 0 0\n")
    p = plan("-m", t, "-x", "-j", "2", "-vT", "--json", "/var/log/%i-%%.json",
             "--metrics=/m/%f.prom", "-a3", "--", "-n", "-m", "/etc/mtab")
    assert p.cmds["/srv/a"] == [FSCRUB, "-b", "--resume", "-x", "-j", "2", "-vT", "--json",
                                "/var/log/srv-a-%.json", "--metrics", "/m//srv/a.prom", "-a", "3",
                                "-n", "-m", "/etc/mtab", "/srv/a"], p
    # every fscrub option that takes a value passes with it
    valued = ["--limit", "16M", "--ledger", "/l", "--manifest", "/m", "--since", "2026-01-01",
              "--portion", "25%", "--time-budget", "1h"]
    assert plan("-m", t, *valued).cmds["/srv/a"] == [FSCRUB, "-b", "--resume"] + valued + \
        ["/srv/a"]
    # fscrub_all's own letters mixed into a cluster with fscrub's
    p = plan("-xm", t, "-vj4")
    assert p.cmds["/srv/a"] == [FSCRUB, "-b", "--resume", "-x", "-v", "-j", "4", "/srv/a"], p
    p = plan("-m", t, "--systemd")
    assert p.cmds["/srv/a"] == ["systemctl", "start", "fscrub@srv-a.service"], p


def test_resume_is_passed_unless_it_cannot_be(tmp_path):
    """fscrub runs as fscrub@.service runs it, with --resume; not twice, not
    with --no-state (fscrub refuses it there), not with --no-resume, which
    --systemd does not take (the unit always resumes)."""
    t = write(tmp_path / "t", "/dev/fake-a /srv/a ext4 defaults 0 0\n")
    assert plan("-m", t, "-x").cmds["/srv/a"] == [FSCRUB, "-b", "--resume", "-x", "/srv/a"]
    assert plan("-m", t, "--resume").cmds["/srv/a"] == [FSCRUB, "-b", "--resume", "/srv/a"]
    assert plan("-m", t, "--no-state").cmds["/srv/a"] == [FSCRUB, "-b", "--no-state", "/srv/a"]
    assert plan("-m", t, "--no-resume", "-x").cmds["/srv/a"] == [FSCRUB, "-b", "-x", "/srv/a"]
    p = fscrub_all("-m", t, "--systemd", "--no-resume")
    assert p.returncode == 16 and "always continues a stopped scrub" in p.stderr, p.stderr


@pytest.mark.parametrize("path", ["/", "/home", "/a/.b", "/.x", "/a-b", "/a b", "/a\\b",
                                  "/\u00fc/\u65e5", "/a:b_c.d", "/x/y.z/-", "/tab\there"])
def test_unit_names_as_systemd_escape(tmp_path, path):
    need_tools("systemd-escape")
    field = "".join("\\%03o" % ord(c) if c in " \t\\" else c for c in path)
    t = write(tmp_path / "t", "/dev/fake %s ext4 defaults 0 0\n" % field)
    p = plan("--systemd", "-m", t)
    [target] = p.scrubbed
    unit = p.cmds[target][2]
    want = subprocess.run(["systemd-escape", "--path", "--template=fscrub@.service", "--", path],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert unit == want


# ----------------------------------------------------------------------------
# grouping: fake sysfs for what this kernel lacks (dm, md), real devices below
# ----------------------------------------------------------------------------

def make_sysfs(root):
    """A /sys/class/block with sda (sda1, sda2), sdb (sdb1), md0 on sda2 and
    sdb1, dm-0 (LVM) on md0, dm-1 (crypt) on dm-0, nvme0n1 (nvme0n1p1),
    loop3: links and files shaped like the real ones."""
    dev = os.path.join(root, "devices")
    cls = os.path.join(root, "class", "block")
    os.makedirs(cls)

    def node(path, slaves=(), partition=None):
        d = os.path.join(dev, path)
        os.makedirs(os.path.join(d, "slaves"), exist_ok=True)
        for s in slaves:
            os.symlink(os.path.relpath(os.path.join(dev, dict(NODES)[s]),
                                       os.path.join(d, "slaves")),
                       os.path.join(d, "slaves", s))
        if partition:
            write(os.path.join(d, "partition"), "%d\n" % partition)
        os.symlink(os.path.relpath(d, cls), os.path.join(cls, os.path.basename(path)))

    NODES = [("sda", "pci/host0/block/sda"), ("sda1", "pci/host0/block/sda/sda1"),
             ("sda2", "pci/host0/block/sda/sda2"), ("sdb", "pci/host1/block/sdb"),
             ("sdb1", "pci/host1/block/sdb/sdb1"), ("md0", "virtual/block/md0"),
             ("dm-0", "virtual/block/dm-0"), ("dm-1", "virtual/block/dm-1"),
             ("nvme0n1", "pci/nvme/nvme0/nvme0n1"),
             ("nvme0n1p1", "pci/nvme/nvme0/nvme0n1/nvme0n1p1"),
             ("loop3", "virtual/block/loop3")]
    for name, path in NODES:
        slaves = {"md0": ["sda2", "sdb1"], "dm-0": ["md0"], "dm-1": ["dm-0"]}.get(name, [])
        part = int(name[-1]) if name in ("sda1", "sda2", "sdb1", "nvme0n1p1") else None
        if not slaves:
            node(path, partition=part)
    for name in ("md0", "dm-0", "dm-1"):
        node(dict(NODES)[name], slaves={"md0": ["sda2", "sdb1"], "dm-0": ["md0"],
                                        "dm-1": ["dm-0"]}[name])
    return cls


def test_whole_disks_through_partitions_dm_md(tmp_path):
    mod = load_module()
    mod.SYS_BLOCK = make_sysfs(str(tmp_path))
    assert mod.whole_disks("sda1") == {"sda"}
    assert mod.whole_disks("sda") == {"sda"}
    assert mod.whole_disks("md0") == {"sda", "sdb"}
    assert mod.whole_disks("dm-1") == {"sda", "sdb"}
    assert mod.whole_disks("nvme0n1p1") == {"nvme0n1"}
    assert mod.whole_disks("loop3") == {"loop3"}
    assert mod.whole_disks("unknown9") == {"unknown9"}


def test_groups_are_connected_by_shared_disks():
    mod = load_module()
    disks = {"/a": ["sda"], "/b": ["sdb"], "/c": ["nvme0n1"], "/md": ["sda", "sdb"],
             "/d": ["sdb"], "/tmp": []}
    mod.find_disks = lambda m: disks[m.target]
    mounts = [mod.Mount(i, t, "ext4", "/dev/x", ["rw"]) for i, t in
              enumerate(["/a", "/c", "/tmp", "/b", "/md", "/d"], 1)]
    groups = mod.group(mounts)
    assert [[m.target for m in g] for g in groups] == [["/a", "/b", "/md", "/d"], ["/c"],
                                                       ["/tmp"]]


def _write_mbr(path, size_mb, parts_mb):
    """An image with an MS-DOS partition table: one Linux partition per
    size in parts_mb, 1 MiB aligned."""
    with open(path, "wb") as f:
        f.truncate(size_mb << 20)
        mbr = bytearray(512)
        start = 2048
        for i, mb in enumerate(parts_mb):
            n = mb * 2048
            mbr[446 + 16 * i:462 + 16 * i] = struct.pack("<B3sB3sII", 0, b"\0" * 3, 0x83,
                                                         b"\0" * 3, start, n)
            start += n
        mbr[510:512] = b"\x55\xaa"
        f.seek(0)
        f.write(mbr)


class Devices:
    """Kernel state made for the grouping tests, undone in reverse order."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="fscrub-ops-")
        self.undo = []
        self.mounts = fsimage.Mounts(self.undo)

    def loop(self, img, partitions=False):
        dev = self.mounts.loop(img, *(["-P"] if partitions else []))
        if partitions:
            # This kernel may not parse the table itself: partx adds the
            # partitions it reads (BLKPG), and removes them before detach.
            time.sleep(0.2)
            if not os.path.exists(dev + "p1"):
                fsimage.run(["partx", "-a", dev])
            self.undo.append(lambda: fsimage.run(["partx", "-d", dev], check=False))
        return dev

    def mount(self, src, name, opts=()):
        return self.mounts.mount(src, os.path.join(self.dir, name), *opts)

    def cleanup(self):
        for fn in reversed(self.undo):
            try:
                fn()
            except Exception as e:  # keep cleaning up
                print("cleanup failed: %r" % e, file=sys.stderr)
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir])

    def tables(self):
        """(mountinfo, mounts) tables holding only the mounts made here."""
        out = []
        for src, idx in (("/proc/self/mountinfo", 4), ("/proc/self/mounts", 1)):
            with open(src) as f:
                lines = [line for line in f if line.split()[idx].startswith(self.dir + "/")]
            out.append(write(os.path.join(self.dir, os.path.basename(src) + ".table"),
                             "".join(lines)))
        return out


@pytest.fixture(scope="module")
def devices():
    """disk.img partitioned in two (p1, p2: one disk), other.img (whole, and
    a bind mount of a directory in it), third.img: three disks, four
    filesystems, five mounts.  Each image is on a tmpfs of its own: a loop
    device is on the disk its file is on, and tmpfs has none, so each is a
    disk of its own."""
    need_root()
    need_tools("losetup", "mkfs.ext4", "partx")
    d = Devices()
    try:
        home = {n: d.mount("fscrub-ops", n + ".tmpfs", ["-t", "tmpfs", "-o", "size=80m"])
                for n in ("disk", "other", "third")}
        disk = os.path.join(home["disk"], "disk.img")
        _write_mbr(disk, 72, [32, 32])
        dev = d.loop(disk, partitions=True)
        for p in ("p1", "p2"):
            fsimage.run(["mkfs.ext4", "-q", "-F", "-b", "4096", dev + p])
        d.disk = os.path.basename(dev)
        d.p1 = d.mount(dev + "p1", "p1")
        d.p2 = d.mount(dev + "p2", "p2")
        others = []
        for name in ("other", "third"):
            img = os.path.join(home[name], name + ".img")
            with open(img, "wb") as f:
                f.truncate(32 << 20)
            fsimage.run(["mkfs.ext4", "-q", "-F", "-b", "4096", img])
            others.append(d.loop(img))
        d.other_disk, d.third_disk = (os.path.basename(x) for x in others)
        d.other = d.mount(others[0], "other")
        os.mkdir(os.path.join(d.other, "sub"))
        d.bind = d.mount(os.path.join(d.other, "sub"), "bind", ["--bind"])
        d.third = d.mount(others[1], "third")
        d.mountinfo, d.mounts = d.tables()
        yield d
    finally:
        d.cleanup()


@pytest.mark.parametrize("fmt", ["mountinfo", "mounts"])
def test_groups_of_real_devices(devices, fmt):
    d = devices
    p = plan("-m", getattr(d, fmt))
    assert sorted(p.scrubbed) == sorted([d.p1, d.p2, d.other, d.third]), p
    assert p.group_of(d.p1) == ([d.disk], [d.p1, d.p2]), p
    assert p.group_of(d.other) == ([d.other_disk], [d.other]), p
    assert p.group_of(d.third) == ([d.third_disk], [d.third]), p
    assert len(p.groups) == 3
    assert p.skipped[d.bind][0].startswith("the same filesystem as %s" % d.other), p


def test_loop_devices_on_one_disk_are_one_group(fake_fscrub):
    """Issue 35 item 18: two loop devices whose images are in one directory
    were two disks of their own, scrubbed in parallel, both reading the one
    disk under that directory.  They are on that disk: one group, one scrub
    after the other."""
    need_root()
    need_tools("losetup", "mkfs.ext4")
    d = Devices()
    try:
        if os.major(os.stat(d.dir).st_dev) == 0:
            pytest.skip("%s is not on a block device" % d.dir)
        mnts = []
        for name in ("one", "two"):
            img = os.path.join(d.dir, name + ".img")
            with open(img, "wb") as f:
                f.truncate(32 << 20)
            fsimage.run(["mkfs.ext4", "-q", "-F", "-b", "4096", img])
            mnts.append(d.mount(d.loop(img), name))
        mountinfo, _ = d.tables()
        p = plan("-m", mountinfo)
        assert len(p.groups) == 1 and sorted(p.groups[0][1]) == sorted(mnts), p.text
        assert not any(disk.startswith("loop") for disk in p.groups[0][0]), p.text
        env, intervals = fake_fscrub
        r = fscrub_all("-m", mountinfo, env=env)
        assert r.returncode == 0, r.stderr
        start, end, _ = intervals()
        assert not overlap((start[mnts[0]], end[mnts[0]]), (start[mnts[1]], end[mnts[1]]))
    finally:
        d.cleanup()


def test_fscrub_beside_the_generated_script(tmp_path):
    """Issue 35 item 18: the fscrub_all meson generates names the fscrub of
    the prefix it was configured for (/usr/local/sbin/fscrub by default):
    run from the build directory, its plan ran a binary that was not there.
    Where that is missing it runs the fscrub beside it."""
    script = os.path.join(os.path.dirname(os.path.abspath(FSCRUB)), "fscrub_all")
    if not os.path.exists(script):
        pytest.skip("%s was not generated" % script)
    with open(script) as f:
        installed = re.search(r'"(/[^"]*/fscrub)"', f.read()).group(1)
    if os.path.exists(installed):
        pytest.skip("%s is installed: it is the one to run" % installed)
    e = {k: v for k, v in os.environ.items() if k != "FSCRUB"}
    p = subprocess.run([PYTHON, script, "-n", "-m", _table(tmp_path, ["a"])],
                       capture_output=True, text=True, env=e, timeout=60)
    cmd = Plan(p).cmds["/fake/a"]
    assert os.path.exists(cmd[0]) and os.path.samefile(cmd[0], FSCRUB), p.stdout
    assert "not there" not in p.stderr, p.stderr


FAKE_FSCRUB = r"""#!/bin/sh
# A stand-in for fscrub: logs its start and end, sleeps, exits as its mount
# point's name says (bad: 4, crash: SIGKILL, odd: 99, else 0).
for last; do :; done
echo "start $last $(date +%s.%N) $*" >> "$FAKE_LOG"
if [ -n "${FAKE_FD:-}" ]; then echo "progress $last" > "/proc/self/fd/$FAKE_FD"; fi
trap 'kill $pid 2>/dev/null; echo "term $last" >> "$FAKE_LOG"; exit 32' TERM
sleep "${FAKE_SLEEP:-1}" & pid=$!
wait $pid
echo "end $last $(date +%s.%N)" >> "$FAKE_LOG"
echo "$last: 0 errors and 0 warnings found."
case "$last" in
*bad*) exit 4 ;;
*crash*) kill -KILL $$ ;;
*odd*) exit 99 ;;
esac
exit 0
"""


@pytest.fixture
def fake_fscrub(tmp_path):
    path = write(tmp_path / "fake-fscrub", FAKE_FSCRUB)
    os.chmod(path, 0o755)
    log = tmp_path / "log"
    log.write_text("")

    def intervals():
        start, end, term = {}, {}, []
        for line in log.read_text().splitlines():
            f = line.split()
            if f[0] == "start":
                start[f[1]] = float(f[2])
            elif f[0] == "end":
                end[f[1]] = float(f[2])
            else:
                term.append(f[1])
        return start, end, term

    return {"FSCRUB": str(path), "FAKE_LOG": str(log)}, intervals


def overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


def test_one_scrub_per_disk_at_a_time(devices, fake_fscrub):
    env, intervals = fake_fscrub
    p = fscrub_all("-m", devices.mountinfo, env=env)
    assert p.returncode == 0, p.stderr
    start, end, _ = intervals()
    iv = {t: (start[t], end[t]) for t in start}
    d = devices
    assert sorted(iv) == sorted([d.p1, d.p2, d.other, d.third])
    assert not overlap(iv[d.p1], iv[d.p2]), iv              # one disk: one after another
    assert iv[d.p1][1] <= iv[d.p2][0]                         # in table order
    assert overlap(iv[d.p1], iv[d.other]) and overlap(iv[d.p1], iv[d.third]), iv
    # each report printed in one piece (parallel runs are captured)
    assert sorted(p.stdout.splitlines()) == sorted(
        "%s: 0 errors and 0 warnings found." % t for t in iv)

    open(env["FAKE_LOG"], "w").close()
    p = fscrub_all("-m", devices.mountinfo, "--max-parallel", "1", env=env)
    assert p.returncode == 0, p.stderr
    start, end, _ = intervals()
    iv = sorted((start[t], end[t]) for t in start)
    assert len(iv) == 4 and all(a[1] <= b[0] for a, b in zip(iv, iv[1:])), iv


def _table(tmp_path, names):
    """An fstab-format table of fake filesystems (no block device: a group
    each) mounted at /fake/NAME."""
    return write(tmp_path / "t", "".join("/dev/fake-%s /fake/%s ext4 rw 0 0\n" % (n, n)
                                         for n in names))


def test_exit_status_is_the_or(tmp_path, fake_fscrub):
    env, _ = fake_fscrub
    env["FAKE_SLEEP"] = "0.1"
    t = _table(tmp_path, ["ok", "bad"])
    p = fscrub_all("-m", t, env=env)
    assert p.returncode == 4 and "/fake/bad: fscrub exited 4" in p.stderr, p.stderr
    p = fscrub_all("-m", _table(tmp_path, ["ok", "bad", "crash"]), env=env)
    assert p.returncode == 12, p.stderr
    assert "/fake/crash: fscrub was killed by SIGKILL" in p.stderr
    p = fscrub_all("-m", _table(tmp_path, ["odd"]), env=env)
    assert p.returncode == 8 and "not an fsck exit status" in p.stderr
    env["FSCRUB"] = str(tmp_path / "no-such-fscrub")
    p = fscrub_all("-m", t, env=env)
    assert p.returncode == 8 and "cannot run" in p.stderr


def test_progress_fd_is_passed_on(tmp_path, fake_fscrub):
    env, _ = fake_fscrub
    r, w = os.pipe()
    env.update(FAKE_SLEEP="0", FAKE_FD=str(w))
    try:
        p = fscrub_all("-C", w, "-m", _table(tmp_path, ["a", "b"]), env=env, pass_fds=(w,))
        os.close(w)
        w = None
        got = os.read(r, 4096).decode()
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    assert p.returncode == 0, p.stderr
    assert sorted(got.splitlines()) == ["progress /fake/a", "progress /fake/b"]


def test_sigterm_cancels(tmp_path, fake_fscrub):
    env, intervals = fake_fscrub
    env["FAKE_SLEEP"] = "30"
    e = dict(os.environ)
    e.update(env)
    proc = subprocess.Popen([PYTHON, SCRIPT, "--max-parallel", "1", "-m",
                             _table(tmp_path, ["one", "two", "three"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    try:
        deadline = time.monotonic() + 20
        while not intervals()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)           # let the stand-in set its trap
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    start, end, term = intervals()
    assert proc.returncode == 32, err
    assert list(start) == ["/fake/one"] and term == ["/fake/one"] and not end, (start, term)
    assert "cancelled by SIGTERM" in err


FAKE_SYSTEMCTL = r"""#!/usr/bin/python3
# A stand-in for systemctl: "start" runs nothing but records the unit and
# "finishes" it with the status FAKE_STATUS gives its instance (a unit not
# listed does not exist); "show" reports that status as systemd would.
import json, os, sys, time
status = json.loads(os.environ["FAKE_STATUS"])
args = [a for a in sys.argv[1:] if a != "--"]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(" ".join(args) + "\n")
verb, unit = args[0], args[-1]
inst = unit[len("fscrub@"):-len(".service")]
if verb == "start":
    time.sleep(0.1)
    if status.get(inst) == "skip":          # a failed Condition*=
        sys.exit(0)
    if inst not in status:
        print("Failed to start %s: Unit %s not found." % (unit, unit), file=sys.stderr)
        sys.exit(5)
    sys.exit(0 if status[inst] in (0, 32) else 1)
if verb == "show":
    if status.get(inst) == "skip":
        print("LoadState=loaded\nResult=success\nExecMainCode=0\nExecMainStatus=0")
        print("ConditionResult=no")
        sys.exit(0)
    code = 1 if inst in status else 0
    print("LoadState=%s" % ("loaded" if inst in status else "not-found"))
    print("ConditionResult=yes")
    print("Result=%s" % ("success" if status.get(inst, 0) in (0, 32) else "exit-code"))
    print("ExecMainCode=%d" % code)
    print("ExecMainStatus=%d" % status.get(inst, 0))
"""


def test_systemd_mode(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    path = write(bindir / "systemctl", FAKE_SYSTEMCTL)
    os.chmod(path, 0o755)
    log = tmp_path / "log"
    env = {"PATH": "%s:%s" % (bindir, os.environ["PATH"]), "FAKE_LOG": str(log),
           "FSCRUB": "/nonexistent/fscrub-must-not-run"}
    t = _table(tmp_path, ["ok", "bad", "stopped"])
    env["FAKE_STATUS"] = '{"fake-ok": 0, "fake-bad": 4, "fake-stopped": 32}'
    p = fscrub_all("--systemd", "-m", t, env=env)
    assert p.returncode == 36, p.stderr
    started = sorted(line for line in log.read_text().splitlines() if line.startswith("start"))
    assert started == ["start fscrub@fake-bad.service", "start fscrub@fake-ok.service",
                       "start fscrub@fake-stopped.service"]
    assert "fscrub@fake-bad.service exited 4" in p.stderr
    env["FAKE_STATUS"] = '{"fake-ok": 0, "fake-bad": "skip", "fake-stopped": 0}'
    p = fscrub_all("--systemd", "-m", t, env=env)
    assert p.returncode == 0, p.stderr
    assert "/fake/bad: fscrub@fake-bad.service skipped: not a mount point" in p.stderr
    env["FAKE_STATUS"] = '{"fake-ok": 0}'
    p = fscrub_all("--systemd", "-m", t, env=env)
    assert p.returncode == 8, p.stderr
    assert "systemctl start fscrub@fake-bad.service failed (no such unit)" in p.stderr


# ----------------------------------------------------------------------------
# the real thing: fscrub on two ext4 images
# ----------------------------------------------------------------------------

def test_real_scrubs_clean_then_faulty(image_factory, tmp_path):
    need_tools("debugfs")
    imgs = []
    for name in ("alpha", "beta"):
        img = image_factory("ext4", size_mb=64, name=name)
        img.mkfs()
        img.mount()
        os.makedirs(os.path.join(img.mnt, "dir"))
        with open(os.path.join(img.mnt, "file"), "w") as f:
            f.write("scrub me\n")
        imgs.append(img)
    time.sleep(1.1)    # fscrub treats inodes changed < 1 s before the scan as in flux

    def table():
        with open("/proc/self/mountinfo") as f:
            lines = [line for line in f if line.split()[4] in (imgs[0].mnt, imgs[1].mnt)]
        assert len(lines) == 2
        return write(tmp_path / "table", "".join(lines))

    p = fscrub_all("-m", table())
    assert p.returncode == 0, p.stdout + p.stderr
    for img in imgs:
        assert "%s: 0 errors and 0 warnings found." % img.mnt in p.stdout, p.stdout

    beta = imgs[1]
    beta.offline()
    fsimage.run(["debugfs", "-w", "-R", "set_inode_field /file links_count 5", beta.path])
    beta.mount()
    time.sleep(1.1)
    p = fscrub_all("-m", table(), "-v")
    assert p.returncode == 4, p.stdout + p.stderr
    assert re.search(r"^Error: %s/file \(inode \d+\): .*\[nlink\.count\]$" % re.escape(beta.mnt),
                     p.stdout, re.M), p.stdout
    assert "%s: 1 error and 0 warnings found." % beta.mnt in p.stdout
    assert "%s: 0 errors and 0 warnings found." % imgs[0].mnt in p.stdout
    assert "%s: fscrub exited 4" % beta.mnt in p.stderr
    assert "Phase 1:" in p.stdout       # -v reached fscrub


def test_stopped_run_resumes(image_factory, tmp_path):
    """A manual fscrub_all stopped by SIGTERM (fscrub is sent SIGTERM and
    saves its checkpoint) continues where it stopped when run again, as
    the timer's units do: the second run says it resumes and reads less
    than the whole; a completed run leaves no checkpoint."""
    from test_resume import ENV, FILE, _fill, _stop_when, checkpoint
    img = image_factory("ext4", size_mb=256).mkfs()
    mnt = img.mount()
    _fill(mnt, n=20)
    state = str(tmp_path / "state")
    os.mkdir(state)
    t = _mounts_table(tmp_path, [mnt])
    two = str(tmp_path / "two.json")
    args = ["-m", t, "-x", "--limit", "16M", "--state-dir", state]
    rc, out, err, _ = _stop_when(args + ["--", "-n"], state, lambda cp: cp[3]["bytes"] > 0,
                                 dict(ENV, FSCRUB=FSCRUB), cmd=(PYTHON, SCRIPT))
    assert rc == 32, out + err
    run = checkpoint(state)[0]
    p = fscrub_all(*(args + ["--json", two, "--", "-n"]), env=ENV)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resuming run %d from phase 5 at " % run in p.stderr, p.stderr
    with open(two) as f:
        assert f and json.load(f)["stats"]["bytes_read"] < 20 * FILE
    assert checkpoint(state) is None


# ----------------------------------------------------------------------------
# policies: --if-due DAYS (from fscrub status) and XFS's autofsck property
# ----------------------------------------------------------------------------

def _mounts_table(tmp_path, targets):
    """The kernel's mountinfo lines of targets only."""
    with open("/proc/self/mountinfo") as f:
        lines = [line for line in f if line.split()[4] in targets]
    assert len(lines) == len(targets), lines
    return write(tmp_path / "table", "".join(lines))


def _runs(state, mnt):
    p = subprocess.run([FSCRUB, "status", "--json", "--history", "100", "--state-dir", state,
                        mnt], capture_output=True, text=True)
    return json.loads(p.stdout)["filesystems"][0].get("history", [])


def test_if_due(tmp_path):
    """--if-due DAYS scrubs only the filesystems whose last complete run
    (fscrub status, in the --state-dir passed on) ended DAYS ago or more,
    or never; a run that did not complete does not count."""
    need_root()
    state = str(tmp_path / "state")
    os.mkdir(state)
    fss = [fsimage.make_tmpfs(str(tmp_path), name=n, size_mb=8, populate=False)
           for n in ("alpha", "beta")]
    try:
        alpha, beta = (f.mnt for f in fss)
        time.sleep(1.1)
        t = _mounts_table(tmp_path, [alpha, beta])
        r = subprocess.run([FSCRUB, "--state-dir", state, alpha], capture_output=True)
        assert r.returncode == 0, r
        pl = plan("--all", "--if-due", "7", "-m", t, "--state-dir", state)
        assert list(pl.cmds) == [beta], pl.text
        assert pl.skipped[alpha] == ["not due: last complete run 0.0 days ago (--if-due 7)"]
        assert "    due: no complete run recorded" in pl.text
        assert pl.cmds[beta][-3:] == ["--state-dir", state, beta]

        p = fscrub_all("--all", "--if-due", "7", "-m", t, "--state-dir", state)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "fscrub_all: %s: skipped: not due" % alpha in p.stderr
        assert len(_runs(state, alpha)) == 1 and len(_runs(state, beta)) == 1

        # alpha's run ended 8 days ago: due for 7, not for 9 (fractions allowed)
        db = sqlite3.connect(os.path.join(state, "state.sqlite"))
        db.execute("UPDATE runs SET started = started - 8 * 86400, ended = ended - 8 * 86400 "
                   "WHERE mountpoint = ?", (alpha,))
        db.commit()
        db.close()
        pl = plan("--all", "--if-due", "7", "-m", t, "--state-dir", state)
        assert list(pl.cmds) == [alpha], pl.text
        assert "    due: last complete run 8.0 days ago" in pl.text
        assert list(plan("--all", "--if-due", "9.5", "-m", t, "--state-dir", state).cmds) == []
        assert sorted(plan("--all", "--if-due", "0", "-m", t, "--state-dir", state).cmds) == \
            sorted([alpha, beta])
        # a cancelled run is not a complete one
        db = sqlite3.connect(os.path.join(state, "state.sqlite"))
        db.execute("UPDATE runs SET status = 'cancelled' WHERE mountpoint = ?", (beta,))
        db.commit()
        db.close()
        assert list(plan("--all", "--if-due", "7", "-m", t, "--state-dir", state).cmds) == \
            [alpha, beta]
        for bad in ("x", "-1", "7d"):
            p = fscrub_all("-n", "--if-due", bad, "-m", t)
            assert p.returncode == 16 and "--if-due wants a number of days" in p.stderr, p
    finally:
        for f in fss:
            f.cleanup()


def test_if_due_when_status_cannot_say(tmp_path):
    """A filesystem status cannot answer for (here: not mounted, a crafted
    table) is scrubbed, and the plan says why."""
    t = _table(tmp_path, ["ghost"])
    pl = plan("--if-due", "7", "-m", t, "--state-dir", str(tmp_path))
    assert list(pl.cmds) == ["/fake/ghost"], pl.text
    assert re.search(r"^    due: its last complete run is not known \(fscrub status: .*\)$",
                     pl.text, re.M), pl.text


@pytest.fixture(scope="module")
def xfs_mounted(tmp_path_factory):
    need_root()
    need_tools("mkfs.xfs")
    img = fsimage.Image(str(tmp_path_factory.mktemp("xfs")), "xfs", size_mb=300)
    img.mkfs()
    img.mount()
    yield img
    img.cleanup(remove=True)


@pytest.mark.parametrize("value,skip,extra", [
    (None, None, []), ("none", "autofsck=none (XFS property): no background scrub", []),
    ("check", None, ["-n"]), ("optimize", None, ["-n"]), ("repair", None, [])])
def test_xfs_autofsck(xfs_mounted, tmp_path, value, skip, extra):
    """XFS's autofsck property (the trusted.xfs:autofsck xattr of the root,
    as xfsprogs' xfs_property sets it): none skips, check and optimize add
    -n, repair is as without it.  --systemd cannot pass -n: check is then
    skipped unless FSCRUB_OPTIONS has it."""
    mnt = xfs_mounted.mnt
    try:
        os.removexattr(mnt, "trusted.xfs:autofsck")
    except OSError:
        pass
    if value:
        os.setxattr(mnt, "trusted.xfs:autofsck", value.encode())
    t = _mounts_table(tmp_path, [mnt])
    pl = plan("-m", t)
    if skip:
        assert pl.skipped[mnt] == [skip] and mnt not in pl.cmds, pl.text
        return
    assert pl.cmds[mnt] == [FSCRUB, "-b", "--resume"] + extra + [mnt], pl.text
    if extra:
        assert "    autofsck=%s: -n (check only" % value in pl.text
        # already check-only: nothing added
        assert plan("-m", t, "-n").cmds[mnt] == [FSCRUB, "-b", "--resume", "-n", mnt]
        pl = plan("--systemd", "-m", t, env={"FSCRUB_OPTIONS": ""})
        assert pl.skipped[mnt][0].startswith("autofsck=%s (XFS property) asks for -n" % value)
        pl = plan("--systemd", "-m", t, env={"FSCRUB_OPTIONS": "-x -n"})
        assert mnt in pl.cmds, pl.text
    if value:
        os.removexattr(mnt, "trusted.xfs:autofsck")
