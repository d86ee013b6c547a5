#!/bin/bash
# bulk.sh: phase 3's metadata scan with and without the backend's bulk
# inode records (issue 22), against find, cold cache, on XFS, ext4 and
# btrfs.
#
# For each filesystem: a sparse image under $BENCH_DIR attached with
# `losetup --direct-io=on` (drop_caches then really empties every cache of
# it), mkfs, mount, $NR_FILES small files (bench/mkdata.c tiny: 100-2000
# bytes each, one extent) in $NR_DIRS directories, sync, umount, mount.
# Then REPS rounds, each of
#     find MNT -xdev -printf '%i %n\n'
#     fscrub -n MNT                              (bulk records where the backend has them)
#     FSCRUB_DEBUG_NO_BULK=1 fscrub -n MNT       (the per-file path: statx each entry)
#     BASE_FSCRUB -n MNT                         (if set: e.g. a build of main, "before")
# with `sync; echo 3 > /proc/sys/vm/drop_caches` before every command.
# Every fscrub runs with --no-state: the runs time the scan, not the state
# database (/var/lib/fscrub is shared with whatever else runs here).
# The table gives median wall, user and system time, peak RSS and peak
# RSS per inode.  With STRACE=1, one more cold run of each fscrub variant
# under `strace -c -f` gives the system calls per file.
#
# Knobs (environment): BENCH_DIR (/var/tmp/fscrub-bench-bulk), REPS (3),
# NR_FILES (200000), NR_DIRS (200), FSTYPES ("xfs ext4 btrfs"), IMG_SIZE (8G),
# KEEP (0; 1 keeps the images for the next run), STRACE (1), FSCRUB,
# BASE_FSCRUB (unset: no "before" column).
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench-bulk}
REPS=${REPS:-3}
NR_FILES=${NR_FILES:-200000}
NR_DIRS=${NR_DIRS:-200}
FSTYPES=${FSTYPES:-"xfs ext4 btrfs"}
IMG_SIZE=${IMG_SIZE:-8G}
KEEP=${KEEP:-0}
STRACE=${STRACE:-1}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
BASE_FSCRUB=${BASE_FSCRUB:-}

me=bulk.sh
BIN_NAME=bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
posint REPS; posint NR_FILES; posint NR_DIRS
flag01 KEEP; flag01 STRACE
[ -x /usr/bin/time ] || need_pkg time
[ "$STRACE" = 0 ] || command -v strace >/dev/null || need_pkg strace
private_fscrub
if [ -n "$BASE_FSCRUB" ]; then
	cp -p "$BASE_FSCRUB" "$BIN/fscrub.base" || die "cannot copy $BASE_FSCRUB"
fi
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"
mkdir -p "$BENCH_DIR/logs"

# Sets ELAPSED (s), USER, SYS (s) and MAXRSS (KiB); returns the exit status.
timed() {	# OUT -- CMD...
	local out=$1 t0 rc=0
	shift
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%M %U %S' -o "$BENCH_DIR/logs/time" "$@" >"$out" 2>&1 || rc=$?
	ELAPSED=$(secs_since "$t0" 3)
	read -r MAXRSS USER SYS < <(tail -n 1 "$BENCH_DIR/logs/time")
	return "$rc"
}

mkfs_cmd() {	# FS DEV: find_ratio.sh's
	case $1 in
	xfs) echo "mkfs.xfs -f -q -m rmapbt=1 $2";;
	ext4) echo "mkfs.ext4 -F -q -E lazy_itable_init=0 -N $((NR_FILES + NR_FILES / 4 + 1000)) $2";;
	btrfs) echo "mkfs.btrfs -f -q $2";;
	esac
}

echo "bulk.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "fscrub: $FSCRUB ($("$BIN/fscrub" -V 2>&1 | head -n 1))"
echo "set: $NR_FILES files of 100-2000 bytes in $NR_DIRS directories; $REPS cold runs each (median)"
echo

