"""A worker for air launch's fault tests. Each worker records its pid per attempt in
$JOB_OUT/attempt_<K>_rank_<R>.pid. In attempts below $FAIL_UNTIL (every attempt when unset),
rank $FAIL_RANK fails ($FAIL_HOW: "exit" = exit code 3, "kill" = SIGKILL itself) once the
others are running, and the others sleep (ignoring SIGTERM when $IGNORE_TERM is set, so only
SIGKILL ends them); in later attempts every worker exits 0."""
import os
import signal
import sys
import time

out, rank = os.environ["JOB_OUT"], int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
world = int(os.environ["WORLD_SIZE"])
with open(os.path.join(out, f"attempt_{attempt}_rank_{rank}.pid"), "w") as f:
    f.write(str(os.getpid()))
fail_until = int(os.environ.get("FAIL_UNTIL", "1000000"))
if attempt >= fail_until:
    sys.exit(0)
if rank == int(os.environ["FAIL_RANK"]):
    # Fail once every worker of the attempt has started.
    while not all(os.path.exists(os.path.join(out, f"attempt_{attempt}_rank_{r}.pid"))
                  for r in range(world)):
        time.sleep(0.05)
    if os.environ.get("FAIL_HOW", "exit") == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(3)
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
