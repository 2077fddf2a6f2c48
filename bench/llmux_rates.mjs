// Measures llmux's prefill rate, single-stream decode rate and aggregate
// decode rate with B concurrent streams, the way llama-bench (pp/tg) and
// llama-batched-bench (S_TG) define them, and prints one JSON object.
//
//   node bench/llmux_rates.mjs --bin build/src/llmux --model models/qwen05.gguf --threads 2 \
//        [--pp 512] [--tg 128] [--batch 8] [--npp 128] [--ntg 128] [--reps 3]
//
// Server-side rates come from the engine's own counters (/api/status:
// prompt_tokens/prompt_ms, decode_tokens/decode_ms), i.e. time inside
// llama_decode plus sampling; client-side rates include HTTP, tokenizing,
// queueing and streaming, and are reported beside them.
import { parseArgs } from 'node:util';
import { startServer, postJson, status } from '../tests/integration/lib/server.mjs';

const { values: a } = parseArgs({ options: {
  bin: { type: 'string' }, model: { type: 'string' }, threads: { type: 'string', default: '2' },
  pp: { type: 'string', default: '512' }, tg: { type: 'string', default: '128' },
  batch: { type: 'string', default: '8' }, npp: { type: 'string', default: '128' }, ntg: { type: 'string', default: '128' },
  reps: { type: 'string', default: '3' },
} });
if (a.bin) process.env.LLMUX_BIN = a.bin;
const pp = Number(a.pp), tg = Number(a.tg), B = Number(a.batch), npp = Number(a.npp), ntg = Number(a.ntg), reps = Number(a.reps);
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const engine = async (base) => (await status(base)).models[0].engine;
// Distinct, stop-free prompts as token ids (no chat template, no BOS surprises).
const tokens = (n, salt) => Array.from({ length: n }, (_, i) => 1000 + ((i * 7919 + salt * 104729) % 20000));

const srv = await startServer(['--model', a.model, '--threads', a.threads, '--parallel', String(Math.max(B, 1)),
  '--ctx-size', String(Math.max(pp, npp + ntg, tg + 8) + 64), '--batch-size', String(Math.max(512, B * npp)), '--log-level', 'warn']);
const base = srv.baseUrl;
const model = (await (await fetch(`${base}/v1/models`)).json()).data[0].id;
const run = (prompt, max_tokens) => postJson(base, '/v1/completions', { model, prompt, max_tokens, temperature: 0, ignore_eos: true });

await run(tokens(32, 99), 8);  // warm-up

// Prefill: one prompt of pp tokens, one output token.
const ppRates = [], ttft = [];
for (let r = 0; r < reps; r++) {
  const e0 = await engine(base);
  const t0 = performance.now();
  const res = await run(tokens(pp, r), 1);
  ttft.push(performance.now() - t0);
  const e1 = await engine(base);
  if (res.status !== 200) throw new Error(res.text);
  ppRates.push((e1.prompt_tokens - e0.prompt_tokens) / ((e1.prompt_ms - e0.prompt_ms) / 1000));
}

// Single-stream decode: a tiny prompt, tg tokens.
const tgRates = [], tgClient = [];
for (let r = 0; r < reps; r++) {
  const e0 = await engine(base);
  const t0 = performance.now();
  const res = await run(tokens(4, 50 + r), tg + 1);
  const ms = performance.now() - t0;
  const e1 = await engine(base);
  if (res.status !== 200) throw new Error(res.text);
  tgRates.push((e1.decode_tokens - e0.decode_tokens) / ((e1.decode_ms - e0.decode_ms) / 1000));
  tgClient.push(res.json.usage.completion_tokens / (ms / 1000));
}

// B concurrent streams of npp-token prompts and ntg tokens each (llama-batched-bench's S_TG).
const bRates = [], bClient = [];
for (let r = 0; r < reps; r++) {
  const e0 = await engine(base);
  const t0 = performance.now();
  const rs = await Promise.all([...Array(B).keys()].map((i) => run(tokens(npp, 200 + r * B + i), ntg + 1)));
  const ms = performance.now() - t0;
  const e1 = await engine(base);
  for (const res of rs) if (res.status !== 200) throw new Error(res.text);
  bRates.push((e1.decode_tokens - e0.decode_tokens) / ((e1.decode_ms - e0.decode_ms) / 1000));
  bClient.push(rs.reduce((s, x) => s + x.json.usage.completion_tokens, 0) / (ms / 1000));
}

const st = await status(base);
await srv.stop();
console.log(JSON.stringify({
  pp, tg, B, npp, ntg, reps,
  pp_tokens_per_s: median(ppRates), ttft_ms_pp: median(ttft),
  tg_tokens_per_s: median(tgRates), tg_client_tokens_per_s: median(tgClient),
  batch_tg_tokens_per_s: median(bRates), batch_client_tokens_per_s: median(bClient),
  peak_rss_bytes: st.process.vm_hwm_bytes,
}));
