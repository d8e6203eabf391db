# scripts/slurm/common.sh - shared by start.sh and stop.sh (sourced): where the cluster lives and
# how a recorded daemon is recognised.
BASE=${AIR_SLURM_DIR:-/tmp/air-slurm}
export SLURM_CONF=$BASE/slurm.conf
PIDS=$BASE/pids # our records: "<pid> <comm>" per process we started
log() { echo "[air-slurm] $*" >&2; }

# alive FILE: the recorded process exists, has the recorded name and is not a zombie
# (PID 1 here may not reap orphans, so kill -0 is not enough).
alive() {
  local pid comm
  [ -s "$1" ] || return 1
  read -r pid comm <"$1"
  [ -r "/proc/$pid/stat" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
  [ "$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f1)" != Z ]
}
