#!/usr/bin/env bash
# scripts/slurm/stop.sh - stop what scripts/slurm/start.sh started (its recorded PIDs only).
#   stop.sh                cancel every job, stop every node, slurmctld and the munged it started
#   stop.sh --keep-munge   the same, leaving munged running
#   stop.sh node2 [...]    hard-kill only these nodes: slurmd, its slurmstepds and their tasks
#                          (SIGKILL, a node crash); start.sh brings them back.
# Idempotent: what is not running is skipped. Settings: AIR_SLURM_DIR as for start.sh.
set -uo pipefail
# shellcheck source=common.sh
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
pid_of() { cut -d' ' -f1 "$1"; }
descendants() { local c; for c in $(pgrep -P "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done; }
# The slurmstepds of a node without namespaces: they hold sockets in its spool directory.
stepds_of() {
  local inodes pid fd l
  inodes=$(awk -v d="$BASE/spool/$1/" 'index($8, d) == 1 {print $7}' /proc/net/unix)
  [ -n "$inodes" ] || return 0
  for pid in $(pgrep -x slurmstepd); do
    for fd in /proc/"$pid"/fd/*; do
      l=$(readlink "$fd" 2>/dev/null) || continue
      case $l in socket:\[*\])
        l=${l#socket:[}; l=${l%]}
        if grep -qx "$l" <<<"$inodes"; then echo "$pid"; break; fi ;;
      esac
    done
  done
}
# stop_rec FILE SIGNAL SECONDS: signal the recorded process, wait, then SIGKILL.
stop_rec() {
  local f=$1 sig=$2 t=$3 pid
  alive "$f" || { rm -f "$f"; return 0; }
  pid=$(pid_of "$f")
  kill -"$sig" "$pid" 2>/dev/null
  for _ in $(seq 1 $((t * 5))); do alive "$f" || break; sleep 0.2; done
  if alive "$f"; then log "$(basename "$f" .pid) ($pid) ignored SIG$sig: SIGKILL"; kill -KILL "$pid"; sleep 0.2; fi
  rm -f "$f"
}
kill_node() {
  local n=$1 f=$PIDS/$1.pid pid victims
  alive "$f" || { log "$n: not running"; rm -f "$f"; return 0; }
  pid=$(pid_of "$f")
  if [ "$(cut -d' ' -f2 "$f")" = unshare ]; then
    kill -KILL "$pid" # --kill-child + PID namespace: everything inside dies
  else
    victims="$pid $(descendants "$pid")"
    for s in $(stepds_of "$n"); do victims="$victims $s $(descendants "$s")"; done
    kill -KILL $victims 2>/dev/null
  fi
  sleep 0.2
  rm -f "$f"
  log "$n killed"
}

if [ $# -gt 0 ] && [ "$1" != --keep-munge ]; then
  for n in "$@"; do kill_node "$n"; done
  exit 0
fi
[ -d "$PIDS" ] || { log "nothing recorded in $PIDS"; exit 0; }
if alive "$PIDS/slurmctld.pid"; then
  jobs=$(squeue -h -o %i 2>/dev/null | paste -sd' ' -)
  if [ -n "$jobs" ]; then
    scancel $jobs 2>/dev/null
    for _ in $(seq 1 75); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi
for f in "$PIDS"/node*.pid; do
  [ -e "$f" ] || continue
  if [ "$(cut -d' ' -f2 "$f")" = unshare ]; then stop_rec "$f" KILL 5; else stop_rec "$f" TERM 10; fi
done
stop_rec "$PIDS/slurmctld.pid" TERM 10
[ "${1:-}" = --keep-munge ] || stop_rec "$PIDS/munged.pid" TERM 5
log "stopped"
