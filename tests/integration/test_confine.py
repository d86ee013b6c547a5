"""Least privilege (src/scan/confine.c): once phase 1 has opened the mount, its
devices and the run history, a scan keeps five capabilities, may write
only in the directories it writes its results to, and cannot run a
program, mount, trace or load a module -- so that a parser bug reached by
a crafted image cannot do what a root shell could.

The process is frozen mid-walk (SIGSTOP at its first phase 3 progress
line) and its /proc status read; FSCRUB_DEBUG_CONFINE_PROBE makes the
confined process try a write and an exec and say (-v) what came of them."""

import os
import re
import subprocess

import pytest

from conftest import FSCRUB, check_sanitizers, need_fs, need_tools, run_fscrub, scan_paused
import fsimage

# CAP_DAC_READ_SEARCH 2, CAP_FOWNER 3, CAP_SYS_RAWIO 17, CAP_SYS_ADMIN 21, CAP_SYSLOG 34.
KEPT = (1 << 2) | (1 << 3) | (1 << 17) | (1 << 21) | (1 << 34)


@pytest.fixture(scope="module")
def mounted():
    need_fs("ext4")
    with fsimage.scratch_image("fscrub-confine-", "ext4", size_mb=64) as img:
        img.mkfs()
        mnt = img.mount()
        fsimage.make_tree(mnt, deep=False)
        yield mnt
        img.offline()


def status_mid_walk(mnt, *args):
    """fscrub's /proc/PID/status fields, read while it is frozen in phase 3."""
    fields = {}

    def read_status(pid):
        with open("/proc/%d/status" % pid) as f:
            fields.update(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
    r = scan_paused(list(args) + [mnt], lambda phase, done: phase >= 3, read_status)
    return fields, r


def test_capabilities_left_mid_scan(mounted, tmp_path):
    fields, r = status_mid_walk(mounted, "-v", "-n", "--state-dir", str(tmp_path))
    assert r.rc == 0, r
    assert fields, "no phase 3 progress line came"
    assert int(fields["CapEff"], 16) == KEPT, fields
    assert int(fields["CapPrm"], 16) == KEPT, fields
    assert int(fields["CapBnd"], 16) == KEPT, fields
    assert int(fields["CapAmb"], 16) == 0, fields
    assert fields["NoNewPrivs"].strip() == "1", fields
    assert fields["Seccomp"].strip() == "2", fields
    line = re.search(r"^Phase 1: confined: (.*)$", r.stdout, re.M)
    assert line, r
    assert "capabilities left: sys_admin dac_read_search fowner sys_rawio syslog" in line.group(1)


def probe(mnt, target, *args):
    r = run_fscrub("-v", "-n", *args, mnt, env={"FSCRUB_DEBUG_CONFINE_PROBE": target})
    assert r.rc == 0, r
    m = re.search(r"^Phase 1: confinement probe: writing (.*): (.*); running /bin/true: (.*)$",
                  r.stdout, re.M)
    assert m and m.group(1) == target, r
    return m.group(2), m.group(3)


def test_no_write_outside_the_result_directories(mounted, tmp_path):
    """The probe's write outside the state directory, the ledger's and the
    outputs' is refused, and nothing is made; no program can be run."""
    state = tmp_path / "state"
    state.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wrote, ran = probe(mounted, str(elsewhere / "x"), "--state-dir", str(state))
    assert wrote == "Permission denied", wrote
    assert ran == "Operation not permitted", ran
    assert not (elsewhere / "x").exists()
    # Nor in the filesystem being checked.
    wrote, _ = probe(mounted, os.path.join(mounted, "planted"), "--state-dir", str(state))
    assert wrote in ("Permission denied", "Read-only file system"), wrote
    assert not os.path.exists(os.path.join(mounted, "planted"))


def test_writes_in_the_result_directories_still_work(mounted, tmp_path):
    """The run history, the JSON report and the metrics file are written
    in their directories, each its own."""
    state, out, prom = tmp_path / "state", tmp_path / "out", tmp_path / "prom"
    for d in (state, out, prom):
        d.mkdir()
    wrote, _ = probe(mounted, str(state / "x"), "--state-dir", str(state),
                     "--json", str(out / "r.json"), "--metrics", str(prom / "m.prom"))
    assert wrote == "allowed", wrote
    assert (out / "r.json").stat().st_size > 0
    assert (prom / "m.prom").stat().st_size > 0
    assert any(p.name.endswith(".sqlite") or p.name.startswith("state") for p in state.iterdir())
    r = run_fscrub("-v", "-n", "--state-dir", str(state), "--json", str(out / "r.json"),
                   mounted)
    assert r.rc == 0, r
    # The JSON report's directory is allowed, and no other: not the metrics one.
    assert re.search(r"^Phase 1: confined: Landlock ABI \d+: writes only in %s %s;" %
                     (re.escape(str(state)), re.escape(str(out))), r.stdout, re.M), r


def test_within_the_units_bounding_set_no_capset(mounted, tmp_path):
    """Under fscrub@.service's bounding set (no CAP_SYSLOG, no CAP_SETPCAP)
    fscrub holds no capability it would drop: it makes no capset(2) call,
    which the unit's system call filter refuses (~@privileged)."""
    need_tools("setpriv", "strace")
    trace = tmp_path / "trace"
    cmd = ["setpriv", "--bounding-set", "-all,+sys_admin,+dac_read_search,+fowner,+sys_rawio",
           "--no-new-privs", "--", "strace", "-f", "-qq", "-e", "trace=capset", "-o", str(trace),
           FSCRUB, "-v", "-n", "--no-state", mounted]
    # LeakSanitizer cannot stop the world under strace: no leak check here.
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    check_sanitizers(p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "capabilities: none beyond those kept" in p.stdout, p.stdout
    assert "capset(" not in trace.read_text(), trace.read_text()
