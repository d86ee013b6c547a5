"""The XFS backend on the host kernel, which has no XFS online scrub: fscrub
must say so once and still find, with its own checks, what xfs_db -x broke
on an unmounted image -- orphaned inodes (BULKSTAT against the walk),
extents without their reverse mapping and reverse mappings without their
extent (GETFSMAP against FIEMAP), cross-linked blocks, wrong link counts
and directory entry types -- while a clean image, reflinked files and an
unlinked-but-open file give nothing.  The kernel scrub and repair paths run
in a VM: test_xfs_vm.py."""

import json
import os
import re
import subprocess
import threading
import time

import pytest

from conftest import FSCRUB, escaped, need_fs, run_fscrub
import faults
import fsimage


@pytest.fixture
def xfs_image(image_factory):
    """An XFS image (crc, finobt, rmapbt, reflink: fsimage's defaults) with
    the fixture tree, proved clean with the xfs backend, left unmounted."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert "with xfs backend" in r.stdout, r
    img.offline()
    return img


def odd_warnings(r):
    """Warnings other than the fixture tree's deliberately odd names."""
    return [w for w in r.warnings if not w.check.startswith("name.")]


def scrub(img, *args):
    # Victims younger than 1 s count as changed during the scan (phase 3).
    time.sleep(1.1)
    mnt = img.mount()
    return mnt, run_fscrub(*args, mnt)


def errors_of(r, check):
    return [f for f in r.errors if f.check == check]


def no_online_scrub(r):
    return "kernel online scrub" not in r.stdout


def test_clean_geometry_and_no_online_scrub(xfs_image):
    mnt, r = scrub(xfs_image, "-v")
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert re.search(r"XFS v5, \d+ AGs of \d+ blocks, block 4096 bytes", r.stdout), r
    feat = re.search(r"XFS features:(.*)", r.stdout).group(1).split()
    for f in ("+crc", "+finobt", "+rmapbt", "+reflink", "-realtime", "-quota"):
        assert f in feat, feat
    if no_online_scrub(r):
        said = r.of("Info", "xfs.scrub_unsupported")
        assert len(said) == 1 and "no XFS online scrub" in said[0].message, r
    # A quiet filesystem: BULKSTAT finds exactly the inodes the walk found.
    m = re.search(r"(\d+) inodes found by name, (\d+) by BULKSTAT", r.stdout)
    assert m and m.group(1) == m.group(2), r
    # Every directory and every name the walk reached was compared with
    # BULKSTAT, a directory's entries in a few requests (xfs_walkstat.c),
    # or was taken from a BULKSTAT record in the first place (the walk's
    # bulk_inodes hook: compared only if the file was opened, as the open
    # file's statx shows it).
    n = re.search(r"Phase 3: (\d+) directories, (\d+) files, (\d+) symlinks, "
                  r"(\d+) special files", r.stdout)
    c = re.search(r"Phase 3: (\d+) inodes compared with BULKSTAT in (\d+) requests", r.stdout)
    b = re.search(r"Phase 3: (\d+) of \d+ entries' inodes from bulk records", r.stdout)
    total = sum(int(x) for x in n.groups()) if n else 0
    assert c and b and int(c.group(1)) + int(b.group(1)) >= total >= int(c.group(1)), r
    assert 0 < int(c.group(2)) < int(c.group(1)) / 4, r
    m = re.search(r"Phase 3: (\d+) data extents against (\d+) reverse mappings: 0 to look",
                  r.stdout)
    assert m and int(m.group(1)) > 40, r
    # -t generic: none of it.
    g = run_fscrub("-v", "-t", "generic", mnt)
    assert g.rc == 0 and "with generic backend" in g.stdout, g
    assert "BULKSTAT" not in g.stdout and "[xfs." not in g.stdout, g


def test_orphaned_inode(xfs_image):
    """The dirent 'victim' is pointed at another file's inode: the victim's
    own inode stays allocated with one link and no name reaches it."""
    f = faults.xfs_dirent_ino(xfs_image, target="existing")
    mnt, r = scrub(xfs_image)
    assert r.rc == 4, r
    orphans = errors_of(r, "xfs.orphan")
    assert [o.inode for o in orphans] == [f["orphan_inode"]], r
    msg = orphans[0].message
    assert "allocated with 1 link, but no directory entry reaches it" in msg, r
    assert "regular file, 7 bytes, owner uid 0 gid 0" in msg, r
    # The target now has two names and one link: the generic check.
    nl = errors_of(r, "nlink.count")
    assert [(e.path, e.inode) for e in nl] == [(escaped(os.path.join(mnt, f["target"])),
                                                 f["inode"])] or \
        [e.inode for e in nl] == [f["inode"]], r


def test_sick_inode_health_flag(xfs_image):
    """The kernel marks a directory sick when a read finds its block
    corrupt (bad CRC), in memory, until the inode leaves its cache.  A scan
    of the filesystem still mounted reports that health flag once, as an
    error without the kernel scrub (xfs.health, the directory named),
    wherever fscrub reads it: a BULKSTAT of every inode before the walk,
    or the walk's own BULKSTAT records (xfs_inodes.c)."""
    mnt = xfs_image.mount()
    many = os.path.join(mnt, "many")
    ino = fsimage.inode_of(many)
    xfs_image.offline()
    # A block-format directory's first block is a "bhdr", a bigger one's a "dhdr".
    hdr = re.search(r"^([bd]hdr)\.hdr\.crc", faults.xfs_db(
        xfs_image, "inode %d" % ino, "dblock 0", "print", write=False), re.M).group(1)
    faults.xfs_db(xfs_image, "inode %d" % ino, "dblock 0", "write -c %s.hdr.crc 0xdeadbeef" % hdr)
    time.sleep(1.1)
    mnt = xfs_image.mount()
    with pytest.raises(OSError):
        os.listdir(os.path.join(mnt, "many"))
    r = run_fscrub("-v", mnt)
    if not no_online_scrub(r):
        pytest.skip("with the kernel scrub a sick flag is an info: the scrub judges it")
    health = errors_of(r, "xfs.health")
    assert [e.inode for e in health] == [ino], r
    assert "corrupt while using it: directory" in health[0].message, r
    # and phase 2's read of the block from the disk, whatever the log holds
    # of the directory's inode (the failed read's atime): a block that names
    # its inode and fails its CRC is damage in itself
    assert [e.inode for e in errors_of(r, "xfs.dir_hash")] == [ino], r
    assert r.rc == 4, r


