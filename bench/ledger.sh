#!/bin/bash
# ledger.sh: what the checksum ledger costs fscrub -x, cold cache, on XFS
# and ext4.
#
# Acceptance target (issue "checksum ledger"): hashing runs inside the data
# scan and lowers -x's bandwidth by at most 10 %: with records, fscrub -x
# reads file data at >= TARGET (0.9) x its bandwidth without, in the same
# run on the same files.
#
# For each filesystem: an image under $BENCH_DIR on `losetup --direct-io=on`,
# mkfs, BIG_FILES x BIG_SIZE (4 x 1 GiB) of incompressible data, sync,
# umount + mount.  Then, each run after `sync; echo 3 > drop_caches`:
#   record    fscrub --record --ledger DB MNT, once (DB on $BENCH_DIR's
#             filesystem, not the image)
#   without   fscrub -n -x -v MNT: no records, nothing hashed
#   with-db   fscrub -n -x -v --ledger DB MNT: every file hashed and
#             verified against the database
# after one untimed warm-up read, REPS times each, in ABBA order (odd reps
# without first, even reps with first) so both see the same machine; then
#   fscrub --record MNT (records in xattrs), and REPS runs of
#   with-xattr  fscrub -n -x -v MNT: verified against the xattrs.
# Bandwidth = bytes of file data / median seconds of the whole run.  Each
# verifying run must report BIG_FILES files verified and no finding.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench}
REPS=${REPS:-3}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
FSTYPES=${FSTYPES:-"xfs ext4"}
KEEP=0
BIG_FILES=${BIG_FILES:-4}
BIG_SIZE=${BIG_SIZE:-1G}
TARGET=${TARGET:-0.9}

me=ledger.sh
BIN_NAME=lg-bin
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
bench_setup
for k in REPS BIG_FILES; do posint "$k"; done
for fs in $FSTYPES; do
	case $fs in xfs|ext4) ;; *) die "FSTYPES: unknown filesystem '$fs' (xfs, ext4)";; esac
done
BIG_BYTES=$(numfmt --from=iec "$BIG_SIZE") || die "BIG_SIZE: not a size: $BIG_SIZE"
command -v cc >/dev/null || need_pkg gcc
cc -O2 -Wall -o "$BIN/mkdata" "$top/bench/mkdata.c" || die "cannot build bench/mkdata.c"
private_fscrub
LOGS=$BENCH_DIR/lg-logs
mkdir -p "$LOGS"
rm -f "$LOGS/"*

echo "ledger.sh  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
machine_line
echo "data: $BIG_FILES x $BIG_SIZE per filesystem; reps: $REPS, alternated; cold cache, loop --direct-io=on"
echo

# One fscrub run, cold: sets SECS; fails unless it exits 0 with no finding
# and says VERIFIED files were verified (none: "", nothing hashed; "-":
# not looked at).
run_cold() {	# LOG VERIFIED -- ARGS...
	local log=$1 verified=$2 t0 rc=0
	shift 2
	drop_caches
	t0=$EPOCHREALTIME
	"$FSCRUB" "$@" >"$log" 2>&1 || rc=$?
	SECS=$(secs_since "$t0" 6)
	if [ "$rc" -ne 0 ] || grep -qE '^(Error|Warning)' "$log"; then
		cat "$log" >&2
		die "fscrub $* exited $rc or reported findings on untouched data"
	fi
	[ "$verified" = - ] && return 0
	if [ -n "$verified" ] && ! grep -q "checksum ledger.*: $verified files verified" "$log"; then
		grep 'checksum ledger' "$log" >&2 || true
		die "fscrub $* did not verify $verified files"
	fi
	if [ -z "$verified" ] && grep -q 'checksum ledger' "$log"; then
		die "fscrub $* hashed files although none has a record"
	fi
}

