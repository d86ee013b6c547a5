"""fscrub locate: from sectors of a device to the files and metadata they hold.

Each filesystem is made and filled offline-free (a file of random bytes,
so that its place on the device is found by its bytes in the image file,
independently of fscrub), then mounted fresh, settled or read-only, and
asked: a sector of the file names it and the right byte range (exit 4);
metadata is named with its kind, free space as free (exit 0); a sector
past the filesystem is "not part of any mounted filesystem".  The block
stack: a partition table on a loop device (the whole disk's sector), and a
loop device on a file of another filesystem (the lower device's sector
names the backing file and the file inside the upper filesystem).  Bad
input is a usage error with one clear line, never a crash.
"""

import json
import os
import re
import stat
import struct
import subprocess

import pytest

from conftest import FSCRUB, check_sanitizers
from fsimage import Image, fiemap, run

MOUNTS = Image.MOUNT_KINDS
PAYLOAD = 256 * 1024


def locate(*args, timeout=120):
    p = subprocess.run([FSCRUB, "locate"] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    check_sanitizers(p.stderr)
    return p


def locate_json(*args):
    p = locate("--json", *args)
    assert p.returncode in (0, 4, 8), p
    return p, json.loads(p.stdout)


def write_payload(path, size=PAYLOAD):
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    return data


def find_on_disk(image_path, data, base=0):
    """The byte offset of data (its first 4 KiB) in the image file, from base."""
    with open(image_path, "rb") as f:
        f.seek(base)
        disk = f.read()
    at = disk.find(data[:4096])
    assert at >= 0 and at % 512 == 0, "the payload is not on the disk"
    return base + at


def made(image_factory, fstype, how, size_mb=None, mkfs=None):
    """A filesystem with /dir/payload written, unmounted, then mounted as how;
    mkfs: a command to make it instead of the fixture's (the image's path appended)."""
    img = image_factory(fstype, size_mb=size_mb or {"xfs": 300}.get(fstype, 200))
    img.mkfs()
    if mkfs:
        run(list(mkfs) + [img.path])
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "dir"))
    data = write_payload(os.path.join(mnt, "dir", "payload"))
    img.umount()
    img.mount_as(how)
    return img, data


def file_owners(j):
    return [o for r in j["ranges"] for o in r["owners"] if o["kind"] == "file"]


