#!/usr/bin/env bash
# Sets up everything air needs on a fresh Debian 12 machine, idempotently, then builds
# build/bin/air. Debian packages come from apt-get; the Python packages the tests use as
# numerical references go into a venv outside the clone, keyed by the requirements' hash
# (AIR_VENV_ROOT, default ~/.cache/air), so fresh clones reuse it.
#
#   scripts/setup.sh            # packages + venv + build
#   AIR_SKIP_VENV=1 ...         # skip the Python venv and the python/ wheel (build only)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git clang-format
  libyaml-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libsqlite3-dev sqlite3 libsodium-dev libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev libdnnl-dev
  python3 python3-venv
  libgloo-dev libcpp-httplib-dev libcurl4-openssl-dev libjs-chart.js chromium chromium-driver
  slurm-wlm slurmctld slurmd munge
)

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

if [ "${AIR_SKIP_VENV:-0}" != "1" ]; then
  VENV=$("$ROOT/scripts/venv.sh")
  # The Python package (python/: `air` and `serverless_gpu`) as a wheel in .whl/, built from a
  # copy so that setuptools' build/ and egg-info never land in the clone.
  WHEEL_SRC=$(mktemp -d)
  cp -r "$ROOT/python" "$WHEEL_SRC/"
  "$VENV/bin/pip" wheel -q --no-deps --no-build-isolation -w "$ROOT/.whl" "$WHEEL_SRC/python"
  rm -rf "$WHEEL_SRC"
fi

cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$ROOT/build" --parallel "$(nproc)"
echo "setup: built $ROOT/build/bin/air"