bench_fs() {	# FS
	local fs=$1 img=$BENCH_DIR/$1.img mnt=$BENCH_DIR/mnt-$1 dev want stamp inodes v r log
	IMAGES+=("$img"); MOUNTS+=("$mnt")
	mkdir -p "$mnt"
	want="$NR_FILES $NR_DIRS $(mkfs_cmd "$fs" DEV) $IMG_SIZE"
	stamp=$img.ready
	if [ "$KEEP" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		dev=$(losetup -f --show --direct-io=on "$img")
		mount "$dev" "$mnt"
	else
		rm -f "$img" "$stamp"
		truncate -s "$IMG_SIZE" "$img"
		dev=$(losetup -f --show --direct-io=on "$img")
		local mkfs
		mkfs=$(mkfs_cmd "$fs" "$dev")
		$mkfs
		mount "$dev" "$mnt"
		mkdir "$mnt/tiny"
		say "$fs: writing $NR_FILES files"
		"$BIN/mkdata" tiny "$mnt/tiny" "$NR_FILES" "$NR_DIRS"
		sync
		umount "$mnt"
		mount "$dev" "$mnt"
		echo "$want" >"$stamp"
	fi
	inodes=$(df --output=iused "$mnt" | tail -n 1 | tr -d ' ')
	# btrfs counts no inodes (df says 0): count the tree's names (no hard links here).
	[ "$inodes" -gt 0 ] || inodes=$(find "$mnt" -xdev | wc -l)
	local -a label=("find -printf '%i %n\\n'" "fscrub -n" "fscrub -n, NO_BULK")
	[ -n "$BASE_FSCRUB" ] && label+=("base fscrub -n")
	local nvar=${#label[@]}
	local -a wall usr sys rss
	for ((v = 0; v < nvar; v++)); do wall[v]=""; usr[v]=""; sys[v]=""; rss[v]=0; done
	run() {	# V [PREFIX...]: one cold run of variant V
		local v=$1 rc=0
		log=$BENCH_DIR/logs/$fs.$v.log
		drop_caches
		case $v in
		0) timed "$log" find "$mnt" -xdev -printf '%i %n\n' || rc=$?;;
		1) timed "$log" env -u FSCRUB_DEBUG_NO_BULK "$BIN/fscrub" --no-state -n "$mnt" || rc=$?;;
		2) timed "$log" env FSCRUB_DEBUG_NO_BULK=1 "$BIN/fscrub" --no-state -n "$mnt" || rc=$?;;
		3) timed "$log" "$BIN/fscrub.base" --no-state -n "$mnt" || rc=$?;;
		esac
		[ "$rc" -eq 0 ] || { cat "$log" >&2; die "$fs: ${label[v]} exited $rc"; }
	}
	for ((r = 1; r <= REPS; r++)); do
		for ((v = 0; v < nvar; v++)); do
			run "$v"
			wall[v]="${wall[v]} $ELAPSED"; usr[v]="${usr[v]} $USER"; sys[v]="${sys[v]} $SYS"
			[ "$MAXRSS" -gt "${rss[v]}" ] && rss[v]=$MAXRSS
			printf '%s: rep %d/%d  %-20s %8.3f s wall  %5.2f s user  %5.2f s sys\n' \
				"$fs" "$r" "$REPS" "${label[v]}" "$ELAPSED" "$USER" "$SYS" >&2
		done
	done
	local fmed
	fmed=$(echo "${wall[0]}" | median 3)
	echo "== $fs: $inodes inodes in use =="
	printf '%-20s %9s %7s %7s %7s %10s %9s\n' command "wall s" ratio "user s" "sys s" "peak RSS" "B/inode"
	for ((v = 0; v < nvar; v++)); do
		local med
		med=$(echo "${wall[v]}" | median 3)
		printf '%-20s %9s %6sx %7s %7s %6.1f MiB %9.1f\n' "${label[v]}" "$med" \
			"$(awk -v a="$med" -v b="$fmed" 'BEGIN { printf "%.2f", a / b }')" \
			"$(echo "${usr[v]}" | median 2)" "$(echo "${sys[v]}" | median 2)" \
			"$(awk -v k="${rss[v]}" 'BEGIN { print k / 1024 }')" \
			"$(awk -v k="${rss[v]}" -v n="$inodes" 'BEGIN { print k * 1024 / n }')"
	done
	echo "runs (s):"
	for ((v = 0; v < nvar; v++)); do echo "  ${label[v]}:${wall[v]}"; done
	if [ "$STRACE" = 1 ]; then
		for ((v = 1; v < nvar; v++)); do
			drop_caches
			local cmd=(env -u FSCRUB_DEBUG_NO_BULK "$BIN/fscrub")
			[ "$v" = 2 ] && cmd=(env FSCRUB_DEBUG_NO_BULK=1 "$BIN/fscrub")
			[ "$v" = 3 ] && cmd=("$BIN/fscrub.base")
			strace -c -f -o "$BENCH_DIR/logs/$fs.$v.strace" "${cmd[@]}" --no-state -n "$mnt" \
				>/dev/null 2>&1 || true
			echo "strace -c -f, ${label[v]}: per inode (calls / $inodes), futex left out:"
			# strace -c's rows: % time, seconds, usecs/call, calls, [errors,] syscall
			awk -v n="$inodes" '$1 ~ /^[0-9.]+$/ && $NF ~ /^[a-z_0-9]+$/ &&
				$NF != "total" && $NF != "futex" {
				if ($4 / n >= 0.01) printf "  %-12s %6.2f\n", $NF, $4 / n
				tot += $4 } END { printf "  %-12s %6.2f\n", "all", tot / n }' \
				"$BENCH_DIR/logs/$fs.$v.strace"
		done
	fi
	echo
	cleanup_fs "$img" "$mnt"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

for fs in $FSTYPES; do
	bench_fs "$fs"
done
