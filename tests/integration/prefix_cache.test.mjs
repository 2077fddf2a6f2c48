// The tiered prefix KV cache with the real binary: parity of outputs after a
// hit from each tier, reuse across a restart, the hot tier's global budget
// and a clear that really frees, damaged files, a full disk, and no sharing
// between models.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readdirSync, statSync, readFileSync, writeFileSync, truncateSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, modelPath, postJson, getJson, procMemory, waitFor } from './lib/server.mjs';

const TOOL = process.env.LLMUX_MAKE_MODEL ?? path.resolve(import.meta.dirname, '../../build/tools/make_model/llmux-make-model');
const MiB = 1 << 20;
const B = 64;  // --cache-block-size for these tests: small prompts, several blocks

// Distinct, stop-free prompts given as token ids (exact lengths).
const tokens = (n, salt) => Array.from({ length: n }, (_, i) => 1000 + ((i * 7919 + salt * 104729) % 20000));
const complete = (srv, model, prompt, extra = {}) =>
  postJson(srv.baseUrl, '/v1/completions', { model, prompt, max_tokens: 24, temperature: 0, ...extra });
const cachedOf = (r) => r.json.usage.prompt_tokens_details.cached_tokens;
const stats = async (srv) => (await getJson(srv.baseUrl, '/api/cache/stats')).json;
// Runs `fn` with a server that is stopped whatever happens (a failing test
// must not leave a server behind, or node never exits).
async function withServer(args, fn) {
  const srv = await startServer(args);
  try {
    return await fn(srv);
  } finally {
    await srv.stop();
  }
}
const blockFiles = (dir) => {
  const out = [];
  for (const shard of readdirSync(dir, { withFileTypes: true })) {
    if (!shard.isDirectory()) continue;
    for (const f of readdirSync(path.join(dir, shard.name))) if (f.endsWith('.kvb')) out.push(path.join(dir, shard.name, f));
  }
  return out;
};

