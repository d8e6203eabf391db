#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++/CUDA source differs from .clang-format's layout, naming each
# file; `clang-format -i FILE` fixes it. Run by ctest as `format_check`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) not formatted; run: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
