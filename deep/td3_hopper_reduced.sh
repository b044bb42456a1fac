#!/usr/bin/env bash
# Reduced-budget TD3 on Hopper-v5: uniform, per, lap, pal x seeds 0, 1 x 100k steps (the paper: 1M x 10 seeds).
# Runs one at a time; an interrupted run continues from its checkpoint, a finished one is skipped.
# Usage: deep/td3_hopper_reduced.sh [out folder, default runs/td3_hopper_reduced]
set -u
OUT=${1:-runs/td3_hopper_reduced}
PY=${PY:-.venv/bin/python}
for seed in 0 1; do
  for sampler in uniform per lap pal; do
    dir="$OUT/td3_Hopper-v5_${sampler}_s${seed}"
    [ -f "$dir/finished.json" ] && continue
    flag=""
    [ -f "$dir/checkpoint.pt" ] && flag="--resume"
    $PY -m prioritylab train td3 --env Hopper-v5 --sampler "$sampler" --steps 100000 --seed "$seed" \
      --threads 1 --checkpoint-every 10000 --no-progress --out "$OUT" $flag || echo "run $dir failed: $?"
  done
done