def test_sick_inode_let_go_is_a_warning(xfs_image):
    """A symlink whose remote target block fails its CRC: readlink marks it
    sick; deleted, it leaves memory through inactivation, and the kernel
    keeps only a mark on its AG (XFS_AG_GEOM_SICK_INODES, until unmount).
    The damage left with the file: the scan warns, naming the bit, and
    exits 0 (it was an error saying "health bit 10"); fscrub health lists
    the AG's "inodes"."""
    mnt = xfs_image.mount()
    link = os.path.join(mnt, "long-link")
    os.symlink("t" * 600, link)         # past the inode's literal area: a remote block
    ino = fsimage.inode_of(link)
    xfs_image.offline()
    faults.xfs_db(xfs_image, "inode %d" % ino, "dblock 0", "type symlink",
                  "write -c crc 0xdeadbeef")
    mnt = xfs_image.mount()
    link = os.path.join(mnt, "long-link")
    with pytest.raises(OSError):
        os.readlink(link)
    os.unlink(link)
    r = run_fscrub("-v", mnt)
    if not no_online_scrub(r):
        pytest.skip("with the kernel scrub a sick flag is an info: the scrub judges it")
    assert r.rc == 0 and r.errors == [], r
    let_go = [w for w in r.warnings if w.check == "xfs.health"]
    assert len(let_go) == 1, r
    assert re.search(r"AG \d+: the kernel found inodes here sick and has since let them go",
                     let_go[0].message), r
    h = subprocess.run([FSCRUB, "health", "--json", mnt], capture_output=True, text=True)
    doc = json.loads(h.stdout)
    ags = [a["sick"] for fs in doc["filesystems"] for a in fs["detail"]["sick_ags"]]
    assert ags == [["inodes"]], h.stdout
    assert h.returncode == 4, h


def test_bmbt_crc_said_once(xfs_image):
    """A file's bmbt block fails its CRC: the walk's FIEMAP cannot map the
    file (extent.unreadable), and the kernel marks the inode's data fork
    mapping sick as it trips on the block.  That flag is the walk's own
    finding again, not one the kernel held before the scan: its health
    flags come from the directory's bulk record, read before the walk
    opened the file, so no xfs.health as well (as when phase 2 read every
    inode's flags before the walk)."""
    mnt = xfs_image.mount()
    ino = fsimage.inode_of(os.path.join(mnt, "data", "frag_a"))
    xfs_image.offline()
    assert "(btree)" in faults.xfs_db(xfs_image, "inode %d" % ino, "print core.format",
                                      write=False)
    faults.xfs_db(xfs_image, "inode %d" % ino, "addr u3.bmbt.ptrs[1]", "write -c crc 0xdeadbeef")
    mnt, r = scrub(xfs_image, "-v")
    assert r.rc == 4, r
    assert [(e.check, e.inode) for e in r.errors] == [("extent.unreadable", ino)], r


def test_orphan_while_directories_change(xfs_image):
    """The same orphan while a thread keeps changing a directory: every walk
    that looks again reads a changed directory, so none of them proves the
    inode has no name (a moved directory could hide it).  After three such
    walks the orphan is an info, not an error."""
    f = faults.xfs_dirent_ino(xfs_image, target="existing")
    time.sleep(1.1)
    mnt = xfs_image.mount()
    busy = os.path.join(mnt, "busy")
    os.mkdir(busy)
    stop = threading.Event()

    def toucher():
        while not stop.is_set():
            p = os.path.join(busy, "t")
            open(p, "w").close()
            os.unlink(p)
            time.sleep(0.005)

    t = threading.Thread(target=toucher)
    t.start()
    try:
        r = run_fscrub("-v", mnt)
    finally:
        stop.set()
        t.join()
    assert errors_of(r, "xfs.orphan") == [], r
    said = r.of("Info", "xfs.orphan")
    assert [i.inode for i in said] == [f["orphan_inode"]], r
    assert "each of them saw directories change" in said[0].message, r
    assert re.search(r"looked for again in 3 more walks: 1 not found", r.stdout), r
    # A quiet filesystem: one more walk, and the orphan is an error.
    time.sleep(1.1)     # past the ctime margin of the last change
    q = run_fscrub("-v", mnt)
    assert [o.inode for o in errors_of(q, "xfs.orphan")] == [f["orphan_inode"]], q
    assert re.search(r"looked for again in 1 more walk: 1 not found", q.stdout), q


def test_unlinked_but_open_is_no_orphan(xfs_image):
    """nlink 0 and open, created long before the scan: not an orphan."""
    mnt = xfs_image.mount()
    path = os.path.join(mnt, "doomed")
    with open(path, "wb") as fh:
        fh.write(b"x" * 5000)
        fh.flush()
        os.fsync(fh.fileno())
        os.unlink(path)
        time.sleep(1.1)
        r = run_fscrub(mnt)
        assert r.rc == 0 and r.errors == [], r


