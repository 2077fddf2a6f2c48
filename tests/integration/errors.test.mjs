// Bad input gets a clear error in OpenAI's envelope, with the exact status,
// type and code, and the server keeps serving.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, modelPath, postJson, getJson } from './lib/server.mjs';

const CTX = 256;
const msgs = [{ role: 'user', content: 'hi' }];
const chat = (extra) => JSON.stringify({ model: 'tiny', messages: msgs, ...extra });
const long = 'lorem ipsum dolor sit amet '.repeat(200);

// [name, route, raw body, status, type, code, param (undefined = not checked)]
const cases = [
  ['malformed JSON', '/v1/chat/completions', '{"model": "tiny", "messages": [', 400, 'invalid_request_error', 'invalid_json'],
  ['empty body', '/v1/chat/completions', '', 400, 'invalid_request_error', 'invalid_json'],
  ['JSON array body', '/v1/chat/completions', '[1,2]', 400, 'invalid_request_error', 'invalid_json'],
  ['missing model', '/v1/chat/completions', JSON.stringify({ messages: msgs }), 400, 'invalid_request_error', 'missing_required_parameter', 'model'],
  ['model not a string', '/v1/chat/completions', chat({ model: 42 }), 400, 'invalid_request_error', 'invalid_type', 'model'],
  ['unknown model', '/v1/chat/completions', chat({ model: 'no-such-model' }), 404, 'not_found_error', 'model_not_found', 'model'],
  ['missing messages', '/v1/chat/completions', JSON.stringify({ model: 'tiny' }), 400, 'invalid_request_error', 'missing_required_parameter', 'messages'],
  ['messages not an array', '/v1/chat/completions', chat({ messages: 'hello' }), 400, 'invalid_request_error', 'invalid_type', 'messages'],
  ['empty messages', '/v1/chat/completions', chat({ messages: [] }), 400, 'invalid_request_error', 'invalid_value', 'messages'],
  ['message not an object', '/v1/chat/completions', chat({ messages: ['hi'] }), 400, 'invalid_request_error', 'invalid_type', 'messages[0]'],
  ['unknown role', '/v1/chat/completions', chat({ messages: [{ role: 'robot', content: 'x' }] }), 400, 'invalid_request_error', 'invalid_value', 'messages[0].role'],
  ['content wrong type', '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 5 }] }), 400, 'invalid_request_error', 'invalid_type', 'messages[0].content'],
  ['image content part', '/v1/chat/completions', chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), 400, 'invalid_request_error', 'unsupported_content', 'messages[0].content[0]'],
  ['temperature a string', '/v1/chat/completions', chat({ temperature: 'hot' }), 400, 'invalid_request_error', 'invalid_type', 'temperature'],
  ['temperature out of range', '/v1/chat/completions', chat({ temperature: 5 }), 400, 'invalid_request_error', 'invalid_value', 'temperature'],
  ['negative temperature', '/v1/chat/completions', chat({ temperature: -0.5 }), 400, 'invalid_request_error', 'invalid_value', 'temperature'],
  ['top_p above 1', '/v1/chat/completions', chat({ top_p: 1.5 }), 400, 'invalid_request_error', 'invalid_value', 'top_p'],
  ['top_k negative', '/v1/chat/completions', chat({ top_k: -3 }), 400, 'invalid_request_error', 'invalid_value', 'top_k'],
  ['top_k fractional', '/v1/chat/completions', chat({ top_k: 2.5 }), 400, 'invalid_request_error', 'invalid_type', 'top_k'],
  ['min_p above 1', '/v1/chat/completions', chat({ min_p: 2 }), 400, 'invalid_request_error', 'invalid_value', 'min_p'],
  ['presence_penalty out of range', '/v1/chat/completions', chat({ presence_penalty: 3 }), 400, 'invalid_request_error', 'invalid_value', 'presence_penalty'],
  ['frequency_penalty wrong type', '/v1/chat/completions', chat({ frequency_penalty: [1] }), 400, 'invalid_request_error', 'invalid_type', 'frequency_penalty'],
  ['max_tokens zero', '/v1/chat/completions', chat({ max_tokens: 0 }), 400, 'invalid_request_error', 'invalid_value', 'max_tokens'],
  ['max_tokens negative', '/v1/chat/completions', chat({ max_tokens: -5 }), 400, 'invalid_request_error', 'invalid_value', 'max_tokens'],
  ['max_tokens enormous', '/v1/chat/completions', chat({ max_tokens: 1e15 }), 400, 'invalid_request_error', 'invalid_value', 'max_tokens'],
  ['max_tokens a string', '/v1/chat/completions', chat({ max_tokens: '10' }), 400, 'invalid_request_error', 'invalid_type', 'max_tokens'],
  ['seed not an integer', '/v1/chat/completions', chat({ seed: 'abc' }), 400, 'invalid_request_error', 'invalid_type', 'seed'],
  ['stream not a boolean', '/v1/chat/completions', chat({ stream: 'yes' }), 400, 'invalid_request_error', 'invalid_type', 'stream'],
  ['stream_options not an object', '/v1/chat/completions', chat({ stream: true, stream_options: 1 }), 400, 'invalid_request_error', 'invalid_type', 'stream_options'],
  ['stop a number', '/v1/chat/completions', chat({ stop: 5 }), 400, 'invalid_request_error', 'invalid_type', 'stop'],
  ['stop array with a non-string', '/v1/chat/completions', chat({ stop: ['a', 1] }), 400, 'invalid_request_error', 'invalid_type', 'stop'],
  ['too many stop strings', '/v1/chat/completions', chat({ stop: [...Array(17).keys()].map(String) }), 400, 'invalid_request_error', 'invalid_value', 'stop'],
  ['n = 2', '/v1/chat/completions', chat({ n: 2 }), 400, 'invalid_request_error', 'invalid_value', 'n'],
  ['tools', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'f' } }] }), 400, 'invalid_request_error', 'unsupported_parameter', 'tools'],
  ['logprobs', '/v1/chat/completions', chat({ logprobs: true }), 400, 'invalid_request_error', 'unsupported_parameter', 'logprobs'],
  ['prompt over the context (chat)', '/v1/chat/completions', chat({ messages: [{ role: 'user', content: long }] }), 400, 'exceed_context_size_error', 'context_length_exceeded', 'messages'],
  ['prompt over the context (completion)', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: long }), 400, 'exceed_context_size_error', 'context_length_exceeded', 'prompt'],
  ['missing prompt', '/v1/completions', JSON.stringify({ model: 'tiny' }), 400, 'invalid_request_error', 'missing_required_parameter', 'prompt'],
  ['prompt an object', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: { a: 1 } }), 400, 'invalid_request_error', 'invalid_type', 'prompt'],
  ['several prompts', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: ['a', 'b'] }), 400, 'invalid_request_error', 'invalid_value', 'prompt'],
  ['token id outside the vocabulary', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: [1, 99999999] }), 400, 'invalid_request_error', 'invalid_value', 'prompt'],
  ['negative token id', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: [1, -4] }), 400, 'invalid_request_error', 'invalid_value', 'prompt'],
  ['empty prompt without BOS', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: [] }), 400, 'invalid_request_error', 'invalid_type', 'prompt'],
  ['echo', '/v1/completions', JSON.stringify({ model: 'tiny', prompt: 'x', echo: true }), 400, 'invalid_request_error', 'unsupported_parameter', 'echo'],
  ['probe: malformed JSON', '/api/cache/probe', '{"model":', 400, 'invalid_request_error', 'invalid_json'],
  ['probe: missing model', '/api/cache/probe', JSON.stringify({ prompt: 'x' }), 400, 'invalid_request_error', 'missing_required_parameter', 'model'],
  ['probe: unknown model', '/api/cache/probe', JSON.stringify({ model: 'nope', prompt: 'x' }), 404, 'not_found_error', 'model_not_found', 'model'],
  ['probe: neither prompt nor messages', '/api/cache/probe', JSON.stringify({ model: 'tiny' }), 400, 'invalid_request_error', 'missing_required_parameter', 'prompt'],
  ['probe: messages not an array', '/api/cache/probe', JSON.stringify({ model: 'tiny', messages: 'hi' }), 400, 'invalid_request_error', 'invalid_type', 'messages'],
  ['probe: prompt an object', '/api/cache/probe', JSON.stringify({ model: 'tiny', prompt: { a: 1 } }), 400, 'invalid_request_error', 'invalid_type', 'prompt'],
  ['probe: token id outside the vocabulary', '/api/cache/probe', JSON.stringify({ model: 'tiny', prompt: [1, 99999999] }), 400, 'invalid_request_error', 'invalid_value', 'prompt'],
  ['unknown route', '/v1/nothing-here', '{}', 404, 'not_found_error', 'route_not_found'],
];

