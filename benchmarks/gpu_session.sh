#!/usr/bin/env bash
# Everything this project measures or tests on a CUDA machine, in stages, each with its own time limit,
# logs under $OUT (default ./gpu_out). Run from the repository root where torch with CUDA is installed:
#
#   bash benchmarks/gpu_session.sh doctor tests suite  # the doctor on the seed and the CNN; the tests
#   bash benchmarks/gpu_session.sh demo fit memory sweep overhead cupti
#
# Stages:
#   tests     pytest -m gpu (tests/gpu)
#   suite     every other test on a CUDA machine (they see no GPU: tests/conftest.py), 4 processes
#   doctor    trainspeed doctor on examples/seed_iris.py and examples/cnn_dataloader.py (JSON + HTML)
#   demo      trainspeed demo (CPU and CUDA rows)
#   fit       benchmarks/fit_iris.py --device cuda
#   memory    benchmarks/memory_accuracy.py --device cuda
#   sweep     trainspeed sweep record-every (on CUDA) and device on the seed's Iris job
#   overhead  benchmarks/doctor_overhead.py --device cuda (seed loop 10 000 steps, plain against watched)
#   cupti     benchmarks/cupti_teardown.py: the plain loop before and after the doctor's profiler window
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PY:-python3}
TS="$PY -m trainspeed"

stage() {  # stage NAME SECONDS COMMAND...: run one command under a time limit, its output into $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*" | tee -a "$OUT/$name.log"
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    echo "=== $name exit $? ($(date -u +%H:%M:%S))" | tee -a "$OUT/$name.log"
}

for what in "$@"; do
    case $what in
        tests | suite | doctor | demo | fit | memory | sweep | overhead | cupti) ;;
        *) echo "gpu_session.sh: unknown stage '$what' (tests suite doctor demo fit memory sweep overhead cupti)" >&2
           exit 2 ;;
    esac
done

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    $PY -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
    nproc
} >"$OUT/env.log" 2>&1

for what in "$@"; do
    case $what in
        tests)
            stage tests 240 $PY -m pytest -p no:cacheprovider -q -m gpu tests/gpu ;;
        suite)
            stage suite 480 $PY -m pytest -p no:cacheprovider -p no:benchmark -v --timeout 120 -m "not gpu" -n 4 tests ;;
        doctor)
            stage doctor 150 $TS doctor --json "$OUT/seed.json" --html "$OUT/seed.html" examples/seed_iris.py
            stage doctor 150 $TS doctor --json "$OUT/cnn.json" --html "$OUT/cnn.html" examples/cnn_dataloader.py --epochs 5 ;;
        demo)
            stage demo 300 $TS demo --out "$OUT/demo" --json "$OUT/demo.json" ;;
        fit)
            stage fit 300 $PY benchmarks/fit_iris.py --device cuda --epochs 20000 --no-lightning ;;
        memory)
            stage memory 100 $PY benchmarks/memory_accuracy.py --device cuda ;;
        sweep)
            stage sweep 200 $TS sweep record-every --workload iris --device cuda --steps 2000 --repeats 5 \
                --fresh --out "$OUT/sweep-record" --json "$OUT/sweep-record.json"
            stage sweep 200 $TS sweep device --workload iris --steps 2000 --repeats 5 \
                --fresh --out "$OUT/sweep-device" --json "$OUT/sweep-device.json" ;;
        overhead)
            stage overhead 300 $PY benchmarks/doctor_overhead.py --device cuda --iris-steps 10000 --rounds 4 \
                --arms plain,trainspeed.watch ;;
        cupti)
            stage cupti 420 $PY benchmarks/cupti_teardown.py --steps 3000 --rounds 3 ;;
    esac
done
