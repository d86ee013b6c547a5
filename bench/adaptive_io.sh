#!/bin/bash
# adaptive_io.sh: what fscrub -x costs a foreground job, at full speed,
# with --limit auto and with a fixed --limit at auto's average rate; and
# the scan bandwidth --limit auto reaches while the job pauses (issue 24).
#
# Target: --limit auto keeps the job's p99 read latency within 1.2x of the
# job alone, and reaches at least half the idle scan bandwidth while the
# job pauses.
#
# The device (DEVICE):
#   loop     (default) an XFS image of IMG_SIZE holding DATA_FILES x 1 GiB,
#            on a loop device attached with --direct-io=on.  A loop device
#            over a file is served by the host's cache at a few GB/s, not
#            like a disk, and the build host's kernel has no device-mapper
#            (no dm-delay); so with THROTTLE (default 150M bytes/s) the job
#            and the scan run in one blkio cgroup (v1) whose read_bps_device
#            caps the loop device: one queue of that bandwidth, in which the
#            job's 4 KiB reads wait behind the scan's 8 MiB ones as on a
#            disk.  THROTTLE=0 uses the bare loop device.
#   nullblk  a memory-backed null_blk device (configfs; the kernel needs
#            CONFIG_BLK_DEV_NULL_BLK) with a fixed service time: every
#            request completes NULLB_LAT_US (1000) us after it started
#            (irqmode=2, a timer), at most NULLB_QD (1) at a time on one
#            submission queue, requests of at most NULLB_MAX_KB (64) KiB;
#            so 64 MB/s, and a 4 KiB read alone takes 1 ms.  Whatever else
#            is queued is served first: a disk's queue, with service times
#            and not only a bandwidth.  XFS on all of it (DATA_FILES GiB and
#            256 MiB more, in RAM).  bench/adaptive_io_vm.sh runs this in
#            the test VM's kernel.
#
# The job: fio, random 4 KiB reads, O_DIRECT, iodepth 1 (psync), of the
# loop device (read-only), FIO_SECS (10) seconds.  Each round runs, in
# this order:
#   alone  fio alone, before and after each of the three below (four
#          times a round): the job's p99 drifts with the host (under TCG
#          its tail is the guest's CPU), so each variant is judged against
#          the median of the two alone runs next to it, and the alone runs'
#          own spread (max / min p99) is the noise floor
#   auto   fscrub -n -x --limit auto started 1 s before fio; after fio,
#          PAUSE_SECS (5) more seconds without it, then fscrub is stopped:
#          the job's p99, the scan's average rate while fio read (the
#          device's bytes read less fio's, between fio's own start and end
#          of its reads: under TCG it takes seconds to start and to end),
#          and its bandwidth in the PAUSE_SECS after fio stopped (the
#          ramp-up included)
#   fixed  the same with --limit R, R = that round's auto average while fio
#          read, in reads of FIXED_READ_KB (64) KiB
#          (FSCRUB_DEBUG_FIXED_READ): the token bucket takes a whole
#          read's bytes before it starts, and an 8 MiB read at auto's
#          floor (~0.1 MB/s) would wait over a minute -- reading nothing in
#          the job's seconds.  Its own average while fio read is printed
#          beside R.
#   full   the same with --limit none: the job's p99, and the idle scan
#          bandwidth over the PAUSE_SECS after it
# and the job's reads slower than 1.2x the adjacent alone p99: at most
# 1 % keep its p99 within 1.2x (the alone runs: over 1.2x their own).
# The scan's rates come from its -C progress lines, time-stamped here.
# Medians of REPS (3) rounds; the machine may be shared: see the load in
# the header, and every round's figures are printed.
#
# Everything it mounts or attaches is undone on exit, failure or Ctrl-C.
set -euo pipefail
export LC_ALL=C

