// --model-dir discovery, name resolution (id, case, alias), lazy loading, and
// the per-model settings file and endpoint, with the real binary.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, symlinkSync, rmSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, modelPath, postJson, getJson, status } from './lib/server.mjs';

const ask = (model, extra = {}) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0, ...extra });
const stateOf = async (base) => Object.fromEntries((await status(base)).models.map((m) => [m.id, m.state]));
const put = async (base, route, body) => {
  const r = await fetch(`${base}${route}`, { method: 'PUT', headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
};

describe('model directory', () => {
  let srv;
  let dir;
  let settingsFile;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'llmux-models-'));
    symlinkSync(modelPath('tiny'), path.join(dir, 'tiny.gguf'));
    mkdirSync(path.join(dir, 'qwen'));
    symlinkSync(modelPath('tiny-qwen2'), path.join(dir, 'qwen', 'tiny-qwen2.gguf'));
    symlinkSync(modelPath('tiny'), path.join(dir, 'qwen', 'mmproj-tiny-qwen2.gguf'));  // a projector, not a model
    mkdirSync(path.join(dir, 'qwen', 'deeper'));
    symlinkSync(modelPath('tiny'), path.join(dir, 'qwen', 'deeper', 'too-deep.gguf'));  // two levels down: ignored
    symlinkSync(modelPath('tiny'), path.join(dir, 'notes.txt'));
    settingsFile = path.join(dir, 'settings', 'models.json');
    srv = await startServer(['--model-dir', dir, '--settings', settingsFile]);
  });
  after(async () => {
    await srv.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('lists every model, one level of subdirectories, no projectors, none loaded yet', async () => {
    const r = await getJson(srv.baseUrl, '/v1/models');
    assert.deepEqual(r.json.data.map((m) => m.id), ['tiny', 'tiny-qwen2']);
    assert.deepEqual(await stateOf(srv.baseUrl), { tiny: 'unloaded', 'tiny-qwen2': 'unloaded' });
  });

  test('concurrent first requests load the model once', async () => {
    const rs = await Promise.all([0, 1, 2, 3].map(() => postJson(srv.baseUrl, '/v1/chat/completions', ask('tiny'))));
    for (const r of rs) assert.equal(r.status, 200, r.text);
    assert.equal((srv.logs().match(/loaded model 'tiny'/g) ?? []).length, 1);
    assert.equal((await stateOf(srv.baseUrl)).tiny, 'loaded');
  });

  test('names resolve case-insensitively and both models stay loaded when there is room', async () => {
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', ask('TINY-QWEN2'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.model, 'tiny-qwen2');
    assert.deepEqual(await stateOf(srv.baseUrl), { tiny: 'loaded', 'tiny-qwen2': 'loaded' });
  });

  test('an alias set through the settings endpoint resolves, and is written to the settings file', async () => {
    const r = await put(srv.baseUrl, '/api/models/tiny-qwen2/settings', { alias: 'qwen', ttl_seconds: 600 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json.settings, { alias: 'qwen', pinned: false, ttl_seconds: 600, ctx_size: null });
    const chat = await postJson(srv.baseUrl, '/v1/chat/completions', ask('qwen'));
    assert.equal(chat.status, 200);
    assert.equal(chat.json.model, 'tiny-qwen2');
    const file = JSON.parse(readFileSync(settingsFile, 'utf8'));
    assert.deepEqual(file.models['tiny-qwen2'], { alias: 'qwen', ttl_seconds: 600 });
    const m = (await status(srv.baseUrl)).models.find((x) => x.id === 'tiny-qwen2');
    assert.equal(m.alias, 'qwen');
    assert.equal(m.ttl_seconds, 600);
  });

  test('a new context size is reported as needing a reload and applies to the next load', async () => {
    const r = await put(srv.baseUrl, '/api/models/tiny/settings', { ctx_size: 512 });
    assert.equal(r.json.requires_reload, true);
    await postJson(srv.baseUrl, '/api/models/tiny/unload', {});
    const long = 'word '.repeat(700);
    const e = await postJson(srv.baseUrl, '/v1/completions', { model: 'tiny', prompt: long, max_tokens: 2 });
    assert.equal(e.status, 400);
    assert.equal(e.json.error.n_ctx, 512);
    await put(srv.baseUrl, '/api/models/tiny/settings', { ctx_size: null });
  });

  const badSettings = [
    ['not JSON', '{', 400, 'invalid_json', ''],
    ['not an object', '[1]', 400, 'invalid_json', ''],
    ['unknown key', { colour: 'red' }, 400, 'invalid_value', 'colour'],
    ['alias with spaces', { alias: 'a b' }, 400, 'invalid_value', 'alias'],
    ['alias taken by another model id', { alias: 'tiny-qwen2' }, 400, 'invalid_value', 'alias'],
    ['alias taken by another alias', { alias: 'QWEN' }, 400, 'invalid_value', 'alias'],
    ['pinned not a boolean', { pinned: 'yes' }, 400, 'invalid_value', 'pinned'],
    ['negative ttl', { ttl_seconds: -1 }, 400, 'invalid_value', 'ttl_seconds'],
    ['ctx_size too small', { ctx_size: 8 }, 400, 'invalid_value', 'ctx_size'],
    ['ctx_size fractional', { ctx_size: 10.5 }, 400, 'invalid_value', 'ctx_size'],
  ];
  for (const [name, body, statusCode, code, param] of badSettings) {
    test(`settings: ${name} -> ${statusCode}`, async () => {
      const before = readFileSync(settingsFile, 'utf8');
      const r = await put(srv.baseUrl, '/api/models/tiny/settings', body);
      assert.equal(r.status, statusCode, JSON.stringify(r.json));
      assert.equal(r.json.error.code, code);
      assert.equal(r.json.error.param ?? '', param);
      assert.equal(readFileSync(settingsFile, 'utf8'), before, 'a rejected update changed the file');
    });
  }

  test('admin endpoints answer 404 for unknown models, listing the available ones', async () => {
    for (const [method, route] of [['POST', '/api/models/nope/load'], ['POST', '/api/models/nope/unload'], ['PUT', '/api/models/nope/settings']]) {
      const r = await fetch(`${srv.baseUrl}${route}`, { method, headers: { 'content-type': 'application/json' }, body: '{}' });
      assert.equal(r.status, 404, route);
      const j = await r.json();
      assert.equal(j.error.code, 'model_not_found');
      assert.match(j.error.message, /available models: tiny, tiny-qwen2/);
    }
  });

  test('unloading a model that is not loaded is not an error', async () => {
    await postJson(srv.baseUrl, '/api/models/tiny/unload', {});
    const r = await postJson(srv.baseUrl, '/api/models/tiny/unload', {});
    assert.equal(r.status, 200);
    assert.equal(r.json.status, 'not_loaded');
  });
});

describe('a single --model', () => {
  test('that cannot be loaded stops the server with exit code 1 and says why', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'llmux-junk-'));
    try {
      const junk = path.join(dir, 'junk.gguf');
      writeFileSync(junk, 'this is not a GGUF file');
      await assert.rejects(startServer(['--model', junk]), (e) => /exited.*\(1\)/s.test(e.message) && /junk/.test(e.message));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('settings file at start-up', () => {
  test('a pinned model in the settings file is loaded at start; a malformed file stops the server with a clear error', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'llmux-settings-'));
    try {
      copyFileSync(modelPath('tiny'), path.join(dir, 'tiny.gguf'));
      copyFileSync(modelPath('tiny-qwen2'), path.join(dir, 'other.gguf'));
      const file = path.join(dir, 'models.json');
      writeFileSync(file, JSON.stringify({ models: { other: { pinned: true, alias: 'o' } } }));
      const srv = await startServer(['--model-dir', dir, '--settings', file]);
      try {
        const st = await status(srv.baseUrl);
        assert.deepEqual(Object.fromEntries(st.models.map((m) => [m.id, m.state])), { other: 'loaded', tiny: 'unloaded' });
        assert.equal(st.models.find((m) => m.id === 'other').pinned, true);
      } finally {
        await srv.stop();
      }
      writeFileSync(file, '{"models": {"other": {"pinned": "sometimes"}}}');
      await assert.rejects(startServer(['--model-dir', dir, '--settings', file]), /models\.json/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
