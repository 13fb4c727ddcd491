#!/usr/bin/env bash
# Rehearse the GPU check here, from the carried set alone: a clean Debian 12 chroot with only what the GPU
# machine brings (build-essential, cmake, ninja-build, python3; none of resil's -dev packages), a copy of
# what travels there (the files git tracks or does not ignore, and .debs/), then scripts/gpu-check.sh's
# steps versions, carried, prefix, configure, build, smoke and unittests inside it.
#
#   scripts/gpu-rehearse.sh [--root DIR] [--cuda ON|OFF] [--jobs N] [--ccache] [--all] [--mirror URL]
#
# The build is what the GPU machine builds (ckpt-train and the gpu tests) and the unit tests that
# between them link every library of the prefix: core_unit, ckpt_unit (HDF5, xxhash, OpenSSL,
# nlohmann-json), ec_unit (ISA-L), inject_deflate_patch (libdeflate, zlib), data_unit_tests,
# cuda_cublas_load and ckpt-train_no_cublas_at_start (CLI11 and Catch2 in all);
# MPICH is the smoke step's. --all builds every target and runs every unit test.
#
#   --root DIR   the chroot (default /var/tmp/resil-gpu-chroot), made with debootstrap on first use
#                (~600 MB) and reused; delete it to start over
#   --cuda ON    (default) the host's /usr/local/cuda is bound read-only into the chroot, so the CUDA code
#                compiles as on the GPU machine and cuBLAS loads (no GPU here: the gpu tests are not
#                run); OFF builds without CUDA
#   --jobs N     build and test jobs (default 2), under nice -n 19
#   --ccache     compile through ccache (installed into the chroot, its cache kept there)
#   --mirror URL Debian mirror for debootstrap (default http://deb.debian.org/debian)
# The unit tests read Debian's Fashion-MNIST (the whole test split), so the host's
# /usr/share/datasets/fashion-mnist is bound read-only into the chroot; the smoke step trains on the
# carried subset. Needs root, debootstrap, unshare, and scripts/gpu-check.sh --fetch first.
# Output: build-rehearse/ here (gpu-check.log, versions.txt, ctest-unit.log); exit 0 when every step passed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
R=/var/tmp/resil-gpu-chroot cuda=ON jobs=2 ccache=0 all=0 mirror=http://deb.debian.org/debian
while (($#)); do
  case $1 in
    --root) R=$2; shift ;;
    --cuda) cuda=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --ccache) ccache=1 ;;
    --all) all=1 ;;
    --mirror) mirror=$2; shift ;;
    *) echo "gpu-rehearse: unknown argument '$1' (see the top of $0)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "gpu-rehearse: $*" >&2; exit 1; }
((EUID == 0)) || die "needs root (debootstrap, chroot, mounts)"
compgen -G "$root/.debs/*.deb" > /dev/null || die "no .deb files in $root/.debs: run scripts/gpu-check.sh --fetch first"
[[ $cuda == OFF || -x /usr/local/cuda/bin/nvcc ]] || die "--cuda ON needs the CUDA toolkit in /usr/local/cuda"
data=/usr/share/datasets/fashion-mnist
[[ -e $data/t10k-images-idx3-ubyte.gz ]] || die "no $data here (Debian's dataset-fashion-mnist, which the unit tests read)"

# ---- the chroot: what the GPU machine has, nothing more (ccache only with --ccache)
if [[ ! -e $R/.resil-gpu-rehearse ]]; then
  command -v debootstrap > /dev/null || die "no debootstrap (apt-get install debootstrap)"
  echo "gpu-rehearse: debootstrap bookworm into $R"
  debootstrap --variant=minbase bookworm "$R" "$mirror" > "$R.debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $R.debootstrap.log"
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  chroot "$R" apt-get update -q
  chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    build-essential cmake ninja-build python3
  touch "$R/.resil-gpu-rehearse"
fi
if ((ccache)) && [[ ! -x $R/usr/bin/ccache ]]; then
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ccache
fi
absent=(/usr/include/hdf5 /usr/include/H5public.h /usr/include/isa-l.h /usr/include/x86_64-linux-gnu/mpich
        /usr/include/mpi.h /usr/include/CLI /usr/include/catch2 /usr/include/nlohmann /usr/include/xxhash.h
        /usr/include/openssl /usr/include/libdeflate.h /usr/include/zlib.h /usr/bin/pkg-config /usr/bin/mpiexec
        /usr/bin/h5cc)
for p in "${absent[@]}"; do [[ ! -e $R$p ]] || die "the chroot has $p: it must lack resil's -dev packages"; done
echo "gpu-rehearse: the chroot $R has no -dev package of resil's dependencies (checked: ${#absent[@]} paths)"

# ---- what travels: tracked and untracked-not-ignored files, and the carried .debs/
src=$R/src/resil
rm -rf "$src"
mkdir -p "$src"
git -C "$root" ls-files -z -co --exclude-standard |
  tar -C "$root" --null --ignore-failed-read -T - -cf - 2> /dev/null | tar -C "$src" -xf -
cp -a "$root/.debs" "$src/.debs"
echo "gpu-rehearse: what travels: $(du -sm "$src" | cut -f1) MiB ($(du -sm "$src/.debs" | cut -f1) MiB of it .debs/)"

env_in=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
((ccache)) && env_in+=(CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
                       CMAKE_CUDA_COMPILER_LAUNCHER=ccache CCACHE_DIR=/var/cache/resil-ccache CCACHE_BASEDIR=/src)
# A private mount namespace: the mounts go away with it, whatever happens inside.
units=core_unit,ckpt_unit,ec_unit,inject_deflate_patch,data_unit_tests,cuda_cublas_load
what=(--also-build "$units" --unit-tests "^(${units//,/|}|ckpt-train_no_cublas_at_start)\$")
((all)) && what=(--all-targets)
rc=0
unshare --mount --propagation private -- bash -s "$R" "$cuda" "$jobs" "$data" "${#what[@]}" "${what[@]}" "${env_in[@]}" << 'EOF' || rc=$?
set -euo pipefail
R=$1 cuda=$2 jobs=$3 data=$4 n=$5
shift 5
what=("${@:1:n}")
shift "$n"
mount -t proc proc "$R/proc"
mount -t sysfs sys "$R/sys"
mount --rbind /dev "$R/dev"
mkdir -p "$R$data"
mount --bind "$data" "$R$data" && mount -o remount,bind,ro "$R$data"
if [[ $cuda == ON ]]; then
  mkdir -p "$R/usr/local/cuda"
  mount --bind "$(readlink -f /usr/local/cuda)" "$R/usr/local/cuda" && mount -o remount,bind,ro "$R/usr/local/cuda"
fi
chroot "$R" /usr/bin/env -i "$@" nice -n 19 /src/resil/scripts/gpu-check.sh \
  --steps versions,carried,prefix,configure,build,smoke,unittests "${what[@]}" --cuda "$cuda" --jobs "$jobs" --keep-going
EOF
mkdir -p "$root/build-rehearse"
cp "$src"/build-gpu/out/*.{log,txt} "$root/build-rehearse/" 2> /dev/null || true
echo "gpu-rehearse: $( ((rc == 0)) && echo "every step passed" || echo "FAILED (exit $rc)"); logs in $root/build-rehearse/"
exit $rc
