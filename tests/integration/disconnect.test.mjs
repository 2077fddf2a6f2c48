// A client that disconnects has its request cancelled within 1 s: its slot
// and KV cells are freed and no trace of it stays in the engine's bookkeeping.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, modelPath, postJson, status, waitFor, sleep } from './lib/server.mjs';

// Long enough to still be generating seconds from now: the context is large
// and end-of-generation is ignored.
const endless = (extra = {}) => ({
  model: 'tiny', messages: [{ role: 'user', content: 'Go on forever.' }],
  temperature: 0, max_tokens: 60000, ignore_eos: true, ...extra,
});

const engineOf = async (base) => (await status(base)).models[0].engine;

// Waits (≤ 1 s) until nothing is queued, prefilling, generating or holding KV.
async function drainedWithin1s(base) {
  const t0 = Date.now();
  const st = await waitFor(async () => {
    const s = await status(base);
    const e = s.models[0].engine;
    return e.waiting === 0 && e.prefilling === 0 && e.generating === 0 && e.slots_busy === 0 &&
      e.kv_cells_used === 0 && s.active_requests === 0 ? s : null;
  }, { timeoutMs: 1000, intervalMs: 10 });
  return { st, ms: Date.now() - t0 };
}

describe('client disconnect', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--model', modelPath('tiny'), '--ctx-size', '65536', '--parallel', '1', '--batch-size', '16']);
  });
  after(async () => { await srv.stop(); });

  test('closing a stream after 5 content chunks frees its slot within 1 s', async () => {
    const before = await engineOf(srv.baseUrl);
    const ac = new AbortController();
    const res = await fetch(`${srv.baseUrl}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(endless({ stream: true })), signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let contentChunks = 0;
    while (contentChunks < 5) {
      const { value, done } = await reader.read();
      assert.ok(!done, 'stream ended early');
      buf += dec.decode(value, { stream: true });
      contentChunks = (buf.match(/"content":"/g) ?? []).length;
    }
    const busy = await engineOf(srv.baseUrl);
    assert.equal(busy.generating, 1, 'the request should still be generating');
    ac.abort();
    const { st, ms } = await drainedWithin1s(srv.baseUrl);
    assert.ok(st, 'slot not freed within 1 s');
    const e = st.models[0].engine;
    assert.equal(e.requests_cancelled, before.requests_cancelled + 1);
    assert.equal(e.requests_completed, before.requests_completed);
    assert.ok(ms <= 1000, `took ${ms} ms`);
  });

  test('dropping a non-streamed request while it generates cancels it within 1 s', async () => {
    const before = await engineOf(srv.baseUrl);
    const ac = new AbortController();
    const pending = fetch(`${srv.baseUrl}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(endless()), signal: ac.signal,
    }).catch((e) => e);
    await waitFor(async () => (await engineOf(srv.baseUrl)).generating === 1, { timeoutMs: 5000 });
    ac.abort();
    await pending;
    const { st } = await drainedWithin1s(srv.baseUrl);
    assert.ok(st, 'not cancelled within 1 s');
    assert.equal(st.models[0].engine.requests_cancelled, before.requests_cancelled + 1);
  });

  test('a queued request whose client leaves is removed from the queue', async () => {
    const before = await engineOf(srv.baseUrl);
    const first = new AbortController();
    const second = new AbortController();
    const p1 = fetch(`${srv.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(endless()), signal: first.signal }).catch((e) => e);
    await waitFor(async () => (await engineOf(srv.baseUrl)).generating === 1, { timeoutMs: 5000 });
    const p2 = fetch(`${srv.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(endless()), signal: second.signal }).catch((e) => e);
    assert.ok(await waitFor(async () => (await engineOf(srv.baseUrl)).waiting === 1, { timeoutMs: 5000 }), 'second request never queued');
    second.abort();
    await p2;
    assert.ok(await waitFor(async () => (await engineOf(srv.baseUrl)).waiting === 0, { timeoutMs: 1000 }), 'queued request not removed');
    assert.equal((await engineOf(srv.baseUrl)).generating, 1, 'the running request must be untouched');
    first.abort();
    await p1;
    const { st } = await drainedWithin1s(srv.baseUrl);
    assert.ok(st);
    assert.equal(st.models[0].engine.requests_cancelled, before.requests_cancelled + 2);
  });

  test('a client that leaves during prompt prefill is cancelled between prefill chunks', async () => {
    const before = await engineOf(srv.baseUrl);
    const prompt = Array.from({ length: 40000 }, (_, i) => 100 + (i % 20000));  // token ids
    const ac = new AbortController();
    const pending = fetch(`${srv.baseUrl}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt, max_tokens: 5, stream: true }), signal: ac.signal }).catch((e) => e);
    assert.ok(await waitFor(async () => (await engineOf(srv.baseUrl)).prefilling === 1, { timeoutMs: 5000, intervalMs: 5 }),
      'never saw the request prefilling');
    ac.abort();
    await pending;
    const { st } = await drainedWithin1s(srv.baseUrl);
    assert.ok(st, 'prefill not stopped within 1 s');
    const e = st.models[0].engine;
    assert.equal(e.requests_cancelled, before.requests_cancelled + 1);
    assert.ok(e.prompt_tokens - before.prompt_tokens < prompt.length, 'the whole prompt was prefilled anyway');
  });

  test('the freed slot serves the next request at once', async () => {
    const r = await postJson(srv.baseUrl, '/v1/completions', { model: 'tiny', prompt: 'next', max_tokens: 4, temperature: 0 });
    assert.equal(r.status, 200);
    assert.equal(r.json.usage.completion_tokens, 4);
  });

  test('many abrupt disconnects leave no trace', async () => {
    const before = await engineOf(srv.baseUrl);
    for (let i = 0; i < 20; i++) {
      const ac = new AbortController();
      const p = fetch(`${srv.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify(endless({ stream: i % 2 === 0 })), signal: ac.signal }).catch((e) => e);
      await sleep(5 + (i % 5) * 7);
      ac.abort();
      await p;
    }
    const { st } = await drainedWithin1s(srv.baseUrl);
    assert.ok(st, 'bookkeeping not empty after disconnects');
    // A client that aborts before its body is sent never reaches the engine, so at most 20.
    const e = st.models[0].engine;
    const ended = e.requests_cancelled + e.requests_completed - before.requests_cancelled - before.requests_completed;
    assert.ok(ended >= 1 && ended <= 20, `ended ${ended}`);
    assert.equal(e.requests_failed, before.requests_failed);
  });
});
