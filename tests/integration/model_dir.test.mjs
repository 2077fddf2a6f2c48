// --model-dir: discovery, name resolution, lazy loading, and the one-loaded-
// model policy of this first pool (swap when idle, 503 when busy), with
// process memory measured across swaps.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, symlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, modelPath, postJson, getJson, status, procMemory, waitFor } from './lib/server.mjs';

const MiB = 1 << 20;
const ask = (model, extra = {}) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0, ...extra });
const stateOf = async (base) => Object.fromEntries((await status(base)).models.map((m) => [m.id, m.state]));

describe('model directory', () => {
  let srv;
  let dir;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'llmux-models-'));
    symlinkSync(modelPath('tiny'), path.join(dir, 'tiny.gguf'));
    symlinkSync(modelPath('tiny-qwen2'), path.join(dir, 'tiny-qwen2.gguf'));
    symlinkSync(modelPath('tiny'), path.join(dir, 'not-a-model.txt'));
    srv = await startServer(['--model-dir', dir]);
  });
  after(async () => {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('lists every *.gguf file, none loaded yet', async () => {
    const r = await getJson(srv.baseUrl, '/v1/models');
    assert.deepEqual(r.json.data.map((m) => m.id), ['tiny', 'tiny-qwen2']);
    assert.deepEqual(await stateOf(srv.baseUrl), { tiny: 'unloaded', 'tiny-qwen2': 'unloaded' });
  });

  test('concurrent first requests load the model once', async () => {
    const rs = await Promise.all([0, 1, 2, 3].map(() => postJson(srv.baseUrl, '/v1/chat/completions', ask('tiny'))));
    for (const r of rs) assert.equal(r.status, 200, r.text);
    assert.equal((srv.logs().match(/loaded model 'tiny'/g) ?? []).length, 1);
    assert.deepEqual(await stateOf(srv.baseUrl), { tiny: 'loaded', 'tiny-qwen2': 'unloaded' });
  });

  test('names resolve case-insensitively; an idle model is swapped out for another', async () => {
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', ask('TINY-QWEN2'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.model, 'tiny-qwen2');
    assert.deepEqual(await stateOf(srv.baseUrl), { tiny: 'unloaded', 'tiny-qwen2': 'loaded' });
  });

  test('a busy model is not unloaded: the other model gets 503 with Retry-After', async () => {
    const ac = new AbortController();
    const res = await fetch(`${srv.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ask('tiny-qwen2', { stream: true, max_tokens: 100000, ignore_eos: true })), signal: ac.signal });
    assert.equal(res.status, 200);
    await res.body.getReader().read();
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', ask('tiny'));
    assert.equal(r.status, 503);
    assert.equal(r.json.error.code, 'model_busy');
    assert.equal(r.headers.get('retry-after'), '1');
    ac.abort();
    assert.ok(await waitFor(async () => (await status(srv.baseUrl)).active_requests === 0, { timeoutMs: 2000 }));
    assert.equal((await postJson(srv.baseUrl, '/v1/chat/completions', ask('tiny'))).status, 200);
  });

  test('swapping back and forth gives the memory back (RssAnon and RssFile)', async () => {
    const sample = async (model) => {
      assert.equal((await postJson(srv.baseUrl, '/v1/chat/completions', ask(model))).status, 200);
      return procMemory(srv.pid);
    };
    await sample('tiny');
    const first = await sample('tiny-qwen2');
    let last = first;
    for (let i = 0; i < 6; i++) {
      await sample('tiny');
      last = await sample('tiny-qwen2');
    }
    console.log(`with tiny-qwen2 loaded: RssAnon ${(first.rssAnon / MiB).toFixed(1)} -> ${(last.rssAnon / MiB).toFixed(1)} MiB, ` +
      `RssFile ${(first.rssFile / MiB).toFixed(1)} -> ${(last.rssFile / MiB).toFixed(1)} MiB, threads ${first.threads} -> ${last.threads}`);
    assert.ok(last.rssAnon - first.rssAnon < 8 * MiB, 'anonymous memory grows across swaps');
    assert.ok(last.rssFile - first.rssFile < 4 * MiB, 'mapped weights are not released');
    assert.equal(last.threads, first.threads, 'an engine thread outlived its model');
  });
});