def xfs_crosslink(img):
    """File 'a' gets its only extent pointed at 'b''s block with xfs_db
    (u3.bmx[0].startblock; the inode CRC is recomputed).  Both 16 KiB.
    Returns the paths and inode numbers and both start blocks."""
    mnt = img.mount()
    d = os.path.join(mnt, "xfs_crosslink")
    os.mkdir(d)
    for name, byte in (("a", b"a"), ("b", b"b")):
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(byte * 16384)
    os.sync()
    ino_a = fsimage.inode_of(os.path.join(d, "a"))
    ino_b = fsimage.inode_of(os.path.join(d, "b"))
    img.offline()

    def startblock(ino):
        out = faults.xfs_db(img, "inode %d" % ino, "print u3.bmx[0].startblock", write=False)
        return int(re.search(r"startblock = (\d+)", out).group(1))

    def device_bytes(fsb):
        out = faults.xfs_db(img, "convert fsblock %d daddr" % fsb, write=False)
        return int(re.search(r"\((\d+)\)", out).group(1)) * 512

    old, new = startblock(ino_a), startblock(ino_b)
    faults.xfs_db(img, "inode %d" % ino_a, "write u3.bmx[0].startblock %d" % new)
    assert startblock(ino_a) == new
    return {"a": "xfs_crosslink/a", "b": "xfs_crosslink/b", "ino_a": ino_a, "ino_b": ino_b,
            "old_bytes": device_bytes(old), "new_bytes": device_bytes(new)}


def test_crosslinked_extent(xfs_image):
    f = xfs_crosslink(xfs_image)
    mnt, r = scrub(xfs_image, "-v")
    assert_crosslink_found(r, mnt, f)


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_crosslink_found_when_getfsmap_fails_at_the_second_look(xfs_image, how):
    """The reverse mappings a file's extents disagree with are looked up
    again before they are reported.  A GETFSMAP that fails then (a damaged
    btree on the way; FSCRUB_DEBUG_FRESH_FSMAP_FAILS makes every such query
    fail) tells nothing about them: the first reading stands, so the record
    that gives the file a block it does not map is still an error.  It was
    "changed while being checked" before, fresh, settled and read-only."""
    f = xfs_crosslink(xfs_image)
    mnt = xfs_image.mount_as(how)
    time.sleep(1.1)     # past the ctime margin of the victims
    r = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_FRESH_FSMAP_FAILS": "1"})
    assert_crosslink_found(r, mnt, f)
    assert "GETFSMAP failed at the second look" in r.stdout, r


def assert_crosslink_found(r, mnt, f):
    """xfs_crosslink()'s findings: the crosslink, and the reverse mappings
    that disagree with a's new map, both ways."""
    assert r.rc == 4, r
    a, b = escaped(os.path.join(mnt, f["a"])), escaped(os.path.join(mnt, f["b"]))
    xl = errors_of(r, "extent.crosslinked")
    assert xl and {(e.path, e.inode) for e in xl} <= {(a, f["ino_a"]), (b, f["ino_b"])}, r
    assert any("not as shared extents" in e.message for e in xl), r
    # GETFSMAP: the rmap still gives a's old block to a, and nothing gives
    # it b's block.
    miss = errors_of(r, "xfs.rmap_missing")
    extra = errors_of(r, "xfs.rmap_extra")
    assert [(e.path, e.inode) for e in miss] == [(a, f["ino_a"])], r
    assert [(e.path, e.inode) for e in extra] == [(a, f["ino_a"])], r
    assert "file offset 0 maps device bytes %d-" % f["new_bytes"] in miss[0].message, r
    assert "device bytes %d-" % f["old_bytes"] in extra[0].message, r
    assert len(r.errors) == len(xl) + 2, r


@pytest.mark.parametrize("inject,check", [(faults.xfs_wrong_nlink, "nlink.count"),
                                          (faults.xfs_ftype_mismatch, "dirent.type")])
def test_generic_findings_with_xfs_backend(xfs_image, inject, check):
    f = inject(xfs_image)
    mnt, r = scrub(xfs_image, "-v")
    assert "with xfs backend" in r.stdout, r
    assert r.rc == 4, r
    assert [(e.check, e.path, e.inode) for e in r.errors] == \
        [(check, escaped(os.path.join(mnt, f["path"])), f["inode"])], r


def make_reflinked(mnt):
    """'orig' (4 MiB) and two reflinked copies, 'copy' partly overwritten:
    every extent of 'copy2' shared, some of 'copy' no longer."""
    src = os.path.join(mnt, "orig")
    with open(src, "wb") as fh:
        for i in range(64):
            fh.write(os.urandom(65536))
    fsimage.run(["cp", "--reflink=always", src, os.path.join(mnt, "copy")])
    fsimage.run(["cp", "--reflink=always", src, os.path.join(mnt, "copy2")])
    with open(os.path.join(mnt, "copy"), "r+b") as fh:
        fh.seek(1 << 20)
        fh.write(os.urandom(65536))
    os.sync()


def test_reflinked_files_not_flagged(xfs_image):
    """A reflinked copy (every extent shared), partly overwritten (some
    extents no longer shared): no cross-link, no rmap mismatch."""
    mnt = xfs_image.mount()
    make_reflinked(mnt)
    shared = [e["flags"] & 0x2000 for e in fsimage.fiemap(os.path.join(mnt, "copy"))]
    assert any(shared) and not all(shared), shared    # FIEMAP_EXTENT_SHARED
    xfs_image.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert re.search(r"data extents against \d+ reverse mappings: 0 to look at again",
                     r.stdout), r


