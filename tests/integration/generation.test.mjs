// Generation behaviour of the real server on the tiny model: determinism,
// batching invariance, streaming shape, stop conditions, per-request sampling.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, modelPath, postJson, postStream, streamText, status, waitFor } from './lib/server.mjs';

const chat = (content, extra = {}) => ({
  model: 'tiny',
  messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content }],
  ...extra,
});

// These tests compare outputs bit for bit across runs. llama.cpp's CPU
// attention sums a sequence's KV cells in an order that depends on where the
// cells sit, and with the prefix cache on, where they sit depends on what
// earlier requests left behind. The cache has its own parity tests
// (prefix_cache.test.mjs); here it is off, so every run starts from the same
// state.
describe('generation', () => {
  let srv;
  before(async () => { srv = await startServer(['--model', modelPath('tiny'), '--parallel', '8', '--no-prefix-cache']); });
  after(async () => { await srv.stop(); });

  test('temperature 0 is identical across 3 sequential runs', async () => {
    const body = chat('Tell me about the sea.', { temperature: 0, max_tokens: 48 });
    const outs = [];
    for (let i = 0; i < 3; i++) {
      const r = await postJson(srv.baseUrl, '/v1/chat/completions', body);
      assert.equal(r.status, 200, r.text);
      outs.push(r.json.choices[0].message.content);
    }
    assert.ok(outs[0].length > 0);
    assert.equal(outs[1], outs[0]);
    assert.equal(outs[2], outs[0]);
  });

  // The prompt is short so that four of them prefill in under 64 rows: llama.cpp's
  // CPU flash attention then uses its per-row kernel, whose result depends only on
  // the order of a sequence's own KV cells (which the engine preserves) and not on
  // where the cells are or what else is in the batch. See docs/ARCHITECTURE.md.
  test('4 concurrent identical temperature-0 requests give identical output', async () => {
    const body = { model: 'tiny', prompt: 'Four at once, said the sea', temperature: 0, max_tokens: 48 };
    const alone = (await postJson(srv.baseUrl, '/v1/completions', body)).json.choices[0].text;
    const rs = await Promise.all([0, 1, 2, 3].map(() => postJson(srv.baseUrl, '/v1/completions', body)));
    for (const r of rs) {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.choices[0].text, alone);
    }
  });

  test('a temperature-0 request is the same alone and beside three temperature-1.5 requests', async () => {
    const greedy = chat('Steady as she goes.', { temperature: 0, max_tokens: 64 });
    const alone = (await postJson(srv.baseUrl, '/v1/chat/completions', greedy)).json.choices[0].message.content;
    // The hot requests outlive the greedy one, so they are in every one of its batches.
    const hot = [1, 2, 3].map((i) => postJson(srv.baseUrl, '/v1/chat/completions',
      chat(`Wild guess number ${i}.`, { temperature: 1.5, max_tokens: 400, seed: i })));
    const beside = postJson(srv.baseUrl, '/v1/chat/completions', greedy);
    const [b, ...h] = await Promise.all([beside, ...hot]);
    assert.equal(b.status, 200);
    for (const r of h) assert.equal(r.status, 200);
    assert.equal(b.json.choices[0].message.content, alone);
  });

  test('the concatenated chat stream equals the non-streamed text (greedy and seeded)', async () => {
    for (const extra of [{ temperature: 0 }, { temperature: 1.0, top_p: 0.9, seed: 1234 }]) {
      const body = chat('Stream me.', { max_tokens: 40, ...extra });
      const whole = await postJson(srv.baseUrl, '/v1/chat/completions', body);
      const streamed = await postStream(srv.baseUrl, '/v1/chat/completions', body);
      assert.equal(streamed.status, 200);
      assert.equal(streamText(streamed.chunks), whole.json.choices[0].message.content);
    }
  });

  test('the text-completion stream equals the non-streamed text', async () => {
    const body = { model: 'tiny', prompt: 'Once upon a time', max_tokens: 40, temperature: 0 };
    const whole = await postJson(srv.baseUrl, '/v1/completions', body);
    assert.equal(whole.status, 200, whole.text);
    assert.equal(whole.json.object, 'text_completion');
    const streamed = await postStream(srv.baseUrl, '/v1/completions', body);
    assert.equal(streamText(streamed.chunks), whole.json.choices[0].text);
    assert.equal(streamed.doneCount, 1);
  });

  test('stream shape: role-only first delta, content deltas, finish chunk, usage chunk, one [DONE]', async () => {
    const s = await postStream(srv.baseUrl, '/v1/chat/completions',
      chat('Shape.', { temperature: 0, max_tokens: 12, stream_options: { include_usage: true } }));
    assert.equal(s.status, 200);
    assert.match(s.headers.get('content-type'), /^text\/event-stream/);
    assert.equal(s.doneCount, 1);
    assert.equal(s.data.at(-1), '[DONE]');
    const [first, ...rest] = s.chunks;
    assert.deepEqual(first.choices[0].delta, { role: 'assistant' });
    assert.equal(first.object, 'chat.completion.chunk');
    const usageChunk = rest.at(-1);
    assert.deepEqual(usageChunk.choices, []);
    assert.equal(usageChunk.usage.completion_tokens, 12);
    assert.equal(usageChunk.usage.total_tokens, usageChunk.usage.prompt_tokens + 12);
    assert.equal(usageChunk.usage.prompt_tokens_details.cached_tokens, 0);
    const finish = rest.at(-2);
    assert.equal(finish.choices[0].finish_reason, 'length');
    assert.deepEqual(finish.choices[0].delta, {});
    for (const c of rest.slice(0, -2)) {
      assert.equal(typeof c.choices[0].delta.content, 'string');
      assert.equal(c.choices[0].finish_reason, null);
      assert.equal(c.id, first.id);
    }
  });

  test('without include_usage there is no usage chunk', async () => {
    const s = await postStream(srv.baseUrl, '/v1/chat/completions', chat('No usage.', { temperature: 0, max_tokens: 5 }));
    assert.equal(s.doneCount, 1);
    assert.ok(s.chunks.every((c) => c.choices.length === 1 && c.usage === undefined));
  });

  test('max_tokens 1 gives exactly one token and finish_reason length', async () => {
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', chat('One.', { temperature: 0, max_tokens: 1 }));
    assert.equal(r.status, 200);
    assert.equal(r.json.usage.completion_tokens, 1);
    assert.equal(r.json.choices[0].finish_reason, 'length');
    assert.equal(r.json.usage.total_tokens, r.json.usage.prompt_tokens + 1);
  });

  test('usage counts the prompt: token-array prompts are counted exactly', async () => {
    const r = await postJson(srv.baseUrl, '/v1/completions',
      { model: 'tiny', prompt: [1, 15043, 3186, 29892], max_tokens: 3, temperature: 0 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.prompt_tokens, 4);
    assert.equal(r.json.usage.completion_tokens, 3);
  });

  test('a stop string ends generation before it and finish_reason is stop', async () => {
    const body = chat('Stop me.', { temperature: 0, max_tokens: 60 });
    const full = (await postJson(srv.baseUrl, '/v1/chat/completions', body)).json.choices[0].message.content;
    assert.ok(full.length > 12, full);
    const stop = full.slice(8, 11);
    const cut = await postJson(srv.baseUrl, '/v1/chat/completions', { ...body, stop: [stop] });
    assert.equal(cut.json.choices[0].finish_reason, 'stop');
    assert.equal(cut.json.choices[0].message.content, full.slice(0, full.indexOf(stop)));
    const streamed = await postStream(srv.baseUrl, '/v1/chat/completions', { ...body, stop });
    assert.equal(streamText(streamed.chunks), full.slice(0, full.indexOf(stop)));
  });

  test('same seed gives the same sample; different seeds differ', async () => {
    const body = chat('Roll the dice.', { temperature: 1.2, max_tokens: 40 });
    const a = await postJson(srv.baseUrl, '/v1/chat/completions', { ...body, seed: 7 });
    const b = await postJson(srv.baseUrl, '/v1/chat/completions', { ...body, seed: 7 });
    const c = await postJson(srv.baseUrl, '/v1/chat/completions', { ...body, seed: 8 });
    assert.equal(a.json.choices[0].message.content, b.json.choices[0].message.content);
    assert.notEqual(a.json.choices[0].message.content, c.json.choices[0].message.content);
  });

  test('sampling parameters change the output: top_k 1 is greedy, penalties change greedy text', async () => {
    const base = chat('Parameters matter.', { max_tokens: 40 });
    const greedy = (await postJson(srv.baseUrl, '/v1/chat/completions', { ...base, temperature: 0 })).json.choices[0].message.content;
    const topk1 = (await postJson(srv.baseUrl, '/v1/chat/completions', { ...base, temperature: 1.0, top_k: 1, seed: 3 })).json.choices[0].message.content;
    assert.equal(topk1, greedy);
    const penalised = (await postJson(srv.baseUrl, '/v1/chat/completions',
      { ...base, temperature: 0, repeat_penalty: 1.5, presence_penalty: 1.5, frequency_penalty: 1.0 })).json.choices[0].message.content;
    assert.notEqual(penalised, greedy);
  });

  test('8 concurrent streams all complete', async () => {
    const rs = await Promise.all([...Array(8).keys()].map((i) =>
      postStream(srv.baseUrl, '/v1/chat/completions', chat(`Stream ${i}.`, { temperature: 0.8, seed: i, max_tokens: 64 }))));
    for (const r of rs) {
      assert.equal(r.status, 200);
      assert.equal(r.doneCount, 1);
      const finish = r.chunks.at(-1).choices[0].finish_reason;
      assert.ok(finish === 'length' || finish === 'stop');
      assert.ok(streamText(r.chunks).length > 0);
    }
  });

  test('more requests than slots queue and all complete', async () => {
    const rs = await Promise.all([...Array(20).keys()].map((i) =>
      postJson(srv.baseUrl, '/v1/completions', { model: 'tiny', prompt: `Queue ${i}`, max_tokens: 16, temperature: 0 })));
    for (const r of rs) assert.equal(r.status, 200);
  });

  test('after all requests the engine bookkeeping is empty', async () => {
    const s = await waitFor(async () => {
      const st = await status(srv.baseUrl);
      const e = st.models[0].engine;
      return e.waiting === 0 && e.prefilling === 0 && e.generating === 0 && e.slots_busy === 0 &&
        e.kv_cells_used === 0 && st.active_requests === 0 ? st : null;
    });
    assert.ok(s, 'engine did not drain');
    assert.equal(s.models[0].leases, 0);
  });
});
