"""fscrub never harms the filesystem: on a read-only mount the image is
byte-identical after fscrub -n and fscrub -n -x; on a read-write mount
with strictatime no inode's atime, mtime or ctime changes (compared with
a stat snapshot taken by this test); and a lazy unmount during a scan
ends it with a clean operational error, not a hang."""

import hashlib
import os
import signal
import subprocess
import time

import pytest

from conftest import FSCRUB, check_sanitizers, need_tools, run_fscrub
import fsimage


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@pytest.mark.parametrize("fstype", ["xfs", "ext4", "btrfs"])
def test_readonly_image_unchanged(image_factory, fstype):
    img = image_factory(fstype, size_mb=300)
    img.mkfs()
    mnt = img.mount()
    fsimage.make_tree(mnt, deep=False)
    img.offline()
    # XFS writes its log on every plain read-only mount cycle of this image
    # (measured: the hash changes without fscrub); norecovery stops that.
    ro = "ro,norecovery" if fstype == "xfs" else "ro"
    before = sha256(img.path)
    img.mount(ro)
    img.offline()
    assert sha256(img.path) == before, "a read-only mount cycle alone changes the image"
    img.mount(ro)
    for args in (("-n",), ("-n", "-x")):
        r = run_fscrub(*args, mnt)
        assert r.rc == 0 and r.errors == [], r
    img.offline()
    assert sha256(img.path) == before


def snapshot(paths):
    out = {}
    for p in paths:
        st = os.lstat(p)
        out[p] = (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)
    return out


def all_paths(mnt):
    paths = [mnt]
    for top, dirs, files in os.walk(mnt):
        paths += [os.path.join(top, n) for n in dirs + files]
    return paths


NO_CLONE = {"FSCRUB_DEBUG_NO_CLONE": "1"}


@pytest.mark.parametrize("clone", [True, False], ids=["clone", "no_clone"])
def test_no_timestamp_changes(image_factory, clone):
    """As root, nothing changes: through the clone (read-only, noatime), and
    without it (FSCRUB_DEBUG_NO_CLONE, as on a kernel without open_tree),
    where files and directories are opened O_NOATIME and symlinks are not
    read, since readlink() has no O_NOATIME and under strictatime always
    updates the atime: one symlink.unread info says so."""
    img = image_factory("ext4", size_mb=128)
    img.mkfs()
    mnt = img.mount("strictatime")
    tree = fsimage.make_tree(mnt, deep=False)
    paths = all_paths(mnt)
    assert len(paths) > 1000 and tree["symlink_short"]
    nr_links = len([p for p in paths if os.path.islink(p)])
    time.sleep(1.1)
    before = snapshot(paths)
    r = run_fscrub("-n", "-x", "-v", mnt, env=None if clone else NO_CLONE)
    assert r.rc == 0 and r.errors == [], r
    after = snapshot(paths)
    changed = [p for p in paths if before[p] != after[p]]
    assert changed == [], changed[:10]
    unread = r.of("Info", "symlink.unread")
    if clone:
        assert unread == [], r
    else:
        assert len(unread) == 1 and unread[0].message.startswith(
            "%d of %d symlinks were not read" % (nr_links, nr_links)), r


def test_no_clone_relatime_reads_the_symlinks_it_leaves_alone(image_factory):
    """Under relatime the kernel updates an atime only if it is not after the
    mtime and the ctime (or is a day old): a symlink read since it was made
    is read again unharmed; a fresh one would be touched, so it is not read."""
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    mnt = img.mount("relatime")
    fresh, seen = os.path.join(mnt, "fresh"), os.path.join(mnt, "seen")
    os.symlink("target-a", fresh)
    os.symlink("target-b", seen)
    time.sleep(1.1)
    os.readlink(seen)               # its atime is now after its mtime and ctime
    st = os.lstat(seen)
    assert st.st_atime_ns > st.st_ctime_ns and st.st_atime_ns > st.st_mtime_ns
    time.sleep(1.1)
    # (not os.walk: following a symlink to see whether it is a directory
    # updates its atime too)
    paths = [mnt, os.path.join(mnt, "lost+found"), fresh, seen]
    before = snapshot(paths)
    r = run_fscrub("-n", "-v", mnt, env=NO_CLONE)
    assert r.rc == 0 and r.errors == [], r
    assert snapshot(paths) == before
    unread = r.of("Info", "symlink.unread")
    assert len(unread) == 1 and unread[0].message.startswith(
        "1 of 2 symlinks were not read"), r


NOBODY = 65534


def test_unprivileged_run_changes_only_the_atimes_it_cannot_keep(workdir, cleanups):
    """Run as nobody over a tree it can read, on a strictatime tmpfs: O_NOATIME
    is allowed only to an inode's owner, so the directories nobody does not
    own (and with -x their files) may get a new atime; its own directories
    and files, and every symlink (not read), must not, whichever order the
    walk opens them in."""
    need_tools("setpriv")
    os.chmod(workdir, 0o755)
    fs = fsimage.make_tmpfs(workdir, "t", size_mb=32, populate=False,
                            options="strictatime,mode=755")
    cleanups.append(fs.cleanup)
    mnt = fs.mnt
    for d in ("rootdir", "rootdir/mine/sub/deeper", "rootdir/mine/other", "zroot"):
        os.makedirs(os.path.join(mnt, d), exist_ok=True)
    for d in ("rootdir", "rootdir/mine", "rootdir/mine/sub", "zroot"):
        with open(os.path.join(mnt, d, "file"), "w") as f:
            f.write("data of %s\n" % d)
        os.symlink("file", os.path.join(mnt, d, "link"))
    for top, dirs, files in os.walk(os.path.join(mnt, "rootdir", "mine")):
        for n in dirs + files + [""]:
            os.lchown(os.path.join(top, n), NOBODY, NOBODY)
    paths = all_paths(mnt)
    time.sleep(1.1)
    before = snapshot(paths)
    p = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                        "--clear-groups", FSCRUB, "-n", "-x", "-v", mnt],
                       capture_output=True, text=True, timeout=300)
    check_sanitizers(p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    after = snapshot(paths)
    changed = {q for q in paths if before[q] != after[q]}
    others = {q for q in paths if os.lstat(q).st_uid != NOBODY and not os.path.islink(q)}
    assert changed <= others, sorted(changed - others)
    assert [q for q in changed if before[q][1:] != after[q][1:]] == []     # mtime, ctime
    assert "4 of 4 symlinks were not read" in p.stdout, p.stdout


def test_lazy_unmount_during_scan(big_fs):
    """umount -l while phase 5 reads the data: exit 8, said.  --limit keeps
    phase 5 at least 6 s long (768 MiB at 128 MiB/s), so that it is still
    reading when the SIGSTOP comes (on a fast, idle disk it once finished
    first)."""
    p = subprocess.Popen([FSCRUB, "-v", "-x", "-j", "1", "--limit", "128M", big_fs],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("Phase 5: Verify file data."):
            p.send_signal(signal.SIGSTOP)
            break
    subprocess.run(["umount", "-l", big_fs], check=True)
    p.send_signal(signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    check_sanitizers(err)
    assert p.returncode == 8, out + err
    assert "the filesystem was unmounted during the scan" in err
