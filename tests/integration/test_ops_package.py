"""The Debian package, end to end: dpkg-buildpackage -us -uc -b in a copy
of the tree under a temporary directory (dpkg-buildpackage writes the .deb
beside the source tree, and dh builds in obj-<triplet>/: neither lands in
the work tree), then dpkg -i, the installed fscrub and fscrub_all run and
the units verify, dpkg -r leaves only the conffile and the run history
(/var/lib/fscrub), dpkg -P nothing (debian/postrm removes the history).
A /var/lib/fscrub that was there before the test is set aside meanwhile
and put back afterwards.

It changes the system's package database, so it runs only when asked:
FSCRUB_TEST_PACKAGE=1, or CI=true (CI sets it).  One build, ~15 s on two
cores; in tests/run's second pass (the sanitizer build under test) it is
skipped, as the package does not depend on which fscrub is under test.
"""

import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import FSCRUB, TOP, need_root, need_tools

PACKAGE = "fscrub"
STATE = "/var/lib/fscrub"


def sh(cmd, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s -> %d\n%s\n%s" % (cmd, p.returncode, p.stdout[-5000:],
                                                 p.stderr[-5000:]))
    return p


def wanted():
    return os.environ.get("FSCRUB_TEST_PACKAGE") == "1" or os.environ.get("CI") == "true"


def installed_state():
    p = sh(["dpkg-query", "-W", "-f", "${Status}", PACKAGE], check=False)
    return p.stdout.strip() if p.returncode == 0 else "not-installed"


def copy_tree(dst):
    """The source tree without build directories, VCS data and caches."""
    top_skip = re.compile(r"^(build.*|obj-.*|\.git)$")

    def ignore(d, names):
        top = os.path.samefile(d, TOP)
        return [n for n in names if (top and top_skip.match(n)) or
                n in ("__pycache__", ".pytest_cache")]
    shutil.copytree(TOP, dst, symlinks=True, ignore=ignore)


def project_version():
    with open(os.path.join(TOP, "meson.build")) as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


