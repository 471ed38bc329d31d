#!/usr/bin/env bash
# Every GPU check of the project in one call, for a lent GPU machine with a short budget:
#
#     bash benchmarks/gpu_check.sh [OUT]        # OUT: where logs go (default: $OUT or ./gpu-check)
#
# 1. the tests marked `gpu` (program mode, kernel mode, Ray on the one GPU, energy by NVML);
# 2. tests/run/gpu_kernel_check.py: KernelRunner with every backend, outputs and throughput;
# 3. the CUDA example conv2d tuned in program mode and in kernel mode (a fresh study each,
#    small budgets), then with --objective energy;
# 4. `annotune check --measure` on the header the program-mode tune wrote (run right after it),
#    when this checkout has the `check` command;
# 5. benchmarks/gpu_kernel_mode.py when HECBENCH names a HeCBench checkout (none is reachable
#    from a lent machine unless carried).
# Each step runs under its own timeout and its log goes to OUT; a failing step does not stop
# the others. The summary at the end lists each step's exit code; the script exits 1 when any
# step failed, 2 when there is no GPU (after saying so).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check}}"
mkdir -p "$out"
summary=()

step() {  # step NAME SECONDS COMMAND...: run COMMAND with a timeout, log to OUT/NAME.log
    local name="$1" seconds="$2"
    shift 2
    local started=$SECONDS
    timeout --kill-after=10 "$seconds" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-22s rc %-3s %4ss' "$name" "$rc" "$((SECONDS - started))")")
    tail -n 25 "$out/$name.log"
    echo "== $name: rc $rc"
}

if ! nvidia-smi -L >"$out/nvidia-smi.log" 2>&1; then
    cat "$out/nvidia-smi.log"
    echo "no GPU: nvidia-smi lists none; nothing checked" >&2
    exit 2
fi
cat "$out/nvidia-smi.log"
[ -f .venv/bin/activate ] && . .venv/bin/activate
python -c "import annotune" 2>/dev/null || python -m pip install --quiet -e '.[test]'

work="$(mktemp -d)"
cp -r examples "$work/"
example="$work/examples/cuda/conv2d/conv2d.cu"

step pytest-gpu 240 python -m pytest -m gpu -n 0 -p no:cacheprovider
step kernel-runner 120 python tests/run/gpu_kernel_check.py --repeats 3
step program-mode 150 annotune tune "$example" --budget 8 --fresh --json
# before the kernel-mode tunes below write the header again: it re-measures the program-mode
# tune's configuration (the mode the header's provenance records) against the default
if annotune check --help >/dev/null 2>&1; then
    step check-measure 120 annotune check "$example" --measure
else
    summary+=("check-measure          skipped: this checkout has no 'annotune check'")
fi
step kernel-mode 120 annotune tune "$example" --mode kernel --budget 20 --fresh --json
step energy 120 annotune tune "$example" --mode kernel --objective energy --budget 8 --fresh
if [ -n "${HECBENCH:-}" ]; then
    step gpu-kernel-mode 240 python benchmarks/gpu_kernel_mode.py --suite-root "$HECBENCH" --configs 100
else
    summary+=("gpu-kernel-mode        skipped: HECBENCH names no HeCBench checkout")
fi

echo
echo "summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1))"
failed=0
for line in "${summary[@]}"; do
    echo "  $line"
    case "$line" in *"rc 0 "*|*skipped*) ;; *) failed=1 ;; esac
done
exit "$failed"
