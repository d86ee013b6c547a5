"""A bounded, concurrent workload for scanning a filesystem while it
changes: worker processes create, write, truncate, rename (files and whole
directories across their part of the tree), hard-link, unlink and replace
symlinks, give files one of a few attributes too big for the inode (ext4
shares such blocks between files with the same attributes) -- and, with reflink=True, clone whole files and ranges of
files into others or into themselves (FICLONE, FICLONERANGE) -- as fast
as they can, until told to stop or until a cap on the number of
operations.  Each worker owns a top-level area (so workers do
not race each other into errors) but moves things anywhere inside it.

    with Churn(root, workers=2) as c:   # populated, running
        ...                             # c.ops() so far
    # stopped and joined here

Used by test_churn.py (short, in CI) and bench/churn_soak.sh (20 rounds).
"""

import errno
import fcntl
import multiprocessing as mp
import os
import random
import struct

SEED = 1234
# Directory moves nest directories ever deeper: keep the paths the workers
# use (not fscrub, which needs no paths) well below PATH_MAX.
MAX_DEPTH = 24
# linux/fs.h: FICLONE = _IOW(0x94, 9, int), FICLONERANGE = _IOW(0x94, 13,
# struct file_clone_range { s64 src_fd; u64 src_offset, src_length, dest_offset; }).
FICLONE = 0x40049409
FICLONERANGE = 0x4020940d
# Clone ranges in units of this (a multiple of any XFS block size here).
CLONE_UNIT = 4096
# Attribute values files are given: few and big, so that ext4 keeps them in
# blocks that files with the same value share, and moves files between them.
XATTR_VALUES = [bytes([0x61 + i]) * 400 for i in range(3)]


