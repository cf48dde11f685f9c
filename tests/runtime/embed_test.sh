#!/usr/bin/env bash
# ctest runtime_embed: installs deltac (component deltac) into a temporary
# prefix, builds examples/embed against it twice (find_package through
# CMAKE_PREFIX_PATH, and the README's plain g++ line through pkg-config) and
# runs both.   embed_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1" src="$2"
tmp="$(mktemp -d /tmp/deltac_embed_XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" --component deltac >/dev/null
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/examples/embed" -B "$tmp/build" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/embed"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
g++ -std=c++17 -O2 "$src/examples/embed/main.cpp" $(pkg-config --cflags --libs deltac) \
  -o "$tmp/embed_gpp"
"$tmp/embed_gpp"