def test_times_past_2262(xfs_image):
    """Times past 2262, which XFS's bigtime holds (to 2486) and signed
    64-bit nanoseconds do not: clean, and BULKSTAT's times converted
    without a signed overflow (the sanitizer build reported one on
    tests/fuzz/images' mutant 20261207/xfs/98, a fuzzed crtime)."""
    year_2400 = 13569465600      # 2400-01-01T00:00:00Z
    mnt = xfs_image.mount()
    for rel in ("data/hello.txt", "small"):
        os.utime(os.path.join(mnt, rel), (year_2400, year_2400))
    assert os.stat(os.path.join(mnt, "small")).st_mtime == year_2400
    xfs_image.remount()
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_inobt_refused_asked_twice(xfs_image, how):
    """An AG's inobt root claims 45748 records (xfs_db write -d keeps the
    CRC right): every BULKSTAT that reaches the AG costs the kernel a walk
    of it and is refused.  Two refusals of an AG are the damage read
    twice: its later requests are not made (tests/fuzz/images' mutant
    2026120702/xfs/375 took 251 requests, over 10 s under the sanitizers),
    and the findings are the same, fresh, settled and read-only."""
    counts = [db_field(xfs_image, "count", "agi %d" % ag) for ag in range(1, 4)]
    ag = 1 + counts.index(max(counts))
    assert max(counts) > 0, counts
    faults.xfs_db(xfs_image, "agi %d" % ag, "addr root", "write -d numrecs 45748")
    mnt = xfs_image.mount_as(how)
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 4, r
    assert any(e.message.startswith("AG %d: BULKSTAT stops at damaged inode metadata" % ag)
               for e in errors_of(r, "xfs.bulkstat")), r
    assert any(e.message.startswith("AG %d on disk: inobt root block" % ag)
               for e in errors_of(r, "xfs.ondisk")), r
    requests = int(re.search(r"(\d+) BULKSTAT requests since the scan began", r.stdout).group(1))
    assert requests < 100, requests


def test_ondisk_headers(xfs_image):
    """AG 1's bnobt root block and AG 2's superblock get a bad CRC (xfs_db
    write -c crc): the kernel reads neither while the filesystem is only
    scanned, so only the O_DIRECT read of the device can tell."""
    faults.xfs_db(xfs_image, "agf 1", "addr bnoroot", "write -c crc 0xdeadbeef")
    faults.xfs_db(xfs_image, "sb 2", "write -c crc 0xdeadbeef")
    mnt, r = scrub(xfs_image, "-v")
    assert r.rc == 4, r
    got = sorted(e.message for e in errors_of(r, "xfs.ondisk"))
    assert got == ["AG 1 on disk: bnobt root block 1 fails its CRC",
                   "AG 2 on disk: superblock fails its CRC"], r
    assert [e.path for e in r.errors] == [mnt, mnt], r
    assert re.search(r"4 AGs' headers, \d+ btree blocks and \d+ inodes read from", r.stdout), r


# -- whole btrees, counters and inode chunks read from the device ----------

ONDISK_FILES = 20000      # in one directory, so one AG: 313 inobt records, 2 levels
FRAG_FILES = 3000         # 4 KiB each, every other one removed: 600 holes, 2-level bnobt


