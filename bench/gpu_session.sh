#!/bin/bash
# One batched device call: install carried wheels, then run the named steps, logging each to $OUT.
# Usage (on the GPU machine): bash bench/gpu_session.sh STEP...
#   steps: evidence:a,b,..  gates  gates:PYTEST_K  check  smoke  "optimize:--budget 3 --jobs 4 ..."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1 ASSAY_DB=sqlite:////tmp/assay-gpu.db
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for step in "$@"; do
  t0=$(date +%s)
  case $step in
    evidence:*) python3 bench/measure_evidence.py --only "${step#evidence:}" 2>&1 | tee "$OUT/evidence_$(echo ${step#evidence:} | tr , _).log" | grep -v Warning ;;
    gates) python3 -m pytest tests/gpu/test_gpu_gates.py -v -x -p no:cacheprovider 2>&1 | tee "$OUT/gates.log" | grep -E "PASS|FAIL|Error|assert|^E " ;;
    check) python3 -m pytest tests/gpu/test_gpu_check.py -v -p no:cacheprovider 2>&1 | tee "$OUT/check.log" | grep -E "PASS|FAIL|Error|assert|^E " ;;
    gates:*) python3 -m pytest tests/gpu/test_gpu_gates.py -v -p no:cacheprovider -k "${step#gates:}" 2>&1 | tee "$OUT/gates_k.log" | grep -E "PASS|FAIL|Error|assert|^E " ;;
    optimize:*) python3 bench/optimize_suite.py ${step#optimize:} 2>&1 | tee "$OUT/optimize.log" | grep -v -i warn ;;
    smoke) python3 tests/knowledge/gpu_smoke.py 2>&1 | tee "$OUT/smoke.log" | tail -40 ;;
    *) echo "unknown step $step" ;;
  esac
  echo "== $step rc=$? $(( $(date +%s) - t0 )) s"
done
