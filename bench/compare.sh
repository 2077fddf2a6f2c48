#!/usr/bin/env bash
# `make bench`: llmux next to llama.cpp's own tools (built from the same pinned
# tree), same model, same thread count, in one run. Prints a markdown table of
# rates and llmux/peer ratios and keeps the raw outputs in bench/results/<time>/.
#
#   THREADS (default: nproc)  MODEL (default: models/qwen05.gguf, generated if missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
THREADS=${THREADS:-$(nproc)}
MODEL=${MODEL:-$root/models/qwen05.gguf}
BUILD=${BUILD:-build}
PP=512 TG=128 NPP=128 NTG=128 B=8 REPS=${REPS:-3}

if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  "$BUILD/tools/make_model/llmux-make-model" --preset qwen05 --out "$MODEL"
fi
peer=$(bench/build-peer.sh)
out="bench/results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"

echo "bench: llama-bench pp$PP/tg$TG, $THREADS threads" >&2
"$peer/llama-bench" -m "$MODEL" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" -o json > "$out/llama-bench.json" 2>"$out/llama-bench.log"

n_kv=$(( B * (NPP + NTG) + 256 ))
for mode in split unified; do
  flag=""; [ "$mode" = unified ] && flag="-kvu"
  echo "bench: llama-batched-bench npp$NPP ntg$NTG npl 1,$B ($mode KV)" >&2
  "$peer/llama-batched-bench" -m "$MODEL" -t "$THREADS" -tb "$THREADS" -c "$n_kv" -b 2048 -ub 512 \
    -npp "$NPP" -ntg "$NTG" -npl "1,$B" $flag --output-format jsonl > "$out/batched-bench-$mode.jsonl" 2>"$out/batched-bench-$mode.log"
done

echo "bench: llmux" >&2
node bench/llmux_rates.mjs --bin "$root/$BUILD/src/llmux" --model "$MODEL" --threads "$THREADS" \
  --pp "$PP" --tg "$TG" --batch "$B" --npp "$NPP" --ntg "$NTG" --reps "$REPS" > "$out/llmux.json"

node bench/report_rates.mjs "$out" "$THREADS" "$MODEL" | tee "$out/report.md"