def _fill_ondisk(mnt):
    many = os.path.join(mnt, "many")
    os.mkdir(many)
    for i in range(ONDISK_FILES):
        os.close(os.open(os.path.join(many, "%05d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
    frag = os.path.join(mnt, "frag")
    os.mkdir(frag)
    for i in range(FRAG_FILES):
        with open(os.path.join(frag, "%04d" % i), "wb") as fh:
            fh.write(b"f" * 4096)
    os.sync()
    for i in range(0, FRAG_FILES, 2):
        os.unlink(os.path.join(frag, "%04d" % i))
    with open(os.path.join(mnt, "orig"), "wb") as fh:
        fh.write(os.urandom(1 << 20))
    for name in ("copy", "copy2"):
        fsimage.run(["cp", "--reflink=always", os.path.join(mnt, "orig"),
                     os.path.join(mnt, name)])


@pytest.fixture(scope="module")
def ondisk_base():
    """Built once: 4 AGs, sparse inodes, rmapbt, reflink, a two-level inobt
    and a two-level bnobt; unmounted.  Tests corrupt copies of it."""
    need_fs("xfs")
    with fsimage.scratch_image("fscrub-ondisk-", "xfs", size_mb=300,
                               mkfs_args=("-i", "sparse=1", "-d", "agcount=4")) as img:
        img.mkfs()
        _fill_ondisk(img.mount())
        img.offline()
        yield img


@pytest.fixture
def ondisk_image(ondisk_base, workdir):
    img = ondisk_base.copy(os.path.join(workdir, "ondisk.img"))
    yield img
    img.cleanup(remove=True)


def db_field(img, field, *cmds):
    out = faults.xfs_db(img, *cmds, "print %s" % field, write=False)
    return int(re.search(r"^%s = (\d+)" % re.escape(field), out, re.M).group(1))


def deepest_ag(img, hdr, field):
    """The AG whose btree (AGF/AGI field *field*) has the most levels."""
    levels = [db_field(img, field, "%s %d" % (hdr, ag)) for ag in range(4)]
    return max(range(4), key=lambda ag: levels[ag]), max(levels)


def ondisk_errors(r):
    return sorted(e.message for e in errors_of(r, "xfs.ondisk"))


def test_ondisk_clean_multilevel(ondisk_image):
    """Every block of every btree and every inode: nothing on a clean image."""
    assert deepest_ag(ondisk_image, "agf", "bnolevel")[1] >= 2
    assert deepest_ag(ondisk_image, "agi", "level")[1] >= 2
    mnt, r = scrub(ondisk_image, "-v")
    assert r.rc == 0 and r.errors == [] and odd_warnings(r) == [], r
    assert r.of(check="xfs.ondisk") == [], r
    m = re.search(r"4 AGs' headers, (\d+) btree blocks and (\d+) inodes read from", r.stdout)
    assert m and int(m.group(1)) > 24 and int(m.group(2)) >= ONDISK_FILES + FRAG_FILES // 2, r


def test_ondisk_bnobt_order(ondisk_image):
    """recs[2] of a bnobt leaf is moved past recs[3] (xfs_db recomputes the
    CRC): the kernel mounts it (it checks record order only when it
    allocates), the walk finds the order broken."""
    ag, levels = deepest_ag(ondisk_image, "agf", "bnolevel")
    path = ["agf %d" % ag, "addr bnoroot"] + ["addr ptrs[1]"] * (levels - 1)
    leaf = db_field(ondisk_image, "bnoroot", "agf %d" % ag) if levels == 1 else \
        db_field(ondisk_image, "ptrs[1]", *path[:-1])
    s3 = db_field(ondisk_image, "recs[3].startblock", *path)
    faults.xfs_db(ondisk_image, *path, "write recs[2].startblock %d" % (s3 + 1))
    mnt, r = scrub(ondisk_image, "-v")
    assert r.rc == 4, r
    got = ondisk_errors(r)
    want = "AG %d on disk: bnobt block %d: records out of order at index 3" % (ag, leaf)
    assert want in got, r
    assert all(m.startswith("AG %d on disk: bnobt block %d: " % (ag, leaf)) for m in got), r


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_ondisk_cntbt_node_key(ondisk_image, fast_xfs_log_worker, how):
    """A cntbt node's key for its second child no longer is that child's
    first record (a problem between two blocks: believed when the log
    names neither block, after a third look at once), fresh, settled and
    read-only."""
    ag, levels = deepest_ag(ondisk_image, "agf", "cntlevel")
    assert levels >= 2
    path = ["agf %d" % ag, "addr cntroot"]
    child = db_field(ondisk_image, "ptrs[2]", *path)
    start = db_field(ondisk_image, "keys[2].startblock", *path)
    faults.xfs_db(ondisk_image, *path, "write keys[2].startblock %d" % (start + 1))
    mnt = ondisk_image.mount_as(how)
    time.sleep(1.1)
    r = run_fscrub("-v", mnt)
    assert r.rc == 4, r
    assert ondisk_errors(r) == [
        "AG %d on disk: cntbt block %d: first key differs from its parent's" % (ag, child)], r
    assert ("AG %d looks wrong twice; the log names blocks of 0 of its 1 problems between "
            "blocks" % ag) in r.stdout, r
    assert "for the log worker" not in r.stdout, r


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_ondisk_rmap_record_getfsmap(ondisk_image, fast_xfs_log_worker, how):
    """A reverse mapping of AG 0's headers marked unwritten (a flag only an
    inode's extent may have; xfs_db fuzz keeps the block's CRC right): the
    kernel's GETFSMAP refuses the record with EUCLEAN.  The btree block is
    sound, so only GETFSMAP sees it: an xfs.ondisk error and exit 4, not an
    operational error (tests/fuzz/images found the exit 8: mutant
    20261207/xfs/15), fresh, settled and read-only."""
    path = ["agf 0", "addr rmaproot"]
    for _ in range(db_field(ondisk_image, "rmaplevel", "agf 0") - 1):
        path.append("addr ptrs[1]")
    faults.xfs_db(ondisk_image, *path, "fuzz -d recs[1].extentflag ones")
    mnt = ondisk_image.mount_as(how)
    time.sleep(1.1)
    r = run_fscrub(mnt)
    assert r.rc == 4, r
    assert [e.message for e in errors_of(r, "xfs.ondisk") if "GETFSMAP" in e.message] == [
        "GETFSMAP: Structure needs cleaning, read twice: the kernel refuses a block of the "
        "free-space, reverse-mapping or reference count btrees"], r
    assert all(e.path == mnt for e in errors_of(r, "xfs.ondisk")), r


def test_ondisk_agf_freeblks(ondisk_image, fast_xfs_log_worker):
    """AGF 1's freeblks one too many: both free space btrees disagree."""
    free = db_field(ondisk_image, "freeblks", "agf 1")
    faults.xfs_db(ondisk_image, "agf 1", "write freeblks %d" % (free + 1))
    mnt, r = scrub(ondisk_image, "-v")
    assert r.rc == 4, r
    assert ondisk_errors(r) == [
        "AG 1 on disk: AGF freeblks %d, bnobt records add up to %d" % (free + 1, free),
        "AG 1 on disk: AGF freeblks %d, cntbt records add up to %d" % (free + 1, free)], r


def ag_shape(img):
    """(agblocks, agblklog, inopblog) of an XFS image."""
    return tuple(db_field(img, f, "sb 0") for f in ("agblocks", "agblklog", "inopblog"))


def roomiest_ag_dir(img, mnt, ag, shape):
    """A new directory of mnt in the AG other than ag with the most free
    space (new directories go round the AGs), so that what is written
    there is allocated there: an allocation that does not fit in its AG
    tries others, and moves blocks between their free space btrees and
    AGFLs."""
    free = {a: db_field(img, "freeblks", "agf %d" % a) for a in range(4) if a != ag}
    want = max(free, key=free.get)
    for k in range(8):
        d = os.path.join(mnt, "elsewhere%d" % k)
        os.mkdir(d)
        if os.stat(d).st_ino >> (shape[1] + shape[2]) == want:
            return d
    raise AssertionError("eight new directories, none in AG %d" % want)


@pytest.mark.parametrize("how", ["fresh", "settled"])
def test_ondisk_damage_found_while_another_ag_is_busy(ondisk_image, how):
    """The cntbt node key fault of test_ondisk_cntbt_node_key, while a
    writer renames files and overwrites their data in place in a directory
    of another AG all through the scan: the log is busy, but names none of
    the damaged blocks, so what reads the same twice is damage, whatever
    else changes.  (The files are made before the fault, on a mount of
    their own: an allocation may go to any AG -- one whose AGF is locked
    for its write-back is passed over.)  With the log worker at its
    default period: no wait for it is needed."""
    ag, levels = deepest_ag(ondisk_image, "agf", "cntlevel")
    shape = ag_shape(ondisk_image)
    made = ondisk_image.mount()
    d = roomiest_ag_dir(ondisk_image, made, ag, shape)
    names = [os.path.join(d, "f%d" % k) for k in range(10)]
    for name in names:
        with open(name, "wb") as fh:
            fh.write(b"w" * 65536)
    ondisk_image.offline()
    path = ["agf %d" % ag, "addr cntroot"]
    child = db_field(ondisk_image, "ptrs[2]", *path)
    start = db_field(ondisk_image, "keys[2].startblock", *path)
    faults.xfs_db(ondisk_image, *path, "write keys[2].startblock %d" % (start + 1))
    mnt = ondisk_image.mount_as(how)
    names = [os.path.join(mnt, os.path.relpath(name, made)) for name in names]
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            for name in names:
                os.rename(name, name + ".moved")
                os.rename(name + ".moved", name)
                with open(name, "r+b") as fh:
                    fh.write(os.urandom(4096))
                    os.fsync(fh.fileno())

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(1.1)
        r = run_fscrub("-v", mnt)
    finally:
        stop.set()
        t.join()
    about = [line for line in r.stdout.splitlines() if "AG %d " % ag in line]
    assert ondisk_errors(r) == [
        "AG %d on disk: cntbt block %d: first key differs from its parent's" % (ag, child)], \
        (r, about)
    assert r.rc == 4, r
    assert ("AG %d looks wrong twice; the log names blocks of 0 of its 1 problems between "
            "blocks" % ag) in r.stdout, r


def test_ondisk_external_log_waits_for_log_worker(image_factory, fast_xfs_log_worker, workdir):
    """With the log on a device of its own (not read), the damaged AG's
    quiet is judged from its counters and LSNs: AGF 1's freeblks one too
    many is an error after the log worker's period and a third look."""
    logfile = os.path.join(workdir, "extlog.img")
    with open(logfile, "wb") as fh:
        fh.truncate(16 << 20)
    logdev = fsimage.run(["losetup", "-f", "--show", logfile]).stdout.strip()
    img = image_factory("xfs", size_mb=300, mkfs_args=("-l", "logdev=%s,size=16m" % logdev))
    try:
        img.mkfs()
        fsimage.make_tree(img.mount("logdev=" + logdev), deep=False)
        img.offline()
        free = int(re.search(r"^freeblks = (\d+)", faults.xfs_db(
            img, "agf 1", "print freeblks", write=False), re.M).group(1))
        faults.xfs_db(img, "agf 1", "write freeblks %d" % (free + 1))
        time.sleep(1.1)
        mnt = img.mount("logdev=" + logdev)
        r = run_fscrub("-v", mnt)
        assert r.rc == 4, r
        assert ondisk_errors(r) == [
            "AG 1 on disk: AGF freeblks %d, bnobt records add up to %d" % (free + 1, free),
            "AG 1 on disk: AGF freeblks %d, cntbt records add up to %d" % (free + 1, free)], r
        assert "AG 1 looks wrong twice; the log cannot say whether it is busy" in r.stdout, r
        assert "for the log worker" in r.stdout, r
    finally:
        img.cleanup()
        fsimage.run(["losetup", "-d", logdev], check=False)


XFSLOGVIEW = os.environ.get("FSCRUB_XFSLOGVIEW",
                            os.path.join(os.path.dirname(FSCRUB), "xfslogview"))


def test_logview_is_what_logprint_reads(image_factory):
    """The log reader (xfs_logview.c, through tests/tools/xfslogview) on
    the dirty log a forced shutdown leaves: the same records, buffer and
    inode-create items as xfs_logprint -t, and its inode items in order,
    each naming the cluster its inode is in.  (4 KiB blocks.)"""
    if not os.access(XFSLOGVIEW, os.X_OK):
        pytest.skip("%s is not built (meson -Dtests=disabled)" % XFSLOGVIEW)
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    for i in range(300):
        with open(os.path.join(mnt, "f%d" % i), "wb") as fh:
            fh.write(b"x" * 100)
    os.mkdir(os.path.join(mnt, "d"))
    for i in range(200):
        os.rename(os.path.join(mnt, "f%d" % i), os.path.join(mnt, "d", "g%d" % i))
    fsimage.run(["xfs_io", "-x", "-c", "shutdown -f", mnt])
    img.offline()
    mine = fsimage.run([XFSLOGVIEW, img.path]).stdout.splitlines()
    lp = fsimage.run(["xfs_logprint", "-t", img.path]).stdout
    agblocks, agblklog, inopblog = ag_shape(img)
    records = re.findall(r"^LOG REC AT LSN cycle (\d+) block (\d+)", lp, re.M)
    assert re.match(r"tail \d+/\d+ head \d+/\d+ records %d$" % len(records), mine[0]), mine[0]
    items = [line.split() for line in mine[1:]]
    bufs = sorted((int(a, 16), int(n)) for a, n in re.findall(
        r"BUF:  #regs:\d+\s+start blkno:0x([0-9a-f]+)\s+len:(\d+)", lp))
    icreates = sorted(((int(ag) * agblocks + int(b, 16)) * 8, int(n) * 8) for ag, b, n in
                      re.findall(r"ICR:  #ag: (\d+)\s+agbno: 0x([0-9a-f]+)\s+len: (\d+)", lp))
    assert len(bufs) >= 10 and icreates, lp
    assert sorted((int(d), int(n)) for t, d, n in items if t == "buf") == bufs
    assert sorted((int(d), int(n)) for t, d, n in items if t == "icreate") == icreates
    # each inode item, in the log's order, names the cluster of its inode
    clusters = [(int(d), int(n)) for t, d, n in items if t == "inode"]
    inos = [int(i, 16) for i in re.findall(r"^\s+INODE: #regs:\d+\s+ino:0x([0-9a-f]+)", lp, re.M)]
    assert len(clusters) == len(inos) >= 300, (len(clusters), len(inos))
    for (d, n), ino in zip(clusters, inos):
        agino = ino & ((1 << (agblklog + inopblog)) - 1)
        at = ((ino >> (agblklog + inopblog)) * agblocks + (agino >> inopblog)) * 8
        assert d <= at < d + n, (ino, at, d, n)


def test_ondisk_inode_crc(ondisk_image):
    """One allocated inode of an inode cluster gets a bad CRC (write -c: no
    CRC recalculation).  The kernel mounts; it refuses that inode alone (the
    cluster buffer's verifier checks magic numbers, not CRCs): the walk
    cannot read it, BULKSTAT stops at it (xfs.bulkstat: damage, not a
    failure of the scan, so exit 4), and the device read names it."""
    mnt = ondisk_image.mount()
    ino = fsimage.inode_of(os.path.join(mnt, "many", "00100"))
    ondisk_image.offline()
    faults.xfs_db(ondisk_image, "inode %d" % ino, "write -c v3.crc 0xdeadbeef")
    mnt, r = scrub(ondisk_image, "-v")
    assert r.rc == 4 and "XFS_IOC_BULKSTAT" not in r.stderr, r
    od = errors_of(r, "xfs.ondisk")
    assert [(e.inode, e.message.split(": ", 1)[1]) for e in od] == \
        [(ino, "inode %d fails its CRC" % ino)], r
    assert sorted((e.check, e.inode) for e in r.errors if e not in od) == \
        [("inode.unreadable", ino), ("xfs.bulkstat", None)], r
    bs = [e for e in r.errors if e.check == "xfs.bulkstat"][0]
    assert "BULKSTAT stops at damaged inode metadata" in bs.message, r


CHUNKS_RE = re.compile(r"Phase 2: inode chunks in (\d+) reads, (\d+) batches of them in flight")


def test_ondisk_inode_chunks_read_in_batches(ondisk_image):
    """Phase 2 reads the inode chunks a batch at a time, many reads in
    flight: the inode with a bad CRC (as test_ondisk_inode_crc) is found
    with the same findings and exit 4 as FSCRUB_DEBUG_NO_CHUNKBATCH=1
    (each chunk read by itself when it is checked)."""
    mnt = ondisk_image.mount()
    ino = fsimage.inode_of(os.path.join(mnt, "many", "00100"))
    ondisk_image.offline()
    faults.xfs_db(ondisk_image, "inode %d" % ino, "write -c v3.crc 0xdeadbeef")
    mnt, r = scrub(ondisk_image, "-v")
    assert r.rc == 4, r
    assert [e.inode for e in errors_of(r, "xfs.ondisk")] == [ino], r
    m = CHUNKS_RE.search(r.stdout)
    # 4 AGs: a batch each at least, and every read in one.
    assert m and int(m.group(1)) > 0 and 4 <= int(m.group(2)) <= int(m.group(1)), r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_CHUNKBATCH": "1"})
    m2 = CHUNKS_RE.search(old.stdout)
    assert old.rc == 4 and m2 and m2.groups() == (m.group(1), "0"), old
    key = lambda rr: sorted((f.severity, f.check, f.path, f.inode, f.message) for f in rr.findings)
    assert key(old) == key(r), (old, r)


BTAHEAD_RE = re.compile(r"Phase 2: btree blocks read ahead a level at a time: (\d+) in (\d+) batches")


def test_ondisk_btree_level_read_ahead(ondisk_image):
    """Phase 2 reads a btree level's blocks together, many reads in flight:
    the second leaf of the deepest bnobt with a bad CRC is found as with
    FSCRUB_DEBUG_NO_CHUNKBATCH=1 (each block read by itself), with the same
    findings and exit 4, and the leaves around it are still checked."""
    ag, levels = deepest_ag(ondisk_image, "agf", "bnolevel")
    assert levels >= 2, levels
    path = ["agf %d" % ag, "addr bnoroot"] + ["addr ptrs[1]"] * (levels - 2) + ["addr ptrs[2]"]
    faults.xfs_db(ondisk_image, *path, "write -c crc 0xdeadbeef")
    mnt, r = scrub(ondisk_image, "-v")
    assert r.rc == 4, r
    got = ondisk_errors(r)
    assert len(got) == 1 and got[0].startswith("AG %d on disk: bnobt block " % ag) and \
        got[0].endswith("fails its CRC"), r
    m = BTAHEAD_RE.search(r.stdout)
    assert m and int(m.group(1)) >= 2 and int(m.group(2)) >= 1, r
    old = run_fscrub("-v", mnt, env={"FSCRUB_DEBUG_NO_CHUNKBATCH": "1"})
    assert old.rc == 4 and BTAHEAD_RE.search(old.stdout).groups() == ("0", "0"), old
    key = lambda rr: sorted((f.severity, f.check, f.path, f.inode, f.message) for f in rr.findings)
    assert key(old) == key(r), (old, r)


def free_inode(img):
    """A free inode in an allocated chunk, from the first finobt record."""
    for ag in range(4):
        levels = db_field(img, "free_level", "agi %d" % ag)
        path = ["agi %d" % ag, "addr free_root"] + ["addr ptrs[1]"] * (levels - 1)
        if db_field(img, "numrecs", *path) == 0:
            continue
        out = faults.xfs_db(img, *path, "print recs[1]", write=False)
        m = re.search(r"^1:\[(\d+),(\d+),(\d+),(\d+),(\w+)\]", out, re.M)
        start, free = int(m.group(1)), int(m.group(5), 0)
        agino = start + (free & -free).bit_length() - 1
        out = faults.xfs_db(img, "convert agno %d agino %d ino" % (ag, agino), write=False)
        return ag, int(re.search(r"\((\d+)\)", out).group(1))
    raise AssertionError("no free inode in any chunk")


@pytest.mark.parametrize("write,problem,rc", [
    ("write -c v3.crc 0xdeadbeef", "fails its CRC", 4),
    # The cluster buffer's verifier checks every inode's magic: the kernel
    # refuses the whole cluster and BULKSTAT stops there (xfs.bulkstat too).
    ("write -d core.magic 0", "has magic 0x0000", 4)])
def test_ondisk_free_inode(ondisk_image, write, problem, rc, fast_xfs_log_worker):
    """A free inode of a chunk gets a bad CRC or magic 0 (write -d: no
    verifier, CRC recomputed): every inode of a chunk is checked, free or
    not, and nothing else reads a free inode's CRC."""
    ag, ino = free_inode(ondisk_image)
    faults.xfs_db(ondisk_image, "inode %d" % ino, write)
    mnt, r = scrub(ondisk_image, "-v")
    assert [(e.inode, e.message) for e in errors_of(r, "xfs.ondisk")] == \
        [(ino, "AG %d on disk: inode %d %s" % (ag, ino, problem))], r
    assert r.rc == rc, r
    if "crc" in write:
        assert len(r.errors) == 1, r
    else:
        assert "xfs.bulkstat" in {e.check for e in r.errors}, r


@pytest.mark.slow
def test_ondisk_busy(ondisk_image):
    """A writer creates, fills, renames and deletes files while the device is
    read, scan after scan for 20 s: the disk holds what the kernel wrote
    back, torn between blocks it keeps relogging and file data written at
    once (an inode chunk freed and reused for data while the inobt on the
    disk still has it), but nothing is an xfs.ondisk error -- nor an error
    of the directory indexes read from the disk (xfs.dir_hash: the
    directory's old map on the disk names blocks already written over with
    file data; 26 of 49 runs had such errors before they were judged by the
    log).  (Phase 3's own checks are not what this test is about.)"""
    mnt = ondisk_image.mount()
    stop = threading.Event()
    d = os.path.join(mnt, "busy")
    os.mkdir(d)

    def writer():
        while not stop.is_set():
            for k in range(500):
                with open(os.path.join(d, "f%d" % k), "wb") as fh:
                    fh.write(b"x" * (4096 * (k % 3)))
            for k in range(0, 500, 2):
                os.unlink(os.path.join(d, "f%d" % k))
            for k in range(1, 500, 2):
                os.rename(os.path.join(d, "f%d" % k), os.path.join(d, "g%d" % k))
            for k in range(1, 500, 2):
                os.unlink(os.path.join(d, "g%d" % k))

    t = threading.Thread(target=writer)
    t.start()
    runs = []
    try:
        time.sleep(2)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            runs.append(run_fscrub("-v", mnt))
    finally:
        stop.set()
        t.join()
    assert len(runs) >= 2
    for r in runs:
        for check in ("xfs.ondisk", "xfs.dir_hash", "xfs.dir_free", "xfs.attr_hash"):
            assert errors_of(r, check) == [], r
        assert "primary superblock" not in r.stdout, r


@pytest.mark.parametrize("how", ["rw", "ro"])
def test_shut_down_filesystem(image_factory, how):
    """A mounted XFS the kernel has shut down (here by XFS_IOC_GOINGDOWN;
    it does the same when it finds damage at mount or when a metadata
    write fails): every stat of it fails with EIO.  That is damage, exit 4
    with what to do -- not a usage error (16), as "cannot access" was --
    named by the mount point in any spelling; a path inside it is still not
    a mount point."""
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount("ro" if how == "ro" else "")
    fsimage.run(["xfs_io", "-x", "-c", "shutdown", mnt])
    for arg in (mnt, mnt + "/", os.path.relpath(mnt)):
        r = run_fscrub("-n", arg)
        assert r.rc == 4, r
        assert "(xfs on %s) cannot be read: Input/output error: the kernel has shut this " \
            "filesystem down" % img.dev in r.stderr, r
    assert run_fscrub("-n", os.path.join(mnt, "x")).rc == 16
