"""Names that deceive (src/tree/name_check.c, src/tree/unicrash.c): look-alike pairs in
one directory (name.nfc_twin, name.nfkc_twin, name.confusable), one name
alone (name.bidi, name.invisible, name.mixed_script, name.option_like), the
same for one inode's attribute names and for the filesystem label, and twins
a casefolded ext4 directory takes for one name (name.casefold_twin, an error).

Every kind is made with real Unicode names in a directory of its own on XFS,
ext4, btrfs and tmpfs; one fscrub run per filesystem serves all the tests of
that filesystem.  Legitimate non-Latin names (Japanese, Cyrillic-only,
Arabic-only, emoji, a Cyrillic word with a Latin extension, case twins in a
directory that is not casefolded) must stay silent, and warnings leave the
exit code 0."""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import escaped, need_fs, need_tools, run_fscrub
import fsimage

CYR_A = "\u0430"                     # CYRILLIC SMALL LETTER A, looks like 'a'
NFC = "r\u00e9sum\u00e9"               # résumé, composed
NFD = "re\u0301sume\u0301"             # résumé, decomposed

# kind -> (directory, names in it, the expected findings as
#          (check, path name, the other name in the message or None))
CASES = {
    # Latin 'paypal' and 'pаypаl' with Cyrillic а: the second also mixes scripts
    "confusable": ("confusable", ["paypal", "p%syp%sl" % (CYR_A, CYR_A)],
                   {("name.confusable", "pair", "pair"),
                    ("name.mixed_script", "p%syp%sl" % (CYR_A, CYR_A), None)}),
    # Latin 'cop' and Cyrillic 'сор', each of one script
    "confusable_whole_script": ("whole", ["cop", "\u0441\u043e\u0440"],
                                {("name.confusable", "pair", "pair")}),
    "nfc_twin": ("nfc", [NFC, NFD], {("name.nfc_twin", "pair", "pair")}),
    "nfkc_twin": ("nfkc", ["\ufb01le", "file"], {("name.nfkc_twin", "pair", "pair")}),
    "bidi": ("bidi", ["gnp\u202e.exe"], {("name.bidi", "gnp\u202e.exe", None)}),
    "invisible": ("invisible", ["pay\u200bpal"],
                  {("name.invisible", "pay\u200bpal", None)}),
    "mixed_script": ("mixed", ["p%syp%sl" % (CYR_A, CYR_A)],
                     {("name.mixed_script", "p%syp%sl" % (CYR_A, CYR_A), None)}),
    "option_like": ("option", ["-rf"], {("name.option_like", "-rf", None)}),
}

LEGIT = ["\u65e5\u672c\u8a9e\u306e\u30d5\u30a1\u30a4\u30eb.txt",   # 日本語のファイル.txt
         "\u0434\u043e\u043a\u0443\u043c\u0435\u043d\u0442",         # документ
         "\u043e\u0442\u0447\u0451\u0442.pdf",                       # отчёт.pdf
         "\u0645\u0644\u0641",                                       # ملف
         "\U0001f600\U0001f389",                                     # 😀🎉
         "\U0001f468\u200d\U0001f469\u200d\U0001f467",               # family: ZWJ sequence
         "\u2764\ufe0f",                                             # ❤️ with VS16
         "Makefile", "makefile", "caf\u00e9", "na\u00efve"]

# What a stock Debian root holds: vim's ps1.vim and psl.vim, terminfo's
# 1/ and l/, and "modern"/"rnodern": ASCII look-alikes, no spoof.
ASCII_PAIRS = [("ps1.vim", "psl.vim"), ("1", "l"), ("modern", "rnodern")]

XATTR_FILE = "xattrs/file"
XATTRS = ["user.name", "user.n%sme" % CYR_A]

SIZE_MB = {"xfs": 300, "ext4": 64, "btrfs": 128}


def populate(root):
    for kind, (d, names, _) in CASES.items():
        os.makedirs(os.path.join(root, d))
        for n in names:
            open(os.path.join(root, d, n), "w").close()
    os.makedirs(os.path.join(root, "legit"))
    for n in LEGIT:
        open(os.path.join(root, "legit", n), "w").close()
    for i, pair in enumerate(ASCII_PAIRS):
        os.makedirs(os.path.join(root, "ascii%d" % i))
        for n in pair:
            open(os.path.join(root, "ascii%d" % i, n), "w").close()
    os.makedirs(os.path.join(root, "xattrs"))
    path = os.path.join(root, XATTR_FILE)
    open(path, "w").close()
    for x in XATTRS:
        os.setxattr(path, x, b"1")


