"""Hostile trees and limits: each completes with the right findings and
no crash.  (A 3000-deep chain with RLIMIT_NOFILE 32 and a covered mount
point are in test_walk.py.)"""

import os
import re
import resource
import time

import pytest

from conftest import escaped, run_fscrub
import fsimage


def tmpfs(workdir, cleanups, name, opts="size=2g"):
    return fsimage.Mounts(cleanups).mount("fscrub-" + name, os.path.join(workdir, name),
                                          "-t", "tmpfs", "-o", opts)


def test_peak_rss_is_fscrubs_own(workdir, cleanups):
    """-T's peak RSS is fscrub's own: Linux keeps ru_maxrss across
    execve(), so a run started by a big process (a test runner that had
    grown to 2 GiB) reported its parent's."""
    mnt = tmpfs(workdir, cleanups, "small", "size=64m")
    with open(os.path.join(mnt, "f"), "w") as fh:
        fh.write("x")
    ballast = bytearray(768 << 20)
    for i in range(0, len(ballast), 4096):      # resident, not just reserved
        ballast[i] = 1
    r = run_fscrub("-T", "-v", mnt)
    del ballast
    assert r.rc == 0, r
    peaks = [float(m) for m in re.findall(r"peak RSS ([\d.]+) MiB", r.stdout)]
    assert peaks and max(peaks) < 384, r


def test_chain_20000_deep(workdir, cleanups):
    mnt = tmpfs(workdir, cleanups, "deep")
    fd = os.open(mnt, os.O_RDONLY)
    for i in range(20000):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.mkfifo("bottom\n", dir_fd=fd)
    os.close(fd)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    r = run_fscrub("-v", "-T", mnt, preexec_fn=limit)
    assert r.rc == 0 and r.errors == [], r
    assert "Phase 3: 20001 directories" in r.stdout
    w = r.of("Warning", "name.control")
    assert len(w) == 1 and w[0].path == mnt + "/d" * 20000 + "/bottom\\n"


def test_every_byte_in_names(workdir, cleanups):
    mnt = tmpfs(workdir, cleanups, "bytes")
    allbytes = bytes(b for b in range(1, 256) if b != ord("/"))
    names = [bytes([b]) for b in allbytes if b != ord(".")] + [allbytes, b".."[:1] * 3]
    for n in names:
        with open(os.path.join(mnt.encode(), n), "wb") as f:
            f.write(n)
    r = run_fscrub("-x", mnt)
    assert r.rc == 0 and r.errors == [], r
    bad = {escaped(os.path.join(mnt.encode(), n)) for n in names
           if any(b < 0x20 or b == 0x7f for b in n)}
    assert bad <= {w.path for w in r.of("Warning", "name.control")}
    # every printed line is one line: no raw control byte reached the report
    assert all(0x20 <= ord(c) or c == "\n" for c in r.stdout)


def test_16_tib_sparse_file(image_factory):
    img = image_factory("xfs", size_mb=300)
    img.mkfs()
    mnt = img.mount()
    p = os.path.join(mnt, "sparse")
    with open(p, "wb") as f:
        f.truncate(16 << 40)
        f.seek((16 << 40) - 4096)
        f.write(b"e" * 4096)
        f.seek(0)
        f.write(b"s" * 4096)
    r = run_fscrub("-x", "-v", mnt)
    assert r.rc == 0 and r.errors == [], r
    # only the data is read, not 16 TiB of holes
    read = r.data_bytes_read
    assert 8192 <= read < 64 << 20, r


def test_100000_extents(image_factory):
    img = image_factory("xfs", size_mb=1024)
    img.mkfs()
    mnt = img.mount()
    p = os.path.join(mnt, "fragmented")
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(100000):
        os.posix_fallocate(fd, i * 8192, 4096)      # a hole after every extent
    os.close(fd)
    r = run_fscrub("-v", "-x", mnt)
    assert r.rc == 0 and r.errors == [], r
    extents = int(r.stdout.split(" extents, ")[0].rsplit(" ", 1)[1])
    assert extents >= 100000, r


@pytest.mark.slow
def test_directory_with_a_million_entries(workdir, cleanups):
    mnt = tmpfs(workdir, cleanups, "wide", "size=4g,nr_inodes=0")
    d = os.path.join(mnt, "wide")
    os.mkdir(d)
    dfd = os.open(d, os.O_RDONLY)
    for i in range(1000000):
        os.close(os.open("%07d" % i, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd))
    os.close(dfd)
    r = run_fscrub("-T", "-v", mnt, timeout=1200)
    assert r.rc == 0 and r.errors == [] and r.warnings == [], r
    assert re.search(r"Phase 3: 2 directories, 1000000 files,", r.stdout), r
    rss = max(float(l.split("peak RSS ")[1].split(" MiB")[0])
              for l in r.stdout.splitlines() if "peak RSS" in l)
    print("1M-entry directory: peak RSS %.1f MiB" % rss)
    assert rss < 256, r


def test_full_filesystem(image_factory):
    """No free blocks and no free inodes."""
    img = image_factory("ext4", size_mb=32, mkfs_args=("-N", "256"))
    img.mkfs()
    mnt = img.mount()
    i = 0
    while True:                       # use up the inodes
        try:
            open(os.path.join(mnt, "i%04d" % i), "w").close()
        except OSError:
            break
        i += 1
    with open(os.path.join(mnt, "i0000"), "wb") as f:   # then the blocks
        try:
            while True:
                f.write(b"f" * (1 << 20))
                f.flush()
        except OSError:
            pass
    st = os.statvfs(mnt)
    assert st.f_ffree == 0 and st.f_bavail == 0
    time.sleep(1.1)
    r = run_fscrub("-x", mnt)
    assert r.rc == 0 and r.errors == [], r
