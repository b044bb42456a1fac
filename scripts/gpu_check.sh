#!/usr/bin/env bash
# The GPU checks of docs/benchmarks.md ("On a GPU"), in one go on a machine with a CUDA device:
#   1. the device: GPU model, driver, torch and CUDA versions;
#   2. `bench agent` on CUDA (TD3, SAC on Hopper-v5; DQN on Pong; every sampler; SB3 on the same GPU);
#   3. `bench replay` on CUDA (batches copied to the GPU), and scripts/transfer_ab.py (host storage against
#      device-resident storage, MuJoCo layout; and three ways to copy a batch);
#   4. TD3 on HalfCheetah-v5 and DQN on Pong at a reduced budget, on the GPU and on the CPU at the same seed
#      (the CPU runs start first, in the background, on the CPU cores);
#   5. the agent, replay, SB3 and benchmark tests with CUDA as the `auto` device, `gpu`-marked tests included.
# Every step has its own time limit and runs even if an earlier one failed; results go to OUT.
# PARTS chooses among "bench runs tests" (default: all three). Beside the runs, the tests get 8 workers and
# 160 s, which was not enough on a 16-core H200 machine; `PARTS=tests` alone gives them 14 workers and 220 s.
#
# usage: [PARTS=...] scripts/gpu_check.sh OUT [PYTHON]   (SCALE=smoke for a short dry run on any machine)
set -u
OUT=${1:?usage: scripts/gpu_check.sh OUT [PYTHON]}
PY=${2:-python3}
DEV=${DEVICE:-cuda}
mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1
log() { echo "== $(date +%T) $*"; }

if [ "${SCALE:-full}" = smoke ]; then  # seconds, to check the script itself
    AGENT="--quick"; REPLAY="--quick --envs 8"; AB="--capacity 4096 --calls 20 --repeats 2"
    HC="--steps 1200 --start-steps 1000 --eval-every 100 --eval-episodes 1"
    PONG="--steps 1300 --start-steps 1000 --eval-every 100 --eval-episodes 1 --max-episode-frames 400"
    LIMIT_RUN=120; TESTS="tests/test_bench.py"; PAR=""
else
    AGENT="--steps 150 --repeats 3 --prefill 2000 --warmup 30 --atari-buffer-size 100000"
    REPLAY="--envs 8 --seconds 0.5 --repeats 3"; AB="--batches 256"
    # the replay's capacity of the committed docs/gpu runs (one slot per step then; 2 x steps now)
    HC="--steps 30000 --start-steps 10000 --eval-every 2500 --eval-episodes 5 --buffer-size 30000"
    PONG="--steps 40000 --start-steps 12500 --eval-every 5000 --eval-episodes 2 --buffer-size 40000"
    LIMIT_RUN=170; PAR="-n 8"
    TESTS="tests/test_agents_continuous.py tests/test_agents_atari.py tests/test_agents_minatar.py tests/test_sb3.py
           tests/test_ners.py tests/test_run_integrity.py tests/test_replay.py tests/test_fused_paths.py
           tests/test_equivalence_torch.py tests/test_targets.py tests/test_bench.py tests/test_bench_replay.py"
fi
COMMON="--seed 0 --checkpoint-every 1000000000 --no-progress"
PARTS=${PARTS:-bench runs tests}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

log device
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  "$PY" -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA device', 'python', sys.version.split()[0])"
  nproc; } | tee "$OUT/device.txt"

if has runs; then
log "CPU reference runs (background)"
timeout $((LIMIT_RUN + 240)) "$PY" -m prioritylab train td3 --env HalfCheetah-v5 $HC $COMMON --device cpu \
    --threads 2 --out "$OUT/runs/cpu" > "$OUT/runs/cpu_td3.log" 2>&1 &
timeout $((LIMIT_RUN + 240)) "$PY" -m prioritylab train dqn $PONG $COMMON --device cpu --threads 4 \
    --out "$OUT/runs/cpu" > "$OUT/runs/cpu_dqn.log" 2>&1 &
fi

if has bench; then
for agent in td3 sac dqn; do
    log "bench agent $agent"
    timeout $([ $agent = dqn ] && echo 100 || echo 80) "$PY" -m prioritylab bench agent --device "$DEV" \
        --agents "$agent" --peers sb3 $AGENT --no-progress --json "$OUT/bench_agent_$agent.json" 2>&1 | tail -n 16
done
log "bench replay"
timeout 75 "$PY" -m prioritylab bench replay --device "$DEV" --peers cpprb sb3 $REPLAY --no-progress \
    --json "$OUT/bench_replay.json" 2>&1 | tail -n 24
log "transfer A/B"
timeout 40 "$PY" scripts/transfer_ab.py --device "$DEV" $AB --json "$OUT/transfer_ab.json" 2>&1
timeout 25 "$PY" scripts/transfer_ab.py --device "$DEV" --copies --json "$OUT/transfer_copies.json" 2>&1
fi

if has runs; then
log "GPU runs (background)"
timeout $LIMIT_RUN "$PY" -m prioritylab train td3 --env HalfCheetah-v5 $HC $COMMON --device "$DEV" \
    --out "$OUT/runs/gpu" > "$OUT/runs/gpu_td3.log" 2>&1 &
timeout $LIMIT_RUN "$PY" -m prioritylab train dqn $PONG $COMMON --device "$DEV" \
    --out "$OUT/runs/gpu" > "$OUT/runs/gpu_dqn.log" 2>&1 &
fi

if has tests; then
    LIMIT_TESTS=$((LIMIT_RUN - 10))
    if ! has runs; then LIMIT_TESTS=220; [ -n "$PAR" ] && PAR="-n 14"; fi
    log "tests ($PAR, ${LIMIT_TESTS} s)"
    timeout $LIMIT_TESTS "$PY" -m pytest -v -m "not slow" $PAR -rfE --tb=short -p no:cacheprovider $TESTS \
        --junitxml "$OUT/junit.xml" > "$OUT/tests.log" 2>&1
    grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -n 30
fi
wait
if has runs; then
    log "runs"
    for f in "$OUT"/runs/*.log; do echo "-- $f"; tail -n 3 "$f"; done
    # the small files of each run (no checkpoints, no event files)
    (cd "$OUT/runs" && tar czf ../runs.tgz --exclude=checkpoint.pt --exclude=tb --exclude='*.lock' . )
fi
rm -rf "$OUT/runs"
(cd "$OUT" && tar czf logs.tgz device.txt tests.log junit.xml 2>/dev/null; rm -f device.txt tests.log junit.xml)
log done