me=adaptive_io.sh
BENCH_DIR=${BENCH_DIR:-/var/tmp/fscrub-bench-adaptive}
REPS=${REPS:-3}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FSCRUB=${FSCRUB:-$top/build/fscrub}
KEEP=${KEEP:-0}
BIN_NAME=bin-adaptive
IMG_SIZE=${IMG_SIZE:-5G}
DATA_FILES=${DATA_FILES:-4}
THROTTLE=${THROTTLE:-150M}
DEVICE=${DEVICE:-loop}
NULLB_LAT_US=${NULLB_LAT_US:-1000}
NULLB_QD=${NULLB_QD:-1}
NULLB_MAX_KB=${NULLB_MAX_KB:-64}
NULLB=/sys/kernel/config/nullb/nullb_fscrub
FIO_SECS=${FIO_SECS:-10}
PAUSE_SECS=${PAUSE_SECS:-5}
FIXED_READ_KB=${FIXED_READ_KB:-64}
CGROUP=/sys/fs/cgroup/blkio/fscrub_bench_adaptive
# shellcheck source=bench/lib.sh
. "$top/bench/lib.sh"
posint REPS; posint DATA_FILES; posint FIO_SECS; posint PAUSE_SECS
posint NULLB_LAT_US; posint NULLB_QD; posint NULLB_MAX_KB; posint FIXED_READ_KB
case $DEVICE in loop|nullblk) ;; *) die "DEVICE must be loop or nullblk, not '$DEVICE'" ;; esac

bench_setup
private_fscrub
command -v fio >/dev/null || need_pkg fio
command -v fio >/dev/null || die "fio is not installed"

IMG=$BENCH_DIR/adaptive.img
MNT=$BENCH_DIR/adaptive.mnt
# The null_blk device, if this run made it (removed at exit).
NULLB_MADE=0
nullblk_remove() {
	[ "$NULLB_MADE" = 1 ] || return 0
	mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
	echo 0 >"$NULLB/power" 2>/dev/null || true
	rmdir "$NULLB" || say "ERROR: could not remove $NULLB"
	NULLB_MADE=0
}
# nullblk_make: a null_blk disk as above; prints its /dev path.
nullblk_make() {
	local name
	[ -d /sys/kernel/config/nullb ] || modprobe null_blk nr_devices=0 2>/dev/null || true
	[ -d /sys/kernel/config/nullb ] || die "DEVICE=nullblk needs null_blk's configfs (CONFIG_BLK_DEV_NULL_BLK)"
	[ ! -e "$NULLB" ] || die "$NULLB exists: another run's?"
	mkdir "$NULLB"
	NULLB_MADE=1
	echo $(((DATA_FILES << 10) + 256)) >"$NULLB/size"	# MiB
	echo 4096 >"$NULLB/blocksize"
	echo 1 >"$NULLB/memory_backed"
	echo 2 >"$NULLB/irqmode"		# completion by a timer ...
	echo $((NULLB_LAT_US * 1000)) >"$NULLB/completion_nsec"	# ... this long after
	echo 1 >"$NULLB/submit_queues"
	echo "$NULLB_QD" >"$NULLB/hw_queue_depth"
	echo $((NULLB_MAX_KB * 2)) >"$NULLB/max_sectors"
	echo 1 >"$NULLB/power"
	# The disk is named after the configfs item (older kernels: nullbINDEX).
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		for name in "${NULLB##*/}" "nullb$(cat "$NULLB/index")"; do
			[ -b "/dev/$name" ] && { echo "/dev/$name"; return; }
		done
		sleep 0.2
	done
	die "the null_blk disk of $NULLB did not appear in /dev"
}
# The cgroup both run in (THROTTLE) and the null_blk disk, removed at
# exit before the rest.
# shellcheck disable=SC2317  # called from the EXIT trap
adaptive_cleanup() {
	local rc=$?
	rmdir "$CGROUP" 2>/dev/null || true
	set +e
	nullblk_remove
	(exit "$rc")	# bench_cleanup exits with $?
	bench_cleanup
}
trap adaptive_cleanup EXIT
MOUNTS+=("$MNT")
if [ "$DEVICE" = nullblk ]; then
	IMAGES+=("")
	nullblk_make >"$BENCH_DIR/nullb.dev"
	DEV=$(cat "$BENCH_DIR/nullb.dev")
	mkfs.xfs -q -f "$DEV"
	THROTTLE=0	# the device itself is slow
