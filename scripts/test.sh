#!/usr/bin/env bash
# Set up, configure, build and run every non-perf test, then the ASan+UBSan build of the unit tests.
#   BUILD_DIR (default build), ASAN_BUILD_DIR (default build-asan), JOBS (default nproc),
#   RESIL_SKIP_ASAN=1 to skip the sanitizer pass (local iteration only; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${JOBS:-$(nproc)}
build=${BUILD_DIR:-build}
asan=${ASAN_BUILD_DIR:-build-asan}

scripts/setup.sh

echo "== configure + build ($build)"
cmake -S . -B "$build" -DRESIL_WERROR=ON
cmake --build "$build" -j "$jobs"

echo "== tests (all labels but perf)"
ctest --test-dir "$build" -LE perf --output-on-failure -j "$jobs" --timeout 900

if [[ "${RESIL_SKIP_ASAN:-0}" != 1 ]]; then
  echo "== ASan+UBSan build of the unit tests ($asan)"
  cmake -S . -B "$asan" -DRESIL_SANITIZE=ON -DRESIL_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug -DRESIL_WERROR=ON
  # Build only what the unit tests run: unit tests named like their executable target (target
  # lists of both Makefiles, "... NAME", and Ninja, "NAME: phony").
  mapfile -t unit_targets < <(comm -12 \
    <(ctest --test-dir "$asan" -L unit -LE perf -N | sed -n 's/^ *Test *#[0-9]*: *//p' | sort -u) \
    <(cmake --build "$asan" --target help | sed -n 's/^\.\.\. *\([^ ]*\).*/\1/p; s/^\([A-Za-z0-9_.+-]*\): .*/\1/p' | sort -u))
  echo "unit test targets: ${unit_targets[*]}"
  cmake --build "$asan" -j "$jobs" --target "${unit_targets[@]}"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$asan" -L unit -LE perf --output-on-failure -j "$jobs"
fi
echo "== all tests passed ($root)"
