#!/usr/bin/env bash
# Carry onnxruntime-gpu (and zeus, the reference energy meter) to a GPU machine that reaches no package
# registry and takes at most 64 MiB of files per command (issue 32).
#
# Here (a machine that reaches PyPI), in the repository root:
#   bash benchmarks/gpu_wheels.sh prepare
# downloads the cp312 manylinux wheels into .gpuwheels/ (ignored through .git/info/exclude), splits
# each into pieces of at most 55 MiB, and prints one line per device command to send, in order. Each
# command carries one piece (`carry: [".gpuwheels/pNN"]`) and copies it into /tmp/gpuwheels on the
# device, which keeps it while the machine stays warm (send them back to back: it is released after
# about 30 s idle). The last command ends with
#   bash benchmarks/gpu_wheels.sh install
# which joins the pieces, checks every wheel's sha256 against the manifest written here, installs them
# into /tmp/site (`--no-deps --target`), and prints the PYTHONPATH to export. onnxruntime-gpu 1.31.1
# links CUDA 13 (libcublas.so.13, libcudart.so.13); the device's torch (cu130) brings those libraries
# as nvidia-* wheels, and `onnxruntime.preload_dlls()` loads them, so no system CUDA is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_GPU="onnxruntime-gpu==1.31.1"
ZEUS="zeus==0.16.0"
PIECE_MIB=55
HERE=.gpuwheels
THERE=/tmp/gpuwheels

prepare() {
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qxF "/$HERE/" "$exclude" 2>/dev/null || echo "/$HERE/" >>"$exclude"
    rm -rf "$HERE" && mkdir -p "$HERE/whl"
    local platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d "$HERE/whl" "$ORT_GPU"
    # zeus is pure Python; its own needs (pydantic, nvidia-ml-py, ...) are on the device already or
    # listed by `unzip -p $HERE/whl/zeus-*.whl '*/METADATA' | grep ^Requires-Dist`.
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$HERE/whl" "$ZEUS"
    (cd "$HERE/whl" && sha256sum ./*.whl >../manifest.sha256)
    tar -C "$HERE" -cf "$HERE/wheels.tar" whl manifest.sha256
    split -b "${PIECE_MIB}m" -d -a 2 "$HERE/wheels.tar" "$HERE/p"
    rm -rf "$HERE/whl" "$HERE/wheels.tar"
    local pieces=("$HERE"/p??)
    echo "wheels: $ORT_GPU, $ZEUS in ${#pieces[@]} pieces of at most $PIECE_MIB MiB"
    for piece in "${pieces[@]}"; do
        echo "device run, carry [\"$piece\"]: mkdir -p $THERE && cp $piece $THERE/"
    done
    echo "then, in the last command: bash benchmarks/gpu_wheels.sh install && export PYTHONPATH=/tmp/site"
}

install() {
    cat "$THERE"/p?? >"$THERE/wheels.tar"
    tar -C "$THERE" -xf "$THERE/wheels.tar"
    (cd "$THERE/whl" && sha256sum -c ../manifest.sha256)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$THERE"/whl/*.whl
    echo "installed into /tmp/site: export PYTHONPATH=/tmp/site"
}

case "${1:-}" in
prepare) prepare ;;
install) install ;;
*)
    echo "usage: bash benchmarks/gpu_wheels.sh prepare|install" >&2
    exit 2
    ;;
esac
