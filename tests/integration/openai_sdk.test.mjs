// End to end with the official `openai` npm package as the client.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, modelPath } from './lib/server.mjs';

describe('official openai client', () => {
  let srv;
  let client;
  before(async () => {
    srv = await startServer(['--model', modelPath('tiny-qwen2')]);
    client = new OpenAI({ baseURL: `${srv.baseUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => { await srv.stop(); });

  test('models.list', async () => {
    const page = await client.models.list();
    assert.deepEqual(page.data.map((m) => m.id), ['tiny-qwen2']);
  });

  test('chat, non-streamed', async () => {
    const r = await client.chat.completions.create({
      model: 'tiny-qwen2', temperature: 0, max_tokens: 16,
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }],
    });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  test('chat, streamed, equals non-streamed, with usage', async () => {
    const params = { model: 'tiny-qwen2', temperature: 0, max_tokens: 24, messages: [{ role: 'user', content: 'Count.' }] };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish = null;
    let usage = null;
    let roleSeen = false;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (c.delta.role) roleSeen = true;
        text += c.delta.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(roleSeen);
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  });

  test('completions, streamed and not', async () => {
    const whole = await client.completions.create({ model: 'tiny-qwen2', prompt: 'The quick brown fox', max_tokens: 12, temperature: 0 });
    assert.equal(whole.object, 'text_completion');
    assert.equal(whole.usage.completion_tokens, 12);
    assert.equal(whole.choices[0].finish_reason, 'length');
    const stream = await client.completions.create({ model: 'tiny-qwen2', prompt: 'The quick brown fox', max_tokens: 12, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, whole.choices[0].text);
  });

  test('errors surface as typed API errors', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'missing', messages: [{ role: 'user', content: 'x' }] }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-qwen2', temperature: 9, messages: [{ role: 'user', content: 'x' }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  });
});
