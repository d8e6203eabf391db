#!/usr/bin/env bash
# Sets up everything air needs on a fresh Debian 12 machine, idempotently, then builds
# build/bin/air. Debian packages come from apt-get; the Python packages the tests use as
# numerical references go into a venv outside the clone, keyed by the requirements' hash
# (AIR_VENV_ROOT, default ~/.cache/air), so fresh clones reuse it.
#
#   scripts/setup.sh               # everything the tests need: packages, venv, every target
#   scripts/setup.sh --quickstart  # only what the quickstart runs: the packages that build
#                                  # the air executable, and only that target (no tests, no
#                                  # Slurm, Chromium or venv)
#   AIR_SKIP_VENV=1 ...            # skip the Python venv (build only)
#   AIR_BUILD_TYPE=RelWithDebInfo  # with debug info (default Release: the same -O2 code)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PROFILE=all
[ "${1:-}" = "--quickstart" ] && PROFILE=quickstart

# What the air executable links (and builds with).
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache
  libyaml-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libsqlite3-dev libsodium-dev libpcre2-dev libicu-dev
  libgloo-dev libcpp-httplib-dev libcurl4-openssl-dev
)
# What the tests add: unit tests, format check, git snapshots, the venv, the UI's browser
# tests and chart, a real Slurm cluster.
TEST_PACKAGES=(
  git clang-format sqlite3 libgtest-dev libgmock-dev libdnnl-dev python3 python3-venv
  libjs-chart.js chromium chromium-driver slurm-wlm slurmctld slurmd munge
)
APT_PACKAGES=("${BUILD_PACKAGES[@]}")
[ "$PROFILE" = all ] && APT_PACKAGES+=("${TEST_PACKAGES[@]}")

T_START=$SECONDS
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if ! command -v apt-get >/dev/null || { [ -n "$SUDO" ] && ! command -v sudo >/dev/null; }; then
    echo "setup: cannot install them here (needs apt-get, and root or sudo); install them and" \
      "run this script again" >&2
    exit 1
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$PROFILE" = all ] && [ "${AIR_SKIP_VENV:-0}" != "1" ]; then
  "$ROOT/scripts/venv.sh" >/dev/null
fi

T_PACKAGES=$SECONDS
# Release: -O2 without debug info (CMakeLists.txt), the same code as RelWithDebInfo in about
# half the compile time. For gdb: AIR_BUILD_TYPE=RelWithDebInfo scripts/setup.sh.
BUILD_TYPE=${AIR_BUILD_TYPE:-Release}
if [ "$PROFILE" = quickstart ]; then
  cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DAIR_BUILD_TESTS=OFF >/dev/null
  cmake --build "$ROOT/build" --parallel "$(nproc)" --target air
else
  cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DAIR_BUILD_TESTS=ON >/dev/null
  cmake --build "$ROOT/build" --parallel "$(nproc)"
fi
echo "setup: built $ROOT/build/bin/air (packages and venv $((T_PACKAGES - T_START)) s, build" \
  "$((SECONDS - T_PACKAGES)) s)"
