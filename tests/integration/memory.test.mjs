// Process memory across the request lifecycle, measured from /proc: serving
// requests (completed and cancelled) must not grow the server's memory.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, modelPath, postJson, procMemory, status, waitFor, sleep } from './lib/server.mjs';

const MiB = 1 << 20;

async function round(base, n) {
  const jobs = [];
  for (let i = 0; i < n; i++) {
    const body = { model: 'tiny', messages: [{ role: 'user', content: `Request ${i} ${'x'.repeat(i * 13 % 400)}` }],
      max_tokens: 24 + (i % 5) * 8, temperature: i % 3 === 0 ? 0 : 0.9, seed: i, stream: i % 2 === 0 };
    if (i % 4 === 3) {
      // a quarter of the clients leave early
      const ac = new AbortController();
      jobs.push(fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, stream: true, max_tokens: 5000, ignore_eos: true }), signal: ac.signal })
        .then((r) => r.body?.getReader().read()).then(() => ac.abort()).catch(() => {}));
    } else {
      jobs.push(postJson(base, '/v1/chat/completions', body));
    }
  }
  await Promise.all(jobs);
  await waitFor(async () => (await status(base)).active_requests === 0, { timeoutMs: 5000 });
}

describe('memory across the request lifecycle', () => {
  let srv;
  before(async () => { srv = await startServer(['--model', modelPath('tiny'), '--parallel', '4']); });
  after(async () => { await srv.stop(); });

  test('loading the model shows up as file-backed (mmapped) weights', async () => {
    const m = procMemory(srv.pid);
    assert.ok(m.rssFile > 4 * MiB, `RssFile ${m.rssFile}`);
  });

  test('RSS stays flat over 8 rounds of 48 mixed requests (completed, streamed, cancelled)', async () => {
    await round(srv.baseUrl, 48);  // warm-up: allocator pools, thread stacks, logits buffer
    await sleep(200);
    const base = procMemory(srv.pid);
    const samples = [];
    for (let r = 0; r < 8; r++) {
      await round(srv.baseUrl, 48);
      samples.push(procMemory(srv.pid));
    }
    // The engine releases its compute threads once it sees itself idle, a
    // moment after the last response: wait (bounded) for the count to settle.
    await waitFor(() => procMemory(srv.pid).threads === base.threads, { timeoutMs: 2000 });
    samples.push(procMemory(srv.pid));
    const last = samples.at(-1);
    const growthAnon = last.rssAnon - base.rssAnon;
    console.log(`RssAnon after warm-up ${(base.rssAnon / MiB).toFixed(1)} MiB, after 8 rounds ${(last.rssAnon / MiB).toFixed(1)} MiB; ` +
      `RssFile ${(base.rssFile / MiB).toFixed(1)} -> ${(last.rssFile / MiB).toFixed(1)} MiB; threads ${base.threads} -> ${last.threads}`);
    assert.ok(growthAnon < 8 * MiB, `RssAnon grew by ${(growthAnon / MiB).toFixed(1)} MiB`);
    assert.ok(Math.abs(last.rssFile - base.rssFile) < 4 * MiB);
    assert.equal(last.threads, base.threads, 'thread count changed');
    const st = await status(srv.baseUrl);
    assert.equal(st.active_requests, 0);
    assert.equal(st.models[0].engine.kv_cells_used, 0);
  });
});