@pytest.fixture(scope="module", params=("xfs", "ext4", "btrfs", "tmpfs"))
def scrubbed(request):
    """(fstype, mount point, the fscrub -n -v result) for one filesystem."""
    fstype = request.param
    need_fs(fstype)
    work = tempfile.mkdtemp(prefix="fscrub-names-")
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    if fstype == "tmpfs":
        fs = fsimage.make_tmpfs(work, populate=False)
        request.addfinalizer(fs.cleanup)
        mnt = fs.mnt
    else:
        img = fsimage.Image(work, fstype, size_mb=SIZE_MB[fstype])
        request.addfinalizer(lambda: img.cleanup(remove=True))
        img.mkfs()
        mnt = img.mount()
    populate(mnt)
    if fstype != "tmpfs":
        mnt = img.remount()
    return fstype, mnt, run_fscrub("-n", "-v", mnt)


def _findings_in(result, mnt, d):
    prefix = escaped(os.path.join(mnt, d)) + "/"
    return [f for f in result.findings if f.path.startswith(prefix) and f.check.startswith("name.")]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_kind(scrubbed, kind):
    _, mnt, r = scrubbed
    d, names, want = CASES[kind]
    got = _findings_in(r, mnt, d)
    assert all(f.severity == "Warning" for f in got), r
    assert {f.check for f in got} == {c for c, _, _ in want}, r
    for check, name, other in want:
        (f,) = [f for f in got if f.check == check]
        if name == "pair":
            # either name of the pair is reported, naming the other, escaped
            base = f.path.rsplit("/", 1)[1]
            rest = [escaped(n) for n in names if escaped(n) != base]
            assert base in [escaped(n) for n in names] and len(rest) == 1, f
            assert "'%s' (inode %d)" % (rest[0], os.lstat(
                os.path.join(mnt, d, [n for n in names if escaped(n) == rest[0]][0])).st_ino) \
                in f.message, f
        else:
            assert f.path == escaped(os.path.join(mnt, d, name)), f
            assert "'%s'" % escaped(name) in f.message or check == "name.option_like", f


def test_escaped(scrubbed):
    """A bidi override or a zero-width space never reaches the terminal raw."""
    _, _, r = scrubbed
    assert "\u202e" not in r.stdout and "\u200b" not in r.stdout, r
    assert "gnp\\xe2\\x80\\xae.exe" in r.stdout, r


def test_legitimate_names_silent(scrubbed):
    _, mnt, r = scrubbed
    assert _findings_in(r, mnt, "legit") == [], r


def test_ascii_lookalikes_are_infos(scrubbed):
    """Two pure-ASCII names alike are no spoof: an info under -v (as the
    fixture runs), nothing without it -- 0 warnings on a stock root."""
    _, mnt, r = scrubbed
    for i in range(len(ASCII_PAIRS)):
        got = _findings_in(r, mnt, "ascii%d" % i)
        assert [(f.severity, f.check) for f in got] == [("Info", "name.confusable")], r
    quiet = run_fscrub("-n", mnt)
    assert not [f for i in range(len(ASCII_PAIRS))
                for f in _findings_in(quiet, mnt, "ascii%d" % i)], quiet


def test_attribute_names(scrubbed):
    _, mnt, r = scrubbed
    got = _findings_in(r, mnt, "xattrs")
    want_path = escaped(os.path.join(mnt, XATTR_FILE))
    conf = [f for f in got if f.check == "name.confusable"]
    assert len(conf) == 1 and conf[0].path == want_path, r
    assert all("'%s'" % x in conf[0].message for x in XATTRS), r
    mixed = [f for f in got if f.check == "name.mixed_script"]
    assert len(mixed) == 1 and "'%s'" % XATTRS[1] in mixed[0].message, r
    assert {f.check for f in got} == {"name.confusable", "name.mixed_script"}, r


def test_warnings_keep_exit_code(scrubbed):
    """Warnings do not change the exit code: 0, no errors, as before."""
    _, _, r = scrubbed
    assert r.rc == 0 and r.errors == [], r
    assert r.warnings, r


def test_names_counted(scrubbed):
    """-v says how many names were checked: every entry and attribute name."""
    _, mnt, r = scrubbed
    n = sum(len(v[1]) for v in CASES.values()) + len(LEGIT) + 1 + len(XATTRS)
    n += len(CASES) + 2     # the directories themselves
    line = [ln for ln in r.stdout.splitlines() if "names checked for look-alikes" in ln]
    assert len(line) == 1, r
    counted = int(line[0].split(" names checked")[0].rsplit(" ", 1)[1])
    assert counted >= n, (counted, n, r)
    # and the JSON report's stats say the same
    out = os.path.join(os.path.dirname(mnt), "names.json")
    rj = run_fscrub("-n", "--json", out, mnt)
    assert rj.rc == 0, rj
    with open(out) as f:
        assert json.load(f)["stats"]["names"] == counted
    os.unlink(out)