def test_build_install_remove(tmp_path):
    if not wanted():
        pytest.skip("changes the system's package database: set FSCRUB_TEST_PACKAGE=1 "
                    "(CI sets CI=true) to build, install and remove the .deb")
    need_root()
    need_tools("dpkg-buildpackage", "dh", "dpkg", "dpkg-deb")
    if re.search(r"lib(a|ub)san", sh(["ldd", FSCRUB], check=False).stdout):
        pytest.skip("the package is built and tested once, in the pass with the plain build "
                    "(%s is a sanitizer build)" % FSCRUB)
    if installed_state() != "not-installed":
        pytest.skip("a %s package is on this system already (%s): not replacing it"
                    % (PACKAGE, installed_state()))
    before = set(os.listdir(TOP))

    src = str(tmp_path / "fscrub")
    copy_tree(src)
    p = sh(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, check=False, timeout=1800)
    assert p.returncode == 0, "dpkg-buildpackage failed:\n%s\n%s" % (p.stdout[-8000:],
                                                                    p.stderr[-4000:])
    debs = [d for d in glob.glob(str(tmp_path / "fscrub_*.deb")) if "dbgsym" not in d]
    assert len(debs) == 1, os.listdir(tmp_path)
    deb = debs[0]
    assert sh(["dpkg-deb", "-f", deb, "Version"]).stdout.strip() == project_version() + "-1"
    listing = sh(["dpkg-deb", "-c", deb]).stdout
    files = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    unitdir = sh(["pkg-config", "--variable=systemdsystemunitdir", "systemd"],
                 check=False).stdout.strip() or "/lib/systemd/system"
    for f in ["/usr/sbin/fscrub", "/usr/sbin/fscrub_all", "/etc/default/fscrub",
              "/usr/share/man/man8/fscrub.8.gz", "/usr/share/man/man8/fscrub_all.8.gz"] + \
            [unitdir + "/" + u for u in ("fscrub@.service", "fscrub-fail@.service",
                                         "fscrub_all.service", "fscrub_all.timer",
                                         "fscrub-watch.service")]:
        assert f in files, (f, sorted(files))
    ctl = tmp_path / "control"
    sh(["dpkg-deb", "-e", deb, str(ctl)])
    assert (ctl / "conffiles").read_text().split() == ["/etc/default/fscrub"]
    postinst = (ctl / "postinst").read_text()
    assert "fscrub_all.timer" in postinst and "'fscrub_all.service'" not in postinst, \
        "installing must not start a scrub"

    assert "rm -rf /var/lib/fscrub" in (ctl / "postrm").read_text()

    saved = None
    if os.path.lexists(STATE):
        saved = "%s.saved-by-test-%d" % (STATE, os.getpid())     # same filesystem
        os.rename(STATE, saved)
    try:
        sh(["dpkg", "-i", deb])
        assert installed_state() == "install ok installed"
        p = sh(["/usr/sbin/fscrub", "-V"])
        assert p.stdout.strip() == "fscrub version %s" % project_version()
        p = sh(["/usr/sbin/fscrub_all", "-V"])
        assert p.stdout.strip() == "fscrub_all version %s" % project_version()
        p = sh(["/usr/sbin/fscrub_all", "-n"])          # the real table, dry run
        assert p.stdout.startswith("fscrub_all: "), p.stdout
        for u in ("fscrub@.service", "fscrub-fail@.service", "fscrub_all.service",
                  "fscrub_all.timer"):
            assert os.path.isfile(os.path.join(unitdir, u)), u
        if shutil.which("systemd-analyze"):
            for u in ("fscrub@home.service", "fscrub-fail@home.service",
                      "fscrub_all.service", "fscrub_all.timer"):
                p = sh(["systemd-analyze", "verify", "--man=no", os.path.join(unitdir, u)],
                       check=False)
                ours = [line for line in (p.stdout + p.stderr).splitlines() if "fscrub" in line]
                assert p.returncode == 0 and not ours, ours
        with open(os.path.join(unitdir, "fscrub@.service")) as f:
            assert "ExecStart=/usr/sbin/fscrub -b --resume $FSCRUB_OPTIONS %f" in f.read()
        assert os.path.islink("/etc/systemd/system/timers.target.wants/fscrub_all.timer")
        owned = [f for f in sh(["dpkg-query", "-L", PACKAGE]).stdout.splitlines()
                 if os.path.isfile(f) and f != "/etc/default/fscrub"]
        # a run of the installed fscrub records itself in the system's store
        tmpfs = str(tmp_path / "tmpfs")
        os.mkdir(tmpfs)
        sh(["mount", "-t", "tmpfs", "fscrub-pkg", tmpfs])
        try:
            env = {k: v for k, v in os.environ.items() if k != "STATE_DIRECTORY"}
            sh(["/usr/sbin/fscrub", "-n", tmpfs], env=env)
        finally:
            sh(["umount", tmpfs])
        assert os.path.isfile(os.path.join(STATE, "state.sqlite"))

        sh(["dpkg", "-r", PACKAGE])
        assert installed_state() == "deinstall ok config-files"
        assert [f for f in owned if os.path.lexists(f)] == []
        assert os.path.isfile("/etc/default/fscrub")          # a conffile stays until purge
        assert os.path.isfile(os.path.join(STATE, "state.sqlite"))    # and the history

        sh(["dpkg", "-P", PACKAGE])
        assert installed_state() == "not-installed"
        assert not os.path.exists("/etc/default/fscrub")
        assert not os.path.lexists(STATE)
        left = sh(["find", "/etc/systemd", "/var/lib/systemd", "-name", "*fscrub*"],
                  check=False).stdout.split()
        assert left == [], left
    finally:
        if installed_state() != "not-installed":
            sh(["dpkg", "-P", PACKAGE], check=False)
        if saved:
            shutil.rmtree(STATE, ignore_errors=True)
            os.rename(saved, STATE)
    assert set(os.listdir(TOP)) == before, "the build wrote into the work tree"
