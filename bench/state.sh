#!/bin/bash
# state.sh: what recording a run in the run history (fscrub(8), RUN
# HISTORY) costs, cold cache, on the million-file data set.
#
# Acceptance target (issue 23): the state store costs at most 2 % of a
# run's wall time: the median of fscrub -n --state-dir DB MNT is at most
# TARGET (1.02) x the median of fscrub -n --no-state MNT, in the same run
# on the same files.
#
# For each filesystem: an image under $BENCH_DIR on `losetup --direct-io=on`,
# mkfs, data set (c) of data_verify.sh -- NR_TINY (1 000 000) files of
# 100-2000 bytes in TINY_DIRS (1000) directories (bench/mkdata tiny) --
# sync, umount + mount.  Then, after one untimed warm-up run, REPS times
# each, in ABBA order (odd reps without first, even reps with first), each
# after `sync; echo 3 > drop_caches`:
#   no-state  fscrub -n --no-state MNT
#   state     fscrub -n --state-dir DB MNT (DB on $BENCH_DIR's filesystem,
#             growing by one run each time, as it would)
# Metadata only (no -x): the shortest whole run, where a fixed cost per run
# shows most.  Each run must exit 0 with no finding.
#
# The fixed cost alone, without the noise of a cold million-file walk:
# SMALL_REPS (41) runs each way, alternated, on a small tmpfs (10 files),
# warm; the difference of the medians in milliseconds.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
REPS=${REPS:-3}
SMALL_REPS=${SMALL_REPS:-41}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
FSTYPES=${FSTYPES:-"ext4"}
KEEP=${KEEP:-0}
NR_TINY=${NR_TINY:-1000000}
TINY_DIRS=${TINY_DIRS:-1000}
TARGET=${TARGET:-1.02}

me=state.sh
BIN_NAME=st-bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
for k in REPS SMALL_REPS NR_TINY TINY_DIRS; do posint "$k"; done
for fs in $FSTYPES; do
	case $fs in xfs|ext4) ;; *) die "FSTYPES: unknown filesystem '$fs' (xfs, ext4)";; esac
done
command -v cc >/dev/null || need_pkg gcc
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"
private_fscrub
LOGS=$BENCH_DIR/st-logs
mkdir -p "$LOGS"
rm -f "$LOGS/"*

echo "state.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "data: $NR_TINY tiny files (100-2000 B) in $TINY_DIRS dirs; fscrub -n; reps: $REPS, alternated; cold cache, loop --direct-io=on"
echo

# One cold fscrub run: sets SECS; fails unless it exits 0 with no finding.
run_cold() {	# LOG ARGS...
	local log=$1 t0 rc=0
	shift
	drop_caches
	t0=$EPOCHREALTIME
	"$FSCRUB" "$@" >"$log" 2>&1 || rc=$?
	SECS=$(secs_since "$t0" 6)
	if [ "$rc" -ne 0 ] || grep -qE '^(Error|Warning)' "$log"; then
		cat "$log" >&2
		die "fscrub $* exited $rc or reported findings on untouched data"
	fi
}

# The fixed cost per run, warm, on a small tmpfs: sets SMALL_LINE.
small_cost() {
	local mnt=$BENCH_DIR/st-small db=$BENCH_DIR/st-small-db r t0 without="" with="" mw mwi
	mkdir -p "$mnt"
	mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
	mount -t tmpfs -o size=16m fscrub-bench-small "$mnt"
	MOUNTS+=("$mnt")
	IMAGES+=("")
	for ((r = 0; r < 10; r++)); do echo "$r" >"$mnt/f$r"; done
	sleep 1.2
	rm -rf "$db"
	mkdir -p "$db"
	for ((r = 1; r <= SMALL_REPS; r++)); do
		t0=$EPOCHREALTIME
		"$FSCRUB" -n --no-state "$mnt" >/dev/null || die "fscrub --no-state $mnt failed"
		without+=" $(secs_since "$t0" 6)"
		t0=$EPOCHREALTIME
		"$FSCRUB" -n --state-dir "$db" "$mnt" >/dev/null || die "fscrub --state-dir $mnt failed"
		with+=" $(secs_since "$t0" 6)"
	done
	mw=$(echo "$without" | median); mwi=$(echo "$with" | median)
	SMALL_LINE=$(awk -v a="$mw" -v b="$mwi" -v n="$SMALL_REPS" 'BEGIN {
		printf "small tmpfs, warm, %d runs each: median %.1f ms without, %.1f ms with: %+.1f ms per run",
		n, a * 1000, b * 1000, (b - a) * 1000 }')
	umount "$mnt"
	rmdir "$mnt"
	rm -rf "$db"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

TABLE=$LOGS/table
: >"$TABLE"
FAILED=0
bench_fs() {	# FS
	local fs=$1 img=$BENCH_DIR/st-$1.img mnt=$BENCH_DIR/st-mnt-$1 db=$BENCH_DIR/st-db-$1
	local r k without="" with="" mw mwi rr v
	IMAGES+=("$img")
	MOUNTS+=("$mnt")
	tiny_fs "$fs" "$img" "$mnt" --direct-io=on
	sleep 1.2	# ctimes older than the scans
	rm -rf "$db"
	mkdir -p "$db"
	run_cold "$LOGS/$fs.warmup.log" -n --no-state "$mnt"
	for ((r = 1; r <= REPS; r++)); do
		for k in $([ $((r % 2)) = 1 ] && echo "without with" || echo "with without"); do
			if [ "$k" = without ]; then
				run_cold "$LOGS/$fs.without.$r.log" -n --no-state "$mnt"
				without+=" $SECS"
			else
				run_cold "$LOGS/$fs.with.$r.log" -n --state-dir "$db" "$mnt"
				with+=" $SECS"
			fi
			say "$fs: rep $r/$REPS  $k  $(printf '%8.3f' "$SECS") s"
		done
	done
	[ "$("$FSCRUB" status --state-dir "$db" --json "$mnt" | grep -c '"status":"complete"\|"status": "complete"')" -ge 1 ] ||
		die "$fs: the runs with state were not recorded"
	mw=$(echo "$without" | median); mwi=$(echo "$with" | median)
	rr=$(awk -v a="$mw" -v b="$mwi" 'BEGIN { printf "%.4f", b / a }')
	v=$(awk -v r="$rr" -v t="$TARGET" 'BEGIN { print (r <= t) ? "met" : "NOT met" }')
	[ "$v" = met ] || FAILED=1
	printf '%-5s %9s %12.3f %12.3f %9s  %s\n' "$fs" "$NR_TINY" "$mw" "$mwi" "$rr" "$v" >>"$TABLE"
	{
		echo "== $fs: $REPS cold runs each =="
		echo "no-state (s):$without    state (s):$with"
		echo "database after the runs: $(du -k "$db" | tail -n 1 | cut -f1) KiB"
		echo
	}
	cleanup_fs "$img" "$mnt"
	rm -rf "$db"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

for fs in $FSTYPES; do
	bench_fs "$fs"
done
small_cost
echo "== medians (seconds of the whole run) =="
printf '%-5s %9s %12s %12s %9s  %s\n' fs files "no-state" "state" "ratio" "target <= $TARGET"
cat "$TABLE"
echo "$SMALL_LINE"
echo "logs: $LOGS"
[ "$FAILED" = 0 ] || exit 2
exit 0
