// Renders bench/compare.sh's raw outputs as a markdown table with llmux/peer ratios.
//   node bench/report_rates.mjs <results dir> <threads> <model path>
import { readFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';

const [dir, threads, model] = process.argv.slice(2);
const read = (f) => readFileSync(path.join(dir, f), 'utf8');
const llamaBench = JSON.parse(read('llama-bench.json'));
const lx = JSON.parse(read('llmux.json'));
const jsonl = (f) => read(f).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const split = jsonl('batched-bench-split.jsonl');
const unified = jsonl('batched-bench-unified.jsonl');

const pp = llamaBench.find((r) => r.n_prompt === lx.pp && r.n_gen === 0).avg_ts;
const tg = llamaBench.find((r) => r.n_prompt === 0 && r.n_gen === lx.tg).avg_ts;
const sTg = (rows, pl) => rows.find((r) => r.pl === pl).speed_tg;
const f = (x) => x.toFixed(1);
const ratio = (x, y) => `${(x / y).toFixed(2)}x`;

const rows = [
  [`prefill, ${lx.pp}-token prompt (t/s)`, lx.pp_tokens_per_s, `llama-bench pp${lx.pp}`, pp, 0.95],
  [`decode, 1 stream (t/s)`, lx.tg_tokens_per_s, `llama-bench tg${lx.tg}`, tg, 0.95],
  [`decode, ${lx.B} streams, aggregate (t/s)`, lx.batch_tg_tokens_per_s, `llama-batched-bench S_TG B=${lx.B}`, sTg(split, lx.B), 0.9],
  [`decode, ${lx.B} streams, aggregate (t/s)`, lx.batch_tg_tokens_per_s, `llama-batched-bench -kvu S_TG B=${lx.B}`, sTg(unified, lx.B), 0.9],
];
console.log(`Model ${path.basename(model)}, ${threads} threads, ${os.cpus().length} cores (${os.cpus()[0].model}), ` +
  `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM.\n`);
console.log('| metric | llmux | peer | peer value | ratio | goal |');
console.log('| --- | ---: | --- | ---: | ---: | ---: |');
for (const [name, ours, peer, theirs, goal] of rows) {
  console.log(`| ${name} | ${f(ours)} | ${peer} | ${f(theirs)} | ${ratio(ours, theirs)} | ≥ ${goal}x |`);
}
console.log(`\nClient-side (HTTP, tokenizing and streaming included): ${lx.pp}-token prompt TTFT ${f(lx.ttft_ms_pp)} ms; ` +
  `1 stream ${f(lx.tg_client_tokens_per_s)} t/s end to end; ${lx.B} streams ${f(lx.batch_client_tokens_per_s)} t/s end to end ` +
  `(prefill included). llama-batched-bench S_TG at B=1: ${f(sTg(split, 1))} (split KV), ${f(sTg(unified, 1))} (unified). ` +
  `llmux peak RSS ${(lx.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB.`);