else
	IMAGES+=("$IMG")
	rm -f "$IMG"
	truncate -s "$IMG_SIZE" "$IMG"
	mkfs.xfs -q "$IMG"
	DEV=$(losetup -f --show --direct-io=on "$IMG")
fi
mkdir -p "$MNT"
mount "$DEV" "$MNT"
say "writing $DATA_FILES GiB on $DEV"
for ((i = 0; i < DATA_FILES; i++)); do
	dd if=/dev/zero of="$MNT/f$i" bs=1M count=1024 conv=fsync status=none
done
sleep 1.1	# ctime more than a second before the scans

RUN=()
if [ "$THROTTLE" != 0 ]; then
	[ -d /sys/fs/cgroup/blkio ] || die "THROTTLE needs the cgroup v1 blkio controller (or THROTTLE=0)"
	bps=$(numfmt --from=iec "$THROTTLE")
	mkdir -p "$CGROUP"
	echo "$(lsblk -dno MAJ:MIN "$DEV" | tr -d ' ') $bps" >"$CGROUP/blkio.throttle.read_bps_device"
	# shellcheck disable=SC2016  # expanded by that sh
	RUN=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CGROUP")
fi

# fio_job SECS TAG: fio for SECS seconds, its log of every read's
# completion latency kept as $BENCH_DIR/lat-TAG.log.  Prints "P99_US IOPS
# READS SLOW FROM TO BYTES": SLOW the reads that took longer than 1.2x
# this run's p99 (slow_reads counts them against another threshold: the
# p99 is within 1.2x of a p99 of P as long as at most 1 % of the reads are
# slower than 1.2 P); FROM and TO: when its reads began and ended (seconds
# since the epoch; under TCG fio takes seconds to start and end around
# them); then the bytes it read.
fio_job() {
	rm -f "$BENCH_DIR"/fiolat_*.log
	"${RUN[@]}" fio --name=fg --filename="$DEV" --readonly --rw=randread --bs=4k \
		--direct=1 --iodepth=1 --ioengine=psync --runtime="$1" --time_based \
		--randseed=$RANDOM --write_lat_log="$BENCH_DIR/fiolat" --log_avg_msec=0 \
		--output-format=json 2>/dev/null |
	python3 -c 'import json, sys
j = json.load(sys.stdin)
r = j["jobs"][0]["read"]
end = j["timestamp_ms"] / 1e3
p99 = r["clat_ns"]["percentile"]["99.000000"] / 1e3
lat = [int(l.split(",")[1]) / 1e3 for l in open(sys.argv[1])]
print("%.0f %.0f %d %d %.2f %.2f %d" % (p99, r["iops"], len(lat), sum(x > 1.2 * p99 for x in lat),
                                    end - j["jobs"][0]["job_runtime"] / 1e3, end, r["io_bytes"]))' \
		"$BENCH_DIR/fiolat_clat.1.log"
	mv "$BENCH_DIR/fiolat_clat.1.log" "$BENCH_DIR/lat-$2.log"
}
# slow_reads TAG LIMIT_US: fio_job TAG's reads that took longer than LIMIT_US.
slow_reads() {
	awk -F, -v l="$2" '$2 / 1e3 > l { n++ } END { print n + 0 }' "$BENCH_DIR/lat-$1.log"
}

# Progress lines "T PHASE DONE TOTAL MNT" (T: seconds since the epoch).
# bytes_at FILE T: phase 5's DONE at the last line not after T.
bytes_at() {
	awk -v t="$2" '$1 <= t && $2 == 5 { d = $3 } END { printf "%.0f\n", d }' "$1"
}