def _clone(rnd, src, dst, whole):
    """dst becomes a clone of src (whole), or gets a block-aligned range of
    src (dst may be src: a file reflinked to itself)."""
    sfd = os.open(src, os.O_RDONLY)
    try:
        dfd = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if whole:
                fcntl.ioctl(dfd, FICLONE, sfd)
                return
            blocks = os.fstat(sfd).st_size // CLONE_UNIT
            if not blocks:
                return
            off = rnd.randrange(blocks) * CLONE_UNIT
            length = rnd.randrange(1, blocks - off // CLONE_UNIT + 1) * CLONE_UNIT
            dest = rnd.randrange(8) * CLONE_UNIT
            fcntl.ioctl(dfd, FICLONERANGE, struct.pack("qQQQ", sfd, off, length, dest))
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def populate(area, dirs=40, files=15, size=4096):
    """A starting tree: dirs directories, some nested, files files each."""
    os.makedirs(area, exist_ok=True)
    paths = [area]
    for i in range(dirs):
        parent = paths[random.Random(i).randrange(len(paths))]
        d = os.path.join(parent, "d%03d" % i)
        os.mkdir(d)
        paths.append(d)
        for j in range(files):
            with open(os.path.join(d, "f%03d" % j), "wb") as f:
                f.write(b"x" * size)
    return paths


def _all(area):
    dirs, files, links = [], [], []
    for top, ds, fs in os.walk(area):
        dirs.append(top)
        for f in fs:
            p = os.path.join(top, f)
            (links if os.path.islink(p) else files).append(p)
    return dirs, files, links


def _moved(paths, src, dst):
    """Rewrite the paths at or below src after a rename to dst."""
    pre = src + "/"
    for i, p in enumerate(paths):
        if p == src:
            paths[i] = dst
        elif p.startswith(pre):
            paths[i] = dst + p[len(src):]


def _worker(area, seed, counter, stop, max_ops, reflink=False):
    rnd = random.Random(seed)
    dirs, files, links = _all(area)
    serial = 0
    done = 0
    ignorable = (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.EINVAL,
                 errno.ENOTDIR, errno.EISDIR, errno.EXDEV, errno.EMLINK, errno.ENOSPC,
                 errno.ENAMETOOLONG, errno.EOPNOTSUPP, errno.ENODATA)

    def fresh(parent):
        nonlocal serial
        serial += 1
        return os.path.join(parent, "n%d-%d" % (seed, serial))

    while not stop.is_set() and done < max_ops:
        op = rnd.randrange(11 if reflink else 9)
        fi = rnd.randrange(len(files)) if files else None
        try:
            if op == 0 or fi is None:                   # create + write
                p = fresh(rnd.choice(dirs))
                with open(p, "wb") as f:
                    f.write(b"c" * rnd.choice((0, 100, 4096, 20000)))
                files.append(p)
                if rnd.random() < 0.3:
                    os.setxattr(p, "user.churn", rnd.choice(XATTR_VALUES))
            elif op == 1:                               # write into an existing file
                with open(files[fi], "r+b") as f:
                    f.seek(rnd.randrange(16384))
                    f.write(b"w" * rnd.randrange(1, 8192))
            elif op == 2:                               # truncate
                os.truncate(files[fi], rnd.randrange(10000))
                if rnd.random() < 0.3:                  # another attribute, or none
                    if rnd.random() < 0.3:
                        os.removexattr(files[fi], "user.churn")
                    else:
                        os.setxattr(files[fi], "user.churn", rnd.choice(XATTR_VALUES))
            elif op == 3:                               # rename a file elsewhere
                dst = fresh(rnd.choice(dirs))
                os.rename(files[fi], dst)
                files[fi] = dst
            elif op == 4 and len(dirs) > 2:             # move a whole directory
                src = dirs[rnd.randrange(1, len(dirs))]
                parent = rnd.choice(dirs)
                # not into itself, and not so deep that paths pass PATH_MAX
                if parent == src or parent.startswith(src + "/") or \
                        parent.count("/") - area.count("/") > MAX_DEPTH:
                    continue
                dst = fresh(parent)
                os.rename(src, dst)
                for paths in (dirs, files, links):
                    _moved(paths, src, dst)
            elif op == 5:                               # hard link
                dst = fresh(rnd.choice(dirs))
                os.link(files[fi], dst)
                files.append(dst)
            elif op == 6 and len(files) > 20:           # unlink
                os.unlink(files[fi])
                files[fi] = files[-1]
                files.pop()
            elif op == 9:                               # clone a whole file
                dst = fresh(rnd.choice(dirs))
                _clone(rnd, files[fi], dst, True)
                files.append(dst)
            elif op == 10:                              # clone a range, maybe into itself
                dst = files[fi] if rnd.random() < 0.3 else rnd.choice(files)
                _clone(rnd, files[fi], dst, False)
            elif op == 7:                               # replace or create a symlink
                if links and rnd.random() < 0.7:
                    p = rnd.choice(links)
                else:
                    p = fresh(rnd.choice(dirs))
                    links.append(p)
                tmp = p + ".new"
                os.symlink("t" * rnd.randrange(1, 300), tmp)
                os.rename(tmp, p)
            else:                                       # mkdir / rmdir
                if rnd.random() < 0.6:
                    d = fresh(rnd.choice(dirs))
                    os.mkdir(d)
                    dirs.append(d)
                elif len(dirs) > 5:
                    d = dirs[rnd.randrange(1, len(dirs))]
                    os.rmdir(d)                         # only succeeds if empty
                    dirs.remove(d)
            done += 1
            with counter.get_lock():
                counter.value += 1
        except OSError as e:
            if e.errno not in ignorable:
                raise
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                # our bookkeeping went stale: look again
                dirs, files, links = _all(area)


class Churn:
    def __init__(self, root, workers=2, max_ops=10 ** 7, dirs=40, files=15, reflink=False):
        self.root = root
        self.areas = [os.path.join(root, "churn%d" % i) for i in range(workers)]
        for a in self.areas:
            if not os.path.exists(a):
                populate(a, dirs=dirs, files=files)
        self.counter = mp.Value("q", 0)
        self.stop_event = mp.Event()
        self.procs = [mp.Process(target=_worker, daemon=True,
                                 args=(a, SEED + i, self.counter, self.stop_event, max_ops,
                                       reflink))
                      for i, a in enumerate(self.areas)]

    def ops(self):
        return self.counter.value

    def __enter__(self):
        for p in self.procs:
            p.start()
        return self

    def stop(self):
        self.stop_event.set()
        for p in self.procs:
            p.join(timeout=60)
        bad = [p.exitcode for p in self.procs if p.exitcode not in (0, None)]
        if bad:
            raise RuntimeError("a churn worker failed: exit codes %s" % bad)

    def __exit__(self, *exc):
        self.stop()
        return False
