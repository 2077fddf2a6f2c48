// Compute sharing: one model streaming alone vs two models streaming at once
// (the same qwen05 file under two ids), aggregate tokens/s.
//   mkdir -p /tmp/two && ln -sf $PWD/models/qwen05.gguf /tmp/two/qa.gguf && ln -sf $PWD/models/qwen05.gguf /tmp/two/qb.gguf
//   LLMUX_BIN=build/src/llmux node bench/two_models.mjs
import { startServer, postJson } from '../tests/integration/lib/server.mjs';
const srv = await startServer(['--model-dir', '/tmp/two', '--parallel', '1', '--ctx-size', '1024', '--threads', '2', '--log-level', 'warn']);
const run = (model, n) => postJson(srv.baseUrl, '/v1/completions', { model, prompt: [1000, 2000, 3000, 4000], max_tokens: n, temperature: 0, ignore_eos: true });
await run('qa', 8); await run('qb', 8);
let t = performance.now(); await run('qa', 128); const single = 128 / ((performance.now() - t) / 1000);
t = performance.now(); await Promise.all([run('qa', 128), run('qb', 128)]); const both = 256 / ((performance.now() - t) / 1000);
console.log(JSON.stringify({ single_tps: +single.toFixed(1), two_models_aggregate_tps: +both.toFixed(1), ratio: +(both / single).toFixed(2) }));
await srv.stop();
