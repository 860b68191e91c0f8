#!/usr/bin/env bash
# site/gpu-bundle.sh - dtrain for a lent GPU machine, in one archive that runs
# where only the NVIDIA driver, the CUDA toolkit (cudart, cuBLAS) and NCCL's
# Python wheel are installed: no MPI, PMIx, HDF5, json-c, OpenBLAS or cmocka,
# no package registry (runtime/gpu/README.md, "The device check").
#
#   bash site/gpu-bundle.sh [OUT_DIR]     (make gpu-bundle; default build/gpu-bundle)
#
# What it does:
#   1. builds dtrain for sm_90 (H100, H200), Release, warnings as errors, in
#      OUT_DIR/build: the programs and the GPU unit tests;
#   2. fetches the Debian packages of every shared library those programs
#      load (found with ldd, mapped to packages with dpkg -S; glibc, libgcc,
#      libstdc++ and the CUDA libraries stay the machine's), Open MPI's
#      mpirun/orted with its plugins and PMIx's, and unpacks them with
#      `dpkg -x` into OUT_DIR/dtrain-gpu/root (never into /);
#   3. adds the programs (bin/), env.sh (PATH, LD_LIBRARY_PATH, OPAL_PREFIX,
#      PMIX_INSTALL_PREFIX, NCCL from the wheel), tests/gpu/check.sh, the
#      GPT example's spec (jobs/) and its data, the byte-level token stream
#      of Debian's fortunes (data/);
#   4. packs OUT_DIR/dtrain-gpu.tar.xz, at most 48 MiB (the device tool
#      carries 64 MiB with the tree).
# On the machine: tar xJf dtrain-gpu.tar.xz && bash dtrain-gpu/check.sh
# Exit codes: 0 built; 1 a step failed (named); 2 usage.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$src/build/gpu-bundle}
case "$out" in -h | --help) sed -n '2,24s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[[ $out = /* ]] || out=$PWD/$out
b=$out/dtrain-gpu
max_mib=48
say() { echo "gpu-bundle: $*" >&2; }
die() { say "$*"; exit 1; }

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc not found: the bundle needs the CUDA toolkit (CUDAToolkit_ROOT)"
command -v dpkg-query >/dev/null || die "dpkg not found: the bundle is made of Debian 12 packages"

# --- 1. the build ---
say "building for sm_90 in $out/build"
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA=ON \
	-DDTRAIN_CUDA_ARCHITECTURES=90 -DDTRAIN_WERROR=ON >"$out.cmake.log" 2>&1 ||
	{ tail -20 "$out.cmake.log"; die "configure failed ($out.cmake.log)"; }
progs=(dtrain-run dtrain-data dtrain-ckpt dtrain-submit)
tests=(test_gpu_kernels test_gpu_device test_gpu_transformer test_cuda_device)
cmake --build "$out/build" -j"$(nproc)" --target "${progs[@]}" "${tests[@]}" dtrain-cuda >"$out.build.log" 2>&1 ||
	{ tail -30 "$out.build.log"; die "build failed ($out.build.log)"; }

rm -rf "$b"
mkdir -p "$b/bin" "$b/tests" "$b/data" "$b/root" "$out/debs"
for p in "${progs[@]}"; do cp "$out/build/bin/$p" "$b/bin/"; done
# the GPU path, a module the programs load from beside them as in the
# build tree (runtime/gpu/module.h)
mod=$(cd "$out/build" && find . -path '*/dtrain/libdtrain-cuda.so' | head -n 1)
[ -n "$mod" ] || die "the build made no GPU module (libdtrain-cuda.so)"
mkdir -p "$b/$(dirname "$mod")"
cp "$out/build/$mod" "$b/$mod"
for t in "${tests[@]}"; do cp "$out/build/tests/$t" "$b/tests/"; done