TABLE=$LOGS/table
: >"$TABLE"
FAILED=0
bench_fs() {	# FS
	local fs=$1 img=$BENCH_DIR/lg-$1.img mnt=$BENCH_DIR/lg-mnt-$1 db=$BENCH_DIR/lg-db-$1
	local dev size i r data without="" withdb="" withx="" rec mw md mx rd rx vd vx
	IMAGES+=("$img")
	MOUNTS+=("$mnt")
	mkdir -p "$mnt"
	mountpoint -q "$mnt" && die "$mnt is already mounted (a previous run's? umount it first)"
	size=$((BIG_FILES * BIG_BYTES * 5 / 4 / 1048576 + 1024))
	rm -f "$img"
	truncate -s "${size}M" "$img"
	dev=$(losetup -f --show --direct-io=on "$img")
	case $fs in
	xfs) mkfs.xfs -f -q "$dev";;
	ext4) mkfs.ext4 -F -q -E lazy_itable_init=0 "$dev";;
	esac
	mount "$dev" "$mnt"
	say "$fs: writing $BIG_FILES x $BIG_SIZE"
	for ((i = 0; i < BIG_FILES; i++)); do
		"$BIN/mkdata" big "$mnt/big$i" "$BIG_BYTES"
	done
	sync
	umount "$mnt"
	mount "$dev" "$mnt"
	sleep 1.2	# ctimes older than the scans (fscrub skips files changed during one)
	data=$((BIG_FILES * BIG_BYTES))
	rm -rf "$db"
	mkdir -p "$db"

	run_cold "$LOGS/$fs.record.log" - --record --ledger "$db" -v "$mnt"
	rec=$SECS
	grep -q "checksum ledger.*0 files verified, $BIG_FILES recorded" "$LOGS/$fs.record.log" ||
		{ cat "$LOGS/$fs.record.log" >&2; die "$fs: --record did not record $BIG_FILES files"; }
	say "$fs: record  $(printf '%8.3f' "$rec") s  $(mbps "$data" "$rec") MB/s"
	# One untimed read first: the host's cache of the image settles.
	run_cold "$LOGS/$fs.warmup.log" "" -n -x "$mnt"
	for ((r = 1; r <= REPS; r++)); do
		# ABBA: odd reps without first, even reps with first, so that a
		# drift of the machine during the run favours neither.
		for k in $([ $((r % 2)) = 1 ] && echo "without withdb" || echo "withdb without"); do
			if [ "$k" = without ]; then
				run_cold "$LOGS/$fs.without.$r.log" "" -n -x -v "$mnt"
				without+=" $SECS"
			else
				run_cold "$LOGS/$fs.withdb.$r.log" "$BIG_FILES" -n -x -v --ledger "$db" "$mnt"
				withdb+=" $SECS"
			fi
			say "$fs: rep $r/$REPS  $k  $(printf '%8.3f' "$SECS") s  $(mbps "$data" "$SECS") MB/s"
		done
	done
	run_cold "$LOGS/$fs.record-xattr.log" - --record -v "$mnt"
	sleep 1.2	# the xattr writes changed the ctimes
	for ((r = 1; r <= REPS; r++)); do
		run_cold "$LOGS/$fs.withx.$r.log" "$BIG_FILES" -n -x -v "$mnt"
		withx+=" $SECS"
		say "$fs: rep $r/$REPS  with-xattr  $(printf '%8.3f' "$SECS") s  $(mbps "$data" "$SECS") MB/s"
	done
	mw=$(echo "$without" | median); md=$(echo "$withdb" | median); mx=$(echo "$withx" | median)
	rd=$(ratio "$mw" "$md"); rx=$(ratio "$mw" "$mx")	# bandwidth with / without
	vd=$(awk -v r="$rd" -v t="$TARGET" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
	vx=$(awk -v r="$rx" -v t="$TARGET" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
	[ "$vd" = met ] && [ "$vx" = met ] || FAILED=1
	printf '%-5s %12s %11s %11s %8s %11s %8s %10s  %s / %s\n' "$fs" "$data" "$(mbps "$data" "$mw")" \
		"$(mbps "$data" "$md")" "$rd" "$(mbps "$data" "$mx")" "$rx" "$(mbps "$data" "$rec")" \
		"$vd" "$vx" >>"$TABLE"
	{
		echo "== $fs: $BIG_FILES x $BIG_SIZE, $REPS cold runs each =="
		echo "without (s):$without    with-db (s):$withdb    with-xattr (s):$withx    record (s): $rec"
		grep -E '^Phase 5:' "$LOGS/$fs.withdb.$REPS.log" | sed "s|$BENCH_DIR|\$BENCH_DIR|g"
		echo
	}
	cleanup_fs "$img" "$mnt"
	rm -rf "$db"
	unset 'IMAGES[-1]' 'MOUNTS[-1]'
}

for fs in $FSTYPES; do
	bench_fs "$fs"
done
echo "== medians (MB/s = bytes of file data / median seconds of the whole run / 1e6) =="
printf '%-5s %12s %11s %11s %8s %11s %8s %10s  %s\n' fs "data bytes" "without" "with-db" \
	"db/w.o." "with-xattr" "xa/w.o." "record" "target >= $TARGET (db / xattr)"
cat "$TABLE"
echo "logs: $LOGS"
[ "$FAILED" = 0 ] || exit 2
exit 0
