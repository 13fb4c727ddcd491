#!/usr/bin/env bash
# The GPU check, for a machine that has a GPU, nvcc, CMake, ninja, gcc and a PyTorch but none of resil's
# other dependencies and no network. Two halves:
#
#   scripts/gpu-check.sh --fetch
#       On a Debian 12 box with apt: downloads the packages below into the git-ignored .debs/, cuts
#       Fashion-MNIST to what the gpu tests and the benchmark read (.debs/fashion-mnist), copies three
#       of Debian's fortunes files, the gpt's corpus (.debs/fortunes), and fails if .debs/ is over its
#       budget. .debs/ is what travels beside the checkout.
#
#   scripts/gpu-check.sh [--steps LIST] [--keep-going] [--budget S] [--build DIR] [--out DIR] [--jobs N]
#                        [--cuda ON|OFF] [--also-build T,T | --all-targets] [--unit-tests REGEX]
#       On the GPU machine, in the checkout with .debs/: runs the steps in order, everything logged to
#       OUT/gpu-check.log (OUT: --out, else $OUT, else BUILD/out). A failed step ends the run with one
#       line naming it; --keep-going goes on with the steps that do not need it. --budget S: no step
#       runs past S seconds from the start (the log and the summary line are still written). The last
#       line says which steps passed, failed and were skipped; the exit status is 0 only if none failed.
#
# Steps (default: versions,carried,torchfiles,prefix,configure,build,smoke,gputests,determinism,bench):
#   versions     the machine: OS, GPU, driver, nvcc, CMake, gcc, Python and its packages (OUT/versions.txt)
#   carried      every package below is in .debs/, with the Fashion-MNIST subset; the size budget holds
#   torchfiles   tests/inject/formats/torch_files/make_torch_files.py with this machine's PyTorch
#                (OUT/torch-files.tar.gz)
#   prefix       the .deb files unpacked with `dpkg -x` into BUILD/prefix (never into /), the wrapper
#                scripts of MPICH and HDF5 pointed at it, every library in it resolvable; the Fashion-
#                MNIST subset installed at /usr/share/datasets/fashion-mnist when that has no data, and
#                the fortunes at /usr/share/games/fortunes
#   configure    cmake with CUDA (--cuda), everything else from the prefix; NCCL from the CUDA toolkit
#                or from the Python's nvidia.nccl package
#   build        the targets the later steps run, and --also-build's (--all-targets: all)
#   smoke        ckpt-train on the CPU over the carried data, then 2 ranks under the prefix's mpiexec
#   gputests     ctest -L gpu -LE perf but gpu_same_seed_twice (OUT/ctest-gpu.log); a skipped test
#                fails the step, but gpu_nccl_collectives and gpu_train_nccl with one GPU
#   determinism  gpu_same_seed_twice: mlp, cnn and dlrm twice with one seed on the GPU, checkpoints
#                bitwise equal
#   bench        bench_train_gpu and bench_gpt_gpu: ckpt-train against PyTorch on this GPU (OUT/gpu-bench.txt)
#   unittests    ctest -L unit, those matching --unit-tests (OUT/ctest-unit.log; scripts/gpu-rehearse.sh
#                runs it)
#
# The prefix is found by CMAKE_PREFIX_PATH, the rewritten h5cc and mpicxx, and a pkg-config wrapper.
# The executables carry the prefix as DT_RPATH (-Wl,--disable-new-dtags), which the loader also uses
# for the libraries those load (libmpich's hwloc, UCX), so no LD_LIBRARY_PATH reaches Python or PyTorch;
# mpiexec is a wrapper that gives hydra the prefix's libraries. The Python of the tests and the
# benchmark: $RESIL_PYTHON, else `python3` on the PATH (it needs numpy and h5py; torch for the benchmark).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
debs=$root/.debs
data=$debs/fashion-mnist
text=$debs/fortunes
text_files=(computers cookie definitions)  # ~660 KB with their .dat indexes: the gpt's tests and benchmark

