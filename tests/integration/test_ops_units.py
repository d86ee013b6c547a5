"""The systemd units, fscrub-fail and the install rules.

The units are generated and installed by meson itself (a temporary build
directory and prefix, `meson install --tags ops,man`, which needs nothing
compiled), so what is verified is what gets installed.  systemd is not
necessarily PID 1 where the suite runs (it is not on the project's
machines): then the units are checked with `systemd-analyze verify` and
`systemd-analyze security --offline`, and fscrub@.service's sandbox is
rebuilt by hand around a real fscrub -- a private mount namespace with
everything read-only (ProtectSystem=strict), the unit's capability
bounding set and no_new_privs (setpriv), the idle CPU class (chrt) -- and
each capability in the set is dropped in turn to show what needs it.
The system call filter is checked against an strace of fscrub.
"""

import os
import pwd
import re
import shutil
import subprocess
import time

import pytest

from conftest import FSCRUB, TOP, check_sanitizers, need_root, need_tools
import fsimage

UNITS = ["fscrub@.service", "fscrub-fail@.service", "fscrub_all.service", "fscrub_all.timer",
         "fscrub-watch.service"]


def sh(cmd, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s -> %d\n%s%s" % (cmd, p.returncode, p.stdout, p.stderr))
    return p


def project_version():
    with open(os.path.join(TOP, "meson.build")) as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


class Installed:
    def __init__(self, base):
        self.base = base
        self.build = os.path.join(base, "build")
        self.prefix = os.path.join(base, "prefix")
        self.unitdir = os.path.join(self.prefix, "lib", "systemd", "system")
        self.sbin = os.path.join(self.prefix, "sbin")
        self.fail = os.path.join(self.prefix, "libexec", "fscrub", "fscrub-fail")
        self.default = os.path.join(self.prefix, "etc", "default", "fscrub")

    def unit(self, name):
        return os.path.join(self.unitdir, name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """meson setup + install --tags ops,man into a private prefix; the
    fscrub under test is linked in as PREFIX/sbin/fscrub, so that the
    units' ExecStart= paths exist."""
    need_tools("meson")
    inst = Installed(str(tmp_path_factory.mktemp("ops")))
    sh(["meson", "setup", inst.build, TOP, "--prefix=" + inst.prefix,
        "-Dsystemdsystemunitdir=" + inst.unitdir])
    sh(["meson", "install", "-C", inst.build, "--no-rebuild", "--quiet", "--tags", "ops,man"])
    os.symlink(os.path.abspath(FSCRUB), os.path.join(inst.sbin, "fscrub"))
    return inst


def read_unit(path):
    """{(section, key): [values]} of a unit file (continuation lines and
    repeated keys kept)."""
    out, section, pending = {}, None, ""
    with open(path) as f:
        for raw in f:
            line = pending + raw.rstrip("\n")
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if s.startswith("["):
                section = s.strip("[]")
                continue
            k, _, v = s.partition("=")
            out.setdefault((section, k.strip()), []).append(v.strip())
    return out


def test_install_layout(installed):
    i = installed
    for path in [os.path.join(i.sbin, "fscrub_all"), i.fail]:
        assert os.stat(path).st_mode & 0o777 == 0o755, path
    for name in UNITS:
        assert os.path.isfile(i.unit(name)), name
    assert os.path.isfile(i.default)
    for man in ("fscrub.8", "fscrub_all.8"):
        assert os.path.isfile(os.path.join(i.prefix, "share", "man", "man8", man))
    generated = [os.path.join(i.sbin, "fscrub_all"), i.fail, i.default] + \
        [i.unit(u) for u in UNITS]
    for path in generated:
        with open(path) as f:
            text = f.read()
        assert not re.search(r"@[a-z_]+@", text), "unsubstituted in %s" % path
    with open(i.unit("fscrub@.service")) as f:
        assert "ExecStart=%s/fscrub -b --resume $FSCRUB_OPTIONS %%f" % i.sbin in f.read()
    p = sh([os.path.join(i.sbin, "fscrub_all"), "-V"])
    assert p.stdout == "fscrub_all version %s\n" % project_version()
    p = sh([os.path.join(i.sbin, "fscrub"), "-V"])
    assert project_version() in p.stdout


def test_install_paths_by_default_and_disabled(tmp_path):
    """Without options the units go to systemd.pc's unit directory (or
    /lib/systemd/system); -Dsystemd=disabled installs none of them."""
    need_tools("meson")
    import json
    want = sh(["pkg-config", "--variable=systemdsystemunitdir", "systemd"],
              check=False).stdout.strip() or "/lib/systemd/system"
    for opts, units in (([], True), (["-Dsystemd=disabled"], False)):
        b = str(tmp_path / ("b%d" % len(opts)))
        sh(["meson", "setup", b, TOP, "--prefix=/usr"] + opts)
        inst = json.loads(sh(["meson", "introspect", "--installed", b]).stdout)
        dests = set(inst.values())
        assert "/usr/sbin/fscrub_all" in dests and "/usr/sbin/fscrub" in dests
        assert "/usr/share/man/man8/fscrub_all.8" in dests
        for u in UNITS:
            assert (os.path.join(want, u) in dests) == units, (u, dests)
        assert ("/etc/default/fscrub" in dests) == units
        assert ("/usr/libexec/fscrub/fscrub-fail" in dests) == units


# ----------------------------------------------------------------------------
# systemd-analyze
# ----------------------------------------------------------------------------

def verify(path):
    """systemd-analyze verify; the lines it printed about our units."""
    p = sh(["systemd-analyze", "verify", "--man=no", path], check=False)
    ours = [line for line in (p.stdout + p.stderr).splitlines()
            if "fscrub" in line or os.path.dirname(path) in line]
    return p.returncode, ours


@pytest.mark.parametrize("unit", ["fscrub@.service", "fscrub@home.service", "fscrub@-.service",
                                  "fscrub@srv-data\\x2d1.service", "fscrub-fail@home.service",
                                  "fscrub-fail@.service", "fscrub_all.service",
                                  "fscrub_all.timer", "fscrub-watch.service"])
def test_systemd_analyze_verify(installed, unit):
    need_tools("systemd-analyze")
    rc, ours = verify(installed.unit(unit))
    assert rc == 0 and not ours, "\n".join(ours)


def test_verify_would_catch_mistakes(installed, tmp_path):
    """The check above is not vacuous: a bad key or a missing binary shows."""
    need_tools("systemd-analyze")
    d = tmp_path / "units"
    d.mkdir()
    with open(installed.unit("fscrub@.service")) as f:
        text = f.read()
    bad = d / "fscrub@.service"
    bad.write_text(text.replace("ProtectSystem=strict", "ProtectSytem=strict"))
    rc, ours = verify(str(d / "fscrub@home.service"))
    assert any("Unknown key" in line for line in ours), ours
    bad.write_text(text.replace(installed.sbin + "/fscrub ", "/nonexistent/fscrub "))
    rc, ours = verify(str(d / "fscrub@home.service"))
    assert rc != 0 and any("not executable" in line for line in ours), ours


def test_references_resolve(installed):
    """What the units name exists: verify does not check OnFailure= targets."""
    u = read_unit(installed.unit("fscrub@.service"))
    [onfail] = u[("Unit", "OnFailure")]
    assert onfail == "fscrub-fail@%i.service"
    assert os.path.isfile(installed.unit("fscrub-fail@.service"))
    t = read_unit(installed.unit("fscrub_all.timer"))
    assert ("Timer", "Unit") not in t and os.path.isfile(installed.unit("fscrub_all.service"))
    for name in UNITS[:3]:
        for cmd in read_unit(installed.unit(name))[("Service", "ExecStart")]:
            exe = cmd.split()[0]
            assert os.access(exe, os.X_OK), (name, exe)
        envfile = read_unit(installed.unit(name))[("Service", "EnvironmentFile")]
        assert envfile == ["-" + installed.default], envfile


def test_scrub_unit_settings(installed):
    u = read_unit(installed.unit("fscrub@.service"))
    want = {"ProtectSystem": "strict", "ProtectHome": "read-only", "PrivateNetwork": "yes",
            "NoNewPrivileges": "yes", "CPUSchedulingPolicy": "idle",
            "IOSchedulingClass": "idle", "Nice": "19", "Type": "oneshot",
            "SuccessExitStatus": "32", "KillSignal": "SIGTERM", "TimeoutStopSec": "90s"}
    for k, v in want.items():
        assert u[("Service", k)] == [v], k
    [cmd] = u[("Service", "ExecStart")]
    assert cmd.split()[1] == "-b" and cmd.split()[-1] == "%f"
    caps = set(u[("Service", "CapabilityBoundingSet")][0].split())
    assert caps == set(CAP_EFFECTS), caps
    a = read_unit(installed.unit("fscrub_all.service"))
    assert a[("Service", "ExecStart")] == [
        installed.sbin + "/fscrub_all --systemd $FSCRUB_ALL_OPTIONS"]
    assert a[("Service", "KillMode")] == ["mixed"]


def test_security_exposure(installed):
    """systemd's own score of the sandbox: "OK" or better (below 4.0)."""
    need_tools("systemd-analyze")
    p = sh(["systemd-analyze", "security", "--offline=yes", "--no-pager",
            installed.unit("fscrub@home.service")], check=False)
    m = re.search(r"Overall exposure level for fscrub@home.service: ([\d.]+) (\w+)",
                  p.stdout + p.stderr)
    if m is None and "offline" in p.stderr:
        pytest.skip("this systemd-analyze has no security --offline")
    assert m, p.stdout + p.stderr
    assert float(m.group(1)) < 3.0, p.stdout


def test_timer_is_weekly(installed):
    need_tools("systemd-analyze")
    t = read_unit(installed.unit("fscrub_all.timer"))
    assert t[("Timer", "Persistent")] == ["true"]
    assert t[("Timer", "RandomizedDelaySec")] == ["1h"]
    assert t[("Install", "WantedBy")] == ["timers.target"]
    [cal] = t[("Timer", "OnCalendar")]
    p = sh(["systemd-analyze", "calendar", "--iterations=4", cal],
           env=dict(os.environ, TZ="UTC"))
    stamps = re.findall(r"(?:Next elapse|Iter\. #\d+): \w+ (\S+ \S+) UTC", p.stdout)
    times = [time.mktime(time.strptime(s, "%Y-%m-%d %H:%M:%S")) for s in stamps]
    assert len(times) == 4, p.stdout
    assert all(b - a == 7 * 86400 for a, b in zip(times, times[1:])), p.stdout


# ----------------------------------------------------------------------------
# the sandbox, rebuilt around a real fscrub
# ----------------------------------------------------------------------------

def sanitized(binary):
    p = sh(["ldd", binary], check=False)
    return "libasan" in p.stdout or "libubsan" in p.stdout


@pytest.fixture(scope="module")
def scrub_fs():
    """An ext4 with the awkward tree, a directory only 'nobody' may enter
    (mode 000) and a file of nobody's with its atime before its mtime (so
    that a read without O_NOATIME would update it, relatime or not)."""
    need_root()
    need_tools("mkfs.ext4", "unshare", "setpriv", "chrt")
    import tempfile
    d = tempfile.mkdtemp(prefix="fscrub-units-")
    img = fsimage.Image(d, "ext4", size_mb=96)
    try:
        img.mkfs()
        img.mount()
        fsimage.make_tree(img.mnt, deep=False)
        nobody = pwd.getpwnam("nobody").pw_uid
        locked = os.path.join(img.mnt, "locked")
        os.makedirs(os.path.join(locked, "inner"))
        with open(os.path.join(locked, "inner", "secret"), "w") as f:
            f.write("only nobody reads this\n" * 100)
        for p in (locked, os.path.join(locked, "inner"), os.path.join(locked, "inner", "secret")):
            os.chown(p, nobody, nobody)
            os.chmod(p, 0)
        img.owned = os.path.join(img.mnt, "nobodys-file")
        with open(img.owned, "w") as f:
            f.write("data\n" * 1000)
        os.chown(img.owned, nobody, nobody)
        img.remount()
        time.sleep(1.1)     # fscrub treats inodes changed < 1 s before the scan as in flux
        yield img
    finally:
        img.cleanup(remove=True)
        shutil.rmtree(d, ignore_errors=True)


def unit_caps(installed):
    u = read_unit(installed.unit("fscrub@.service"))
    return u[("Service", "CapabilityBoundingSet")][0].split()


def setpriv_caps(caps):
    return ",".join(["-all"] + ["+" + c[len("CAP_"):].lower() for c in caps])


def sandboxed(mnt, caps, args=(), env=None, readonly=True):
    """fscrub -b ARGS MNT the way fscrub@.service runs it: a private mount
    namespace (slave, like systemd's) with / and the filesystem remounted
    read-only, only CAPS in the bounding set, no_new_privs, SCHED_IDLE.
    The unit's StateDirectory= is a writable /var/lib/fscrub: here an
    empty tmpfs there, so the run is recorded without touching the host's."""
    script = 'set -e; if [ "$RO" = 1 ]; then mkdir -p /var/lib/fscrub; ' \
             'mount -t tmpfs -o mode=0700 fscrub-state /var/lib/fscrub; ' \
             'mount -o remount,bind,ro /; ' \
             'mount -o remount,bind,ro "$1"; fi; shift; exec "$@"'
    cmd = ["unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", script, "sh", mnt,
           "setpriv", "--bounding-set", setpriv_caps(caps), "--no-new-privs", "--",
           "chrt", "--idle", "0", FSCRUB, "-b"] + list(args) + [mnt]
    # systemd sets STATE_DIRECTORY for a unit with StateDirectory= (the suite
    # points it elsewhere for its other runs: conftest.py).
    e = dict(os.environ, RO="1" if readonly else "0", STATE_DIRECTORY="/var/lib/fscrub")
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=600)
    check_sanitizers(p.stderr)
    return p


def test_sandbox_like_the_unit(installed, scrub_fs):
    p = sandboxed(scrub_fs.mnt, unit_caps(installed), ["-v", "-x"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^Phase 1: walking a private .*clone", p.stdout, re.M), p.stdout
    assert "cannot" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert "%s: 0 errors and " % scrub_fs.mnt in p.stdout      # the awkward names warn
    # and nothing could have been written: the namespace was read-only
    assert not os.path.exists(os.path.join(scrub_fs.mnt, "written"))


def test_unit_gives_a_state_directory(installed):
    """fscrub records its runs in /var/lib/fscrub (fscrub(8), RUN HISTORY):
    under ProtectSystem=strict only a StateDirectory= is writable."""
    u = read_unit(installed.unit("fscrub@.service"))
    assert u[("Service", "StateDirectory")] == ["fscrub"], u
    assert u[("Service", "StateDirectoryMode")] == ["0700"], u


def _atime_reset(path):
    st = os.stat(path)
    os.utime(path, (st.st_mtime - 3600, st.st_mtime))
    time.sleep(1.1)     # the ctime just changed: let it age past the in-flux window
    return os.stat(path).st_atime


def _effect_sys_admin(fs, caps):
    p = sandboxed(fs.mnt, caps, ["-v"])
    return "cannot clone the mount" in p.stdout, p


def _effect_dac_read_search(fs, caps):
    p = sandboxed(fs.mnt, caps, ["-x"])
    return p.returncode == 8 and "Permission denied" in p.stderr, p


def _effect_fowner(fs, caps):
    # Through the clone (read-only, noatime) no atime can change anyway:
    # CAP_FOWNER is what keeps the fallback walk of the mount itself clean.
    # The device-order reader opens no files, so force the per-file reader
    # (what runs wherever the device cannot be read), which opens every file.
    before = _atime_reset(fs.owned)
    p = sandboxed(fs.mnt, caps, ["-x"], readonly=False,
                  env={"FSCRUB_DEBUG_NO_CLONE": "1", "FSCRUB_DEBUG_NO_DEVREAD": "1"})
    return os.stat(fs.owned).st_atime != before, p


def _effect_sys_rawio(fs, caps):
    p = sandboxed(fs.mnt, caps, ["-v"], env={"FSCRUB_DEBUG_NO_FIEMAP": "1"})
    return "FIBMAP fails too" in p.stdout, p


CAP_EFFECTS = {"CAP_SYS_ADMIN": _effect_sys_admin,
               "CAP_DAC_READ_SEARCH": _effect_dac_read_search,
               "CAP_FOWNER": _effect_fowner,
               "CAP_SYS_RAWIO": _effect_sys_rawio}


@pytest.mark.parametrize("cap", sorted(CAP_EFFECTS))
def test_each_capability_is_needed(installed, scrub_fs, cap):
    caps = unit_caps(installed)
    effect = CAP_EFFECTS[cap]
    broken, p = effect(scrub_fs, [c for c in caps if c != cap])
    assert broken, "without %s:\n%s%s" % (cap, p.stdout, p.stderr)
    broken, p = effect(scrub_fs, caps)
    assert not broken, "with the unit's set:\n%s%s" % (p.stdout, p.stderr)


def test_dac_override_is_not_needed(installed, scrub_fs):
    """Left out of the set: with it, fscrub reads exactly the same."""
    caps = unit_caps(installed)
    assert "CAP_DAC_OVERRIDE" not in caps
    a = sandboxed(scrub_fs.mnt, caps, ["-v", "-x"])
    b = sandboxed(scrub_fs.mnt, caps + ["CAP_DAC_OVERRIDE"], ["-v", "-x"])
    assert a.returncode == b.returncode == 0, a.stdout + a.stderr

    def findings(out):      # the same checks and counts; timings aside
        return [line for line in out.splitlines() if not line.startswith("Phase")]
    assert findings(a.stdout) == findings(b.stdout) and a.stderr == b.stderr


# ----------------------------------------------------------------------------
# the system call filter
# ----------------------------------------------------------------------------

def syscall_groups():
    out = sh(["systemd-analyze", "syscall-filter", "--no-pager"]).stdout
    groups, cur = {}, None
    for line in out.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if not line[0].isspace():
            cur = groups.setdefault(s, [])
        elif cur is not None:
            cur.append(s)

    def expand(name, seen=()):
        if not name.startswith("@"):
            return {name}
        out = set()
        for x in groups[name]:
            if x not in seen:
                out |= expand(x, seen + (name,))
        return out
    return expand


def strace_syscalls(args, env=None, pass_fds=()):
    import tempfile
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
        e = dict(os.environ)
        e.update(env or {})
        subprocess.run(["strace", "-f", "-qq", "-c", "-o", log.name, FSCRUB] + list(args),
                       capture_output=True, env=e, pass_fds=pass_fds, timeout=600)
        names = set()
        for line in log.read().splitlines():
            f = line.split()
            if f and re.fullmatch(r"[a-z_0-9]+", f[-1]) and f[-1] not in ("total", "syscall"):
                names.add(f[-1])
    return names


def test_syscall_filter_covers_fscrub(installed, scrub_fs, tmp_path):
    need_tools("strace", "systemd-analyze")
    if sanitized(FSCRUB):
        pytest.skip("%s is a sanitizer build: its runtime's system calls are not fscrub's"
                    % FSCRUB)
    u = read_unit(installed.unit("fscrub@.service"))
    expand = syscall_groups()
    allowed, denied = set(), set()
    for value in u[("Service", "SystemCallFilter")]:
        deny = value.startswith("~")
        for name in value.lstrip("~").split():
            (denied if deny else allowed).update(expand(name))
    allowed -= denied
    mnt = scrub_fs.mnt
    progress = open(tmp_path / "progress", "w")
    try:
        used = set()
        for args, env, fds in [
                (["-b", "-v", "-x", "-T", mnt], None, ()),
                (["-d", "-j", "2", "-x", "--json", str(tmp_path / "r.json"),
                  "--metrics", str(tmp_path / "m.prom"), "-C", str(progress.fileno()), mnt],
                 None, (progress.fileno(),)),
                (["-v", mnt], {"FSCRUB_DEBUG_NO_FIEMAP": "1"}, ()),
                (["-v", mnt], {"FSCRUB_DEBUG_NO_CLONE": "1"}, ()),
                (["-V"], None, ()),
                (["/nonexistent"], None, ())]:
            used |= strace_syscalls(args, env, fds)
    finally:
        progress.close()
    assert "open_tree" in used and "getdents64" in used, sorted(used)
    # capset(2): run by hand as root, fscrub drops the capabilities it does
    # not keep (confine.c); under the unit its bounding set holds no more
    # than those, and it makes no such call (test_confine.py checks both).
    used.discard("capset")
    assert used <= allowed, "called but not allowed: %s" % sorted(used - allowed)


# ----------------------------------------------------------------------------
# fscrub-fail and /etc/default/fscrub
# ----------------------------------------------------------------------------

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
echo "x fscrub@srv-data\\\\x2d1.service - Online filesystem scrub of /srv/data-1"
echo "     Active: failed (Result: exit-code)"
echo "Error: /srv/data-1/f (inode 12): link count is 5 but 1 names were found [nlink.count]"
exit 3
"""


@pytest.fixture
def fail_env(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "systemctl").write_text(FAKE_SYSTEMCTL)
    os.chmod(bindir / "systemctl", 0o755)
    log = tmp_path / "systemctl.log"
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), FAKE_LOG=str(log))
    return env, log


def test_fscrub_fail_logs_and_notifies(installed, fail_env, tmp_path):
    need_tools("systemd-escape")
    env, log = fail_env
    got = tmp_path / "notified"
    env["FSCRUB_NOTIFY"] = 'cat > %s; env | grep "^FSCRUB_" | sort >> %s.env' % (got, got)
    p = sh([installed.fail, "srv-data\\x2d1"], env=env)
    host = os.uname().nodename
    assert p.stdout.startswith("The online scrub of /srv/data-1 on %s failed.\n" % host), p.stdout
    assert "[nlink.count]" in p.stdout
    assert log.read_text() == \
        "status --full --no-pager --lines=50 -- fscrub@srv-data\\x2d1.service\n"
    assert got.read_text() == p.stdout
    envs = (tmp_path / "notified.env").read_text().splitlines()
    assert "FSCRUB_UNIT=fscrub@srv-data\\x2d1.service" in envs
    assert "FSCRUB_MOUNTPOINT=/srv/data-1" in envs and "FSCRUB_HOST=%s" % host in envs


def test_fscrub_fail_without_and_with_a_failing_notifier(installed, fail_env):
    env, log = fail_env
    env.pop("FSCRUB_NOTIFY", None)
    p = sh([installed.fail, "home"], env=dict(env, FSCRUB_STATUS_LINES="7"))
    assert "The online scrub of /home on" in p.stdout and p.stderr == ""
    assert "--lines=7" in log.read_text()
    p = sh([installed.fail, "home"], env=dict(env, FSCRUB_NOTIFY="cat >/dev/null; exit 3"),
           check=False)
    assert p.returncode == 1 and "the notifier command exited 3" in p.stderr
    p = sh([installed.fail], env=env, check=False)
    assert p.returncode == 2 and "usage" in p.stderr


def test_default_file(installed):
    """Every setting the units read is there, empty, and the file is valid
    sh as well (the examples too, uncommented)."""
    with open(installed.default) as f:
        text = f.read()
    settings = re.findall(r"^([A-Z_]+)=(.*)$", text, re.M)
    assert dict(settings) == {"FSCRUB_OPTIONS": '""', "FSCRUB_ALL_OPTIONS": '""',
                              "FSCRUB_NOTIFY": '""', "FSCRUB_WATCH_OPTIONS": '""'}
    examples = re.findall(r"^#(FSCRUB_[A-Z_]+=.*)$", text, re.M)
    assert len(examples) >= 3
    for ex in examples:
        sh(["sh", "-n", "-c", ex])
    p = sh(["sh", "-c", '. "$1"; echo "[$FSCRUB_OPTIONS][$FSCRUB_NOTIFY]"', "sh",
            installed.default])
    assert p.stdout == "[][]\n"


# ----------------------------------------------------------------------------
# for real, where systemd runs the machine
# ----------------------------------------------------------------------------

def systemd_is_pid1():
    return os.path.isdir("/run/systemd/system")


def test_unit_runs_for_real(installed, image_factory):
    if not systemd_is_pid1():
        with open("/proc/1/comm") as f:
            pid1 = f.read().strip()
        pytest.skip("systemd is not PID 1 here (it is %r): the units are checked with "
                    "systemd-analyze and a hand-made sandbox instead" % pid1)
    need_root()
    img = image_factory("ext4", size_mb=64)
    img.mkfs()
    img.mount()
    time.sleep(1.1)
    rundir = "/run/systemd/system"
    names = ["fscrub@.service", "fscrub-fail@.service"]
    for n in names:
        shutil.copy(installed.unit(n), os.path.join(rundir, n))
    inst = sh(["systemd-escape", "--path", img.mnt]).stdout.strip()
    unit = "fscrub@%s.service" % inst
    try:
        sh(["systemctl", "daemon-reload"])
        p = sh(["systemctl", "start", unit], check=False)
        show = sh(["systemctl", "show", "-p", "Result", "-p", "ExecMainStatus", unit]).stdout
        assert p.returncode == 0 and "ExecMainStatus=0" in show, show + p.stderr
    finally:
        sh(["systemctl", "stop", unit], check=False)
        sh(["systemctl", "reset-failed", unit], check=False)
        for n in names:
            os.unlink(os.path.join(rundir, n))
        sh(["systemctl", "daemon-reload"], check=False)


# ----------------------------------------------------------------------------
# fscrub-watch.service
# ----------------------------------------------------------------------------

def test_watch_unit_settings(installed):
    u = read_unit(installed.unit("fscrub-watch.service"))
    want = {"Type": "simple", "ProtectSystem": "strict", "ProtectHome": "read-only",
            "PrivateNetwork": "yes", "NoNewPrivileges": "yes", "IOSchedulingClass": "idle",
            "RestrictAddressFamilies": "AF_UNIX", "Restart": "on-failure",
            "RestartPreventExitStatus": "8"}
    for k, v in want.items():
        assert u[("Service", k)] == [v], k
    # its events go to the run history (fscrub(8), RUN HISTORY)
    assert u[("Service", "StateDirectory")] == ["fscrub"], u
    assert u[("Service", "StateDirectoryMode")] == ["0700"], u
    assert u[("Service", "ExecStart")] == [installed.sbin + "/fscrub watch $FSCRUB_WATCH_OPTIONS"]
    assert u[("Service", "EnvironmentFile")] == ["-" + installed.default]
    assert os.access(installed.sbin + "/fscrub", os.X_OK)
    with open(installed.default) as f:
        assert 'FSCRUB_WATCH_OPTIONS=""' in f.read()
    need_tools("systemd-analyze")
    p = sh(["systemd-analyze", "security", "--offline=yes", "--no-pager",
            installed.unit("fscrub-watch.service")], check=False)
    m = re.search(r"Overall exposure level for fscrub-watch.service: ([\d.]+) (\w+)",
                  p.stdout + p.stderr)
    if m is None and "offline" in p.stderr:
        pytest.skip("this systemd-analyze has no security --offline")
    assert m and float(m.group(1)) < 4.0, p.stdout


def test_watch_in_the_units_sandbox(installed, tmp_path):
    """fscrub watch the way fscrub-watch.service runs it (read-only
    namespace, the unit's bounding set, no_new_privs), under strace: a
    corrupted directory read from outside is reported with its path (so
    open_by_handle_at works with these capabilities), recorded in the run
    history (the unit's StateDirectory=: an empty tmpfs at /var/lib/fscrub
    here) and checked, and every system call made is allowed by the unit's
    filter."""
    need_root()
    need_tools("strace", "systemd-analyze", "unshare", "setpriv", "timeout", "debugfs")
    if sanitized(FSCRUB):
        pytest.skip("%s is a sanitizer build: its runtime's system calls are not fscrub's"
                    % FSCRUB)
    from test_watch import corrupt_dir_block, read_dir
    u = read_unit(installed.unit("fscrub-watch.service"))
    caps = u[("Service", "CapabilityBoundingSet")][0].split()
    expand = syscall_groups()
    allowed = set()
    for value in u[("Service", "SystemCallFilter")]:
        assert not value.startswith("~")
        for name in value.split():
            allowed |= expand(name)
    img = fsimage.Image(str(tmp_path), "ext4", size_mb=64)
    try:
        img.mkfs()
        img.mount()
        d = os.path.join(img.mnt, "d")
        os.mkdir(d)
        for i in range(10):
            open(os.path.join(d, "f%d" % i), "w").close()
        os.chown(d, pwd.getpwnam("nobody").pw_uid, -1)     # O_NOATIME needs CAP_FOWNER
        ino = corrupt_dir_block(img, d)
        # strace writes through an fd opened here: the namespace is read-only
        log, err = str(tmp_path / "strace"), str(tmp_path / "err")
        logf = open(log, "w")
        script = 'set -e; mkdir -p /var/lib/fscrub; ' \
                 'mount -t tmpfs -o mode=0700 fscrub-state /var/lib/fscrub; ' \
                 'mount -o remount,bind,ro /; mount -o remount,bind,ro "$1"; ' \
                 'shift; exec "$@"'
        cmd = ["unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", script, "sh",
               img.mnt, "setpriv", "--bounding-set", setpriv_caps(caps), "--no-new-privs",
               "--", "strace", "-f", "-qq", "-c", "-o", "/proc/self/fd/%d" % logf.fileno(),
               "timeout", "4",
               FSCRUB, "watch", "-v", "--on-error", "true", img.mnt]
        with open(err, "w") as errf:
            # STATE_DIRECTORY as systemd sets it for the unit's StateDirectory=
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf,
                                    pass_fds=(logf.fileno(),),
                                    env=dict(os.environ, STATE_DIRECTORY="/var/lib/fscrub"))
        logf.close()
        try:
            deadline = time.monotonic() + 3
            while "FAN_FS_ERROR" not in open(err).read() and time.monotonic() < deadline:
                time.sleep(0.05)
            read_dir(d)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = open(err).read()
        assert "watching %s (ext4): FAN_FS_ERROR" % img.mnt in text, text
        assert "inode %d, path %s\n" % (ino, d) in text, text
        assert "checked %s (inode %d)" % (d, ino) in text, text
        assert "fs_error event recorded in /var/lib/fscrub/state.sqlite" in text, text
        used = set()
        for line in open(log).read().splitlines():
            f = line.split()
            if f and re.fullmatch(r"[a-z_0-9]+", f[-1]) and f[-1] not in ("total", "syscall"):
                used.add(f[-1])
        assert {"fanotify_init", "fanotify_mark", "open_by_handle_at"} <= used, sorted(used)
        assert used <= allowed, "called but not allowed: %s" % sorted(used - allowed)
    finally:
        img.cleanup(remove=True)
