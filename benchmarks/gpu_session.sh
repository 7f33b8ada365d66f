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
#   attention benchmarks/memory_models.py --attention --device cuda (each attention kernel's estimate against its
#             measured peak), and benchmarks/memory_trace.py's op-by-op comparison on three of the cases
#   mfu       the doctor on examples/wide_mlp.py at a size that keeps an H100 busy (8192 x 8192, batch 8192), bf16
#             autocast and float32: compute_bound with the step's achieved TFLOP/s against the GPU's peak
#   planted   the doctor on CUDA on the planted examples that take --device (logging, checkpoints, a starved loader
#             with its saw-tooth): each one's first verdict
#   busy      benchmarks/gpu_busy.py: the doctor's gpu_busy_ms against torch.profiler's own kernel sum (seed loop,
#             wide MLP); the doctor on Lightning's Trainer (its optimizer closure) on CUDA
#   sweeps    trainspeed sweep crossover (measured on both sides), cuda-graphs and amp on CUDA, compile last
#   hfsync    Hugging Face's Trainer on a GPU-heavier step (batch 128): the doctor on logging every step and on the
#             default, and the script timed (3 rounds) logging every step, by default, and with
#             logging_nan_inf_filter=False (the Trainer's own read of the loss on every step)
#   frameworks benchmarks/framework_gains.py --device cuda --planted log: Lightning's and Hugging Face's Trainer
#             logging every step, the doctor's first verdict and prediction against the measured gain
#   measure   trainspeed memory --measure on CUDA: the largest batch under a budget, estimated and then confirmed
#             by real steps (gpt, resnet-cnn)
#   interleaved benchmarks/doctor_interleaved.py --device cuda: the doctor's steady per-step cost on the seed loop,
#             plain and watched blocks alternating in one process
#   try       trainspeed doctor --try on CUDA: the wide MLP in float32 (compute_bound's TF32 lever) and the starved
#             loader (workers and pinned memory), each lever timed against plain runs, 3 rounds
#
# DEADLINE (seconds since the epoch), when set, clips every stage's limit so that the whole session ends by then.
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PY:-python3}
TS="$PY -m trainspeed"

stage() {  # stage NAME SECONDS COMMAND...: run one command under a time limit, its output into $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    if [ -n "${DEADLINE:-}" ]; then
        local left=$((DEADLINE - $(date +%s)))
        if [ "$left" -lt 5 ]; then echo "=== $name skipped: the deadline has passed" | tee -a "$OUT/$name.log"; return; fi
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*" | tee -a "$OUT/$name.log"
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    echo "=== $name exit $? ($(date -u +%H:%M:%S))" | tee -a "$OUT/$name.log"
}

for what in "$@"; do
    case $what in
        tests | suite | doctor | demo | fit | memory | sweep | overhead | cupti | attention | frameworks | hfsync | mfu \
            | sweeps | busy | planted | try | measure | interleaved) ;;
        *) echo "gpu_session.sh: unknown stage '$what' (tests suite doctor demo fit memory sweep overhead cupti" \
                "attention frameworks hfsync mfu sweeps busy planted try measure interleaved)" >&2
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
        mfu)
            wide="examples/wide_mlp.py --device cuda --batch 8192 --width 8192 --steps 200"
            stage mfu 60 $TS doctor --json "$OUT/mfu-bf16.json" $wide --bf16
            stage mfu 60 $TS doctor --json "$OUT/mfu-fp32.json" $wide ;;
        measure)
            stage measure 60 $TS memory gpt --device cuda --budget 8GiB --measure --json "$OUT/measure-gpt.json"
            stage measure 60 $TS memory resnet-cnn --device cuda --budget 8GiB --measure \
                --json "$OUT/measure-resnet.json" ;;
        interleaved)
            stage interleaved 120 $PY benchmarks/doctor_interleaved.py --device cuda --rounds 40 ;;
        try)
            stage try 240 $TS doctor --try 1 --steps 60 --json "$OUT/try-wide-mlp.json" -- examples/wide_mlp.py \
                --device cuda --batch 8192 --width 8192 --steps 200
            stage try 240 $TS doctor --try 1 --steps 60 --json "$OUT/try-slow-dataloader.json" -- \
                examples/slow_dataloader.py --device cuda ;;
        planted)
            for spec in "log_every_step.py --steps 600" "checkpoint_every_step.py --steps 60" "slow_dataloader.py"; do
                name=${spec%%.py*}
                stage planted 60 $TS doctor --json "$OUT/planted-$name.json" examples/$spec --device cuda
            done ;;
        busy)
            stage busy 60 $PY benchmarks/gpu_busy.py --loop iris --steps 600
            stage busy 60 $PY benchmarks/gpu_busy.py --loop wide --steps 60
            stage busy 90 $TS doctor --json "$OUT/lightning.json" examples/frameworks/lightning_trainer.py --device cuda ;;
        sweeps)
            stage sweeps 90 $TS sweep crossover --workload mlp --values 16,64,256,1024 --batches 16,128,1024 --steps 20 \
                --repeats 5 --device cuda --fresh --out "$OUT/sweep-crossover" --json "$OUT/sweep-crossover.json"
            stage sweeps 60 $TS sweep cuda-graphs --workload iris --device cuda --steps 2000 --repeats 5 \
                --fresh --out "$OUT/sweep-graphs" --json "$OUT/sweep-graphs.json"
            stage sweeps 60 $TS sweep amp --workload mlp:width=4096,batch=4096 --device cuda --steps 50 --repeats 5 \
                --fresh --out "$OUT/sweep-amp" --json "$OUT/sweep-amp.json"
            stage sweeps 120 $TS sweep compile --workload mlp:width=1024,batch=1024 --device cuda --steps 200 \
                --repeats 3 --fresh --out "$OUT/sweep-compile" --json "$OUT/sweep-compile.json" ;;
        overhead)
            stage overhead 300 $PY benchmarks/doctor_overhead.py --device cuda --iris-steps 10000 --rounds 4 \
                --arms plain,trainspeed.watch ;;
        cupti)
            stage cupti 420 $PY benchmarks/cupti_teardown.py --steps 3000 --rounds 3 ;;
        attention)
            stage attention 100 $PY benchmarks/memory_models.py --attention --device cuda
            for case in sdpa-causal transformer-encoder-gpt mha-need-weights; do
                stage attention 30 $PY benchmarks/memory_trace.py --case $case
            done ;;
        hfsync)
            hf="examples/frameworks/hf_trainer.py --device cuda --max-steps 60 --per-device-train-batch-size 128"
            mkdir -p "$OUT/fw"
            stage hfsync 60 $TS doctor --json "$OUT/fw/hf-b128-logging-1.json" $hf --logging-steps 1
            stage hfsync 60 $TS doctor --json "$OUT/fw/hf-b128-default.json" $hf
            for round in 1 2 3; do
                for arm in "--logging-steps 1" "" "--no-nan-inf-filter"; do
                    echo "round $round [$arm] $(timeout 60 $PY $hf $arm 2>&1 | grep 'training time')" | tee -a "$OUT/hfsync.log"
                done
            done ;;
        frameworks)
            stage frameworks 200 $PY benchmarks/framework_gains.py --device cuda --planted log --rounds 3 \
                --json-dir "$OUT/fw"
            stage frameworks 60 $TS doctor --json "$OUT/fw/hf-healthy.json" examples/frameworks/hf_trainer.py \
                --max-steps 120 --device cuda
            stage frameworks 60 $TS doctor --json "$OUT/fw/lightning-healthy.json" \
                examples/frameworks/lightning_trainer.py --device cuda ;;
    esac
done
