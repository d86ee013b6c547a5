"""SIGINT/SIGTERM stop a scan cleanly with exit status 32 and a partial
summary; -b really runs at nice 19 in the idle I/O class.  The scan is
caught mid-way by waiting for its "Phase 5" line (-v) and freezing it
with SIGSTOP before the signal under test is sent."""

import os
import signal
import subprocess

import pytest

from conftest import FSCRUB, check_sanitizers, need_tools, SUMMARY


def start_and_freeze(*args):
    """Start fscrub -v -x ..., stop it as soon as phase 5 begins."""
    p = subprocess.Popen([FSCRUB, "-v", "-x"] + list(args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out = []
    for line in p.stdout:
        out.append(line)
        if line.startswith("Phase 5: Verify file data."):
            p.send_signal(signal.SIGSTOP)
            return p, out
    p.wait()
    pytest.fail("fscrub ended before phase 5:\n" + "".join(out))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_cancels_with_partial_summary(big_fs, sig):
    # Phase 5 held to about 4 s (768 MiB at 200 MB/s): unlimited, the
    # image's data comes from the page cache in a quarter of a second,
    # and a test process slow to be scheduled (the other worker's test
    # busy) sent SIGSTOP after phase 6 had begun.
    p, out = start_and_freeze("-j", "1", "--limit", "200M", big_fs)
    p.send_signal(sig)
    p.send_signal(signal.SIGCONT)
    rest, err = p.communicate(timeout=120)
    check_sanitizers(err)
    out = "".join(out) + rest
    assert p.returncode == 32, out + err
    last = out.splitlines()[-1]
    m = SUMMARY.match(last)
    assert m and "scan cancelled; so far 0 errors and 0 warnings found." in last, out
    # it stopped mid-way: phase 6 never ran and not all data was read
    assert "Phase 6" not in out


@pytest.mark.alone
def test_background_priority(big_fs):
    need_tools("ionice")
    p, out = start_and_freeze("-b", big_fs)
    try:
        with open("/proc/%d/stat" % p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        nice = int(fields[16])          # field 19 of stat(5), after pid and comm
        # every thread there is (workers inherit the class from main)
        tids = os.listdir("/proc/%d/task" % p.pid)
        io = subprocess.run(["ionice", "-p"] + tids, capture_output=True,
                            text=True).stdout
        # Read; now let it finish at the normal class: in the idle class
        # the rest of the scan waits for every other I/O on the machine
        # (300 s and more here beside other sessions' loop devices).
        subprocess.run(["ionice", "-c", "2", "-p"] + tids, check=True)
    finally:
        p.send_signal(signal.SIGCONT)
        p.communicate(timeout=300)
    assert nice == 19
    assert io.split() == ["idle"] * len(tids), io
    assert p.returncode == 0
    assert "1 threads" in "".join(out)


def test_progress_after_a_signal_says_how_far(big_fs):
    """Issue 35 item 14: after SIGINT in phase 5 the last -C line said
    "5 N N" (100 %) with about a third of the data read.  It says how far
    the phase got: DONE below TOTAL, the bytes read so far."""
    r, w = os.pipe()
    p = subprocess.Popen([FSCRUB, "-v", "-x", "-j", "1", "--limit", "200M", "-C", str(w),
                          big_fs], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         pass_fds=(w,))
    os.close(w)
    progress = os.fdopen(r)
    lines = []
    for line in progress:
        lines.append(line.split())
        # stopped once phase 5 has read some, well before the end
        if line.startswith("5 ") and 0 < int(line.split()[1]) < int(line.split()[2]) // 2:
            p.send_signal(signal.SIGINT)
            break
    lines += [line.split() for line in progress]
    out, err = p.communicate(timeout=120)
    check_sanitizers(err)
    assert p.returncode == 32, out + err
    last = lines[-1]
    assert last[0] == "5" and int(last[1]) < int(last[2]), lines[-5:]
    read = int(last[1])
    assert read * 4 < int(last[2]) * 3, lines[-5:]     # about where it stopped, not the end