describe('prefix cache', () => {
  let work;
  before(() => { work = mkdtempSync(path.join(tmpdir(), 'llmux-kv-test-')); });
  after(() => { rmSync(work, { recursive: true, force: true }); });

  describe('parity: flash attention off, temperature 0', () => {
    const P = tokens(300, 1);  // 4 full blocks before its last token
    let expected;
    let cacheDir;
    const args = () => ['--model', modelPath('tiny'), '--flash-attn', 'off', '--cache-block-size', String(B),
      '--cache-dir', cacheDir, '--parallel', '2'];

    before(async () => {
      cacheDir = path.join(work, 'parity');
      expected = await withServer(['--model', modelPath('tiny'), '--flash-attn', 'off', '--no-prefix-cache'],
        async (ref) => (await complete(ref, 'tiny', P)).json.choices[0].text);
      assert.ok(expected.length > 0);
    });

    test('a hit from each tier (device, hot, SSD after a restart) gives the output without cache', async () => {
      await withServer(args(), async (srv) => {
        const cold = await complete(srv, 'tiny', P);
        assert.equal(cachedOf(cold), 0);
        assert.equal(cold.json.choices[0].text, expected);

        const device = await complete(srv, 'tiny', P);  // tier 0: the cells of the first request
        assert.equal(cachedOf(device), P.length - 1);
        assert.equal(device.json.choices[0].text, expected);

        await postJson(srv.baseUrl, '/api/models/tiny/unload', {});  // tier 0 is gone, RAM blocks stay
        const hot = await complete(srv, 'tiny', P);
        assert.equal(cachedOf(hot), 4 * B);
        assert.equal(hot.json.choices[0].text, expected);
        const s = await stats(srv);
        assert.ok(s.lookups.hot_hits >= 4, JSON.stringify(s.lookups));
        assert.equal(s.lookups.ssd_hits, 0);
      });  // stopping flushes RAM-only blocks to disk

      await withServer(args(), async (srv) => {
        const ssd = await complete(srv, 'tiny', P);
        assert.equal(cachedOf(ssd), 4 * B);
        assert.equal(ssd.json.choices[0].text, expected);
        assert.ok((await stats(srv)).lookups.ssd_hits >= 4);
      });
    });

    test('a prompt that extends a cached one reuses exactly floor(n/B) of its blocks', async () => {
      await withServer(args(), async (srv) => {
        const base = tokens(200, 2);                                  // 200 tokens: 3 full blocks
        await complete(srv, 'tiny', base);
        await postJson(srv.baseUrl, '/api/models/tiny/unload', {});   // only the block tiers remain
        const longer = [...base, ...tokens(150, 3)];
        const r = await complete(srv, 'tiny', longer);
        assert.equal(cachedOf(r), Math.floor(base.length / B) * B);
        // From tier 0 the reuse is token-exact: the whole shared prefix.
        const again = await complete(srv, 'tiny', [...base, ...tokens(150, 4)]);
        assert.equal(cachedOf(again), base.length);
      });
    });

    test('the probe reports what each tier holds without running the model', async () => {
      await withServer(args(), async (srv) => {
        const Q = tokens(400, 5);
        const empty = await postJson(srv.baseUrl, '/api/cache/probe', { model: 'tiny', prompt: Q });
        assert.equal(empty.status, 200, empty.text);
        assert.deepEqual(empty.json, { model: 'tiny', total_tokens: 400, block_size: B, blocks_device: 0, blocks_hot: 0,
          blocks_ssd: 0, blocks_missing: 6, cached_tokens: 0 });
        const before = (await stats(srv)).device.models[0];
        await complete(srv, 'tiny', Q);
        const warm = (await postJson(srv.baseUrl, '/api/cache/probe', { model: 'tiny', prompt: Q })).json;
        assert.equal(warm.blocks_device, 6);
        assert.equal(warm.cached_tokens, 399);
        const after = (await stats(srv)).device.models[0];
        assert.equal(after.cached_tokens, before.cached_tokens, 'the probe ran a request');
      });
    });
  });

  test('restart: a prompt of 4+ blocks is reused after the server restarts', async () => {
    const dir = path.join(work, 'restart');
    const args = ['--model', modelPath('tiny-qwen2'), '--cache-block-size', String(B), '--cache-dir', dir];
    const P = tokens(5 * B + 10, 6);
    await withServer(args, async (srv) => assert.equal(cachedOf(await complete(srv, 'tiny-qwen2', P)), 0));
    assert.ok(blockFiles(dir).length >= 5, 'blocks were not written to disk at shutdown');
    // Each file starts with the documented header (src/kvcache/ssd_tier.h).
    const head = readFileSync(blockFiles(dir)[0]).subarray(0, 120);
    assert.equal(head.subarray(0, 8).toString(), 'LLMUXKVB');
    assert.equal(head.readUInt32LE(8), 2, 'format version');
    assert.equal(head.readUInt32LE(80), B, 'token count');
    assert.ok(head.readUInt32LE(84) > 0, 'layer count');
    assert.deepEqual([head.readUInt32LE(88), head.readUInt32LE(92)], [1, 1], 'K/V types (F16)');
    await withServer(args, async (srv) => {
      const r = await complete(srv, 'tiny-qwen2', P);
      assert.ok(cachedOf(r) >= 4 * B, `cached ${cachedOf(r)}`);
    });
  });

  test('no cross-model hits between two models that share a vocabulary', async () => {
    const dir = path.join(work, 'models-xm');
    execFileSync('mkdir', ['-p', dir]);
    copyFileSync(modelPath('tiny'), path.join(dir, 'a.gguf'));
    execFileSync(TOOL, ['--preset', 'tiny', '--seed', '7', '--out', path.join(dir, 'b.gguf')], { stdio: 'pipe' });
    const srv = await startServer(['--model-dir', dir, '--cache-block-size', String(B), '--cache-dir', path.join(work, 'xm-kv')]);
    try {
      const P = tokens(300, 7);
      await complete(srv, 'a', P);
      assert.equal(cachedOf(await complete(srv, 'a', P)), P.length - 1);
      const probe = (await postJson(srv.baseUrl, '/api/cache/probe', { model: 'b', prompt: P })).json;
      assert.equal(probe.blocks_hot + probe.blocks_ssd + probe.blocks_device, 0, JSON.stringify(probe));
      assert.equal(cachedOf(await complete(srv, 'b', P)), 0);
    } finally {
      await srv.stop();
    }
  });

  describe('hot tier budget', () => {
    let dir;
    before(() => {
      dir = path.join(work, 'hot-models');
      execFileSync('mkdir', ['-p', dir]);
      // KV of 4 KiB per token: a 256-token block is 1 MiB.
      for (const [id, seed] of [['m1', 1], ['m2', 2], ['m3', 3]]) {
        execFileSync(TOOL, ['--preset', 'tiny', '--n-embd', '512', '--n-layer', '4', '--n-ff', '1024', '--seed', String(seed),
          '--out', path.join(dir, `${id}.gguf`)], { stdio: 'pipe' });
      }
    });

    test('three models filling the tier never exceed its budget; a clear gives the memory back, also after unloads', async () => {
      const budget = 24 * MiB;
      const srv = await startServer(['--model-dir', dir, '--hot-cache-size', String(budget), '--ssd-cache-size', '0',
        '--parallel', '1', '--ctx-size', '2048', '--max-process-memory', 'disabled']);
      let peak = 0;
      for (let round = 0; round < 4; round++) {
        for (const id of ['m1', 'm2', 'm3']) {
          const r = await complete(srv, id, tokens(1300, round * 10 + Number(id[1])), { max_tokens: 4 });
          assert.equal(r.status, 200, r.text);
          const h = (await stats(srv)).hot;
          peak = Math.max(peak, h.bytes);
          assert.ok(h.bytes <= budget, `hot tier holds ${h.bytes} > ${budget}`);
        }
      }
      const s = (await stats(srv)).hot;
      assert.ok(s.evictions > 0, 'the tier never filled up');
      assert.ok(peak > budget * 0.8, `peak ${peak}`);
      for (const id of ['m1', 'm2', 'm3']) await postJson(srv.baseUrl, '/api/models/' + id + '/unload', {});
      const held = (await stats(srv)).hot.bytes;
      assert.ok(held > budget * 0.8, 'unloading the models emptied the tier');
      const rssBefore = procMemory(srv.pid);
      const c = await postJson(srv.baseUrl, '/api/hot-cache/clear', {});
      const rssAfter = procMemory(srv.pid);
      assert.equal(c.status, 200);
      assert.equal(c.json.bytes_freed, held);
      assert.ok(c.json.entries_cleared > 0);
      console.log(`hot tier: ${(held / MiB).toFixed(1)} MiB held after unloads; clear reclaimed ${(c.json.bytes_reclaimed / MiB).toFixed(1)} MiB ` +
        `(RssAnon ${(rssBefore.rssAnon / MiB).toFixed(1)} -> ${(rssAfter.rssAnon / MiB).toFixed(1)} MiB)`);
      assert.ok(c.json.bytes_reclaimed >= 0.8 * held, `reclaimed ${c.json.bytes_reclaimed} of ${held}`);
      assert.ok(rssBefore.rssAnon - rssAfter.rssAnon >= 0.8 * held);
      assert.equal((await stats(srv)).hot.bytes, 0);
      await srv.stop();
    });
  });

  describe('damaged files and a full disk', () => {
    test('corrupt, truncated and foreign files are misses, are removed, and outputs stay right', async () => {
      const dir = path.join(work, 'faults');
      const args = ['--model', modelPath('tiny'), '--flash-attn', 'off', '--cache-block-size', String(B), '--cache-dir', dir,
        '--hot-cache-size', '0'];  // every hit comes from disk
      const P = tokens(400, 8);
      const ref = await startServer(['--model', modelPath('tiny'), '--flash-attn', 'off', '--no-prefix-cache']);
      const expected = (await complete(ref, 'tiny', P)).json.choices[0].text;
      await ref.stop();
      let srv = await startServer(args);
      await complete(srv, 'tiny', P);
      await srv.stop();
      const files = blockFiles(dir).sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs);
      assert.ok(files.length >= 6, `only ${files.length} block files`);
      // One byte of the first block's payload flipped; the second truncated; a foreign file added.
      const bytes = readFileSync(files[0]);
      bytes[bytes.length - 100] ^= 0xff;
      writeFileSync(files[0], bytes);
      truncateSync(files[1], 50);
      const foreign = path.join(path.dirname(files[2]), 'f'.repeat(64) + '.kvb');
      writeFileSync(foreign, Buffer.alloc(4096, 7));
      srv = await startServer(args);
      try {
        const r = await complete(srv, 'tiny', P);
        assert.equal(r.status, 200);
        assert.equal(r.json.choices[0].text, expected);
        // The truncated and the foreign file go at start-up, the corrupt one when read.
        const s = (await stats(srv)).ssd;
        assert.equal(s.corrupt_removed, 3, JSON.stringify(s));
        assert.ok(!blockFiles(dir).includes(foreign), 'the foreign file is still there');
      } finally {
        await srv.stop();
      }
      // The blocks that were lost were computed again and stored whole.
      const sizes = new Set(blockFiles(dir).map((f) => statSync(f).size));
      assert.equal(sizes.size, 1, `block files of different sizes: ${[...sizes]}`);
    });

    test('a disk that cannot take more (file-size limit) counts errors and keeps serving', async () => {
      const dir = path.join(work, 'full');
      const bin = process.env.LLMUX_BIN ?? path.resolve(import.meta.dirname, '../../build/src/llmux');
      // Run the server under a tiny file-size limit: every block write fails with EFBIG.
      const wrapper = path.join(work, 'limited.sh');
      // A block of the tiny model is about 16 KiB, so every block write fails.
      writeFileSync(wrapper, `#!/bin/sh\nexec prlimit --fsize=8000 ${bin} "$@"\n`, { mode: 0o755 });
      process.env.LLMUX_BIN = wrapper;
      let srv;
      try {
        srv = await startServer(['--model', modelPath('tiny'), '--cache-block-size', String(B), '--cache-dir', dir,
          '--hot-cache-size', '0']);
      } finally {
        process.env.LLMUX_BIN = bin;
      }
      try {
        for (let i = 0; i < 3; i++) {
          const r = await complete(srv, 'tiny', tokens(400, 20 + i));
          assert.equal(r.status, 200, r.text);
        }
        const s = await waitFor(async () => { const x = (await stats(srv)).ssd; return x.write_errors > 0 ? x : null; });
        assert.ok(s, 'no write error was counted');
        assert.equal(s.writes_stopped, true);
        assert.equal((await complete(srv, 'tiny', tokens(100, 30))).status, 200);
      } finally {
        await srv.stop();
      }
    });
  });

  test('clearing the SSD tier deletes its files and reports them', async () => {
    const dir = path.join(work, 'clear');
    const srv = await startServer(['--model', modelPath('tiny'), '--cache-block-size', String(B), '--cache-dir', dir,
      '--hot-cache-size', '0']);
    await complete(srv, 'tiny', tokens(300, 40));
    await waitFor(async () => (await stats(srv)).ssd.entries >= 4);
    const n = blockFiles(dir).length;
    const r = await postJson(srv.baseUrl, '/api/ssd-cache/clear', {});
    assert.equal(r.status, 200);
    assert.equal(r.json.files_deleted, n);
    assert.ok(r.json.bytes_deleted > 0);
    assert.equal(blockFiles(dir).length, 0);
    await srv.stop();
  });
});
