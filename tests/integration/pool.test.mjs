// The engine pool with the real binary: three generated models of different
// sizes and a --max-model-memory that fits two. Eviction, leases, unloading a
// busy model, memory returned after unload, load/unload cycles, TTL, two
// models streaming at once, /health during a load.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, postJson, status, procMemory, waitFor, sleep } from './lib/server.mjs';

const TOOL = process.env.LLMUX_MAKE_MODEL ?? path.resolve(import.meta.dirname, '../../build/tools/make_model/llmux-make-model');
const MiB = 1 << 20;
const COMMON = ['--parallel', '2', '--max-process-memory', 'disabled'];

const ask = (model, extra = {}) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0, ...extra });
const states = async (base) => Object.fromEntries((await status(base)).models.map((m) => [m.id, m.state]));
const rss = (pid) => { const m = procMemory(pid); return m.rssAnon + m.rssFile; };

// Opens a long stream; resolves once the first content arrives. `chunks`
// records arrival times; `done` resolves with the whole body.
async function openStream(base, model, extra = {}) {
  const ac = new AbortController();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: ac.signal,
    body: JSON.stringify(ask(model, { stream: true, max_tokens: 100000, ignore_eos: true, ...extra })),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  const s = { ac, body: '', times: [] };
  let first;
  const gotFirst = new Promise((r) => { first = r; });
  s.done = (async () => {
    try {
      while (true) {
        const { value, done } = await reader.read();
        if (done) break;
        const text = dec.decode(value, { stream: true });
        s.body += text;
        if (text.includes('"content"')) { s.times.push(Date.now()); first(); }
      }
    } catch { /* aborted */ }
    first();
    return s.body;
  })();
  await gotFirst;
  return s;
}