# What the build needs (cmake/ResilDeps.cmake, libckpt/, injectors/, tests/) and what its executables,
# mpiexec and pkg-config load; no compiler: the machine's own gcc, libstdc++ and libgomp are used.
pkgs=(
  libhdf5-dev hdf5-helpers libaec-dev libsz2 libaec0   # HDF5 linked statically (libhdf5.a), szip, h5cc
  libisal-dev libisal2
  mpich libmpich-dev libmpich12 libhwloc15 libucx0 libnuma1 libudev1 libslurm38  # hydra needs libslurm
  libcli11-dev catch2 nlohmann-json3-dev
  libxxhash-dev libxxhash0
  libssl-dev libssl3
  libdeflate-dev libdeflate0
  zlib1g-dev zlib1g
  pkgconf pkgconf-bin libpkgconf3
)
# Fashion-MNIST as far as the gpu tests (1024 training and 500 test samples) and bench_train_gpu
# (250 steps of 128 = 32000 training samples) read it; load_mnist takes the first N.
train_n=32000
test_n=1000
# .debs/ (the packages, ~27 MiB, and the data, ~15 MiB) and the tree (~4 MiB) travel together; the
# device tool takes 64 MiB in all.
debs_budget_mib=46
travel_budget_mib=56

die() { echo "gpu-check: $*" >&2; exit 1; }
mib() { awk -v b="$1" 'BEGIN{printf "%.1f", b / 1048576}'; }

tree_bytes() {  # what travels besides carried paths: tracked and untracked files that git does not ignore
  git -C "$root" rev-parse --git-dir > /dev/null 2>&1 || { echo 0; return; }
  git -C "$root" ls-files -z -co --exclude-standard | (cd "$root" && xargs -0 -r stat -c %s -- 2> /dev/null) |
    awk '{s += $1} END {print s + 0}'
}

check_size() {
  local d t
  d=$(du -sb "$debs" | cut -f1)
  t=$(tree_bytes)
  echo "gpu-check: .debs/ $(mib "$d") MiB (budget $debs_budget_mib), tree $(mib "$t") MiB, together $(mib $((d + t))) MiB (budget $travel_budget_mib)"
  ((d <= debs_budget_mib * 1048576)) || die ".debs/ is $(mib "$d") MiB, over its budget of $debs_budget_mib MiB"
  ((d + t <= travel_budget_mib * 1048576)) || die ".debs/ and the tree are $(mib $((d + t))) MiB, over the budget of $travel_budget_mib MiB"
}

