"""XFS damage that only cross-referencing finds (src/backends/xfs/xfs_xref.c):
each block passes its own checks, but two of them disagree -- an inode in
use that its inobt record calls free, a linked inode (or one whose link count was
made 0 too, but which a name reaches) on an AGI unlinked list, a free extent over a file's blocks or a btree block, a secondary
superblock with other features.  Each fault is made with xfs_db -x on the
unmounted image, shown to be there by xfs_repair -n, and must be found on
the mounted filesystem with exit code 4, naming the AG, the blocks, the
inode and its path; the clean images (rmapbt on and off, sparse inodes,
reflinked files, an unlinked-but-open file and an O_TMPFILE) give
nothing.  Every fault is between blocks, so fscrub believes it only after
the log worker's period (about 32 s a test)."""

import os
import re
import threading
import time

import pytest

from conftest import need_fs, need_tools, run_fscrub
import faults
import fsimage


def reflinked_four_ways(mnt):
    """multi and its three reflinked copies: one extent, a refcountbt
    record of 4 (test_refcount)."""
    with open(os.path.join(mnt, "multi"), "wb") as fh:
        fh.write(os.urandom(64 << 10))
    for i in range(3):
        fsimage.run(["cp", "--reflink=always", os.path.join(mnt, "multi"),
                     os.path.join(mnt, "multi%d" % i)])


def _fill(mnt):
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for i in range(300):
        with open(os.path.join(d, "f%d" % i), "w") as fh:
            fh.write("%d\n" % i)
    with open(os.path.join(mnt, "big"), "wb") as fh:
        fh.write(os.urandom(5 << 20))
    fsimage.run(["cp", "--reflink=always", os.path.join(mnt, "big"),
                 os.path.join(mnt, "big2")])
    reflinked_four_ways(mnt)
    os.setxattr(os.path.join(d, "f1"), "user.x", b"a" * 3000)
    # 600 one-block extents apart: a data fork in btree format.
    with open(os.path.join(mnt, "frag"), "wb") as fh:
        for i in range(600):
            fh.seek(2 * i * 4096)
            fh.write(b"x" * 4096)


# Faults wait one log-worker period before fscrub reports them (conftest).
pytestmark = pytest.mark.usefixtures("fast_xfs_log_worker")

@pytest.fixture(scope="module", params=["rmapbt", "normap"])
def xref_base(request):
    """Built once per flavour: 4 AGs, sparse inodes, reflink, with or without
    the rmapbt; unmounted.  Tests break copies of it."""
    need_fs("xfs")
    args = ("-i", "sparse=1", "-d", "agcount=4")
    with fsimage.scratch_image("fscrub-xref-", "xfs", size_mb=300, mkfs_args=args) as img:
        if request.param == "rmapbt":
            img.mkfs()
        else:
            # fsimage's -m rmapbt=1 cannot be overridden: mkfs.xfs refuses
            # an option given twice.
            with open(img.path, "wb") as fh:
                fh.truncate(img.size_mb << 20)
            env = dict(os.environ, **fsimage._XFS_SMALL_ENV)
            fsimage.run(["mkfs.xfs", "-f", "-q", "-m", "crc=1,reflink=1,rmapbt=0"] +
                        list(args) + [img.path], env=env)
        _fill(img.mount())
        img.offline()
        img.rmap = request.param == "rmapbt"
        yield img


@pytest.fixture
def xref_image(xref_base, workdir):
    img = xref_base.copy(os.path.join(workdir, "xref.img"))
    img.rmap = xref_base.rmap
    yield img
    img.cleanup(remove=True)


def db(img, *cmds):
    return faults.xfs_db(img, *cmds, write=False)


def db_int(img, field, *cmds):
    out = db(img, *cmds, "print %s" % field)
    return int(re.search(r"^%s = (-?\w+)" % re.escape(field), out, re.M).group(1), 0)


def _recs(out):
    return [[int(v, 0) for v in m.group(1).split(",")]
            for m in re.finditer(r"^\d+:\[([^\]]*)\]", out, re.M)]


def leaf_recs(img, hdr, root, level, levels=1):
    """The records of a btree of at most *levels* levels as lists of ints
    ([] if it has more: the tests look for a victim elsewhere)."""
    have = db_int(img, level, hdr)
    if have == 1:
        return _recs(db(img, hdr, "addr %s" % root, "print recs"))
    if have != 2 or levels < 2:
        return []
    recs = []
    for i in range(db_int(img, "numrecs", hdr, "addr %s" % root)):
        recs += _recs(db(img, hdr, "addr %s" % root, "addr ptrs[%d]" % (i + 1), "print recs"))
    return recs


def repair_n(img):
    """xfs_repair -n's findings on the unmounted image (it exits 1)."""
    need_tools("xfs_repair")
    return faults.xfs_repair_n(img)


def inode_paths(img, files_only=False):
    """{inode: path} of the image's tree (its regular files only)."""
    mnt = img.mount()
    paths = {}
    for top, dirs, files in os.walk(mnt):
        for n in files if files_only else dirs + files:
            paths[fsimage.inode_of(os.path.join(top, n))] = os.path.join(top, n)
    img.offline()
    return paths


def ino_of(img, ag, agino):
    out = db(img, "convert agno %d agino %d ino" % (ag, agino))
    return int(re.search(r"\((\d+)\)", out).group(1))


def scrub(img, *args):
    time.sleep(1.1)     # victims younger than 1 s count as changed
    mnt = img.mount()
    return mnt, run_fscrub("-n", *args, mnt)