def test_switch_off(scrubbed):
    """FSCRUB_DEBUG_NO_NAME_CHECKS turns every new check off (the benchmark's baseline)."""
    _, mnt, _ = scrubbed
    r = run_fscrub("-n", "-v", mnt, env={"FSCRUB_DEBUG_NO_NAME_CHECKS": "1"})
    new = {"name.nfc_twin", "name.nfkc_twin", "name.confusable", "name.bidi",
           "name.invisible", "name.mixed_script", "name.option_like"}
    assert not [f for f in r.findings if f.check in new], r
    assert r.rc == 0, r


@pytest.mark.parametrize("fstype", ("xfs", "ext4", "btrfs"))
def test_label(workdir, fstype):
    """A label with a bidi override is a name.bidi warning about the filesystem."""
    need_fs(fstype)
    label = "gnp\u202e.exe"         # 10 bytes: fits XFS's 12
    img = fsimage.Image(workdir, fstype, size_mb=SIZE_MB[fstype], mkfs_args=("-L", label))
    try:
        img.mkfs()
        mnt = img.mount()
        r = run_fscrub("-n", mnt)
        got = r.of("Warning", "name.bidi")
        assert len(got) == 1 and "filesystem label 'gnp\\xe2\\x80\\xae.exe'" in got[0].message, r
        assert r.rc == 0, r
    finally:
        img.cleanup(remove=True)


def _config_unicode():
    try:
        out = subprocess.run(["zgrep", "^CONFIG_UNICODE=", "/proc/config.gz"],
                             capture_output=True, text=True).stdout
    except OSError:
        return False
    return bool(out.strip())


def test_casefold_twins_injected(scrubbed):
    """FSCRUB_DEBUG_CASEFOLD: every directory counts as casefolded, so
    'Makefile' and 'makefile' (and the NFC and NFD résumé, and 'ﬁle' and
    'file': full case folding makes the ligature "fi") are name.casefold_twin
    errors, exit code 4 -- the path the kernel's
    casefolded directories take, on any kernel."""
    _, mnt, _ = scrubbed
    r = run_fscrub("-n", mnt, env={"FSCRUB_DEBUG_CASEFOLD": "1"})
    got = [f for f in r.of("Error", "name.casefold_twin")]
    paths = {f.path.rsplit("/", 1)[0] for f in got}
    assert paths == {escaped(os.path.join(mnt, d)) for d in ("legit", "nfc", "nfkc")}, r
    legit = [f for f in got if "/legit/" in f.path]
    assert len(legit) == 1 and {legit[0].path.rsplit("/", 1)[1],
                                legit[0].message.split("'")[3]} == {"Makefile", "makefile"}, r
    # a casefold twin is not also an NFC twin
    assert not r.of("Warning", "name.nfc_twin") and not r.of("Warning", "name.nfkc_twin"), r
    assert r.rc == 4, r


def test_casefold_twins_are_errors(workdir):
    """Two names a casefolded directory takes for one ("Makefile" and
    "makefile"): the kernel refuses to make the second, so debugfs links it
    offline; fscrub says name.casefold_twin, an error."""
    need_fs("ext4")
    need_tools("debugfs", "chattr")
    if not _config_unicode():
        pytest.skip("the kernel has no CONFIG_UNICODE: ext4 casefold cannot be mounted")
    img = fsimage.Image(workdir, "ext4", size_mb=64, mkfs_args=("-O", "casefold"))
    try:
        img.mkfs()
        mnt = img.mount()
        os.makedirs(os.path.join(mnt, "cf"))
        subprocess.run(["chattr", "+F", os.path.join(mnt, "cf")], check=True)
        open(os.path.join(mnt, "cf", "Makefile"), "w").close()
        with pytest.raises(FileExistsError):
            open(os.path.join(mnt, "cf", "makefile"), "x").close()
        img.offline()
        fsimage.run(["debugfs", "-w", "-R", "link /cf/Makefile /cf/makefile", img.path])
        fsimage.run(["debugfs", "-w", "-R", "sif /cf/Makefile links_count 2", img.path])
        mnt = img.mount()
        assert sorted(os.listdir(os.path.join(mnt, "cf"))) == ["Makefile", "makefile"]
        r = run_fscrub("-n", mnt)
        got = r.of("Error", "name.casefold_twin")
        assert len(got) == 1, r
        assert r.rc & 4, r
    finally:
        img.cleanup(remove=True)
