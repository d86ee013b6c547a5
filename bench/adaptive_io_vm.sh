#!/bin/bash
# adaptive_io_vm.sh: bench/adaptive_io.sh on a device with real service
# times -- DEVICE=nullblk in the test VM (vmrun: a Linux 6.12 guest with
# null_blk; the build host's kernel has neither null_blk nor
# device-mapper).  See adaptive_io.sh for what is measured.
#
# The guest chroots into the host's root (read-only, under a RAM overlay),
# so fio, mkfs.xfs and python3 are the host's, and fscrub is this tree's
# build/fscrub.  Its report goes to stdout and, with the -v logs of the
# --limit auto and fixed runs (auto-N.log, fixed-N.log) and of the last scan (last-fscrub.log,
# the one that failed if one did), to OUT_DIR
# (/var/tmp/fscrub-bench-adaptive-vm).
#
# Under TCG (no KVM) the guest's CPU is slow and the guest costs a host
# core or two for the whole run (REPS 3: about 8 minutes): run it when
# the controller changed, not on every build.
#
#   VMRUN     the harness (default: ../shared/vm/vmrun beside the checkout,
#             else /work/shared/vm/vmrun, else vmrun on PATH)
#   VM_MEM    guest memory (3G: the null_blk disk is in RAM)
#   VM_SMP    guest CPUs (2: fio and the scan each on one)
#   REPS FIO_SECS PAUSE_SECS DATA_FILES NULLB_LAT_US NULLB_QD NULLB_MAX_KB
#             passed on to adaptive_io.sh (defaults here: 3, 8, 4, 1, and
#             adaptive_io.sh's)
set -euo pipefail
export LC_ALL=C

me=adaptive_io_vm.sh
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${OUT_DIR:-/var/tmp/fscrub-bench-adaptive-vm}
VM_MEM=${VM_MEM:-3G}
VM_SMP=${VM_SMP:-2}
die() { echo "$me: $*" >&2; exit 1; }

if [ -z "${VMRUN:-}" ]; then
	for v in "$top/../shared/vm/vmrun" "$top/../../shared/vm/vmrun" /work/shared/vm/vmrun; do
		[ -x "$v" ] && { VMRUN=$v; break; }
	done
	VMRUN=${VMRUN:-$(command -v vmrun || true)}
fi
{ [ -n "$VMRUN" ] && [ -x "$VMRUN" ]; } || die "no vmrun (set VMRUN)"
[ -x "$top/build/fscrub" ] || die "no $top/build/fscrub (ninja -C build)"
command -v fio >/dev/null || die "fio is not installed on the host (the guest uses the host's)"
mkdir -p "$OUT_DIR"

envs=(--env DEVICE=nullblk --env "REPS=${REPS:-3}" --env "FIO_SECS=${FIO_SECS:-8}"
      --env "PAUSE_SECS=${PAUSE_SECS:-4}" --env "DATA_FILES=${DATA_FILES:-1}"
      --env BENCH_DIR=/var/tmp/fscrub-bench-adaptive)
for v in NULLB_LAT_US NULLB_QD NULLB_MAX_KB; do
	[ -z "${!v:-}" ] || envs+=(--env "$v=${!v}")
done

cd "$top"
echo "host: $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); guest: $VM_SMP CPUs, $VM_MEM, $(cat "$(dirname "$(readlink -f "$VMRUN")")/out/kernel-version" 2>/dev/null || echo "kernel ?")"
# shellcheck disable=SC2016  # expanded in the guest
"$VMRUN" --mem "$VM_MEM" --smp "$VM_SMP" --timeout 1800 --share "$OUT_DIR" "${envs[@]}" \
	--env "OUT_DIR=$OUT_DIR" -- bash -c '
	[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd	# bash: <(...) (a bare devtmpfs)
	bench/adaptive_io.sh; rc=$?
	cp /var/tmp/fscrub-bench-adaptive/auto-*.log /var/tmp/fscrub-bench-adaptive/fixed-*.log "$OUT_DIR/" 2>/dev/null
	cp /var/tmp/fscrub-bench-adaptive/fscrub.log "$OUT_DIR/last-fscrub.log" 2>/dev/null
	exit $rc' | tee "$OUT_DIR/report.txt"
rc=${PIPESTATUS[0]}
echo "host load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT_DIR/report.txt"
exit "$rc"