def xref_errors(r):
    return sorted((e.check, e.inode, e.path, e.message) for e in r.errors)


def cow_staging(mnt):
    """A reflinked copy of big, rewritten one block in with a CoW extent
    size hint of 1 MiB: the write reserves 256 blocks of CoW staging, of
    which it uses one; the rest stays in the refcountbt (XFS_REFC_COWFLAG)
    and, with the rmapbt, as XFS_RMAP_OWN_COW until the file is closed and
    evicted (the kernel frees leftover staging at mount, so it cannot be
    made offline).  Returns the open descriptor that keeps it."""
    dst = os.path.join(mnt, "cowdst")
    fsimage.run(["cp", "--reflink=always", os.path.join(mnt, "big"), dst])
    fsimage.run(["xfs_io", "-c", "cowextsize 1m", dst])
    fd = os.open(dst, os.O_WRONLY)
    os.pwrite(fd, b"y" * 4096, 8192)
    os.fsync(fd)
    return fd


def test_xref_clean(xref_image):
    """Nothing on a clean image, with a file unlinked but open and an
    O_TMPFILE file: inodes rightly on the AGI unlinked lists; and a
    reflinked file with CoW staging in flight."""
    mnt = xref_image.mount()
    cow = cow_staging(mnt)
    path = os.path.join(mnt, "d", "f7")
    gone = os.open(path, os.O_RDWR)
    os.unlink(path)
    tmp = os.open(os.path.join(mnt, "d"), os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(tmp, b"t" * 8192)
    try:
        os.sync()
        time.sleep(1.1)
        r = run_fscrub("-n", "-v", mnt)
    finally:
        os.close(gone)
        os.close(tmp)
        os.close(cow)
    assert r.rc == 0 and r.errors == [], r
    assert not [w for w in r.warnings if w.check.startswith("xfs.")], r
    assert re.search(r"4 AGs' headers, \d+ btree blocks and \d+ inodes read from", r.stdout), r
    if not xref_image.rmap:     # the files' extents against the refcountbt
        assert re.search(r"reference counts of 4 AGs against the files' extents .*, \d+ CoW "
                         r"staging records not judged \(FIEMAP does not show CoW forks\)",
                         r.stdout), r


def test_refcount_clean_reflinks(xref_image):
    """Reflinks of every kind give nothing: a whole copy of big, a middle
    part of it into another file, and a file reflinked to itself at two
    offsets (its first 256 KiB then count three references, two of them
    its own), and copies in other AGs than the first; remounted, so the
    disk has them all.  Without the rmapbt the
    files' extents are counted, and nothing is left unjudged."""
    img = xref_image
    mnt = img.mount()
    big, self_ = os.path.join(mnt, "big"), os.path.join(mnt, "self")
    fsimage.run(["cp", "--reflink=always", big, os.path.join(mnt, "big3")])
    fsimage.run(["xfs_io", "-f", "-c", "reflink %s 1m 512k 1m" % big, os.path.join(mnt, "part")])
    with open(self_, "wb") as fh:
        fh.write(os.urandom(1 << 20))
    fsimage.run(["xfs_io", "-c", "reflink %s 0 2m 256k" % self_, "-c",
                 "reflink %s 0 3m 256k" % self_, self_])
    # New directories go to other AGs, their files' data with them.
    for k in range(4):
        os.mkdir(os.path.join(mnt, "ag%d" % k))
        src = os.path.join(mnt, "ag%d" % k, "src")
        with open(src, "wb") as fh:
            fh.write(os.urandom(256 << 10))
        fsimage.run(["cp", "--reflink=always", src, src + ".copy"])
    img.offline()
    assert len({ag for ag in range(4) if [r for r in leaf_recs(
        img, "agf %d" % ag, "refcntroot", "refcntlevel") if not r[3]]}) > 1
    shared_record(img, 3)       # the self-reflinked range
    mnt, r = scrub(img, "-v")
    assert r.rc == 0 and r.errors == [], r
    assert not r.of(check="xfs.refcount"), r
    if not img.rmap:
        assert re.search(r"reference counts of 4 AGs against the files' extents \(at most "
                         r"\d+ in an AG\): 0 ranges not judged", r.stdout), r


def _free_rec_with_inode_in_use(img):
    """(ag, inobt index, finobt index, record, k): an inode k of a chunk
    that has free inodes (so the finobt has its record) is in use; not the
    root directory's chunk (a free root does not mount)."""
    root = db_int(img, "rootino", "sb 0")
    for ag in range(4):
        hdr = "agi %d" % ag
        fino = leaf_recs(img, hdr, "free_root", "free_level")
        ino = leaf_recs(img, hdr, "root", "level")
        for fi, rec in enumerate(fino):
            start, holemask, count, freecount, free = rec
            if ag == 0 and start <= root < start + 64:
                continue
            for k in range(64):
                if not (holemask >> (k // 4)) & 1 and not (free >> k) & 1:
                    return ag, [r[0] for r in ino].index(start) + 1, fi + 1, rec, k
    raise AssertionError("no chunk with free inodes and one in use")


def inode_in_use_made_free(img):
    """An inode in use gets its bit set in ir_free of its inobt and finobt
    records, their free counts, the AGI's and the superblock's one more (the
    kernel takes sb_ifree at mount: left alone, xfs.counters would see the
    sums differ too).  Returns (ag, ino)."""
    ag, ii, fi, (start, _, _, freecount, free), k = _free_rec_with_inode_in_use(img)
    ino = ino_of(img, ag, start + k)
    newfree = (free | 1 << k) - (1 << 64 if (free | 1 << k) >> 63 else 0)
    hdr = "agi %d" % ag
    faults.xfs_db(img,
                  hdr, "addr root", "write recs[%d].free -- %d" % (ii, newfree),
                  "write recs[%d].freecount %d" % (ii, freecount + 1),
                  hdr, "addr free_root", "write recs[%d].free -- %d" % (fi, newfree),
                  "write recs[%d].freecount %d" % (fi, freecount + 1),
                  hdr, "write freecount %d" % (db_int(img, "freecount", hdr) + 1),
                  "sb 0", "write ifree %d" % (db_int(img, "ifree", "sb 0") + 1))
    return ag, ino


def test_inode_in_use_free_in_inobt(xref_image):
    """inode_in_use_made_free(): every btree and counter agrees with every
    other; only the inode core says otherwise."""
    paths = inode_paths(xref_image)
    ag, ino = inode_in_use_made_free(xref_image)
    assert ino in paths, (ino, paths)
    assert "imap claims in-use inode %d is free" % ino in repair_n(xref_image)
    mnt, r = scrub(xref_image)
    assert r.rc == 4, r
    assert xref_errors(r) == [
        ("xfs.inode_alloc", ino, paths[ino],
         "AG %d on disk: inode %d is in use (mode 0100644, 1 links) but free in its inobt "
         "record" % (ag, ino))], r


def linked_inode_on_unlinked_list(img, path, shift=0):
    """The file at path (in the mounted image's tree) is put at the head of
    AGI unlinked bucket agino % 64 + shift.  Returns (ino, ag, agino, bucket)."""
    paths = inode_paths(img)
    ino = [i for i, p in paths.items() if p == path][0]
    out = db(img, "convert ino %d agno" % ino, "convert ino %d agino" % ino)
    ag, agino = [int(v, 0) for v in re.findall(r"^(\w+) \(", out, re.M)]
    bucket = (agino + shift) % 64
    faults.xfs_db(img, "agi %d" % ag, "write unlinked[%d] %d" % (bucket, agino))
    return ino, ag, agino, bucket


@pytest.mark.parametrize("shift", [0, 1], ids=["own_bucket", "wrong_bucket"])
def test_linked_inode_on_unlinked_list(xref_image, shift):
    """A linked file is put at the head of an AGI unlinked bucket (its own,
    agino % 64, or the next one): the kernel mounts it cleanly (it reads
    the lists only in log recovery), xfs_repair -n complains."""
    path = os.path.join(xref_image.mnt, "d", "f42")
    ino, ag, agino, bucket = linked_inode_on_unlinked_list(xref_image, path, shift)
    assert "agi unlinked bucket %d is %d in ag %d" % (bucket, agino, ag) in repair_n(xref_image)
    mnt, r = scrub(xref_image)
    assert r.rc == 4, r
    want = [("xfs.unlinked", ino, path, "AG %d on disk: unlinked bucket %d holds inode %d, "
             "which has 1 links" % (ag, bucket, ino))]
    if shift:
        want.append(("xfs.unlinked", ino, path, "AG %d on disk: unlinked bucket %d holds "
                     "inode %d, whose bucket is %d" % (ag, bucket, ino, agino % 64)))
    assert xref_errors(r) == sorted(want), r


def test_unlinked_list_reachable_inode(xref_image):
    """A linked file is put on its AGI unlinked bucket and its link count
    made 0 as well: the list's entry looks right on its own; only the walk,
    which reaches it by its name, shows it is not unlinked.  The file is
    held open: the kernel frees an inode without links as soon as it drops
    it from its cache (BULKSTAT's look is enough), and then the name
    dangles (dirent.dangling, the only finding, before this check too)."""
    img = xref_image
    path = os.path.join(img.mnt, "d", "f42")
    ino, ag, agino, bucket = linked_inode_on_unlinked_list(img, path)
    faults.xfs_db(img, "inode %d" % ino, "write core.nlinkv2 0")
    out = repair_n(img)
    assert "agi unlinked bucket %d is %d in ag %d" % (bucket, agino, ag) in out, out
    assert "would have reset inode %d nlinks from 0 to 1" % ino in out, out
    time.sleep(1.1)     # victims younger than 1 s count as changed
    mnt = img.mount()
    fd = os.open(path, os.O_RDONLY)
    try:
        r = run_fscrub("-n", mnt)
    finally:
        os.close(fd)
    assert r.rc == 4, r
    assert xref_errors(r) == sorted([
        ("inode.nlink_zero", ino, path,
         "inode is reachable by this name but its link count is 0"),
        ("xfs.unlinked", ino, path, "AG %d on disk: unlinked bucket %d holds inode %d, "
         "which has no link but is reachable by a name" % (ag, bucket, ino))]), r


def inode_in_sparse_hole(img):
    """A full inode chunk of d's files (not the root's) gets a sparse hole
    over four inodes in use: the inobt record's holemask, count and free
    mask, the AGI's and the superblock's inode counts four less; every
    btree and counter agrees.  Returns (ag, the four inodes, the record's
    startino, holemask)."""
    root = db_int(img, "rootino", "sb 0")
    for ag in range(4):
        recs = leaf_recs(img, "agi %d" % ag, "root", "level")
        for i, (start, holemask, count, freecount, free) in enumerate(recs):
            if holemask or free or (ag == 0 and start <= root < start + 64):
                continue
            hole = 1 << 1       # inodes 4-7 of the chunk: a hole marks its inodes free
            faults.xfs_db(img, "agi %d" % ag, "addr root",
                          "write recs[%d].holemask %d" % (i + 1, hole),
                          "write recs[%d].count 60" % (i + 1),
                          "write recs[%d].free %d" % (i + 1, 0xf0),
                          "agi %d" % ag, "write count %d" % (db_int(img, "count", "agi %d" % ag) - 4),
                          "sb 0", "write icount %d" % (db_int(img, "icount", "sb 0") - 4))
            return ag, [ino_of(img, ag, start + k) for k in range(4, 8)], start, hole
    raise AssertionError("no full inode chunk")


@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_inode_in_sparse_hole(xref_image, how):
    """inode_in_sparse_hole(): with the rmapbt, the hole's blocks are still
    an inode chunk's, so the inodes read there are believed: each is an
    error at its path.  Without it, a freed hole's blocks may keep old
    inodes that look in use, and nothing is judged."""
    img = xref_image
    paths = inode_paths(img)
    ag, inos, start, hole = inode_in_sparse_hole(img)
    assert all(i in paths for i in inos), (inos, paths)
    assert "references free inode %d" % inos[0] in repair_n(img)
    time.sleep(1.1)
    mnt = img.mount_as(how)
    r = run_fscrub("-n", mnt)
    if not img.rmap:
        assert r.rc == 0 and not r.of(check="xfs.inode_alloc"), r
        return
    assert r.rc == 4, r
    got = xref_errors(r)
    assert [g[:3] for g in got] == [("xfs.inode_alloc", i, paths[i]) for i in sorted(inos)], r
    for (_, i, _, msg) in got:
        assert re.fullmatch(r"AG %d on disk: inode %d is in use \(mode 0\d+\) in a sparse hole "
                            r"of its inobt record \(inode %d, holes 0x%04x\)"
                            % (ag, i, start, hole), msg), r


def _free_next_to(img, owned):
    """(ag, bnobt index, cntbt index, free extent, victim, who): a free
    extent right after (else right before) a block, the victim, that
    owned(ag, block) names (who)."""
    for ag in range(4):
        hdr = "agf %d" % ag
        bno = leaf_recs(img, hdr, "bnoroot", "bnolevel")
        cnt = leaf_recs(img, hdr, "cntroot", "cntlevel")
        for bi, (start, length) in enumerate(bno):
            for victim in (start - 1, start + length):
                who = owned(ag, victim)
                if who is not None:
                    ci = [tuple(c) for c in cnt].index((start, length))
                    return ag, bi + 1, ci + 1, (start, length), victim, who
    raise AssertionError("no free extent next to such a block")


def _grow_free(img, ag, bi, ci, start, length, victim, cnt=True):
    """The free extent (start, length) takes in the victim block next to it,
    in the bnobt (and the cntbt, the AGF's free count and longest)."""
    hdr = "agf %d" % ag
    new = min(start, victim)
    cmds = [hdr, "addr bnoroot", "write recs[%d].startblock %d" % (bi, new),
            "write recs[%d].blockcount %d" % (bi, length + 1)]
    if cnt:
        cmds += [hdr, "addr cntroot", "write recs[%d].startblock %d" % (ci, new),
                 "write recs[%d].blockcount %d" % (ci, length + 1),
                 hdr, "write freeblks %d" % (db_int(img, "freeblks", hdr) + 1)]
        if db_int(img, "longest", hdr) == length:
            cmds.append("write longest %d" % (length + 1))
    faults.xfs_db(img, *cmds)


def file_block_owner(img):
    """owned(ag, block) for _free_next_to(): (inode, file block) the rmapbt
    gives a regular file of the image, else None."""
    paths = inode_paths(img, files_only=True)

    def owned(ag, b):
        for start, length, owner, offset, _, attr, bmbt in leaf_recs(
                img, "agf %d" % ag, "rmaproot", "rmaplevel", levels=2):
            if owner in paths and not attr and not bmbt and start <= b < start + length:
                return owner, offset + b - start
        return None
    return paths, owned


def btree_block_owner(img, rmap):
    """owned(ag, block) for _free_next_to(): which btree root or AGFL block."""
    roots = {("agf", "bnoroot"): "the bnobt", ("agf", "cntroot"): "the cntbt",
             ("agf", "refcntroot"): "the refcountbt", ("agi", "root"): "the inobt",
             ("agi", "free_root"): "the finobt"}
    if rmap:
        roots[("agf", "rmaproot")] = "the rmapbt"

    def owned(ag, b):
        for (hdr, field), who in roots.items():
            if db_int(img, field, "%s %d" % (hdr, ag)) == b:
                return who
        out = db(img, "agfl %d" % ag, "print bno")
        if b in [int(v) for v in re.findall(r"\d+:(\d+)", out)]:
            return "the AGFL"
        return None
    return owned


def free_extent_over(img, owned, cnt=True):
    """A free extent takes in the block next to it that owned() names.
    Returns (ag, victim, first, last free block now, who)."""
    ag, bi, ci, (start, length), victim, who = _free_next_to(img, owned)
    _grow_free(img, ag, bi, ci, start, length, victim, cnt=cnt)
    first = min(start, victim)
    return ag, victim, first, first + length, who


def file_block_owner_bmap(img):
    """owned(ag, block) for _free_next_to() without the rmapbt: (inode, file
    block) from the regular files' block maps (xfs_db bmap), else None."""
    paths = inode_paths(img, files_only=True)
    cmds = []
    for ino in sorted(paths):
        cmds += ["inode %d" % ino, "print v3.inumber", "bmap"]
    blocks, ino = {}, None
    for line in db(img, *cmds).splitlines():
        m = re.match(r"v3\.inumber = (\d+)", line)
        if m:
            ino = int(m.group(1))
        m = re.match(r"data offset (\d+) startblock \d+ \((\d+)/(\d+)\) count (\d+)", line)
        if m:
            off, ag, bno, count = (int(v) for v in m.groups())
            for k in range(count):
                blocks[(ag, bno + k)] = (ino, off + k)
    return paths, lambda ag, b: blocks.get((ag, b))


@pytest.mark.parametrize("how", ["plain"] + ["fsmap_fails_" + k
                                             for k in fsimage.Image.MOUNT_KINDS])
def test_free_extent_over_file_data(xref_image, how):
    """A free extent grows over the block of a file's extent next to it, in
    both free space btrees and the AGF's counters: used space recorded as
    free, named by the owner's inode and path.  With the rmapbt the disk's
    btrees tell (xfs_xref.c); without it the file's FIEMAP extents against
    GETFSMAP's free space after the walk (xfs_inodes.c), looked up again
    before it is reported.  fsmap_fails_*: that second GETFSMAP fails
    (FSCRUB_DEBUG_FRESH_FSMAP_FAILS), which tells nothing, so the first
    reading stands (it was "changed while being checked" before), fresh,
    settled and read-only."""
    img = xref_image
    paths, owned = file_block_owner(img) if img.rmap else file_block_owner_bmap(img)
    ag, victim, first, last, (ino, fblock) = free_extent_over(img, owned)
    assert re.search(r"data fork in ino %d claims free block" % ino, repair_n(img))
    if how == "plain":
        mnt, r = scrub(img)
    else:
        mnt = img.mount_as(how[len("fsmap_fails_"):])
        time.sleep(1.1)     # victims younger than 1 s count as changed
        r = run_fscrub("-n", "-v", mnt, env={"FSCRUB_DEBUG_FRESH_FSMAP_FAILS": "1"})
        if not img.rmap:
            assert "GETFSMAP failed at the second look" in r.stdout, r
    assert r.rc == 4, r
    if img.rmap:
        want = "AG %d on disk: block %d is free in the bnobt (free extent %d-%d) but used " \
               "by inode %d (data fork, file block %d)" % (ag, victim, first, last, ino, fblock)
    else:
        bsize = db_int(img, "blocksize", "sb 0")
        phys = (ag * db_int(img, "agblocks", "sb 0") + victim) * bsize
        want = "file offset %d maps device bytes %d-%d (AG %d, block %d), which the bnobt " \
               "calls free" % (fblock * bsize, phys, phys + bsize - 1, ag, victim)
    assert xref_errors(r) == [("xfs.space", ino, paths[ino], want)], r


@pytest.mark.parametrize("cnt", [True, False], ids=["both_btrees", "bnobt_only"])
def test_free_extent_over_btree_block(xref_image, cnt):
    """A free extent grows over a btree or AGFL block (with or without
    the rmapbt: the btrees' own blocks are known from their walks); made in
    the bnobt only, the cntbt no longer holds the same extents either."""
    img = xref_image
    ag, victim, first, last, who = free_extent_over(img, btree_block_owner(img, img.rmap), cnt)
    assert "block (%d,%d-%d) multiply claimed by bno space tree" % (ag, victim, victim) \
        in repair_n(img)
    mnt, r = scrub(img)
    assert r.rc == 4, r
    got = [e.message for e in r.errors if e.check == "xfs.space"]
    want = ["AG %d on disk: block %d is free in the bnobt (free extent %d-%d) but used by %s"
            % (ag, victim, first, last, who)]
    if not cnt:
        want.append("AG %d on disk: bnobt has free blocks %d-%d, the cntbt has not"
                    % (ag, first, last))
    assert sorted(got) == sorted(want), r
    assert all(e.path == mnt for e in r.errors), r


# --- reference counts ---------------------------------------------------------

def shared_record(img, refcount):
    """(ag, index, [start, length, refcount, cowflag]) of the refcountbt
    record with that count."""
    for ag in range(db_int(img, "agcount", "sb 0")):
        for i, rec in enumerate(leaf_recs(img, "agf %d" % ag, "refcntroot", "refcntlevel")):
            if rec[2] == refcount and not rec[3]:
                return ag, i + 1, rec
    raise AssertionError("no refcountbt record of %d" % refcount)


@pytest.mark.parametrize("fault", ["count", "short", "long"])
def test_refcount(xref_image, fault):
    """The record of multi's extent, shared by multi and its three reflinked
    copies (refcount 4), counts 5 (count); ends a block early, leaving the
    last block shared without a record (short); or runs a block on, over a
    free block (long).  Every block passes its checks; only the owners
    against the refcountbt tell: the rmapbt's records (xfs_xref.c) or,
    without it, the files' extents after the walk (xfs_refcount.c)."""
    img = xref_image
    paths = inode_paths(img, files_only=True)
    owners = sorted(i for i, p in paths.items() if os.path.basename(p).startswith("multi"))
    ag, i, (start, length, _, _) = shared_record(img, 4)
    last = start + length - 1
    if img.rmap:
        source, who = "the rmapbt gives", "inodes " + ", ".join(str(o) for o in owners)
    else:
        source = "the files' extents give"
        who = "inodes " + ", ".join("%d (%s)" % (o, paths[o]) for o in owners)
    hdr = "agf %d" % ag
    if fault == "count":
        faults.xfs_db(img, hdr, "addr refcntroot", "write recs[%d].refcount 5" % i)
        want = ("xfs.refcount", owners[0], paths[owners[0]],
                "AG %d on disk: blocks %d-%d: %s 4 data fork references (%s), the "
                "refcountbt counts 5" % (ag, start, last, source, who))
        said = "Incorrect reference count"
    elif fault == "short":
        faults.xfs_db(img, hdr, "addr refcntroot", "write recs[%d].blockcount %d"
                      % (i, length - 1))
        want = ("xfs.refcount", owners[0], paths[owners[0]],
                "AG %d on disk: block %d: %s 4 data fork references (%s), the "
                "refcountbt has no record" % (ag, last, source, who))
        said = "Incorrect reference count: saw (%d/%d) len %d nlinks 4" % (ag, start, length - 1)
    elif not img.rmap:
        # The block after the extent: free, another file's data (one
        # reference) or no file's data (d/f1's attr fork: none).
        _, owned = file_block_owner_bmap(img)
        by = owned(ag, last + 1)
        faults.xfs_db(img, hdr, "addr refcntroot", "write recs[%d].blockcount %d"
                      % (i, length + 1))
        refs = "1 data fork reference (inode %d (%s))" % (by[0], paths[by[0]]) if by else \
            "0 data fork references (no file)"
        want = ("xfs.refcount", by[0] if by else None, paths[by[0]] if by else img.mnt,
                "AG %d on disk: block %d: the files' extents give %s, the refcountbt counts 4"
                % (ag, last + 1, refs))
        said = "Incorrect reference count: saw (%d/%d) len %d nlinks 4" % (ag, start, length + 1)
    else:
        # The block after the extent: free, or any fork's of any file (d/f1's
        # attr fork here, allocated right after multi).
        by = [(rec[2], not rec[5] and not rec[6]) for rec in
              leaf_recs(img, hdr, "rmaproot", "rmaplevel", levels=2)
              if rec[0] <= last + 1 < rec[0] + rec[1] and rec[2] in paths]
        free = [f for f in leaf_recs(img, hdr, "bnoroot", "bnolevel") if f[0] == last + 1]
        if len(by) != 1 and not free:
            pytest.skip("block %d after multi's extent is neither free nor one file's"
                        % (last + 1))
        faults.xfs_db(img, hdr, "addr refcntroot", "write recs[%d].blockcount %d"
                      % (i, length + 1))
        refs = "%d data fork reference%s (inode %d)" % (by[0][1], "" if by[0][1] else "s",
                                                         by[0][0]) if by else \
            "0 data fork references (no file)"
        want = ("xfs.refcount", by[0][0] if by else None, paths[by[0][0]] if by else img.mnt,
                "AG %d on disk: block %d: the rmapbt gives %s, the refcountbt counts 4"
                % (ag, last + 1, refs))
        said = "Incorrect reference count: saw (%d/%d) len %d nlinks 4" % (ag, start, length + 1)
    out = repair_n(img)
    assert said in out, out
    mnt, r = scrub(img)
    assert r.rc == 4, r
    assert [e for e in xref_errors(r) if e[0] == "xfs.refcount"] == [want], r
    # FIEMAP takes its shared flag from the refcountbt: the last block is
    # mapped by four files and by none of them as shared (crosslink.c).
    others = {e.check for e in r.errors} - {"xfs.refcount"}
    assert others == ({"extent.crosslinked"} if fault == "short" else set()), r


def churn_every_ag(mnt, stop):
    """Until stop is set: a directory in each of several AGs (the inode64
    allocator rotates new directories across them), files created in it,
    written with fsync and deleted, so every AG's free block and inode
    counts move all the time.  No file is reflinked: the refcountbt never
    changes."""
    dirs = [os.path.join(mnt, "churn%d" % k) for k in range(8)]
    for d in dirs:
        os.mkdir(d)
    n = 0
    while not stop.is_set():
        for d in dirs:
            path = os.path.join(d, "f%d" % (n % 40))
            with open(path, "wb") as fh:
                fh.write(b"y" * (4096 * (1 + n % 7)))
                os.fsync(fh.fileno())
            if n % 3 == 0:
                os.unlink(path)
        n += 1


@pytest.mark.parametrize("how", ["busy", "settled_busy", "ro"])
def test_refcount_counted_wrong_in_a_busy_ag(xref_image, how):
    """multi's refcountbt record counts 3 owners where its four files give
    4, without the rmapbt (xfs_refcount.c), while another process keeps
    every AG's counters moving (busy: right after the mount, or once it
    settled and was remounted), or on a read-only mount (ro).  The
    on-disk log names none of the refcountbt's blocks, so the disk holds
    the btree the kernel has: an error however busy the AG is -- not
    "changed" because its counters moved, as it was when only the counters
    could say whether an AG was quiet.  (A count above the files' is not
    judged while files change: a file not mapped whole may be an owner.)"""
    img = xref_image
    if img.rmap:
        pytest.skip("with the rmapbt, xfs_xref.c counts the owners in phase 2")
    paths = inode_paths(img, files_only=True)
    owners = sorted(i for i, p in paths.items() if os.path.basename(p).startswith("multi"))
    ag, i, (start, length, _, _) = shared_record(img, 4)
    faults.xfs_db(img, "agf %d" % ag, "addr refcntroot", "write recs[%d].refcount 3" % i)
    want = [("xfs.refcount", owners[0], paths[owners[0]],
             "AG %d on disk: blocks %d-%d: the files' extents give 4 data fork references "
             "(%s), the refcountbt counts 3" % (ag, start, start + length - 1, "inodes " +
                                                ", ".join("%d (%s)" % (o, paths[o])
                                                          for o in owners)))]
    time.sleep(1.1)     # victims younger than 1 s count as changed
    if how == "ro":
        r = run_fscrub("-n", "-v", img.mount("ro"))
    else:
        mnt = img.mount_as("settled" if how == "settled_busy" else "fresh")
        stop = threading.Event()
        t = threading.Thread(target=churn_every_ag, args=(mnt, stop))
        t.start()
        try:
            time.sleep(1)
            r = run_fscrub("-n", "-v", mnt)
        finally:
            stop.set()
            t.join()
    assert r.rc == 4, r
    assert [e for e in xref_errors(r) if e[0] == "xfs.refcount"] == want, r
    # Judged by the log: no wait for the log worker.
    assert "waiting" not in r.stdout, r


def cow_staging_in_rmapbt_only(img):
    """The last block of an AG (the end of its last free extent) becomes CoW
    staging in the rmapbt alone: taken out of both free space btrees and the
    AGF's and superblock's free counts, a record of owner XFS_RMAP_OWN_COW
    appended to the one-level rmapbt.  (A CoW record in the refcountbt
    alone cannot be made: the kernel frees the refcountbt's CoW staging at
    mount, and without its rmapbt record that shuts it down.)  Returns
    (ag, block)."""
    for ag in range(db_int(img, "agcount", "sb 0")):
        hdr = "agf %d" % ag
        if db_int(img, "rmaplevel", hdr) != 1 or db_int(img, "bnolevel", hdr) != 1 or \
                db_int(img, "cntlevel", hdr) != 1:
            continue
        bno = leaf_recs(img, hdr, "bnoroot", "bnolevel")
        cnt = leaf_recs(img, hdr, "cntroot", "cntlevel")
        start, length = bno[-1]
        if start + length != db_int(img, "length", hdr) or length < 2 or \
                [c for c in cnt if c[1] == length - 1]:
            continue
        ci = [tuple(c) for c in cnt].index((start, length)) + 1
        n = db_int(img, "numrecs", hdr, "addr rmaproot")
        block = start + length - 1
        cmds = [hdr, "addr bnoroot", "write recs[%d].blockcount %d" % (len(bno), length - 1),
                hdr, "addr cntroot", "write recs[%d].blockcount %d" % (ci, length - 1), hdr]
        # The AGF's verifier wants longest <= freeblks after each write.
        if db_int(img, "longest", hdr) == length:
            cmds.append("write longest %d" % (length - 1))
        cmds.append("write freeblks %d" % (db_int(img, "freeblks", hdr) - 1))
        cmds += [hdr, "addr rmaproot", "write numrecs %d" % (n + 1),
                 "write recs[%d].startblock %d" % (n + 1, block),
                 "write recs[%d].blockcount 1" % (n + 1),
                 "write recs[%d].owner -- -9" % (n + 1), "write recs[%d].offset 0" % (n + 1),
                 "sb 0", "write fdblocks %d" % (db_int(img, "fdblocks", "sb 0") - 1)]
        faults.xfs_db(img, *cmds)
        return ag, block
    raise AssertionError("no AG with one-level btrees ending in a free extent")


def test_refcount_cow(xref_image):
    """An AG's last block is CoW staging in the rmapbt, not in the
    refcountbt: the kernel mounts it (it looks for leftover CoW staging in
    the refcountbt only)."""
    img = xref_image
    if not img.rmap:
        pytest.skip("CoW staging has rmapbt records only with the rmapbt")
    ag, block = cow_staging_in_rmapbt_only(img)
    out = repair_n(img)
    # Its blocks are neither free, nor a file's, nor in the refcountbt.
    assert "unknown block state, ag %d, blocks %d-%d" % (ag, block, block) in out, out
    mnt, r = scrub(img)
    assert r.rc == 4, r
    assert xref_errors(r) == [
        ("xfs.refcount", None, mnt, "AG %d on disk: block %d: CoW staging in the rmapbt, "
         "not in the refcountbt" % (ag, block))], r


def test_secondary_superblock_features(xref_image):
    """Superblock 3 says the filesystem has no ro-compat features (finobt,
    rmapbt, reflink, inobtcount): xfs_repair would fix it; the kernel never
    reads a secondary superblock."""
    img = xref_image
    primary = db_int(img, "features_ro_compat", "sb 0")
    faults.xfs_db(img, "sb 3", "write features_ro_compat 0")
    assert "ro compat feature mismatch in AG 3 super" in repair_n(img)
    mnt, r = scrub(img)
    assert r.rc == 4, r
    assert xref_errors(r) == [
        ("xfs.sb_secondary", None, mnt, "AG 3 on disk: superblock sb_features_ro_compat is "
         "0x0, the primary's 0x%x" % primary)], r


@pytest.mark.parametrize("rel,fmt", [("d/f3", "2 (extents)"), ("frag", "3 (btree)")],
                         ids=["extents", "btree"])
def test_block_count(xref_image, rel, fmt):
    """A file says it has two blocks more (core.nblocks): xfs_repair would
    reset it; the kernel mounts it (its verifier only wants no fewer
    blocks than extents).  For a fork in btree format the bmbt is walked
    from the device."""
    img = xref_image
    paths = inode_paths(img)
    path = os.path.join(img.mnt, rel)
    ino = [i for i, p in paths.items() if p == path][0]
    assert faults.xfs_field(img, ino, "core.format") == fmt
    n = int(faults.xfs_field(img, ino, "core.nblocks"))
    faults.xfs_db(img, "inode %d" % ino, "write core.nblocks %d" % (n + 2))
    assert "bad nblocks %d for inode %d, would reset to %d" % (n + 2, ino, n) in repair_n(img)
    ag = int(re.search(r"^(\w+) \(", db(img, "convert ino %d agno" % ino), re.M).group(1), 0)
    mnt, r = scrub(img)
    assert r.rc == 4, r
    assert xref_errors(r) == [
        ("xfs.block_count", ino, path,
         "AG %d on disk: inode %d counts %d blocks, its forks map %d" % (ag, ino, n + 2, n))], r


# --- summary counters (src/backends/xfs/xfs_counters.c) ---------------------

def _sb_lie(img, d_icount, d_ifree):
    """The primary superblock's inode counters moved by the deltas, its free
    blocks left alone.  The log is clean, so the kernel takes them at mount
    as they are (within its sanity limits: ifree <= icount)."""
    icount = db_int(img, "icount", "sb 0")
    ifree = db_int(img, "ifree", "sb 0")
    faults.xfs_db(img, "sb 0", "write icount %d" % (icount + d_icount),
                  "write ifree %d" % (ifree + d_ifree))
    out = repair_n(img)
    assert ("sb_icount %d, counted %d" % (icount + d_icount, icount) in out) == bool(d_icount)
    assert "sb_ifree %d, counted %d" % (ifree + d_ifree, ifree) in out, out
    return icount, ifree


@pytest.mark.parametrize("d_icount,d_ifree", [(640, 640), (0, 7)],
                         ids=["icount_and_ifree", "ifree_only"])
@pytest.mark.parametrize("how", fsimage.Image.MOUNT_KINDS)
def test_summary_counters(xref_image, d_icount, d_ifree, how):
    """The superblock's inode counters lie consistently (in use unchanged:
    only XFS_IOC_FSCOUNTS sees it) or the free count alone (statfs sees
    it).  Every AG is right, so only the sums against the kernel's
    filesystem-wide counters find it, on every kind of mount."""
    img = xref_image
    icount, ifree = _sb_lie(img, d_icount, d_ifree)
    time.sleep(1.1)     # victims younger than 1 s count as changed
    mnt = img.mount_as(how)
    r = run_fscrub("-n", mnt)
    assert r.rc == 4, r
    want = []
    if d_icount:
        want.append("the kernel counts %d inodes (XFS_IOC_FSCOUNTS), its AGs %d"
                    % (icount + d_icount, icount))
    if d_icount != d_ifree:
        want.append("the kernel counts %d inodes in use (statfs), its AGs %d"
                    % (icount + d_icount - ifree - d_ifree, icount - ifree))
    assert xref_errors(r) == [
        ("xfs.counters", None, mnt, "summary counters: %s (xfs_repair: sb_icount, sb_ifree)"
         % "; ".join(want))], r


@pytest.mark.parametrize("how", ["fresh", "settled"])
def test_summary_counters_moving(xref_image, how):
    """The same lie while the inode counts move all through the scan: the
    figures move between the looks, the difference between them does not,
    so it is an error showing exactly the lie (never a difference made by
    the churn itself) -- not "changed while being checked", as it was when
    only figures that did not move were believed.  (No read-only kind: the
    churn writes.)"""
    img = xref_image
    _sb_lie(img, 0, 7)
    mnt = img.mount_as(how)
    stop = time.monotonic() + 60

    def churn():
        i = 0
        while time.monotonic() < stop:
            p = os.path.join(mnt, "churn%d" % (i % 2000))
            if os.path.exists(p):
                os.unlink(p)
            else:
                open(p, "w").close()
            i += 1
    t = threading.Thread(target=churn)
    t.start()
    try:
        r = run_fscrub("-n", "-v", mnt)
    finally:
        stop = 0
        t.join()
    found = [f for f in r.findings if f.check == "xfs.counters"]
    assert found and r.rc == 4, r
    for f in found:
        m = re.search(r"counts (\d+) inodes in use \(statfs\), its AGs (\d+) ", f.message)
        assert f.severity == "Error" and m and int(m.group(2)) - int(m.group(1)) == 7, r
        assert "(XFS_IOC_FSCOUNTS)" not in f.message, r


@pytest.mark.parametrize("size,agcount,rmap", [(300, 1, True), (300, 4, False),
                                               (700, 9, True), (1200, 16, False)],
                         ids=["1ag_rmap", "4ag_normap", "9ag_rmap", "16ag_normap"])
def test_summary_counters_clean(workdir, size, agcount, rmap):
    """Clean filesystems of several sizes and AG counts, rmapbt and reflink
    on and off, after files are made and removed: no xfs.counters."""
    need_fs("xfs")
    img = fsimage.Image(workdir, "xfs", size_mb=size)
    try:
        with open(img.path, "wb") as fh:
            fh.truncate(size << 20)
        env = dict(os.environ, **fsimage._XFS_SMALL_ENV)
        feat = "rmapbt=1,reflink=1" if rmap else "rmapbt=0,reflink=0"
        fsimage.run(["mkfs.xfs", "-f", "-q", "-m", "crc=1," + feat, "-d",
                     "agcount=%d" % agcount, img.path], env=env)
        mnt = img.mount()
        if rmap:
            _fill(mnt)
        for i in range(500):
            with open(os.path.join(mnt, "g%d" % i), "w") as fh:
                fh.write("x")
        for i in range(0, 500, 3):
            os.unlink(os.path.join(mnt, "g%d" % i))
        time.sleep(1.1)
        r = run_fscrub("-n", mnt)
        assert r.rc == 0 and not [f for f in r.findings if f.check == "xfs.counters"], r
    finally:
        img.cleanup(remove=True)