# --- 2. the packages of what the programs load ---
# a library the machine has already: the C library, the compiler's runtime,
# and CUDA's own (the machine's driver and toolkit must match them)
machines_own() {
	case "$(basename "$1")" in
	ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s.so* | \
		libstdc++.so* | libcuda.so* | libcudart.so* | libcublas*.so* | libnccl.so* | libnvidia*) return 0 ;;
	esac
	return 1
}
declare -A pkgs=()
add_pkgs_of() { # the packages of the libraries the ELF files $@ load
	local lib p
	for lib in $(ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
		machines_own "$lib" && continue
		lib=${lib#"$b/root"} # found in the unpacked packages: the system's path
		p=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n 1 | cut -d: -f1) ||
			p=$(dpkg -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1) || true
		[ -n "$p" ] || die "$lib: no Debian package owns it"
		case "$p" in libc6 | libgcc-s1 | libstdc++6) continue ;; esac # the machine's
		pkgs[$p]=1
	done
}
add_pkgs_of "$b"/bin/* "$b"/tests/* "$b/$mod"
# mpirun and orted, Open MPI's and PMIx's plugins (loaded with dlopen: ldd
# of the programs does not show them), and what those load in turn
for p in openmpi-bin openmpi-common libopenmpi3 libpmix2; do pkgs[$p]=1; done
say "fetching ${#pkgs[@]} packages and what their plugins load"
fetch() {
	(cd "$out/debs" && apt-get download "$@" >/dev/null 2>"$out/debs/download.err") ||
		{ cat "$out/debs/download.err" >&2; die "apt-get download $* failed"; }
}
unpack_all() {
	local d
	for d in "$out"/debs/*.deb; do dpkg -x "$d" "$b/root"; done
}
# fetch what is missing, unpack everything (a rerun reuses the .debs it
# has: the bundle's root is made anew), then add the packages of what the
# unpacked plugins and helpers load, until nothing new comes
missing_pkgs() {
	local p
	for p in "${!pkgs[@]}"; do
		ls "$out/debs/${p}_"*.deb >/dev/null 2>&1 || echo "$p"
	done
}
for round in 1 2 3 4; do
	mapfile -t missing < <(missing_pkgs)
	[ ${#missing[@]} -gt 0 ] && fetch "${missing[@]}"
	unpack_all
	mapfile -t elfs < <(find "$b/root" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c 'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \; 2>/dev/null)
	[ ${#elfs[@]} -gt 0 ] && add_pkgs_of "${elfs[@]}"
	[ -z "$(missing_pkgs)" ] && break
done
[ -z "$(missing_pkgs)" ] || die "$(missing_pkgs | tr '\n' ' '): still missing after four rounds of what the packages load"
rm -rf "$b/root/usr/share/doc" "$b/root/usr/share/man" "$b/root/usr/share/lintian"
# the alternatives' names dpkg -x does not make: mpirun is Open MPI's orterun
ln -sf ../root/usr/bin/orterun "$b/bin/mpirun"

# --- 3. the environment, the check, the data ---
cat >"$b/env.sh" <<'ENV'
# . env.sh: dtrain's bundle on this machine (site/gpu-bundle.sh made it)
B=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R=$B/root/usr/lib/x86_64-linux-gnu
export OPAL_PREFIX=$B/root/usr
export PMIX_INSTALL_PREFIX=$R/pmix2
# the toolkit's bin too: compute-sanitizer, nvcc
export PATH=$B/bin:$B/root/usr/bin:${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
# NCCL from its Python wheel (nvidia-nccl-cu13), cudart and cuBLAS from the toolkit
nccl=$(ls -d /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib \
	$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) 2>/dev/null | head -n 1)
cuda=${CUDA_HOME:-/usr/local/cuda}/lib64
# the alternatives dpkg -x does not set up: libopenblas.so.0 lives in openblas-pthread/
export LD_LIBRARY_PATH=$R:$R/openblas-pthread:$R/openmpi/lib:$R/pmix2/lib:$B/root/lib/x86_64-linux-gnu${nccl:+:$nccl}:$cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one machine, no ssh: Open MPI's launcher for a lone node, and no
# cross-memory attach (a VM's kernel may refuse it)
export OMPI_MCA_plm=isolated OMPI_MCA_btl_vader_single_copy_mechanism=none
export HDF5_USE_FILE_LOCKING=FALSE
ENV
cp "$src/tests/gpu/check.sh" "$b/check.sh"
cp "$src/tests/gpu/compare.py" "$b/compare.py"
cp "$src/tests/gpu/perf.py" "$b/perf.py"
mkdir -p "$b/jobs" && cp "$src/jobs/gpt-tiny-2x2.json" "$b/jobs/"
if [ -f /usr/share/games/fortunes/fortunes ]; then
	# the GPT example's data, as make demo-gpt makes it (site/demo.sh)
	mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' | sort)
	"$out/build/bin/dtrain-data" text "${texts[@]}" "$b/data/fortunes" >/dev/null 2>&1 ||
		die "dtrain-data text of the fortunes failed"
else
	say "no /usr/share/games/fortunes (Debian package fortunes): the bundle has no text data"
fi

# --- 4. the archive ---
(cd "$out" && tar cJf dtrain-gpu.tar.xz dtrain-gpu)
mib=$(( ($(stat -c %s "$out/dtrain-gpu.tar.xz") + 1048575) / 1048576 ))
[ "$mib" -le "$max_mib" ] || die "$out/dtrain-gpu.tar.xz is $mib MiB, more than $max_mib"
say "$out/dtrain-gpu.tar.xz: $mib MiB ($(du -sm "$b" | cut -f1) MiB unpacked, ${#pkgs[@]} packages)"
