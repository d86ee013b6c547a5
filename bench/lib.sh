# bench/lib.sh: what the benchmarks share -- sourced, not run.
#
# The caller sets me (its name for messages), BENCH_DIR, KEEP (1: leave the
# images) and BIN_NAME (its private bin directory under BENCH_DIR), then
# calls bench_setup.  Everything it mounts or attaches goes through
# bench_attach / cleanup_fs, and is undone on exit, failure or Ctrl-C.

die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }
posint() { [[ ${!1} =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, not '${!1}'"; }
flag01() { [[ ${!1} =~ ^[01]$ ]] || die "$1 must be 0 or 1, not '${!1}'"; }

# Only what this run attached or mounted: loop devices whose backing file
# is one of our images, mounted on one of our mount points.
IMAGES=()
MOUNTS=()
cleanup_fs() {	# IMG MNT
	local img=$1 mnt=$2 dev i
	if mountpoint -q "$mnt" 2>/dev/null; then
		for i in 1 2 3 4 5 6 7 8 9 10; do
			umount "$mnt" 2>/dev/null && break
			sleep 1
		done
		if mountpoint -q "$mnt"; then
			say "WARNING: $mnt still busy after 10 s; lazy unmount"
			umount -l "$mnt" || say "ERROR: could not unmount $mnt"
		fi
	fi
	rmdir "$mnt" 2>/dev/null || true
	if [ -e "$img" ]; then
		for dev in $(losetup -n -O NAME -j "$img" 2>/dev/null); do
			losetup -d "$dev" || say "ERROR: could not detach $dev (backing $img)"
		done
		if [ "$KEEP" != 1 ]; then
			rm -f "$img" "$img.ready"
		fi
	fi
}
# shellcheck disable=SC2317  # called from the EXIT trap
bench_cleanup() {
	local rc=$? i
	trap '' INT TERM HUP
	for ((i = ${#IMAGES[@]} - 1; i >= 0; i--)); do
		cleanup_fs "${IMAGES[i]}" "${MOUNTS[i]}"
	done
	rm -rf "${BENCH_DIR:?}/${BIN_NAME:?}"
	[ "$KEEP" = 1 ] && [ ${#IMAGES[@]} -gt 0 ] && say "KEEP=1: images left in $BENCH_DIR"
	exit "$rc"
}

# Root, the work directory locked (one benchmark per directory at a time:
# the cleanup relies on everything in it being this run's), traps set.
bench_setup() {
	[ "$(id -u)" -eq 0 ] || die "run as root (losetup, mount, drop_caches need it): sudo bench/$me"
	mkdir -p "$BENCH_DIR"
	BENCH_DIR=$(cd "$BENCH_DIR" && pwd -P)
	exec 9>"$BENCH_DIR/.lock"
	flock -n 9 || die "another benchmark is using $BENCH_DIR"
	trap bench_cleanup EXIT
	trap 'say "interrupted"; exit 130' INT
	trap 'say "terminated"; exit 143' TERM HUP
	BIN=$BENCH_DIR/$BIN_NAME
	mkdir -p "$BIN"
}

need_pkg() {	# PACKAGE: apt-get install, apt-get update first if needed
	export DEBIAN_FRONTEND=noninteractive
	say "installing $1"
	if ! apt-get install -y --no-install-recommends "$1" >"$BENCH_DIR/apt.log" 2>&1; then
		apt-get update >>"$BENCH_DIR/apt.log" 2>&1 || true
		apt-get install -y --no-install-recommends "$1" >>"$BENCH_DIR/apt.log" 2>&1 ||
			{ cat "$BENCH_DIR/apt.log" >&2; die "apt-get install $1 failed"; }
	fi
}

# The kernel source tarball: $TARBALL, the one found last time, or Debian's
# linux-source (installed if need be).
find_tarball() {
	local t
	if [ -n "$TARBALL" ]; then
		[ -r "$TARBALL" ] || die "TARBALL=$TARBALL is not readable"
		echo "$TARBALL"; return
	fi
	if [ -r "$BENCH_DIR/tarball-path" ]; then
		t=$(cat "$BENCH_DIR/tarball-path")
		[ -r "$t" ] && { echo "$t"; return; }
	fi
	t=$(compgen -G '/usr/src/linux-source-*.tar.xz' | sort -V | tail -n 1 || true)
	if [ -z "$t" ]; then
		need_pkg linux-source
		t=$(compgen -G '/usr/src/linux-source-*.tar.xz' | sort -V | tail -n 1 || true)
		[ -n "$t" ] || die "linux-source installed but no /usr/src/linux-source-*.tar.xz"
	fi
	echo "$t" >"$BENCH_DIR/tarball-path"
	echo "$t"
}

# A private copy of $FSCRUB in $BIN (a rebuild of build/fscrub during the
# run cannot mix two binaries in one table); FSCRUB then names the copy
# and FSCRUB_SRC the original.
private_fscrub() {
	local i m0
	[ -x "$FSCRUB" ] || die "no fscrub binary at $FSCRUB (ninja -C build, or set FSCRUB)"
	for i in 1 2 3 4 5 6 7 8 9 10; do	# not while the linker is writing it
		m0=$(stat -c %Y "$FSCRUB")
		if [ $(($(date +%s) - m0)) -ge 2 ] && cp -p "$FSCRUB" "$BIN/fscrub" &&
		   [ "$(stat -c %Y "$FSCRUB")" = "$m0" ] && cmp -s "$FSCRUB" "$BIN/fscrub"; then
			break
		fi
		[ "$i" -lt 10 ] || die "$FSCRUB keeps changing (being rebuilt?); try again"
		sleep 2
	done
	"$BIN/fscrub" -V >/dev/null 2>&1 || die "$FSCRUB does not run (fscrub -V failed)"
	FSCRUB_SRC=$FSCRUB
	FSCRUB=$BIN/fscrub
}

# The machine, for the head of a report.
machine_line() {
	echo "kernel $(uname -r), $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "fscrub: $FSCRUB_SRC ($("$FSCRUB" -V 2>&1 | head -n 1); sha256 $(sha256sum "$FSCRUB" | cut -c1-12); built $(date -u -r "$FSCRUB" '+%Y-%m-%d %H:%M:%S UTC'))"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
secs_since() {	# T0 [DIGITS]: seconds since $EPOCHREALTIME was T0, DIGITS (1) decimals
	awk -v a="$1" -v b="$EPOCHREALTIME" -v d="${2:-1}" 'BEGIN { printf "%.*f", d, b - a }'; }
median() {	# [DIGITS]: the median of the numbers on stdin, DIGITS (6) decimals
	tr ' ' '\n' | grep . | sort -g | awk -v d="${1:-6}" '{ v[NR] = $1 } END {
	f = "%." d "f"; if (NR % 2) printf f, v[(NR + 1) / 2]; else printf f, (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", b / s / 1e6; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }	# A_S B_S: bandwidth ratio b/a (same bytes)

# vs_offline WORKDIR: run the Python program on stdin -- the cases of
# xfs_vs_repair.sh or ext4_vs_e2fsck.sh -- from tests/integration (the
# tests' injectors and fixtures), with bench/vs_offline.py importable,
# FSCRUB (default build/fscrub) exported and WORKDIR as its argument.
# The caller sets top (the source tree) and me.
vs_offline() {
	[ "$(id -u)" -eq 0 ] || die "run as root (losetup, mount): sudo bench/$me"
	export FSCRUB="${FSCRUB:-$top/build/fscrub}"
	[ -x "$FSCRUB" ] || die "no fscrub binary at $FSCRUB (ninja -C build, or set FSCRUB)"
	mkdir -p "$1"
	cd "$top/tests/integration"
	PYTHONPATH="$top/bench${PYTHONPATH:+:$PYTHONPATH}" exec /usr/bin/python3 - "$1"
}

# The million-file data set (c) of data_verify.sh on FS: IMG made, attached
# (LOSETUP_ARGS, e.g. --direct-io=on), mkfs, NR_TINY files of 100-2000 bytes
# in TINY_DIRS directories (BIN/mkdata tiny), sync, umount + mount on MNT.
# Sets DEV.  The caller has added IMG and MNT to IMAGES and MOUNTS.
tiny_fs() {	# FS IMG MNT [LOSETUP_ARGS...]
	local fs=$1 img=$2 mnt=$3 size
	shift 3
	mkdir -p "$mnt"
	mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
	# one 4 KiB block per file, inodes, directories (as data_verify.sh)
	size=$((NR_TINY * 6144 / 1048576 + 1024))
	rm -f "$img"
	truncate -s "${size}M" "$img"
	DEV=$(losetup -f --show "$@" "$img")
	case $fs in
	xfs) mkfs.xfs -f -q -m rmapbt=1 "$DEV";;
	ext4) mkfs.ext4 -F -q -E lazy_itable_init=0 -N $((NR_TINY + 65536)) "$DEV";;
	esac
	mount "$DEV" "$mnt"
	say "$fs: writing $NR_TINY tiny files"
	mkdir "$mnt/tiny"
	"$BIN/mkdata" tiny "$mnt/tiny" "$NR_TINY" "$TINY_DIRS"
	sync
	umount "$mnt"
	mount "$DEV" "$mnt"
}

