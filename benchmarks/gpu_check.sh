#!/usr/bin/env bash
# Every check of the project that needs a GPU, in one call, for a lent GPU machine with a
# short budget:
#
#     bash benchmarks/gpu_check.sh [OUT]        # OUT: where logs go (default: $OUT or ./gpu-check)
#
# First what any machine can check (nvcc and NVRTC only), then, where nvidia-smi lists a GPU:
#  1. the tests marked `gpu` (program mode, kernel mode, Ray on the one GPU, energy by NVML);
#  2. tests/run/gpu_kernel_check.py: KernelRunner with every backend, outputs and throughput;
#  3. the CUDA example conv2d tuned in program mode, then `annotune check --measure` on the
#     header it wrote (exit 0: still faster; 1: it no longer pays, which is a finding, not a
#     failure of the script);
#  4. conv2d tuned in kernel mode (a fresh study each, small budgets), then with
#     --objective energy;
#  5. a Ray tune of conv2d over every GPU there is (`--ray --devices all`);
#  6. benchmarks/gpu_kernel_mode.py when HECBENCH names a HeCBench checkout (none is reachable
#     from a lent machine unless carried).
# Each step runs under its own timeout and its log goes to OUT; a failing step does not stop
# the others. One table at the end lists each step's exit code and time. Exit 0 when every
# step passed, 1 when one failed, 2 when there is no GPU (after the checks that need none
# passed, with the reason).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check}}"
mkdir -p "$out"
rows=()
failed=0

row() {  # row NAME RC SECONDS NOTE
    rows+=("$(printf '| %-18s | %-7s | %5s | %s |' "$1" "$2" "$3" "$4")")
}

step() {  # step NAME SECONDS [--ok CODES] COMMAND...: run COMMAND with a timeout, log to OUT/NAME.log
    local name="$1" seconds="$2" ok="0"
    shift 2
    if [ "$1" = "--ok" ]; then ok="$2"; shift 2; fi
    local started=$SECONDS
    timeout --kill-after=10 "$seconds" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local note="ok"
    case " $ok " in *" $rc "*) ;; *) note="FAILED (log: $out/$name.log)"; failed=1 ;; esac
    [ "$rc" = 124 ] && note="TIMED OUT after ${seconds} s (log: $out/$name.log)"
    row "$name" "$rc" "$((SECONDS - started))s" "$note"
    tail -n 15 "$out/$name.log"
    echo "== $name: rc $rc"
}

[ -f .venv/bin/activate ] && . .venv/bin/activate
python -c "import annotune" 2>/dev/null || python -m pip install --quiet -e '.[test]'

work="$(mktemp -d)"
cp -r examples "$work/"
example="$work/examples/cuda/conv2d/conv2d.cu"
has_check=0
annotune check --help >/dev/null 2>&1 && has_check=1

# What needs no GPU: every variant compiled as a tune would, program mode (nvcc) and kernel
# mode (NVRTC), and the committed header checked against the files it was tuned from.
step compile-program 240 annotune tune "$example" --compile-only --arch sm_90 --budget 6 --json
step compile-kernel 240 annotune tune "$example" --mode kernel --compile-only --arch sm_90 --budget 12 --json
if [ "$has_check" = 1 ]; then
    # 0: the committed header is true here; 1: stale (said why): both are answers
    step check-header 60 --ok "0 1" annotune check "$example"
fi

if ! nvidia-smi -L >"$out/nvidia-smi.log" 2>&1; then
    reason="no GPU: nvidia-smi lists none ($(head -n 1 "$out/nvidia-smi.log"))"
    for name in pytest-gpu kernel-runner program-mode kernel-mode energy check-measure ray gpu-kernel-mode; do
        row "$name" "-" "-" "not run: no GPU"
    done
else
    reason=""
    cat "$out/nvidia-smi.log"
    step pytest-gpu 240 python -m pytest -m gpu -n 0 -p no:cacheprovider
    step kernel-runner 120 python tests/run/gpu_kernel_check.py --repeats 3
    step program-mode 150 annotune tune "$example" --budget 8 --fresh --json
    # before the kernel-mode tunes below write the header again: it re-measures the
    # program-mode tune's configuration (the mode the header's provenance records)
    if [ "$has_check" = 1 ]; then
        step check-measure 120 --ok "0 1" annotune check "$example" --measure
    else
        row check-measure "-" "-" "skipped: this checkout has no 'annotune check'"
    fi
    step kernel-mode 120 annotune tune "$example" --mode kernel --budget 20 --fresh --json
    step energy 120 annotune tune "$example" --mode kernel --objective energy --budget 8 --fresh
    if python -c "import ray" 2>/dev/null; then
        step ray 180 annotune tune "$example" --ray --devices all --budget 8 --out-dir "$work/ray" --json
    else
        row ray "-" "-" "skipped: ray is not installed (pip install 'annotune[ray]')"
    fi
    if [ -n "${HECBENCH:-}" ]; then
        step gpu-kernel-mode 240 python benchmarks/gpu_kernel_mode.py --suite-root "$HECBENCH" --configs 100
    else
        row gpu-kernel-mode "-" "-" "skipped: HECBENCH names no HeCBench checkout"
    fi
fi

echo
if [ -z "$reason" ]; then
    echo "gpu_check on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
else
    echo "gpu_check without a GPU"
fi
echo "| step               | rc      |  time | result |"
echo "|--------------------|---------|-------|--------|"
for line in "${rows[@]}"; do echo "$line"; done
if [ -n "$reason" ]; then
    echo "$reason: the GPU checks were not run" >&2
    [ "$failed" = 1 ] && exit 1  # a check that needs no GPU failed: that comes first
    exit 2
fi
exit "$failed"
