"""fscrub locate through device-mapper linear and an MBR partition table, in
a VM: the host kernel has neither device-mapper nor an MBR parser,
../shared/vm/vmrun boots one that has both (see test_xfs_vm).

Two disks, and a dm-linear device of two segments, the first from the
second disk at sector 2048, the second from the first disk at sector 0;
ext4 on the dm device with a file of random bytes.  The file's sectors
(FIEMAP on the dm device, mapped down through the table here, by hand) on
the disk that holds them name the file and its bytes (exit 4); the dm
device's superblock, through the second disk's sector, is metadata; the
second disk's sectors before the segment are in no filesystem.  A disk
with ext4 in its second partition: the whole disk's sector names the file;
the sectors before the first partition are in no filesystem.
"""

import json
import os

from test_xfs_vm import VMRUN, VM_TIMEOUT, boot_vm, need_vm  # noqa: F401 (a fixture)
from conftest import FSCRUB
from test_locate import write_mbr

# What every guest script starts with: a shell runner, a file's first extent, locate.
PRELUDE = r'''
import fcntl, json, os, struct, subprocess
def sh(*a):
    return subprocess.run(a, check=True, capture_output=True, text=True).stdout
def payload_sector(mnt):
    """Write mnt/payload (1 MiB of random bytes): the device sector of its bytes 8192-8703."""
    with open(mnt + "/payload", "wb") as f:
        f.write(os.urandom(1 << 20))
        os.fsync(f.fileno())
    buf = bytearray(32 + 56)
    struct.pack_into("=QQIIII", buf, 0, 0, 1 << 62, 0, 0, 1, 0)
    fd = os.open(mnt + "/payload", os.O_RDONLY)
    fcntl.ioctl(fd, 0xC020660B, buf, True)   # FS_IOC_FIEMAP, one extent
    os.close(fd)
    return struct.unpack_from("=QQ", buf, 32)[1] // 512 + 16
def locate_runs(cases, **extra):
    out = dict(extra, runs=[])
    for args in cases:
        p = subprocess.run([FSCRUB, "locate", "--json"] + [str(a) for a in args],
                           capture_output=True, text=True)
        out["runs"].append({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
    json.dump(out, open("result.json", "w"))
'''

DM_GUEST = r'''
# dm sectors [0, 40960) are vdb's [2048, 43008), [40960, 204800) vda's [0, 163840).
TABLE = [(0, 40960, "vdb", 2048), (40960, 163840, "vda", 0)]
sh("dmsetup", "create", "lin", "--table",
   "\n".join("%d %d linear /dev/%s %d" % t for t in TABLE))
sh("mkfs.ext4", "-q", "-F", "/dev/mapper/lin")
os.makedirs("/mnt/x", exist_ok=True)
sh("mount", "/dev/mapper/lin", "/mnt/x")
sector = payload_sector("/mnt/x")
for start, count, disk, off in TABLE:
    if start <= sector < start + count:
        lower = (disk, off + sector - start)
locate_runs([["/dev/%s" % lower[0], lower[1]], ["/dev/vdb", 2048 + 2], ["/dev/vdb", 100]],
            table=sh("dmsetup", "table", "lin"))
'''

PART_GUEST = r'''
sh("mkfs.ext4", "-q", "-F", "/dev/vda2")
os.makedirs("/mnt/x", exist_ok=True)
sh("mount", "/dev/vda2", "/mnt/x")
sector = payload_sector("/mnt/x")
locate_runs([["/dev/vda", 43008 + sector], ["/dev/vda", "0-2047"]])
'''


def run_guest(workdir, script, disks):
    """Boot with disks (name, MiB, MBR partitions or None); the guest's result.json."""
    args = []
    for name, mb, parts in disks:
        path = os.path.join(workdir, name)
        with open(path, "wb") as f:
            f.truncate(mb << 20)
        if parts:
            write_mbr(path, parts)
        args += ["--disk", path]
    with open(os.path.join(workdir, "guest.py"), "w") as f:
        f.write("FSCRUB = %r\n" % FSCRUB + PRELUDE + script)
    boot_vm([VMRUN, "--timeout", str(VM_TIMEOUT)] + args +
            ["--", "bash", "-c", "touch vm.started && python3 guest.py"], workdir,
            VM_TIMEOUT + 60)
    with open(os.path.join(workdir, "result.json")) as f:
        return json.load(f)


def test_dm_linear(workdir):
    res = run_guest(workdir, DM_GUEST, [("a.img", 100, None), ("b.img", 40, None)])
    assert "linear" in res["table"], res
    file_run, sb_run, none_run = res["runs"]
    assert file_run["rc"] == 4, file_run
    j = json.loads(file_run["stdout"])
    [o] = [o for o in j["ranges"][0]["owners"] if o["kind"] == "file"]
    assert (o["path"], o["file_offset"], o["length"]) == ("/mnt/x/payload", 8192, 512), o
    assert o["through"].endswith("> dm-0"), o
    assert sb_run["rc"] == 0, sb_run
    [o] = json.loads(sb_run["stdout"])["ranges"][0]["owners"]
    assert (o["kind"], o["what"], o["device"]) == ("metadata", "the superblock", "dm-0"), o
    assert none_run["rc"] == 0, none_run
    [o] = json.loads(none_run["stdout"])["ranges"][0]["owners"]
    assert o["kind"] == "none", o


def test_partition_table(workdir):
    """ext4 in partition 2 of an MBR disk (the host kernel reads no MBR: test_locate skips)."""
    res = run_guest(workdir, PART_GUEST, [("disk.img", 100, [(2048, 40960), (43008, 161792)])])
    file_run, table_run = res["runs"]
    assert file_run["rc"] == 4, file_run
    j = json.loads(file_run["stdout"])
    [o] = [o for o in j["ranges"][0]["owners"] if o["kind"] == "file"]
    assert (o["path"], o["file_offset"], o["length"], o["through"]) == \
        ("/mnt/x/payload", 8192, 512, "vda > vda2"), o
    assert table_run["rc"] == 0, table_run
    [o] = json.loads(table_run["stdout"])["ranges"][0]["owners"]
    assert (o["kind"], o["device"], o["length"]) == ("none", "vda", 2048 * 512), o