# scan_with_job TAG ARGS...: fscrub -n -x ARGS (in the environment
# SCAN_ENV, VAR=VALUE words), fio (fio_job TAG) from 1 s on for FIO_SECS,
# fscrub stopped PAUSE_SECS after fio.  Prints "P99 IOPS READS
# RATE_DURING RATE_AFTER BPS_DURING" (rates in MB/s from the progress
# lines, BPS_DURING in bytes/s from the device's bytes read less the
# job's); -v output in $LOG.
LOG=$BENCH_DIR/fscrub.log
# "T BYTES" every 0.1 s: the bytes the device has read (no fork: under
# TCG one costs the job milliseconds); bytes_at_dev T: BYTES at T.
dev_sampler() {
	local _r _m s _rest
	while :; do
		read -r _r _m s _rest <"/sys/block/${DEV#/dev/}/stat"
		echo "$EPOCHREALTIME $((s * 512))"
		sleep 0.1
	done
}
# dev_span T0 T1: "SECONDS BYTES" from the last sample before T0 to the
# first after T1 (all of fio's reads inside, whatever the clocks' skew).
dev_span() {
	awk -v a="$1" -v b="$2" '$1 <= a { t0 = $1; d0 = $2 } $1 >= b && !t1 { t1 = $1; d1 = $2 }
		END { printf "%.3f %.0f\n", t1 - t0, d1 - d0 }' "$BENCH_DIR/devbytes"
}
scan_with_job() {
	local prog=$BENCH_DIR/progress t1 t2 pid spid res b0 b1 bp b2 io0 io1 ds db fio_bytes tag=$1
	shift
	: >"$prog"
	"${RUN[@]}" env "${SCAN_ENV[@]}" "$FSCRUB" -n -x -v -C 3 "$@" "$MNT" >"$LOG" 2>&1 \
		3> >(while read -r l; do echo "$EPOCHREALTIME $l"; done >"$prog") &
	pid=$!
	sleep 1
	dev_sampler >"$BENCH_DIR/devbytes" &
	spid=$!
	res=$(fio_job "$FIO_SECS" "$tag")
	t1=$EPOCHREALTIME
	sleep 0.3	# a sample after fio's end
	kill "$spid"; wait "$spid" 2>/dev/null || true	# ours: started above
	read -r _ _ _ _ io0 io1 fio_bytes <<<"$res"
	res=$(cut -d' ' -f1-3 <<<"$res")
	sleep "$PAUSE_SECS"
	t2=$EPOCHREALTIME
	kill -TERM "$pid" 2>/dev/null || true	# ours: started above
	wait "$pid" || true
	sleep 0.5
	# while the job read (from fio's own times), and after it had ended
	b0=$(bytes_at "$prog" "$io0"); b1=$(bytes_at "$prog" "$io1")
	bp=$(bytes_at "$prog" "$t1"); b2=$(bytes_at "$prog" "$t2")
	# where the job ran, in the time of the -v lines ("s into the scan")
	awk -v a="$io0" -v b="$io1" '$2 == 5 { printf "bench: the job read from %.1f s to %.1f s into the scan (from phase 5'"'"'s first progress line)\n", a - $1, b - $1; exit }' "$prog" >>"$LOG"
	# (a slow fixed --limit may not have ended a read in the window)
	[ -s "$prog" ] || die "no progress lines from fscrub (see $LOG)"
	[ "$b2" -lt $((DATA_FILES << 30)) ] || die "the scan ended before the window did: more DATA_FILES"
	# the scan's average while fio read: the device's bytes read less fio's
	# (the progress lines move a whole 8 MiB read at a time: at auto's
	# floor, not once in the job's seconds)
	read -r ds db < <(dev_span "$io0" "$io1")
	echo "$res $(mbps $((b1 - b0)) "$(awk -v a="$io0" -v b="$io1" 'BEGIN { print b - a }')") $(mbps $((b2 - bp)) "$PAUSE_SECS") $(awk -v b=$((db - fio_bytes)) -v s="$ds" 'BEGIN { if (b < 0 || s <= 0) b = 0; printf "%.0f", (s > 0 ? b / s : 0) }')"
}