@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_file_sector(image_factory, fstype, how):
    img, data = made(image_factory, fstype, how)
    at = find_on_disk(img.path, data)
    path = os.path.join(img.mnt, "dir", "payload")
    # The third 4 KiB of the file, if it is contiguous there (it is: one write, fresh fs).
    assert find_on_disk(img.path, data[8192:]) == at + 8192
    p = locate(img.dev, "%d+8" % ((at + 8192) // 512))
    assert p.returncode == 4, p
    assert "file %s (inode %d" % (path, os.stat(path).st_ino) in p.stdout, p.stdout
    assert "data bytes 8192-12287" in p.stdout, p.stdout
    p, j = locate_json(img.dev, (at + 8192) // 512 + 1)
    assert p.returncode == 4 and j["exit_code"] == 4
    [o] = file_owners(j)
    assert (o["path"], o["inode"], o["file_offset"], o["length"], o["offset"]) == \
        (path, os.stat(path).st_ino, 8192 + 512, 512, at + 8192 + 512)
    assert (o["fstype"], o["mountpoint"], o["device"]) == \
        (fstype, img.mnt, os.path.basename(img.dev))


def metadata_sectors(img):
    """(sector, words the answer must hold) of metadata, from the fs's own tools."""
    if img.fstype == "ext4":
        out = run(["dumpe2fs", img.dev]).stdout
        bs = int(re.search(r"Block size:\s+(\d+)", out).group(1))
        it = int(re.search(r"Inode table at (\d+)-", out).group(1))
        per_block = bs // int(re.search(r"Inode size:\s+(\d+)", out).group(1))
        return [(2, "metadata: the superblock"),
                (it * bs // 512 + bs // 512,
                 "the inode table of group 0 (the slots of inodes %d-%d)"
                 % (per_block + 1, 2 * per_block))]
    if img.fstype == "xfs":
        return [(0, "metadata: static filesystem metadata (superblock")]
    out = run(["btrfs", "inspect-internal", "dump-super", img.dev]).stdout
    root = int(re.search(r"^root\s+(\d+)", out, re.M).group(1))
    m = run(["btrfs-map-logical", "-l", str(root), img.dev]).stdout
    phys = int(re.search(r"physical (\d+)", m).group(1))
    return [(128, "metadata: a superblock copy"),
            (phys // 512 + 1, "metadata: a tree block of the root tree (logical %d)" % root)]


@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_metadata_sector(image_factory, fstype, how):
    img, _ = made(image_factory, fstype, how)
    for sector, words in metadata_sectors(img):
        p = locate(img.dev, sector)
        assert p.returncode == 0, p
        assert words in p.stdout, p.stdout
        p, j = locate_json(img.dev, sector)
        [o] = j["ranges"][0]["owners"]
        assert o["kind"] == "metadata" and words in "metadata: " + o["what"], o


def free_sector(img):
    """A sector the fs's own tools call free."""
    if img.fstype == "ext4":
        out = run(["dumpe2fs", img.dev]).stdout
        bs = int(re.search(r"Block size:\s+(\d+)", out).group(1))
        ranges = re.findall(r"Free blocks: (\d+)-(\d+)", out)
        a, b = map(int, ranges[-1])
        return (a + b) // 2 * bs // 512
    if img.fstype == "xfs":
        out = run(["xfs_io", "-c", "fsmap -d", img.mnt]).stdout
        a, b = map(int, re.search(r"\[(\d+)\.\.(\d+)\]:\s+free space", out).groups())
        return (a + b) // 2
    out = run(["btrfs", "inspect-internal", "dump-tree", "-t", "dev", img.dev]).stdout
    ends = [int(o) + int(n) for o, n in
            re.findall(r"DEV_EXTENT (\d+)\).*?length (\d+)", out, re.S)]
    return (max(ends) + 8 * 2**20) // 512


@pytest.mark.parametrize("how", MOUNTS)
@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_free_sector(image_factory, fstype, how):
    img, _ = made(image_factory, fstype, how)
    p = locate(img.dev, free_sector(img))
    assert p.returncode == 0, p
    assert re.search(r"bytes \d+-\d+: (free space|unallocated space)", p.stdout), p.stdout
    p, j = locate_json(img.dev, free_sector(img))
    assert [o["kind"] for o in j["ranges"][0]["owners"]] == ["free"], j


SMALLER = {"ext4": None, "xfs": ("-d", "size=200m"), "btrfs": ("-b", "200m")}


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_past_the_filesystem(image_factory, fstype):
    img = image_factory(fstype, size_mb=300, mkfs_args=SMALLER[fstype] or ())
    img.mkfs()
    if fstype == "ext4":  # mkfs.ext4 takes the size after the device
        run(["mkfs.ext4", "-q", "-F", img.path, "200M"])
    img.mount()
    sector = 250 * 2**20 // 512
    p = locate(img.dev, sector)
    assert p.returncode == 0, p
    assert "not part of any mounted filesystem" in p.stdout, p.stdout
    p, j = locate_json(img.dev, "%d+8" % sector)
    assert [o["kind"] for o in j["ranges"][0]["owners"]] == ["none"], j


def write_mbr(path, parts):
    """An MBR partition table of Linux partitions (start, sectors), as sfdisk writes one."""
    with open(path, "r+b") as f:
        for i, (start, count) in enumerate(parts):
            # status, CHS first (unused: LBA), type 0x83, CHS last, LBA start, sectors
            f.seek(0x1BE + 16 * i)
            f.write(struct.pack("<B3sB3sII", 0, b"\xfe\xff\xff", 0x83, b"\xfe\xff\xff",
                                start, count))
        f.seek(0x1FE)
        f.write(b"\x55\xaa")


def test_partition_table(workdir, mounts):
    """The filesystem in partition 2: the whole disk's sector maps to its file."""
    disk = os.path.join(workdir, "disk.img")
    with open(disk, "wb") as f:
        f.truncate(200 * 2**20)
    write_mbr(disk, [(2048, 40960), (43008, 200 * 2048 - 43008)])
    dev = mounts.loop(disk, "-P")
    # Without udev there is no /dev node for the partition: one of our own.
    name = os.path.basename(dev) + "p2"
    if not os.path.exists("/sys/class/block/" + name):
        pytest.skip("this kernel reads no MBR partition table (CONFIG_MSDOS_PARTITION); "
                    "test_locate_vm runs it in the VM, test_blockstack the mapping")
    with open("/sys/class/block/%s/dev" % name) as f:
        major, minor = map(int, f.read().split(":"))
    part = os.path.join(workdir, name)
    os.mknod(part, 0o600 | stat.S_IFBLK, os.makedev(major, minor))
    run(["mkfs.ext4", "-q", "-F", part])
    mnt = mounts.mount(part, os.path.join(workdir, "p2.mnt"))
    data = write_payload(os.path.join(mnt, "payload"))
    at = find_on_disk(disk, data, base=43008 * 512)
    p = locate(dev, "%d+8" % (at // 512))
    assert p.returncode == 4, p
    assert "%s (partition) bytes %d-" % (name, at - 43008 * 512) in p.stdout
    assert "file %s/payload" % mnt in p.stdout and "data bytes 0-4095" in p.stdout, p.stdout
    # The partition table (sector 0) and the gap are in no filesystem.
    p, j = locate_json(dev, 0, 1000)
    assert p.returncode == 0
    assert [o["kind"] for r in j["ranges"] for o in r["owners"]] == ["none", "none"], j


def test_loop_on_file(workdir, mounts):
    """A loop device on a file of another filesystem: the lower sector names both files."""
    lower = os.path.join(workdir, "lower.img")
    with open(lower, "wb") as f:
        f.truncate(200 * 2**20)
    run(["mkfs.ext4", "-q", "-F", lower])
    ldev = mounts.loop(lower)
    lmnt = mounts.mount(ldev, os.path.join(workdir, "lower.mnt"))
    upper = os.path.join(lmnt, "upper.img")
    with open(upper, "wb") as f:
        f.write(b"\0" * 64 * 2**20)
        os.fsync(f.fileno())
    run(["mkfs.ext4", "-q", "-F", upper])
    udev = mounts.loop(upper)
    umnt = mounts.mount(udev, os.path.join(workdir, "upper.mnt"))
    data = write_payload(os.path.join(umnt, "inner"))
    run(["sync"])
    uat = find_on_disk(upper, data)
    [ext] = [e for e in fiemap(upper)
             if e["logical"] <= uat < e["logical"] + e["length"]]
    lat = ext["physical"] + uat - ext["logical"]
    p = locate(ldev, "%d+8" % (lat // 512))
    assert p.returncode == 4, p
    assert "file %s (inode" % upper in p.stdout, p.stdout
    assert "backs %s: its bytes %d-%d" % (os.path.basename(udev), uat, uat + 4095) in p.stdout
    assert "file %s/inner (inode" % umnt in p.stdout and "data bytes 0-4095" in p.stdout
    p, j = locate_json(ldev, "%d+8" % (lat // 512))
    assert [o["path"] for o in file_owners(j)] == [upper, umnt + "/inner"], j
    assert file_owners(j)[1]["through"] == "%s > %s" % (os.path.basename(ldev),
                                                        os.path.basename(udev))


def test_json_schema(image_factory):
    img, data = made(image_factory, "ext4", "fresh")
    at = find_on_disk(img.path, data)
    p, j = locate_json("--unit", "bytes", img.dev, "%d+4096" % at, "1024-2047")
    assert set(j) == {"device", "unit", "ranges", "exit_code"}
    assert (j["device"], j["unit"], j["exit_code"]) == (img.dev, 1, 4)
    assert [r["range"] for r in j["ranges"]] == ["%d+4096" % at, "1024-2047"]
    assert [(r["offset"], r["length"]) for r in j["ranges"]] == [(at, 4096), (1024, 1024)]
    common = {"kind", "through", "device", "offset", "length", "fstype", "mountpoint", "what"}
    for r in j["ranges"]:
        for o in r["owners"]:
            assert common <= set(o), o
            if o["kind"] == "file":
                assert {"path", "inode", "file_offset"} <= set(o)
    # --unit 4096 and --from: the same answers.
    lst = os.path.join(img.workdir, "sectors")
    with open(lst, "w") as f:
        f.write("# the payload\n%d\n\n" % (at // 4096))
    p, k = locate_json("--unit", "4096", "--from", lst, img.dev)
    assert k["ranges"][0]["owners"] == j["ranges"][0]["owners"]


def test_bad_input(image_factory, workdir, mounts):
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    img.mount()
    cases = [
        ([], 16, "a DEVICE is needed"),
        ([img.dev], 16, "a SECTOR, a range or --from FILE is needed"),
        (["/nonexistent/dev", 0], 16, "not a block device: '/nonexistent/dev'"),
        ([img.path, 0], 16, "not a block device"),
        ([img.dev, "abc"], 16, "not a sector or range of sectors: 'abc'"),
        ([img.dev, "10-5"], 16, "not a sector or range"),
        ([img.dev, "5+0"], 16, "not a sector or range"),
        ([img.dev, "99999999999999999999999"], 16, "not a sector or range"),
        ([img.dev, 64 * 2048], 16, "past the end of the device: '131072'"),
        (["--unit", "7", img.dev, 0], 16, "--unit is 512, 4096 or bytes"),
        (["--from", os.path.join(workdir, "none"), img.dev], 16, "cannot open"),
    ]
    for args, rc, words in cases:
        p = locate(*args)
        assert p.returncode == rc and words in p.stderr, (args, p)
        assert not p.stdout, (args, p)
    p = locate("--help")
    assert p.returncode == 0 and "--unit" in p.stdout and "--from" in p.stdout
    # A device no filesystem is on: resolved, and said so.
    with open(os.path.join(workdir, "blank"), "wb") as f:
        f.truncate(8 * 2**20)
    p = locate(mounts.loop(os.path.join(workdir, "blank")), 100)
    assert p.returncode == 0 and "not part of any mounted filesystem" in p.stdout, p


@pytest.mark.parametrize("how", MOUNTS)
def test_xfs_without_rmapbt(image_factory, how):
    """No reverse map: the files are mapped with FIEMAP, metadata is not resolved (exit 8)."""
    img, data = made(image_factory, "xfs", how,
                     mkfs=("mkfs.xfs", "-f", "-q", "-m", "rmapbt=0"))
    at = find_on_disk(img.path, data)
    path = os.path.join(img.mnt, "dir", "payload")
    p = locate(img.dev, "%d+8" % ((at + 4096) // 512))
    assert p.returncode == 4, p
    assert "file %s (inode %d), data bytes 4096-8191" % (path, os.stat(path).st_ino) \
        in p.stdout, p.stdout
    p = locate(img.dev, 0)
    assert p.returncode == 8, p
    assert "not resolved: allocated, but no file maps it" in p.stdout
    assert "reverse-mapping btree" in p.stdout


def test_btrfs_second_device(workdir, mounts):
    """RAID1 on two devices, mounted from the first: the second's copy names the file too."""
    imgs = [os.path.join(workdir, n) for n in ("a.img", "b.img")]
    for p in imgs:
        with open(p, "wb") as f:
            f.truncate(300 * 2**20)
    devs = [mounts.loop(p) for p in imgs]
    run(["mkfs.btrfs", "-q", "-f", "-d", "raid1", "-m", "raid1"] + devs)
    mnt = mounts.mount(devs[0], os.path.join(workdir, "mnt"))
    data = write_payload(os.path.join(mnt, "payload"))
    run(["sync"])
    for img, dev in zip(imgs, devs):
        at = find_on_disk(img, data)
        p, j = locate_json(dev, "%d+8" % ((at + 4096) // 512))
        assert p.returncode == 4, p
        [o] = file_owners(j)
        assert (o["path"], o["file_offset"], o["device"]) == \
            (mnt + "/payload", 4096, os.path.basename(dev)), o


BLOCK = 4096
STRIPE = 64 * 1024      # btrfs's stripe_len


def marked_payload(path, blocks):
    """A file of *blocks* 4 KiB blocks, each starting with its own number,
    so that each can be found on any device whatever the layout."""
    data = b"".join(b"FSCRUB-BLOCK-%08d-" % k + os.urandom(BLOCK - 22) for k in range(blocks))
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    return data


def marked_blocks(image_path):
    """{device offset: block number} of every marked block on the image."""
    found = {}
    with open(image_path, "rb") as f:
        disk = f.read()
    for m in re.finditer(rb"FSCRUB-BLOCK-(\d{8})-", disk):
        if m.start() % BLOCK == 0:
            found[m.start()] = int(m.group(1))
    return found


def data_chunk_stripes(dev):
    """[(devid, device offset)] of the stripes of the filesystem's first
    data chunk, in stripe order, as btrfs-progs reads the chunk tree."""
    out = run(["btrfs", "inspect-internal", "dump-tree", "-t", "chunk", dev]).stdout
    stripes, in_data = [], False
    for line in out.splitlines():
        if " CHUNK_ITEM " in line:
            if stripes:
                break
            in_data = False
        elif " type DATA" in line:
            in_data = True
        m = re.search(r"stripe \d+ devid (\d+) offset (\d+)", line)
        if in_data and m:
            stripes.append((int(m.group(1)), int(m.group(2))))
    assert stripes, out
    return stripes


def xor(pieces):
    out = bytearray(len(pieces[0]))
    for p in pieces:
        for i, b in enumerate(p):
            out[i] ^= b
    return bytes(out)


@pytest.mark.parametrize("profile,ndev", [("raid0", 2), ("raid10", 4), ("raid5", 3),
                                          ("raid6", 4)])
def test_btrfs_striped_data(workdir, mounts, profile, ndev):
    """Data striped over the devices (RAID0, RAID10, RAID5, RAID6): every
    block of a file, found on each device by the number written into it,
    is named with its file offset by locate on that device; on RAID5/6 the
    piece of the payload's first row that is not data is named parity, and
    the P piece is the XOR of the row's data pieces, as read from the
    devices."""
    imgs = [os.path.join(workdir, "d%d.img" % i) for i in range(ndev)]
    for p in imgs:
        with open(p, "wb") as f:
            f.truncate(300 * 2**20)
    devs = [mounts.loop(p) for p in imgs]
    run(["mkfs.btrfs", "-q", "-f", "-d", profile, "-m", "raid1"] + devs)
    mnt = os.path.join(workdir, "mnt")
    try:
        mounts.mount(devs[0], mnt)
        data = marked_payload(os.path.join(mnt, "payload"), 96)
        run(["btrfs", "filesystem", "sync", mnt])
        run(["sync"])
        seen = set()
        for img, dev in zip(imgs, devs):
            found = marked_blocks(img)
            assert found, "no block of the payload on %s" % dev
            for at, k in sorted(found.items())[:24]:
                p, j = locate_json(dev, "%d+8" % (at // 512))
                assert p.returncode == 4, p
                [o] = file_owners(j)
                assert (o["path"], o["file_offset"], o["length"]) == \
                    (mnt + "/payload", k * BLOCK, BLOCK), (dev, at, o)
                seen.add(k)
        assert len(seen) >= 24, seen
        if profile in ("raid5", "raid6"):
            # The payload's first row: its f-th piece on every device.
            stripes = data_chunk_stripes(devs[0])
            at = min(marked_blocks(imgs[stripes[0][0] - 1]))
            f = (at - stripes[0][1]) // STRIPE
            kinds, pieces = [], []
            for devid, offset in stripes:
                img, dev, row = imgs[devid - 1], devs[devid - 1], offset + f * STRIPE
                p, j = locate_json(dev, "%d+%d" % (row // 512, STRIPE // 512))
                whats = {o["what"] for r in j["ranges"] for o in r["owners"]}
                kinds.append("P" if any("parity (P)" in w for w in whats) else
                             "Q" if any("parity (Q)" in w for w in whats) else "data")
                with open(img, "rb") as fh:
                    fh.seek(row)
                    pieces.append(fh.read(STRIPE))
            want = ["P"] if profile == "raid5" else ["P", "Q"]
            assert sorted(k for k in kinds if k != "data") == want, kinds
            assert xor([pc for pc, k in zip(pieces, kinds) if k == "data"]) == \
                pieces[kinds.index("P")], kinds
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        for dev in devs:
            subprocess.run(["btrfs", "device", "scan", "--forget", dev], capture_output=True)


@pytest.mark.parametrize("how", MOUNTS)
def test_ext4_extent_tree_block(image_factory, how):
    """A file of hundreds of extents: its extent tree's blocks are its metadata."""
    img = image_factory("ext4", size_mb=200)
    img.mkfs()
    mnt = img.mount()
    fd = os.open(os.path.join(mnt, "frag"), os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(0, 800, 2):  # every other 4 KiB: one extent each
        os.pwrite(fd, b"x" * 4096, i * 4096)
    os.fsync(fd)
    os.close(fd)
    img.umount()
    mnt = img.mount_as(how)
    out = run(["debugfs", "-R", "stat /frag", img.dev]).stdout
    etbs = [int(b) for b in re.findall(r"\(ETB\d+\):(\d+)", out)]
    assert etbs, out
    bs = int(re.search(r"Block size:\s+(\d+)", run(["dumpe2fs", "-h", img.dev]).stdout).group(1))
    ino = os.stat(os.path.join(mnt, "frag")).st_ino
    p = locate(img.dev, etbs[-1] * bs // 512)
    assert p.returncode == 0, p
    assert "metadata: the extent tree of an inode (inode %d)" % ino in p.stdout, p.stdout


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_many_sectors(image_factory, workdir, fstype):
    """--from with more sectors than ext4's targeted passes: the index answers the rest."""
    img = image_factory(fstype, size_mb={"xfs": 300}.get(fstype, 200))
    img.mkfs()
    mnt = img.mount()
    datas = [write_payload(os.path.join(mnt, "f%d" % i), 16384) for i in range(12)]
    img.umount()
    img.mount_as("fresh")
    lst = os.path.join(workdir, "list")
    with open(lst, "w") as f:
        for d in datas:
            f.write("%d+2\n" % ((find_on_disk(img.path, d) + 4096) // 512))
    p, j = locate_json("--from", lst, img.dev)
    assert p.returncode == 4, p
    got = [[(o["path"], o["file_offset"]) for o in r["owners"]] for r in j["ranges"]]
    assert got == [[(os.path.join(mnt, "f%d" % i), 4096)] for i in range(12)], got


def test_btrfs_subvolume_and_snapshot(image_factory):
    """A file in a subvolume, and shared by a snapshot: each of its names is an owner."""
    img = image_factory("btrfs", size_mb=200)
    img.mkfs()
    mnt = img.mount()
    run(["btrfs", "subvolume", "create", os.path.join(mnt, "sv")])
    data = write_payload(os.path.join(mnt, "sv", "payload"))
    run(["btrfs", "subvolume", "snapshot", os.path.join(mnt, "sv"), os.path.join(mnt, "snap")])
    run(["sync"])
    at = find_on_disk(img.path, data)
    p, j = locate_json(img.dev, "%d+8" % ((at + 4096) // 512))
    assert p.returncode == 4, p
    got = sorted((o["path"], o["file_offset"]) for o in file_owners(j))
    assert got == [(mnt + "/snap/payload", 4096), (mnt + "/sv/payload", 4096)], j


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs"])
def test_live_file(image_factory, fstype):
    """A file written on the mounted filesystem, fsync'ed but never unmounted:
    its inode may be only in the journal and the page cache, and is found.
    btrfs's extent tree is the committed one: the file is found after a commit."""
    img = image_factory(fstype, size_mb={"xfs": 300}.get(fstype, 200))
    img.mkfs()
    mnt = img.mount()
    os.mkdir(os.path.join(mnt, "new"))
    data = write_payload(os.path.join(mnt, "new", "live"), 65536)
    if fstype == "btrfs":  # its extent tree shows the data once committed (fscrub(8))
        run(["btrfs", "filesystem", "sync", mnt])
    at = find_on_disk(img.path, data)
    p, j = locate_json(img.dev, "%d+8" % ((at + 8192) // 512))
    assert p.returncode == 4, p
    assert [(o["path"], o["file_offset"]) for o in file_owners(j)] == \
        [(os.path.join(mnt, "new", "live"), 8192)], j
