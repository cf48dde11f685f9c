#!/usr/bin/env bash
# Packs built binaries for one call on the lent GPU machine (docs/gpu-roundtrip.md):
# each file stripped and xz-compressed into DIR (a folder becomes one .tar.xz of
# its stripped files), an unpack.sh beside them, and the total checked against
# the 64 MiB a call may carry.
#
#   bash scripts/device_bundle.sh .device/x build/tests/runtime/deltac_runtime_tests \
#        build/bench/cuda/libdeltac_chunked_bench.so build/tests/lit/gen
#
# There: `bash .device/x/unpack.sh` first (it leaves the files where they were
# packed, under their base names; a folder's files under its base name).
# xz gains ~0.3x on host-heavy binaries (the runtime tests: 152 -> 46 MB) and
# ~7% on device-code-heavy ones (nvcc compresses fatbins already).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DIR FILE_OR_FOLDER..." >&2; exit 2; }
dir=$1
shift
mkdir -p "$dir"
for f in "$@"; do
  name=$(basename "$f")
  if [ -d "$f" ]; then
    tmp=$(mktemp -d)
    mkdir -p "$tmp/$name"
    find "$f" -type f -perm -u+x -print0 | while IFS= read -r -d '' x; do
      strip -o "$tmp/$name/$(basename "$x")" "$x" 2>/dev/null || cp "$x" "$tmp/$name/"
    done
    tar -C "$tmp" -cf - "$name" | xz -9 -T2 > "$dir/$name.tar.xz"
    rm -rf "$tmp"
  elif [ -f "$f" ]; then
    strip -o "$dir/$name" "$f" 2>/dev/null || cp "$f" "$dir/$name"
    xz -9 -T2 -f "$dir/$name"
  else
    echo "device_bundle: $f: no such file or folder" >&2
    exit 1
  fi
done
cat > "$dir/unpack.sh" <<'EOF'
#!/usr/bin/env bash
# Unpacks what scripts/device_bundle.sh packed here (run on the GPU machine).
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")"
for t in *.tar.xz; do tar xJf "$t" && rm "$t"; done
for z in *.xz; do xz -d -T0 "$z"; done
EOF
chmod +x "$dir/unpack.sh"
total=$(du -cb "$dir" | tail -1 | cut -f1)
ls -l "$dir"
echo "device_bundle: $dir holds $total bytes of the 67108864 a call may carry"
[ "$total" -le 67108864 ] || { echo "device_bundle: over the carry limit" >&2; exit 1; }