describe('engine pool', () => {
  let dir;
  let fp = {};
  const model = (id) => path.join(dir, `${id}.gguf`);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'llmux-pool-'));
    const make = (id, args) => execFileSync(TOOL, ['--out', model(id), '--preset', 'tiny', ...args], { stdio: 'pipe' });
    make('a', []);
    make('b', ['--n-embd', '256', '--n-layer', '4', '--n-ff', '512']);
    make('c', ['--n-embd', '512', '--n-layer', '4', '--n-ff', '1024']);
    // Learn the predicted footprints from a server without limits.
    const probe = await startServer(['--model-dir', dir, ...COMMON, '--ctx-size', '2048', '--max-model-memory', 'disabled']);
    const st = await waitFor(async () => {
      const s = await status(probe.baseUrl);
      return s.models.every((m) => m.footprint_bytes.predicted > 0) ? s : null;
    }, { timeoutMs: 30_000 });
    await probe.stop();
    assert.ok(st, 'footprints were never predicted');
    fp = Object.fromEntries(st.models.map((m) => [m.id, m.footprint_bytes.predicted]));
    assert.ok(fp.a < fp.b && fp.b < fp.c, JSON.stringify(fp));
  });
  after(() => { rmSync(dir, { recursive: true, force: true }); });

  describe('with memory for two models', () => {
    let srv;
    before(async () => {
      const limit = fp.b + fp.c + Math.floor(fp.a / 2);  // any two fit, all three do not
      srv = await startServer(['--model-dir', dir, ...COMMON, '--ctx-size', '2048', '--max-model-memory', String(limit)]);
    });
    after(async () => { await srv.stop(); });

    test('A, B, C requested in turn: A is evicted', async () => {
      for (const id of ['a', 'b', 'c']) assert.equal((await postJson(srv.baseUrl, '/v1/chat/completions', ask(id))).status, 200);
      assert.deepEqual(await states(srv.baseUrl), { a: 'unloaded', b: 'loaded', c: 'loaded' });
      const st = await status(srv.baseUrl);
      assert.equal(st.ledger.models_bytes, fp.b + fp.c);
      assert.equal(st.enforcer.evictions, 1);
    });

    test('models that are streaming are never evicted; the other request gets 507', async () => {
      const sb = await openStream(srv.baseUrl, 'b');
      const sc = await openStream(srv.baseUrl, 'c');
      const r = await postJson(srv.baseUrl, '/v1/chat/completions', ask('a'));
      assert.equal(r.status, 507, r.text);
      assert.equal(r.json.error.type, 'insufficient_memory');
      assert.match(r.json.error.message, /cannot load model 'a': it needs .*; models in use: .*nothing can be evicted: busy 'b' \(1 request\(s\)\), 'c' \(1 request\(s\)\)/);
      assert.deepEqual(await states(srv.baseUrl), { a: 'unloaded', b: 'loaded', c: 'loaded' });
      const before = sb.times.length + sc.times.length;
      await sleep(300);
      assert.ok(sb.times.length + sc.times.length > before, 'the streams stopped');
      sb.ac.abort();
      sc.ac.abort();
      await Promise.all([sb.done, sc.done]);
      assert.ok(await waitFor(async () => (await status(srv.baseUrl)).active_requests === 0));
    });

    test('two models streamed at once both progress', async () => {
      const sb = await openStream(srv.baseUrl, 'b');
      const sc = await openStream(srv.baseUrl, 'c');
      await sleep(1500);
      const t = Date.now();
      sb.ac.abort();
      sc.ac.abort();
      await Promise.all([sb.done, sc.done]);
      const recent = (s) => s.times.filter((x) => x > t - 1000).length;
      assert.ok(recent(sb) >= 5 && recent(sc) >= 5, `chunks in the last second: b ${recent(sb)}, c ${recent(sc)}`);
    });

    test('unloading a streaming model ends its stream with an error frame', async () => {
      const sc = await openStream(srv.baseUrl, 'c');
      const u = await postJson(srv.baseUrl, '/api/models/c/unload', {});
      assert.equal(u.status, 200, u.text);
      assert.equal(u.json.status, 'unloaded');
      const body = await sc.done;
      const frames = body.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => f.slice(6));
      const error = frames.map((f) => { try { return JSON.parse(f); } catch { return null; } }).find((j) => j?.error);
      assert.ok(error, 'no error frame');
      assert.equal(error.error.code, 'model_unloaded');
      assert.equal(frames.at(-1), '[DONE]');
      assert.equal((await states(srv.baseUrl)).c, 'unloaded');
    });

    test('/health answers within 100 ms while a model loads', async () => {
      assert.equal((await states(srv.baseUrl)).c, 'unloaded');
      let loading = true;
      const load = postJson(srv.baseUrl, '/v1/chat/completions', ask('c')).then((r) => { loading = false; return r; });
      const latencies = [];
      while (loading) {
        const t0 = performance.now();
        const h = await fetch(`${srv.baseUrl}/health`);
        latencies.push(performance.now() - t0);
        assert.equal(h.status, 200);
        await sleep(5);
      }
      assert.equal((await load).status, 200);
      assert.ok(Math.max(...latencies) < 100, `slowest /health ${Math.max(...latencies).toFixed(1)} ms`);
    });

    test('memory after an unload returns to within 32 MiB of before the load', async () => {
      await postJson(srv.baseUrl, '/api/models/c/unload', {});
      await postJson(srv.baseUrl, '/api/models/b/unload', {});
      const before = rss(srv.pid);
      assert.equal((await postJson(srv.baseUrl, '/api/models/c/load', {})).status, 200);
      assert.equal((await postJson(srv.baseUrl, '/v1/chat/completions', ask('c', { max_tokens: 32 }))).status, 200);
      const loaded = rss(srv.pid);
      const u = await postJson(srv.baseUrl, '/api/models/c/unload', {});
      assert.equal(u.json.status, 'unloaded');
      const afterUnload = rss(srv.pid);
      console.log(`RSS before load ${(before / MiB).toFixed(1)} MiB, loaded ${(loaded / MiB).toFixed(1)} MiB, ` +
        `after unload ${(afterUnload / MiB).toFixed(1)} MiB; footprint ${(fp.c / MiB).toFixed(1)} MiB, settled ${u.json.settled}`);
      assert.ok(loaded - before > fp.c / 2, 'the load did not show up in RSS');
      assert.ok(Math.abs(afterUnload - before) < 32 * MiB, `RSS after unload differs by ${((afterUnload - before) / MiB).toFixed(1)} MiB`);
      assert.equal(u.json.settled, true);
      assert.equal((await status(srv.baseUrl)).ledger.models_bytes, 0);
    });

    test('20 load/unload cycles: no growth in RSS or thread count', async () => {
      const samples = [];
      for (let i = 0; i < 20; i++) {
        assert.equal((await postJson(srv.baseUrl, '/api/models/b/load', {})).status, 200);
        assert.equal((await postJson(srv.baseUrl, '/v1/chat/completions', ask('b', { max_tokens: 8 }))).status, 200);
        assert.equal((await postJson(srv.baseUrl, '/api/models/b/unload', {})).json.status, 'unloaded');
        samples.push(procMemory(srv.pid));
      }
      const [first, last] = [samples[0], samples.at(-1)];
      console.log(`after unload #1: RSS ${((first.rssAnon + first.rssFile) / MiB).toFixed(1)} MiB, ${first.threads} threads; ` +
        `after #20: ${((last.rssAnon + last.rssFile) / MiB).toFixed(1)} MiB, ${last.threads} threads`);
      assert.ok(last.rssAnon + last.rssFile - first.rssAnon - first.rssFile < 8 * MiB, 'RSS grows with load/unload cycles');
      assert.equal(last.threads, first.threads, 'threads leak with load/unload cycles');
    });
  });

  describe('with an idle TTL of 2 s', () => {
    let srv;
    // A context large enough that a stream runs for tens of seconds before it fills up.
    before(async () => { srv = await startServer(['--model-dir', dir, ...COMMON, '--ctx-size', '32768', '--idle-ttl', '2']); });
    after(async () => { await srv.stop(); });

    test('an idle model is unloaded within ttl + 2 s', async () => {
      assert.equal((await postJson(srv.baseUrl, '/v1/chat/completions', ask('a'))).status, 200);
      const ended = Date.now();
      await sleep(1000);
      assert.equal((await states(srv.baseUrl)).a, 'loaded', 'unloaded before its TTL');
      assert.ok(await waitFor(async () => (await states(srv.baseUrl)).a === 'unloaded', { timeoutMs: 5000, intervalMs: 50 }));
      const after = Date.now() - ended;
      assert.ok(after <= 4000, `unloaded ${after} ms after its last request`);
    });

    test('a model that is streaming is not unloaded by its TTL', async () => {
      const s = await openStream(srv.baseUrl, 'a');
      for (let i = 0; i < 8; i++) {
        await sleep(500);
        assert.ok(!s.body.includes('"finish_reason":"'), 'the stream ended on its own; the test needs a longer one');
        assert.equal((await states(srv.baseUrl)).a, 'loaded', `unloaded while streaming (after ${(i + 1) * 0.5} s)`);
      }
      s.ac.abort();
      await s.done;
      assert.ok(await waitFor(async () => (await states(srv.baseUrl)).a === 'unloaded', { timeoutMs: 5000, intervalMs: 50 }));
    });
  });
});