fetch() {
  command -v apt-get > /dev/null || die "--fetch needs apt-get (a Debian 12 machine)"
  mkdir -p "$debs"
  tmp=$(mktemp -d "$debs/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # As root, apt downloads as the user _apt, who cannot write into a folder made by mktemp.
  (cd "$tmp" && apt-get -o APT::Sandbox::User=root download "${pkgs[@]}") || die "apt-get download failed (after apt-get update?)"
  rm -rf "$debs"/*.deb "$debs/prefix" "$data" "$text"  # an old list's packages or an unpacked prefix must not travel
  mv "$tmp"/*.deb "$debs"/
  local src=/usr/share/datasets/fashion-mnist
  if [[ ! -e $src/train-images-idx3-ubyte.gz ]]; then
    (cd "$tmp" && apt-get -o APT::Sandbox::User=root download dataset-fashion-mnist && dpkg -x dataset-fashion-mnist_*.deb x) ||
      die "no Fashion-MNIST here and dataset-fashion-mnist could not be downloaded"
    src=$tmp/x/usr/share/datasets/fashion-mnist
  fi
  mkdir -p "$data"
  python3 - "$src" "$data" "$train_n" "$test_n" << 'EOF' || die "cutting Fashion-MNIST failed"
import gzip, struct, sys
src, dst, n_train, n_test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for split, n in (("train", n_train), ("t10k", n_test)):
    for kind, rec in (("images-idx3", 784), ("labels-idx1", 1)):
        name = f"{split}-{kind}-ubyte.gz"
        raw = gzip.open(f"{src}/{name}").read()
        dims = raw[3]
        hdr = bytearray(raw[:4 + 4 * dims])
        if struct.unpack(">I", hdr[4:8])[0] < n:
            sys.exit(f"{name} has fewer than {n} records")
        hdr[4:8] = struct.pack(">I", n)
        with gzip.GzipFile(f"{dst}/{name}", "wb", compresslevel=9, mtime=0) as f:  # mtime 0: same bytes each time
            f.write(bytes(hdr) + raw[len(hdr):len(hdr) + n * rec])
EOF
  local tsrc=/usr/share/games/fortunes f
  if [[ ! -e $tsrc/${text_files[0]}.dat ]]; then
    (cd "$tmp" && apt-get -o APT::Sandbox::User=root download fortunes-min fortunes && for f in fortunes*.deb; do dpkg -x "$f" t; done) ||
      die "no fortunes here and fortunes could not be downloaded"
    tsrc=$tmp/t/usr/share/games/fortunes
  fi
  mkdir -p "$text"
  for f in "${text_files[@]}"; do cp "$tsrc/$f" "$tsrc/$f.dat" "$text"/ || die "cannot copy $tsrc/$f"; done
  rm -rf "$tmp"
  echo "gpu-check: ${#pkgs[@]} packages, fortunes (${text_files[*]}) and Fashion-MNIST (first $train_n training, $test_n test images) in $debs"
  check_size
}

if [[ ${1:-} == --fetch ]]; then
  fetch
  exit 0
fi

# ---- the run ----------------------------------------------------------------------------------------
steps=versions,carried,torchfiles,prefix,configure,build,smoke,gputests,determinism,bench
keep_going=0 budget=0 build=$root/build-gpu out=${OUT:-} jobs=$(nproc) cuda=ON all_targets=0 also_build= unit_tests=.
while (($#)); do
  case $1 in
    --steps) steps=$2; shift ;;
    --keep-going) keep_going=1 ;;
    --budget) budget=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --cuda) cuda=$2; shift ;;
    --all-targets) all_targets=1 ;;
    --also-build) also_build=$2; shift ;;
    --unit-tests) unit_tests=$2; shift ;;
    *) die "unknown argument '$1' (see the top of $0)" ;;
  esac
  shift
done
[[ $cuda == ON || $cuda == OFF ]] || die "--cuda takes ON or OFF"
[[ $build == /* ]] || build=$PWD/$build
out=${out:-$build/out}
mkdir -p "$build" "$out" || die "cannot create $build or $out"
log=$out/gpu-check.log
exec > >(tee -a "$log") 2>&1
tee_pid=$!
start=$(date +%s)
[[ -d /usr/local/nvidia/bin ]] && export PATH=$PATH:/usr/local/nvidia/bin
py=${RESIL_PYTHON:-$(command -v python3 || echo /usr/bin/python3)}
# nvcc: /usr/local/cuda, else the PATH, else a versioned /usr/local/cuda-*, else the Python's CUDA wheels.
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
elif ! command -v nvcc > /dev/null; then
  for f in /usr/local/cuda-*/bin/nvcc "$(dirname "$py")"/../lib/python3*/site-packages/nvidia/*/bin/nvcc; do
    [[ -x $f ]] && { export PATH=$(cd "$(dirname "$f")" && pwd):$PATH; break; }
  done
fi
prefix=$build/prefix
arch=$(gcc -print-multiarch 2> /dev/null)
lib=$prefix/usr/lib/${arch:-x86_64-linux-gnu}
have_debs=0
compgen -G "$debs/*.deb" > /dev/null && have_debs=1

left() { if ((budget > 0)); then echo $((start + budget - $(date +%s))); else echo 999999; fi; }
within() {  # run "$@" in what is left of --budget
  local l
  l=$(left)
  if ((l < 15)); then
    echo "gpu-check: no time left (--budget $budget) for: $*"
    return 124
  fi
  if ((budget > 0)); then timeout -k 10 "$l" "$@"; else "$@"; fi
}
ctest_skips() {  # fail when a test of this output was skipped (exit 77): a GPU run must not skip
  local skipped bad=() t gpus
  skipped=$(sed -nE 's/.*Test +#[0-9]+: ([^ ]+) .*\*\*\*(Skipped|Not Run).*/\1/p' "$1")
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
  for t in $skipped; do
    # With one GPU these check the refusal and the host fallback, then skip: NCCL needs a GPU per rank.
    if ((gpus < 2)) && [[ $t == gpu_nccl_collectives || $t == gpu_train_nccl ]]; then
      echo "gpu-check: $t skipped as it must with $gpus GPU (NCCL needs one GPU per rank)"
    else
      bad+=("$t")
    fi
  done
  ((${#bad[@]} == 0)) || { echo "gpu-check: skipped: ${bad[*]} (no usable GPU for ckpt-train, or no torch.cuda?)"; return 1; }
}

step_versions() {
  {
    echo "date     $(date -u +%FT%TZ)"
    echo "kernel   $(uname -srm)"
    echo "os       $(. /etc/os-release 2> /dev/null && echo "$PRETTY_NAME")"
    echo "glibc    $(ldd --version 2>&1 | head -1)"
    echo "cpus     $(nproc)"
    if command -v nvidia-smi > /dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | sed 's/^/gpu      /'
    else
      echo "gpu      no nvidia-smi"
    fi
    echo "nvcc     $(nvcc --version 2> /dev/null | grep -o 'release.*' || echo none) ($(command -v nvcc))"
    echo "cmake    $(cmake --version | head -1)"
    echo "ninja    $(ninja --version 2> /dev/null || echo none)"
    echo "gcc      $(gcc --version | head -1)"
    "$py" - << 'EOF'
import importlib, sys
print(f"python   {sys.version.split()[0]} ({sys.executable})")
for m in ("numpy", "h5py", "safetensors", "torch"):
    try:
        print(f"{m:8s} {importlib.import_module(m).__version__}")
    except Exception as e:
        print(f"{m:8s} none ({e})")
try:
    import torch
    print(f"torch.cuda {torch.version.cuda}, available {torch.cuda.is_available()}, cudnn {torch.backends.cudnn.version()}")
    if torch.cuda.is_available():
        print(f"device   {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}, nccl {torch.cuda.nccl.version()}")
except Exception as e:
    print(f"torch.cuda: {e}")
EOF
  } | tee "$out/versions.txt"
}

step_carried() {
  ((have_debs)) || { echo "gpu-check: no .deb files in $debs: the system's libraries are used"; return 0; }
  local p missing=()
  for p in "${pkgs[@]}"; do compgen -G "$debs/${p}_*.deb" > /dev/null || missing+=("$p"); done
  ((${#missing[@]} == 0)) || { echo "gpu-check: not in $debs: ${missing[*]} (scripts/gpu-check.sh --fetch)"; return 1; }
  for p in train-images-idx3 train-labels-idx1 t10k-images-idx3 t10k-labels-idx1; do
    [[ -s $data/$p-ubyte.gz ]] || { echo "gpu-check: $data/$p-ubyte.gz missing (scripts/gpu-check.sh --fetch)"; return 1; }
  done
  (check_size)
}

step_torchfiles() {
  rm -rf "$build/torch-files"
  within "$py" "$root/tests/inject/formats/torch_files/make_torch_files.py" "$build/torch-files" &&
    tar -C "$build" -czf "$out/torch-files.tar.gz" torch-files &&
    echo "gpu-check: $out/torch-files.tar.gz ($(du -k "$out/torch-files.tar.gz" | cut -f1) KiB)"
}

step_prefix() {
  ((have_debs)) || { echo "gpu-check: no .deb files: nothing to unpack"; return 0; }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  local f
  for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix" || { echo "gpu-check: dpkg -x $f failed"; return 1; }; done
  local bin=$prefix/usr/bin
  # Wrapper scripts name /usr: point them here. h5cc's -lcurl serves HDF5's S3 driver, which resil
  # never calls (the static link keeps no libcurl), so it is dropped rather than carried; its -lsz,
  # -lcrypto and -lz are found here too (FindHDF5 links a test program with h5cc).
  sed -i -e "s|^prefix=\"/usr\"|prefix=\"$prefix/usr\"|" -e '/^H5BLD_LIBS=/s/-lcurl //' \
    -e "s|^H5BLD_LDFLAGS=\"|H5BLD_LDFLAGS=\"-L$lib -Wl,-rpath-link,$lib |" "$bin/h5cc"
  grep -q "^prefix=\"$prefix/usr\"" "$bin/h5cc" && grep -q "^H5BLD_LDFLAGS=\"-L$lib" "$bin/h5cc" ||
    { echo "gpu-check: h5cc has no prefix=\"/usr\" or H5BLD_LDFLAGS line to rewrite"; return 1; }
  for f in mpicc mpicxx; do
    sed -i -E "s#^(prefix|exec_prefix|includedir|libdir)=/usr#\1=$prefix/usr#" "$bin/$f.mpich"
    grep -q "^libdir=$prefix/usr" "$bin/$f.mpich" || { echo "gpu-check: $f.mpich has no libdir=/usr line to rewrite"; return 1; }
    ln -sf "$f.mpich" "$bin/$f"  # Debian's alternatives links, made by maintainer scripts that dpkg -x skips
  done
  # hydra (and hydra_pmi_proxy, which it starts) load hwloc, slurm and udev from here; the ranks
  # inherit the variable, but resil's executables find the prefix through their DT_RPATH first.
  cat > "$bin/mpiexec" << EOF
#!/bin/sh
LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec $bin/mpiexec.hydra "\$@"
EOF
  cat > "$bin/resil-pkg-config" << EOF
#!/bin/sh
PKG_CONFIG_LIBDIR=$lib/pkgconfig:$prefix/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$prefix LD_LIBRARY_PATH=$lib exec $bin/pkgconf "\$@"
EOF
  chmod +x "$bin/mpiexec" "$bin/resil-pkg-config"
  # Every library and program here that the build or the tests use must resolve (UCX's transport
  # modules in ucx/ are optional, and libmpichfort needs gfortran, which resil never links).
  local bad=0 sys
  for f in "$lib"/*.so.* "$bin"/{mpiexec.hydra,hydra_pmi_proxy,pkgconf}; do
    [[ -f $f && ! -L $f && $f != *fort* ]] || continue
    if LD_LIBRARY_PATH=$lib ldd "$f" 2>&1 | grep -q 'not found'; then
      echo "gpu-check: $f needs what neither the prefix nor the system has:"
      LD_LIBRARY_PATH=$lib ldd "$f" | grep 'not found'
      bad=1
    fi
  done
  ((bad == 0)) || return 1
  sys=$(for f in "$lib"/*.so.* "$bin"/{mpiexec.hydra,hydra_pmi_proxy}; do [[ -f $f && ! -L $f && $f != *fort* ]] && LD_LIBRARY_PATH=$lib ldd "$f"; done |
        awk '$2 == "=>" && $3 !~ "^'"$prefix"'" {print $1}' | sort -u | tr '\n' ' ')
  echo "gpu-check: $(ls "$debs"/*.deb | wc -l) packages unpacked into $prefix ($(du -sm "$prefix" | cut -f1) MB); from the system: $sys"
  "$bin/mpiexec" --version | sed -n 2p || true
  local sys_data=/usr/share/datasets/fashion-mnist
  if ! compgen -G "$sys_data/train-images-idx3-ubyte*" > /dev/null; then
    mkdir -p "$sys_data" && cp "$data"/*.gz "$sys_data"/ ||
      { echo "gpu-check: cannot install Fashion-MNIST at $sys_data"; return 1; }
    echo "gpu-check: Fashion-MNIST (first $train_n training, $test_n test images) installed at $sys_data, where the tests read it"
  fi
  local sys_text=/usr/share/games/fortunes
  if ! compgen -G "$sys_text/*.dat" > /dev/null; then
    mkdir -p "$sys_text" && cp "$text"/* "$sys_text"/ || { echo "gpu-check: cannot install the fortunes at $sys_text"; return 1; }
    echo "gpu-check: fortunes (${text_files[*]}) installed at $sys_text, the gpt's default corpus"
  fi
}

step_configure() {
  local rpath=() args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRESIL_ENABLE_MPI=ON -DRESIL_PYTHON="$py"
              -DRESIL_ENABLE_CUDA="$cuda")
  command -v ninja > /dev/null && [[ ! -f $build/CMakeCache.txt || -f $build/build.ninja ]] && args+=(-G Ninja)
  if ((have_debs)); then
    # gcc searches /usr/include/<multiarch> by itself (openssl/opensslconf.h is there), not the prefix's.
    local multiarch_include=$prefix/usr/include/${arch:-x86_64-linux-gnu}
    rpath+=("$lib" "$lib/hdf5/serial")
    args+=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DHDF5_C_COMPILER_EXECUTABLE="$prefix/usr/bin/h5cc"
           -DMPI_C_COMPILER="$prefix/usr/bin/mpicc" -DMPI_CXX_COMPILER="$prefix/usr/bin/mpicxx"
           -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpiexec" -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/resil-pkg-config"
           -DCMAKE_C_STANDARD_INCLUDE_DIRECTORIES="$multiarch_include"
           -DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES="$multiarch_include"
           -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags -Wl,-rpath-link,$lib")
  fi
  if [[ $cuda == ON ]]; then
    local cap nccl
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | tr -d ' .')
    [[ $cap =~ ^[0-9]+$ ]] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$cap")
    if ! compgen -G "/usr/local/cuda/include/nccl.h" > /dev/null && ! compgen -G "/usr/include/nccl.h" > /dev/null; then
      nccl=$("$py" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2> /dev/null)
      if [[ -n $nccl && -f $nccl/include/nccl.h ]] && compgen -G "$nccl/lib/libnccl.so*" > /dev/null; then
        args+=(-DNCCL_INCLUDE_DIR="$nccl/include" -DNCCL_LIBRARY="$(ls "$nccl"/lib/libnccl.so* | head -1)")
        rpath+=("$nccl/lib")  # libnccl.so.2 is in no folder the loader searches
        echo "gpu-check: NCCL from $nccl"
      else
        echo "gpu-check: no NCCL headers (neither CUDA's include/ nor $py's nvidia.nccl): the NCCL tests are not built"
      fi
    fi
  fi
  ((${#rpath[@]})) && args+=(-DCMAKE_BUILD_RPATH="$(IFS=';'; echo "${rpath[*]}")")
  within cmake "${args[@]}" || return 1
  echo "gpu-check: what the build links:"
  grep -E '^(HDF5_C_LIBRARY_hdf5|HDF5_C_LIBRARY_sz|ISAL_LIBRARY|XXHASH_LIBRARY|OPENSSL_CRYPTO_LIBRARY|ZLIB_LIBRARY_RELEASE|MPI_mpich_LIBRARY|MPIEXEC_EXECUTABLE|NCCL_LIBRARY|CLI11_DIR|Catch2_DIR|nlohmann_json_DIR|pkgcfg_lib_LIBDEFLATE_deflate):' \
    "$build/CMakeCache.txt" | sed 's/^/  /'
}

step_build() {
  local targets=()
  if ((!all_targets)); then
    local t have
    have=$(cmake --build "$build" --target help 2> /dev/null)
    for t in ckpt-train gpu_backend gpu_nccl cuda_cublas_load ${also_build//,/ }; do
      [[ " ${targets[*]} " == *" $t "* ]] && continue
      grep -qE "(^|[ .])$t(:| )" <<< "$have" && targets+=("$t")
    done
    ((${#targets[@]})) || { echo "gpu-check: none of the targets of the GPU check exists"; return 1; }
    echo "gpu-check: building ${targets[*]}"
    targets=(--target "${targets[@]}")
  fi
  within cmake --build "$build" -j"$jobs" "${targets[@]}"
}

step_smoke() {
  local ct=$build/bin/ckpt-train w=$build/smoke mpiexec
  mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
  if ldd "$ct" | grep 'not found'; then echo "gpu-check: $ct cannot load the libraries above"; return 1; fi
  echo "gpu-check: $ct loads from the prefix: $(ldd "$ct" | awk -v p="$prefix" 'index($3, p) == 1 {print $1}' | tr '\n' ' ')"
  rm -rf "$w"
  mkdir -p "$w"
  within "$ct" train --model mlp --device cpu --data "$data" --limit "$train_n" --test-limit "$test_n" --epochs 1 \
    --batch 128 --seed 1 --ckpt-dir "$w/cpu" --summary "$w/cpu.json" || return 1
  [[ -n $mpiexec ]] || { echo "gpu-check: no MPIEXEC_EXECUTABLE in the cache"; return 1; }
  within "$mpiexec" -n 2 "$ct" train --model mlp --parallel dp --device cpu --data "$data" --limit 1024 \
    --test-limit 500 --epochs 1 --batch 64 --seed 7 --ckpt-dir "$w/dp" --summary "$w/dp.json" || return 1
  echo "gpu-check: the carried data trains on the CPU, and 2 ranks ran under $mpiexec"
}

step_gputests() {
  within ctest --test-dir "$build" -L gpu -LE perf -E '^gpu_same_seed_twice$' -j4 --output-on-failure --no-tests=error |
    tee "$build/gputests.txt"
  local rc=${PIPESTATUS[0]}
  cp "$build/Testing/Temporary/LastTest.log" "$out/ctest-gpu.log" 2> /dev/null
  ((rc == 0)) && ctest_skips "$build/gputests.txt"
}

step_determinism() {
  within ctest --test-dir "$build" -R '^gpu_same_seed_twice$' -V --no-tests=error | tee "$build/determinism.txt"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) && ctest_skips "$build/determinism.txt"
}

step_bench() {
  RESIL_BENCH_PYTHON=$py within ctest --test-dir "$build" -R '^bench_(train|gpt)_gpu$' -V --no-tests=error |
    tee "$out/gpu-bench.txt"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) && ctest_skips "$out/gpu-bench.txt"
}

step_unittests() {
  within ctest --test-dir "$build" -L unit -R "$unit_tests" -j"$jobs" --output-on-failure --no-tests=error
  local rc=$?
  cp "$build/Testing/Temporary/LastTest.log" "$out/ctest-unit.log" 2> /dev/null
  return $rc
}

declare -A needs=([prefix]=carried [configure]=prefix [build]=configure [smoke]=build [gputests]=build
                  [determinism]=build [bench]=build [unittests]=build)
passed=() failed=() skipped=()
IFS=, read -ra chosen <<< "$steps"
for s in "${chosen[@]}"; do
  declare -F "step_$s" > /dev/null || die "unknown step '$s'"
done
echo "gpu-check: steps ${chosen[*]}; build $build; log $log; python $py; $(date -u +%FT%TZ)"
for s in "${chosen[@]}"; do
  n=${needs[$s]:-}
  if ((${#failed[@]} && !keep_going)); then
    skipped+=("$s")
    continue
  fi
  if [[ -n $n && " ${failed[*]} ${skipped[*]} " == *" $n "* ]]; then
    echo "gpu-check: $s skipped: it needs $n"
    skipped+=("$s")
    continue
  fi
  t0=$(date +%s)
  echo "=== $s ($(date -u +%T)$( ((budget > 0)) && echo ", $(left) s left"))"
  (set -o pipefail; "step_$s")
  rc=$?
  if ((rc == 0)); then
    passed+=("$s")
    echo "--- $s: ok in $(($(date +%s) - t0)) s"
  else
    failed+=("$s")
    echo "--- $s: FAILED (exit $rc) after $(($(date +%s) - t0)) s; see above in $log"
  fi
done
echo "gpu-check: passed: ${passed[*]:-none}; failed: ${failed[*]:-none}; skipped: ${skipped[*]:-none} ($(($(date +%s) - start)) s)"
exec > /dev/null 2>&1
wait "$tee_pid" 2> /dev/null
((${#failed[@]} == 0))
