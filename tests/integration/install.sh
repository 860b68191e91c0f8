#!/usr/bin/env bash
# cmake --install puts the programs, libdtrain, its headers, the CMake package
# and the pkg-config file under a prefix; a program outside the tree builds
# against the library both ways and resolves a spec with it.
. "$(dirname "$0")/lib.sh"
: "${DTRAIN_BUILD_DIR:?needs the build directory}"

prefix=$T/prefix
cmake --install "$DTRAIN_BUILD_DIR" --prefix "$prefix" >"$T/install.log" || { cat "$T/install.log"; fail "cmake --install"; }
for f in bin/dtrain-submit bin/dtrain-run lib/libdtrain.a include/dtrain/jobs/spec.h \
	include/dtrain/site/site.h include/dtrain/base/err.h lib/pkgconfig/dtrain.pc \
	lib/cmake/dtrain/dtrainConfig.cmake lib/cmake/dtrain/dtrainTargets.cmake; do
	[ -e "$prefix/$f" ] || { cat "$T/install.log"; fail "not installed: $f"; }
done
"$prefix/bin/dtrain-submit" --version >/dev/null || fail "installed dtrain-submit does not run"
# a build with the GPU path installs its module, which the installed
# programs find (runtime/gpu/module.h); the build's own dtrain-run says
# which build this is
"$DTRAIN_BUILD_DIR/bin/dtrain-run" --version >"$T/version" || fail "dtrain-run --version"
if grep -q '^GPU path: built (' "$T/version"; then
	[ -n "$(find "$prefix" -path '*/dtrain/libdtrain-cuda.so')" ] ||
		{ cat "$T/install.log"; fail "not installed: the GPU module libdtrain-cuda.so"; }
	"$prefix/bin/dtrain-run" --version >"$T/iversion" || fail "installed dtrain-run --version"
	grep -q '^GPU path: built (' "$T/iversion" || { cat "$T/iversion"; fail "the installed dtrain-run does not load its GPU module"; }
fi
installed=$(cd "$prefix/include/dtrain" && find . -type f | sort | tr '\n' ' ')
[ "$installed" = "./base/buf.h ./base/err.h ./jobs/spec.h ./launcher/launch.h ./site/site.h " ] ||
	fail "installed headers: want libdtrain's five public ones, got: $installed"
pass "installed programs, library, its public headers only, CMake package, pkg-config file"

# A sanitizer build's library needs the sanitizer runtime in its consumers.
san=
grep -q '^DTRAIN_SANITIZE:BOOL=ON' "$DTRAIN_BUILD_DIR/CMakeCache.txt" && san="-fsanitize=address,undefined"

mkdir -p "$T/consumer"
# it includes launcher/launch.h too: the installed API header stands alone
cat >"$T/consumer/main.c" <<'C'
#include <stdio.h>
#include "jobs/spec.h"
#include "launcher/launch.h"
int main(int argc, char **argv)
{
	struct spec s;
	struct dt_err err = {0};

	if (argc < 2 || spec_load(argv[1], &s, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	printf("%s %ld\n", s.name, s.parallel.data * s.parallel.pipeline);
	spec_free(&s);
	return 0;
}
C
printf '{"name": "consumer", "resources": {"tasks_per_node": 4}, "parallel": {"data": 4}}\n' >"$T/spec.json"

# pkg-config
PKG_CONFIG_PATH=$prefix/lib/pkgconfig cc $san -o "$T/consumer/pc" "$T/consumer/main.c" \
	$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs --static dtrain) ||
	fail "build with pkg-config"
[ "$("$T/consumer/pc" "$T/spec.json")" = "consumer 4" ] || fail "pkg-config consumer output"
pass "a program builds with pkg-config and resolves a spec"

# CMake package
cat >"$T/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(dtrain REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE dtrain::dtrain)
CM
cmake -S "$T/consumer" -B "$T/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" >"$T/cm.log" 2>&1 &&
	cmake --build "$T/consumer/build" >>"$T/cm.log" 2>&1 || { cat "$T/cm.log"; fail "build with find_package(dtrain)"; }
[ "$("$T/consumer/build/consumer" "$T/spec.json")" = "consumer 4" ] || fail "CMake consumer output"
pass "a program builds with find_package(dtrain) and resolves a spec"
