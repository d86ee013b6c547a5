"""Output failures: a closed standard output, a broken pipe or a full
device for the text report end the run with exit 8 and a message on
standard error (never a crash or a silent exit 0)."""

import os
import subprocess

import pytest

from conftest import FSCRUB, check_sanitizers


@pytest.fixture
def small_fs(image_factory):
    img = image_factory("ext4", size_mb=32)
    img.mkfs()
    mnt = img.mount()
    for i in range(50):
        os.mkfifo(os.path.join(mnt, "odd\n%d" % i))   # 50 warning lines to write
    return mnt


def test_stdout_closed(small_fs):
    p = subprocess.run([FSCRUB, small_fs], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, preexec_fn=lambda: os.close(1))
    check_sanitizers(p.stderr)
    assert p.returncode == 8
    assert "unable to write the report: Bad file descriptor" in p.stderr


def test_stdout_full(small_fs):
    with open("/dev/full", "w") as full:
        p = subprocess.run([FSCRUB, small_fs], stdout=full, stderr=subprocess.PIPE, text=True)
    check_sanitizers(p.stderr)
    assert p.returncode == 8
    assert "unable to write the report: No space left on device" in p.stderr


def test_broken_pipe(small_fs):
    p = subprocess.Popen([FSCRUB, "-v", small_fs], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.readline()
    p.stdout.close()            # the reader goes away
    err = p.stderr.read()
    p.wait(timeout=60)
    check_sanitizers(err)
    assert p.returncode == 8
    assert "unable to write the report: Broken pipe" in err
    assert err.count("unable to write the report") == 1     # said once
