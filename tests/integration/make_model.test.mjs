// llmux-make-model: deterministic for a seed, and every architecture and
// tensor type it writes loads and generates in the real server.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, postJson } from './lib/server.mjs';

const TOOL = process.env.LLMUX_MAKE_MODEL ?? path.resolve(import.meta.dirname ?? '.', '../../build/tools/make_model/llmux-make-model');
const sha = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('llmux-make-model', () => {
  let dir;
  const make = (name, args) => {
    const out = path.join(dir, `${name}.gguf`);
    execFileSync(TOOL, ['--out', out, ...args], { stdio: 'pipe' });
    return out;
  };
  before(() => { dir = mkdtempSync(path.join(tmpdir(), 'llmux-mm-')); });
  after(() => { rmSync(dir, { recursive: true, force: true }); });

  test('the same seed writes the same bytes; another seed does not', () => {
    const a = make('a', ['--preset', 'tiny', '--seed', '5']);
    const b = make('b', ['--preset', 'tiny', '--seed', '5']);
    const c = make('c', ['--preset', 'tiny', '--seed', '6']);
    assert.equal(sha(a), sha(b));
    assert.notEqual(sha(a), sha(c));
  });

  test('bad arguments exit with status 2', () => {
    assert.throws(() => execFileSync(TOOL, ['--preset', 'no-such-preset', '--out', path.join(dir, 'x.gguf')], { stdio: 'pipe' }),
      (e) => e.status === 2);
    assert.throws(() => execFileSync(TOOL, ['--preset', 'tiny', '--type', 'q3_k', '--out', path.join(dir, 'x.gguf')], { stdio: 'pipe' }),
      (e) => e.status === 2);
  });

  const variants = [
    ['llama-f16', ['--preset', 'tiny', '--type', 'f16']],
    ['llama-q8', ['--preset', 'tiny', '--type', 'q8_0']],
    ['llama-q4', ['--preset', 'tiny', '--type', 'q4_0']],
    ['llama-bpe', ['--preset', 'tiny', '--vocab', 'llama-bpe', '--type', 'q8_0']],
    ['qwen2-q4', ['--preset', 'tiny-qwen2', '--type', 'q4_0']],
  ];
  for (const [name, args] of variants) {
    test(`${name} loads, chats and generates`, async () => {
      const file = make(name, args);
      assert.ok(statSync(file).size > 100_000);
      const srv = await startServer(['--model', file, '--ctx-size', '512', '--parallel', '2']);
      try {
        const r = await postJson(srv.baseUrl, '/v1/chat/completions',
          { model: name, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, temperature: 0, ignore_eos: true });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.usage.completion_tokens, 8);
        assert.ok(r.json.choices[0].message.content.length > 0);
      } finally {
        await srv.stop();
      }
    });
  }
});
