#!/usr/bin/env bash
# GPU check: build resil with CUDA on a machine that has a GPU (and the CUDA toolkit) but may lack
# HDF5, ISA-L and MPICH, then run the GPU tests (`ctest -L gpu`) and the GPU benchmark.
#
#   scripts/gpu-check.sh --fetch          # on a Debian 12 machine with apt (e.g. the dev box):
#                                         # apt-get download the packages below + their dependencies
#                                         # into .debs/ (git-ignored); copy the checkout with .debs/
#   scripts/gpu-check.sh [BUILD_DIR]      # on the GPU machine (default BUILD_DIR: build-gpu)
#
# The .deb files are unpacked with `dpkg -x` into .debs/prefix (never into /); CMake finds them
# through CMAKE_PREFIX_PATH / include / lib hints, and the executables through PATH and
# LD_LIBRARY_PATH. Libraries the machine already has are used from the system first.
# Output: BUILD_DIR/gpu-check.log (ctest -L gpu -LE perf) and BUILD_DIR/gpu-bench.txt (bench_train_gpu:
# ckpt-train vs PyTorch step times; set RESIL_BENCH_PYTHON to the python whose torch has CUDA,
# default /usr/bin/python3). NCCL tests need one GPU per rank (2 GPUs) and skip their NCCL part on one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
debs=$root/.debs
prefix=$debs/prefix
pkgs=(libhdf5-dev libhdf5-103-1 libhdf5-hl-100 libhdf5-cpp-103-1 libsz2 libaec0
      libisal-dev libisal2 mpich libmpich-dev libmpich12 hwloc libhwloc15 libucx0
      libcli11-dev catch2 nlohmann-json3-dev
      libxxhash-dev libxxhash0 zlib1g-dev libssl-dev)
# Never unpacked into the prefix: the machine's own C runtime and toolchain must stay in charge.
skip='^(libc6|libc6-dev|libgcc-s1|libstdc\+\+6|gcc-.*-base|libc-dev-bin|linux-libc-dev|debconf|perl-base|dpkg|libcrypt1|libcrypt-dev|libgomp1|libgfortran5|libquadmath0|libselinux1|libzstd1|liblzma5|libbz2-1.0|zlib1g|libssl3|libnsl.*|libtirpc.*)$'

if [[ ${1:-} == --fetch ]]; then
  mkdir -p "$debs"
  cd "$debs"
  mapfile -t all < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
                       --no-replaces --no-enhances "${pkgs[@]}" | grep -E '^[a-z0-9]' | sort -u | grep -Ev "$skip" || true)
  echo "gpu-check: downloading ${#all[@]} packages into $debs"
  missed=()
  for p in "${all[@]}"; do apt-get download "$p" > /dev/null 2>&1 || missed+=("$p"); done  # virtual names have no .deb
  ((${#missed[@]} == 0)) || echo "gpu-check: not downloadable (virtual or unavailable): ${missed[*]}"
  exit 0
fi

build=${1:-$root/build-gpu}
command -v nvcc > /dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "gpu-check: no nvcc (CUDA toolkit) on this machine" >&2; exit 2; }
export PATH=/usr/local/cuda/bin:$PATH
if command -v nvidia-smi > /dev/null; then nvidia-smi -L || true; else echo "gpu-check: no nvidia-smi; GPU tests may skip (77)"; fi

# Unpack whatever .deb files were fetched (idempotent: a stamp per file).
if compgen -G "$debs/*.deb" > /dev/null; then
  mkdir -p "$prefix/.stamps"
  for f in "$debs"/*.deb; do
    s="$prefix/.stamps/$(basename "$f").done"
    [[ -e $s ]] || { dpkg -x "$f" "$prefix"; touch "$s"; }
  done
  arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
  lib=$prefix/usr/lib/$arch
  # Debian's alternatives symlinks (mpiexec, mpicc) are created by maintainer scripts, which
  # dpkg -x does not run: recreate the ones the build needs.
  [[ -e $prefix/usr/bin/mpiexec || ! -e $prefix/usr/bin/mpiexec.hydra ]] || ln -sf mpiexec.hydra "$prefix/usr/bin/mpiexec"
  [[ -e $prefix/usr/bin/mpicc || ! -e $prefix/usr/bin/mpicc.mpich ]] || ln -sf mpicc.mpich "$prefix/usr/bin/mpicc"
  [[ -e $prefix/usr/bin/mpicxx || ! -e $prefix/usr/bin/mpicxx.mpich ]] || ln -sf mpicxx.mpich "$prefix/usr/bin/mpicxx"
  export PATH=$PATH:$prefix/usr/bin
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib:$lib/hdf5/serial
  export PKG_CONFIG_PATH=${PKG_CONFIG_PATH:+$PKG_CONFIG_PATH:}$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export CPATH=${CPATH:+$CPATH:}$prefix/usr/include:$prefix/usr/include/hdf5/serial
  export LIBRARY_PATH=${LIBRARY_PATH:+$LIBRARY_PATH:}$lib:$lib/hdf5/serial
  cmake_extra=(-DCMAKE_PREFIX_PATH="$prefix/usr;$lib/cmake" -DHDF5_ROOT="$prefix/usr"
               -DCMAKE_INCLUDE_PATH="$prefix/usr/include;$prefix/usr/include/hdf5/serial"
               -DCMAKE_LIBRARY_PATH="$lib;$lib/hdf5/serial"
               -DRESIL_STATIC_HDF5=OFF)  # the shared libhdf5 from the prefix, as LD_LIBRARY_PATH finds it
  [[ -x $prefix/usr/bin/mpiexec.hydra ]] && cmake_extra+=(-DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpiexec.hydra")
else
  echo "gpu-check: no .deb files in $debs; using the system's libraries"
  cmake_extra=()
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRESIL_ENABLE_CUDA=ON "${cmake_extra[@]}"
cmake --build "$build" -j"$(nproc)"
rc=0
# The gpu tests, not the benchmarks (bench_train_gpu is labelled perf;gpu and runs next, alone).
ctest --test-dir "$build" -L gpu -LE perf --output-on-failure 2>&1 | tee "$build/gpu-check.log" || rc=$?
if ctest --test-dir "$build" -N -R '^bench_train_gpu' | grep -q 'Test *#'; then
  ctest --test-dir "$build" -R '^bench_train_gpu' -V 2>&1 | tee "$build/gpu-bench.txt" || rc=$?
else
  echo "gpu-check: no GPU benchmark registered (bench_train_gpu*)" | tee "$build/gpu-bench.txt"
fi
exit $rc
