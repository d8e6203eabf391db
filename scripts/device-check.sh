#!/usr/bin/env bash
# The device check of the CUDA backend (docs/gpu.md): build and pack here, run on the GPU machine.
#
#   scripts/device-check.sh pack   # here: build air and the engine's test binaries with the CUDA
#                                  # backend, bundle them with their shared libraries (all but
#                                  # libc, libstdc++ and CUDA's own: the GPU machine's cuBLASLt
#                                  # matches its driver) into device-bundle/ (git-ignored)
#   scripts/device-check.sh run    # there, in the repo root with device-bundle carried: the op
#                                  # harness on cuda:0, NCCL at world size 1, FSDP's ranks on one
#                                  # GPU, GPU vs CPU parity over 100 steps, exact resume after
#                                  # SIGKILL, 2 ranks of air train on one GPU, a throughput; writes
#                                  # $OUT/summary.md, device-check.json, device-check.log and
#                                  # nvidia-smi.txt within its budget (AIR_DEVICE_CHECK_BUDGET,
#                                  # 300 s by default: give the device tool timeout_s 360)
#
# With the device tool: pack here, then run `scripts/device-check.sh run` with carry
# ["device-bundle"] and a timeout that leaves room for a rerun. DEVICE_CHECK_ARGS passes options to
# scripts/device_check.py (e.g. "--skip bench" or "--bench full"); AIR_DEVICE_CHECK_DEVICE=cpu runs
# the same steps on the CPU (how tests/python/test_device_check.py checks the script itself).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUNDLE=$ROOT/device-bundle
BINARIES=(air air_engine_core_tests air_engine_train_tests air_engine_parallel_tests)

pack() {
  command -v patchelf >/dev/null || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patchelf
  }
  if ! grep -q "AIR_HAVE_CUDA=1" build/build.ninja 2>/dev/null; then
    cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAIR_BUILD_TESTS=ON \
      -DAIR_CUDA=ON >/dev/null
  fi
  cmake --build "$ROOT/build" --parallel "$(nproc)" --target "${BINARIES[@]}"
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
  for b in "${BINARIES[@]}"; do
    cp "build/bin/$b" "$BUNDLE/bin/"
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$BUNDLE/bin/$b"
    # Every shared library but the C and C++ runtimes and CUDA's (the machine's own there):
    # device_check.py's carried() decides (tests/python/test_device_check.py checks it).
    ldd "build/bin/$b" | awk '/=> \//{print $3}' | python3 scripts/device_check.py --carried |
      while read -r lib; do
        [ -e "$BUNDLE/lib/$(basename "$lib")" ] || cp -L "$lib" "$BUNDLE/lib/"
      done
  done
  (cd "$BUNDLE" && tar -cJf lib.tar.xz lib && rm -rf lib)
  git rev-parse HEAD >"$BUNDLE/commit"
  # Ignored, so that it travels only when carried (a worktree's exclude file is the common one).
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/device-bundle/' "$exclude" 2>/dev/null || echo '/device-bundle/' >>"$exclude"
  du -sh "$BUNDLE"
  echo "packed $(cat "$BUNDLE/commit") into device-bundle/: carry it and run scripts/device-check.sh run"
}

run() {
  OUT=${OUT:-/tmp/device-check-out}
  mkdir -p "$OUT"
  [ -d "$BUNDLE/bin" ] || { echo "no device-bundle/: run scripts/device-check.sh pack first (here)" >&2; exit 2; }
  if [ -f "$BUNDLE/lib.tar.xz" ] && [ ! -d "$BUNDLE/lib" ]; then (cd "$BUNDLE" && tar -xJf lib.tar.xz); fi
  # The machine's cuBLASLt and NCCL, matched to its driver (GPU.md): where the loader already
  # finds them, else the usual folders (CUDA's toolkit, the system's, PyTorch's wheels), else
  # the whole disk (never /proc or /sys: slow, and nothing there).
  for name in libcublasLt.so.13 libnccl.so.2; do
    ldconfig -p 2>/dev/null | grep "$name" >/dev/null && continue  # (no -q: no SIGPIPE)
    found=$(find /usr/local/cuda*/ /usr/lib /opt -name "$name" 2>/dev/null | head -n 1 || true)
    [ -n "$found" ] || found=$(find / \( -path /proc -o -path /sys \) -prune -o -name "$name" \
      -print 2>/dev/null | head -n 1 || true)
    if [ -n "$found" ]; then
      export LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "device-check: $name from $(dirname "$found")"
    else
      echo "device-check: no $name on this machine (the GPU steps will say what fails)" >&2
    fi
  done
  # One machine: NCCL's bootstrap over loopback (the GPU machine may lack the interface NCCL
  # would pick; GPU.md: NCCL_SOCKET_IFNAME=lo worked for one rank).
  export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
  export AIR_SOURCE_DIR=$ROOT PYTHONUNBUFFERED=1
  command -v nvidia-smi >/dev/null && nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
  # shellcheck disable=SC2086
  python3 "$ROOT/scripts/device_check.py" --bin "$BUNDLE/bin" --out "$OUT" \
    --device "${AIR_DEVICE_CHECK_DEVICE:-cuda}" ${DEVICE_CHECK_ARGS:-}
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: scripts/device-check.sh pack|run" >&2; exit 2 ;;
esac