describe('bad input', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--model', modelPath('tiny'), '--ctx-size', String(CTX), '--max-body', '64KiB']);
  });
  after(async () => {
    const { code } = await srv.stop();
    assert.equal(code, 0, 'server did not exit cleanly');
  });

  for (const [name, route, body, statusCode, type, code, param] of cases) {
    test(`${name} -> ${statusCode} ${type}`, async () => {
      const r = await postJson(srv.baseUrl, route, body);
      assert.equal(r.status, statusCode, r.text);
      assert.ok(r.json?.error, `no error envelope: ${r.text}`);
      assert.equal(r.json.error.type, type);
      assert.equal(r.json.error.code, code);
      if (param !== undefined) assert.equal(r.json.error.param, param);
      assert.equal(typeof r.json.error.message, 'string');
      assert.ok(r.json.error.message.length > 0);
    });
  }

  test('the context error carries n_prompt_tokens and n_ctx', async () => {
    const r = await postJson(srv.baseUrl, '/v1/completions', { model: 'tiny', prompt: long });
    assert.equal(r.json.error.n_ctx, CTX);
    assert.ok(r.json.error.n_prompt_tokens >= CTX);
    assert.match(r.json.error.message, /exceeds the available context size/);
  });

  test('the unknown-model error lists the available models', async () => {
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', chat({ model: 'nope' }));
    assert.match(r.json.error.message, /available models: tiny/);
  });

  test('a body over --max-body gets 413', async () => {
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'x'.repeat(100_000) }] }));
    assert.equal(r.status, 413);
    assert.equal(r.json.error.code, 'request_too_large');
  });

  test('a wrong method on a known route gets 405', async () => {
    for (const route of ['/v1/chat/completions', '/api/hot-cache/clear', '/api/ssd-cache/clear', '/api/cache/probe']) {
      const r = await fetch(`${srv.baseUrl}${route}`);
      assert.equal(r.status, 405, route);
      assert.equal((await r.json()).error.code, 'method_not_allowed');
    }
  });

  test('a GET of an unknown route gets 404', async () => {
    const r = await fetch(`${srv.baseUrl}/nope`);
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.type, 'not_found_error');
  });

  test('garbage instead of HTTP gets 400 and the connection closes', async () => {
    const reply = await new Promise((resolve, reject) => {
      const sock = net.connect(new URL(srv.baseUrl).port, '127.0.0.1');
      let data = '';
      sock.on('data', (d) => { data += d; });
      sock.on('end', () => resolve(data));
      sock.on('error', reject);
      sock.write('THIS IS NOT HTTP\r\n\r\n');
    });
    assert.match(reply, /^HTTP\/1\.1 400 /);
  });

  test('invalid UTF-8 in a prompt is served, not crashed on', async () => {
    const body = Buffer.concat([Buffer.from('{"model":"tiny","max_tokens":4,"temperature":0,"prompt":"ab'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('cd"}')]);
    const r = await fetch(`${srv.baseUrl}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.ok(r.status === 200 || r.status === 400, `status ${r.status}`);
    const j = await r.json();
    if (r.status === 400) assert.equal(j.error.code, 'invalid_json');
  });

  test('after all of that the server is healthy and still answers', async () => {
    assert.equal((await getJson(srv.baseUrl, '/health')).status, 200);
    const r = await postJson(srv.baseUrl, '/v1/chat/completions', chat({ max_tokens: 3, temperature: 0 }));
    assert.equal(r.status, 200);
    assert.equal(srv.proc.exitCode, null);
  });
});
