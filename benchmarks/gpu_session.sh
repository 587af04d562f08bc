#!/usr/bin/env bash
# One lent GPU machine's whole check (docs/GPU.md), run from the repository root there:
#   bash benchmarks/gpu_session.sh tests        # install what was carried (once per warm machine), every GPU test
#   GPU_TESTS="tests/workflow" bash benchmarks/gpu_session.sh tests   # the GPU tests under those paths
#   bash benchmarks/gpu_session.sh bench        # benchmarks/gpu.py (W1, W1B, W5: captured, jax) + gpu_structured
#   bash benchmarks/gpu_session.sh bench L8p4   # the structured rows named (plans read from a carried .gpu-cache)
# Everything it measures lands under $OUT (JSON, logs). Carry .whl (and the cutensor parts first, docs/GPU.md),
# .cutensor.sha256 and, for planned rows, .gpu-cache.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
what=${1:-tests}
shift || true

if [ ! -f /tmp/site/.installed ]; then
  extra=()
  if [ -f /tmp/cutensor.part ] && [ -f .cutensor.sha256 ]; then
    if echo "$(cat .cutensor.sha256)  /tmp/cutensor.part" | sha256sum -c - >/dev/null; then
      mv /tmp/cutensor.part "/tmp/$(cat /tmp/cutensor.name)"
    else
      echo "cutensor parts incomplete: cuTensorNet rows will report it" | tee -a "$OUT/install.txt"
    fi
  fi
  [ -f /tmp/cutensor.name ] && [ -f "/tmp/$(cat /tmp/cutensor.name)" ] && extra+=("/tmp/$(cat /tmp/cutensor.name)")
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl "${extra[@]}" >>"$OUT/install.txt" 2>&1 \
    && touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$PWD
export LD_LIBRARY_PATH=/tmp/site/cuquantum/lib:/tmp/site/cutensor/lib:${LD_LIBRARY_PATH:-}
export QHYBRID_CACHE_DIR=${QHYBRID_CACHE_DIR:-$PWD/.gpu-cache}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$OUT/gpu.txt" 2>&1
python3 -c "import torch; from qhybrid.devices.tensornet.backends import available_backends as a
print(torch.__version__, torch.version.cuda, a('cuda'))" >>"$OUT/gpu.txt" 2>&1

case "$what" in
  tests)
    # GPU_TESTS: a subset (paths), else every GPU test; the docs' blocks need sybil, which the machine lacks
    timeout "${TESTS_TIMEOUT:-330}" python3 -m pytest -q -p no:cacheprovider -m gpu ${GPU_TESTS:-tests/} \
      --ignore tests/test_docs_examples.py --timeout 200 -rfEsx \
      --durations=15 --junitxml="$OUT/gpu_tests.xml" >"$OUT/gpu_tests.txt" 2>&1
    echo "pytest rc=$?" >>"$OUT/gpu_tests.txt"
    tail -40 "$OUT/gpu_tests.txt"
    ;;
  bench)
    if [ $# -eq 0 ]; then
      timeout 150 python3 benchmarks/gpu.py --workloads W1,W1B,W5 --cuda-graph --jax --repeats "${REPEATS:-10}" \
        --out "$OUT/gpu.json" >"$OUT/gpu.log" 2>&1
      echo "gpu.py rc=$?"
      set -- G16 Q100p3 L8p3 Q100p4
    fi
    timeout "${STRUCTURED_TIMEOUT:-300}" python3 -m benchmarks.gpu_structured "$@" --out "$OUT/gpu_structured.json" \
      >"$OUT/gpu_structured.log" 2>&1
    echo "gpu_structured rc=$?"
    python3 - "$OUT" <<'EOF'
import json, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("gpu*.json")):
    for w in json.load(open(f))["workloads"]:
        for s, e in w["systems"].items():
            keep = {k: (round(v, 5) if isinstance(v, float) else v) for k, v in e.items()
                    if k in ("median_s", "first_step_s", "capture_s", "ops_per_step", "host_reads_per_step", "error",
                             "max_abs_diff_vs_pennylane", "max_abs_diff_vs_qhybrid", "peak_memory_gib")}
            print(w["workload"], s, keep)
EOF
    ;;
esac
