#!/bin/bash
# Build the parser fuzz targets (flip logs, pattern tables, selections, zlib patching, and the
# torch.save/pickle, safetensors, shard index, DCP metadata, zip and .npy readers) with clang
# (libFuzzer + ASan + UBSan) straight from the parser sources (no HDF5 needed), replay the saved
# regression corpus, then fuzz each for a bounded time.
# Usage: run_fuzz.sh SOURCE_DIR BUILD_DIR [SECONDS] [build-only]
# The build runs `run_fuzz.sh SRC OUT 0 build-only` (target resil_fuzzers) so the test itself only fuzzes.
set -euo pipefail
SRC=$1; OUT=$2; SECS=${3:-20}; MODE=${4:-run}
CXX=${RESIL_FUZZ_CXX:-clang++}
mkdir -p "$OUT"
INC="-I$SRC/injectors/flips/include -I$SRC/injectors/storage/include -I$SRC/injectors/storage/zlib/include -I$SRC/injectors/formats/include -I$SRC/libckpt/include -I$SRC/core/include"
FLAGS="-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $INC"
# Targets and their sources; each source is compiled once (in parallel) and shared by the targets that
# link it. An object is rebuilt when its source or any header under the include directories is newer.
I=$SRC/injectors/flips/src
Z=$SRC/injectors/storage/zlib/src
F=$SRC/tests/inject/fuzz
FS=$SRC/injectors/formats/src
L=$SRC/libckpt/src
declare -A TARGETS=(
  [fuzz_log]="$F/fuzz_log.cpp $I/flip_log.cpp $I/select_expr.cpp $L/dtype.cpp $L/fs.cpp $L/hash.cpp -lcrypto -lxxhash"
  [fuzz_pattern]="$F/fuzz_pattern.cpp $I/fault_model.cpp $I/select_expr.cpp $L/fs.cpp"
  [fuzz_selection]="$F/fuzz_selection.cpp $I/fault_model.cpp $I/select_expr.cpp $L/fs.cpp"
  # The token-level zlib patcher decodes the compressed chunks of user files.
  [fuzz_patch]="$F/fuzz_patch.cpp $Z/deflate_patch.cpp -ldeflate -lz"
  # The format parsers of torch.save archives, safetensors and NumPy files (injectors/formats).
  [fuzz_pickle]="$F/fuzz_pickle.cpp $FS/pickle.cpp $FS/torch.cpp $FS/zip.cpp -lz"
  [fuzz_safetensors]="$F/fuzz_safetensors.cpp $FS/safetensors.cpp $FS/json.cpp"
  [fuzz_shard_index]="$F/fuzz_shard_index.cpp $FS/shard_index.cpp $FS/json.cpp"
  [fuzz_dcp_metadata]="$F/fuzz_dcp_metadata.cpp $FS/dcp.cpp $FS/pickle.cpp $FS/torch.cpp $FS/zip.cpp -lz"
  [fuzz_zip]="$F/fuzz_zip.cpp $FS/zip.cpp $FS/pickle.cpp $FS/torch.cpp $FS/npy.cpp -lz"
  [fuzz_npy]="$F/fuzz_npy.cpp $FS/npy.cpp $FS/zip.cpp -lz"
)
obj() { local r=${1#"$SRC"/}; echo "$OUT/obj/${r//\//_}.o"; }
mkdir -p "$OUT/obj"
newest_header=$(find $(sed 's/-I//g' <<< "$INC") "$I" "$Z" "$FS" "$L" \( -name '*.hpp' -o -name '*.h' \) -type f -printf '%T@ %p\n' |
  sort -n | tail -1 | cut -d' ' -f2-)
stale=()
for src in $(printf '%s\n' "${TARGETS[@]}" | tr ' ' '\n' | grep -v '^-l' | sort -u); do
  o=$(obj "$src")
  if [ ! -e "$o" ] || [ "$src" -nt "$o" ] || { [ -n "$newest_header" ] && [ "$newest_header" -nt "$o" ]; }; then stale+=("$src"); fi
done
if [ ${#stale[@]} -gt 0 ]; then
  export CXX FLAGS OUT SRC
  printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -I{} bash -c 'r=${1#"$SRC"/}; $CXX $FLAGS -c -o "$OUT/obj/${r//\//_}.o" "$1"' _ {}
fi
for name in "${!TARGETS[@]}"; do
  objs=() libs=()
  for a in ${TARGETS[$name]}; do case $a in -l*) libs+=("$a") ;; *) objs+=("$(obj "$a")") ;; esac; done
  if [ ! -x "$OUT/$name" ] || [ -n "$(find "${objs[@]}" -newer "$OUT/$name")" ]; then
    $CXX $FLAGS -o "$OUT/$name" "${objs[@]}" "${libs[@]}"
  fi
done
[ "$MODE" = build-only ] && exit 0
for t in log pattern selection patch pickle safetensors shard_index dcp_metadata zip npy; do
  corpus="$F/corpus/$t"
  work="$OUT/work_$t"; mkdir -p "$work"
  # 1. Regression: every saved input (incl. past crashes) must pass.
  "$OUT/fuzz_$t" -runs=0 "$corpus" > "$OUT/replay_$t.log" 2>&1 || { tail -30 "$OUT/replay_$t.log"; exit 1; }
  # 2. Bounded fuzzing; a crash leaves crash-* in $OUT: copy it into the corpus to keep it.
  # Timeout 30 s: a few hundred bytes of memoised lists reach the state walk's cap of 2^20 values
  # (a million views of one storage, which torch.save writes and resil reads), about 10 s of one
  # run under these sanitizers at -O1; a hang still fails.
  "$OUT/fuzz_$t" -max_total_time="$SECS" -timeout=30 -rss_limit_mb=2048 -max_len=4096 \
      -artifact_prefix="$OUT/${t}_" "$work" "$corpus" > "$OUT/fuzz_$t.log" 2>&1 || {
    tail -40 "$OUT/fuzz_$t.log"; echo "fuzz_$t found a failure: see $OUT/${t}_*"; exit 1; }
  grep -E "^#[0-9]+.*DONE" "$OUT/fuzz_$t.log" | tail -1 || true
done
echo "fuzzing OK"