machine_line
if [ "$DEVICE" = nullblk ]; then
	echo "device: $DEV (null_blk, memory-backed, $(cat "$NULLB/size") MiB XFS, $DATA_FILES GiB of files; each request ${NULLB_LAT_US} us, ${NULLB_QD} at a time, at most ${NULLB_MAX_KB} KiB; scheduler $(sed 's/.*\[\(.*\)\].*/\1/' "/sys/block/${DEV#/dev/}/queue/scheduler"), nr_requests $(cat "/sys/block/${DEV#/dev/}/queue/nr_requests"))"
	echo "PSI: $([ -r /proc/pressure/io ] && echo yes || echo "no (--limit auto watches the device's busy time)")"
else
	echo "device: $DEV ($IMG_SIZE XFS image, $DATA_FILES GiB of files, loop --direct-io=on), throttle ${THROTTLE} B/s (blkio v1 read_bps_device; 0 = none)"
fi
echo "job: fio randread 4k O_DIRECT iodepth 1 psync, ${FIO_SECS} s; scan window: 1 s before, ${PAUSE_SECS} s after; fixed --limit in ${FIXED_READ_KB} KiB reads"
echo "each round: alone, auto, alone, fixed, alone, full, alone; a variant's ratio is its p99 over the median of the two alone runs beside it"
SCAN_ENV=()
# median2 A B: the median (mean) of two p99s, rounded.
median2() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (a + b) / 2 }'; }
# One round's alone runs: p99, IOPS, reads, reads over 1.2x their own p99.
alone() {
	read -r "ap[$1]" "ai[$1]" "an[$1]" "as[$1]" _ < <(fio_job "$FIO_SECS" "alone$1")
}
R_U=(); R_X=(); R_F=(); NOISE=(); ALL_A=(); UR=(); XR=(); UP=(); FP=(); UI=(); XI=(); FI=(); AI=()
for ((r = 1; r <= REPS; r++)); do
	ap=(); ai=(); an=(); as=()
	alone 0
	read -r u_p99 u_iops u_n _ u_after u_bps < <(scan_with_job auto --limit auto)
	nb=$(sed -n 's/.*--limit auto: .* \([0-9]*\) back-offs.*/\1/p' "$LOG")
	cp "$LOG" "$BENCH_DIR/auto-$r.log"
	alone 1
	# the same average as auto's while the job ran, to the byte (--limit
	# takes bytes/s), in reads small enough to be paid for in the job's
	# seconds (FSCRUB_DEBUG_FIXED_READ)
	rate=$((u_bps > 0 ? u_bps : 1))
	SCAN_ENV=("FSCRUB_DEBUG_FIXED_READ=$((FIXED_READ_KB << 10))")
	read -r x_p99 x_iops x_n _ _ x_bps < <(scan_with_job fixed --limit "$rate")
	SCAN_ENV=()
	cp "$LOG" "$BENCH_DIR/fixed-$r.log"
	alone 2
	read -r f_p99 f_iops f_n _ f_after _ < <(scan_with_job full --limit none)
	alone 3
	# each variant against the alone runs before and after it
	ua=$(median2 "${ap[0]}" "${ap[1]}"); xa=$(median2 "${ap[1]}" "${ap[2]}")
	fa=$(median2 "${ap[2]}" "${ap[3]}")
	noise=$(echo "${ap[*]}" | tr ' ' '\n' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f", (lo > 0 ? hi / lo : 0) }')
	echo
	echo "round $r: alone p99 ${ap[0]} / ${ap[1]} / ${ap[2]} / ${ap[3]} us (max/min ${noise}x;" \
		"each against the one before: $(ratio "${ap[1]}" "${ap[0]}")x $(ratio "${ap[2]}" "${ap[1]}")x $(ratio "${ap[3]}" "${ap[2]}")x)"
	echo "  auto  ${u_p99} us = $(ratio "$u_p99" "$ua")x of ${ua}; scan $(awk -v b="$u_bps" 'BEGIN { printf "%.2f", b / 1e6 }') MB/s while the job read," \
		"${u_after} MB/s in the ${PAUSE_SECS} s after it; ${nb:-?} back-offs"
	echo "  fixed ${x_p99} us = $(ratio "$x_p99" "$xa")x of ${xa}; --limit ${rate} B/s, read $(awk -v b="$x_bps" 'BEGIN { printf "%.0f", b }') B/s while the job read"
	echo "  full  ${f_p99} us = $(ratio "$f_p99" "$fa")x of ${fa}; scan ${f_after} MB/s in the ${PAUSE_SECS} s after the job"
	echo "  IOPS alone ${ai[0]}/${ai[1]}/${ai[2]}/${ai[3]}, auto $u_iops, fixed $x_iops, full $f_iops"
	echo "  reads over 1.2x the adjacent alone p99: auto $(slow_reads auto "$(awk -v p="$ua" 'BEGIN { print 1.2 * p }')") of $u_n," \
		"fixed $(slow_reads fixed "$(awk -v p="$xa" 'BEGIN { print 1.2 * p }')") of $x_n," \
		"full $(slow_reads full "$(awk -v p="$fa" 'BEGIN { print 1.2 * p }')") of $f_n;" \
		"alone over 1.2x its own p99: ${as[0]}/${an[0]} ${as[1]}/${an[1]} ${as[2]}/${an[2]} ${as[3]}/${an[3]}"
	R_U+=("$(ratio "$u_p99" "$ua")"); R_X+=("$(ratio "$x_p99" "$xa")"); R_F+=("$(ratio "$f_p99" "$fa")")
	NOISE+=("$noise"); ALL_A+=("${ap[@]}")
	UR+=("$(awk -v b="$u_bps" 'BEGIN { printf "%.2f", b / 1e6 }')"); XR+=("$(awk -v b="$x_bps" 'BEGIN { printf "%.2f", b / 1e6 }')")
	UP+=("$u_after"); FP+=("$f_after")
	AI+=("${ai[@]}"); UI+=("$u_iops"); XI+=("$x_iops"); FI+=("$f_iops")
done
mu=$(echo "${R_U[*]}" | median 2); mx=$(echo "${R_X[*]}" | median 2); mf=$(echo "${R_F[*]}" | median 2)
mn=$(echo "${NOISE[*]}" | median 2)
an_all=$(echo "${ALL_A[*]}" | tr ' ' '\n' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f", (lo > 0 ? hi / lo : 0) }')
mup=$(echo "${UP[*]}" | median 0); mfp=$(echo "${FP[*]}" | median 0)
echo
echo "medians of $REPS rounds (each ratio against the adjacent alone runs):"
echo "  fio p99 with --limit auto ${mu}x (rounds: ${R_U[*]}); fixed --limit at auto's average ${mx}x (${R_X[*]});" \
	"full speed ${mf}x (${R_F[*]})"
echo "  noise floor, alone p99 max/min within a round: median ${mn}x (rounds: ${NOISE[*]}); over all $((4 * REPS)) alone runs ${an_all}x" \
	"(p99s: ${ALL_A[*]} us)"
echo "  fio IOPS alone $(echo "${AI[*]}" | median 0), auto $(echo "${UI[*]}" | median 0)," \
	"fixed $(echo "${XI[*]}" | median 0), full $(echo "${FI[*]}" | median 0)"
echo "  scan while the job runs: auto $(echo "${UR[*]}" | median 2) MB/s, fixed $(echo "${XR[*]}" | median 2) MB/s"
echo "  scan while the job pauses (${PAUSE_SECS} s after it): auto ${mup} MB/s," \
	"full speed ${mfp} MB/s ($(ratio "$mup" "$mfp")x)"
echo "  target: auto p99 <= 1.2x the adjacent alone: $(awk -v u="$mu" 'BEGIN { print (u <= 1.2) ? "met" : "NOT met" }')" \
	"(noise floor ${mn}x: $(awk -v n="$mn" 'BEGIN { print (n <= 1.2) ? "within 1.2x, so measurable" : "over 1.2x, so not measurable here" }'));" \
	"pause bandwidth >= 0.5x idle: $(awk -v f="$mfp" -v u="$mup" 'BEGIN { print (u >= 0.5 * f) ? "met" : "NOT met" }')"
