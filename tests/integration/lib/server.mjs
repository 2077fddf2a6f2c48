// Starts the real llmux binary on a free port and talks HTTP to it.
//
// Environment (set by ctest, see tests/CMakeLists.txt):
//   LLMUX_BIN        path to the llmux executable
//   LLMUX_MODEL_DIR  directory holding the generated test models (tiny.gguf, ...)
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Defaults are relative to the repository, not to the working directory.
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const bin = () => process.env.LLMUX_BIN ?? path.join(REPO, 'build/src/llmux');
const modelDir = () => process.env.LLMUX_MODEL_DIR ?? path.join(REPO, 'models');
export const modelPath = (name) => path.join(modelDir(), `${name}.gguf`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Spawns `llmux serve <args> --port 0` and resolves once /health answers 200.
export async function startServer(args, { readyTimeoutMs = 60_000 } = {}) {
  // Each server gets its own empty config and cache homes, so a developer's
  // ~/.config/llmux/models.json or ~/.cache/llmux/kv never leaks into a test
  // (a test that wants a cache to outlive a server passes --cache-dir).
  const home = mkdtempSync(path.join(tmpdir(), 'llmux-home-'));
  const proc = spawn(bin(), ['serve', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, XDG_CONFIG_HOME: path.join(home, 'config'), XDG_CACHE_HOME: path.join(home, 'cache') },
  });
  proc.on('exit', () => rmSync(home, { recursive: true, force: true }));
  let output = '';
  proc.stdout.on('data', (d) => { output += d; });
  proc.stderr.on('data', (d) => { output += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));

  const deadline = Date.now() + readyTimeoutMs;
  let baseUrl = null;
  while (!baseUrl) {
    const m = output.match(/listening on (http:\/\/[^\s]+)/);
    if (m) baseUrl = m[1];
    else if (proc.exitCode !== null) throw new Error(`llmux exited early (${proc.exitCode}):\n${output}`);
    else if (Date.now() > deadline) throw new Error(`llmux did not start:\n${output}`);
    else await sleep(20);
  }
  while (true) {
    try {
      const r = await fetch(`${baseUrl}/health`);
      if (r.status === 200) break;
    } catch { /* not up yet */ }
    if (proc.exitCode !== null) throw new Error(`llmux exited (${proc.exitCode}):\n${output}`);
    if (Date.now() > deadline) throw new Error(`llmux never became healthy:\n${output}`);
    await sleep(50);
  }

  return {
    baseUrl,
    pid: proc.pid,
    proc,
    logs: () => output,
    // SIGTERM, then wait; returns {code, signal}.
    async stop({ timeoutMs = 15_000 } = {}) {
      if (proc.exitCode !== null || proc.signalCode !== null) return exited;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

export async function postJson(baseUrl, route, body, init = {}) {
  const res = await fetch(`${baseUrl}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(init.headers ?? {}) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: init.signal,
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

export async function getJson(baseUrl, route) {
  const res = await fetch(`${baseUrl}${route}`);
  return { status: res.status, json: await res.json() };
}

// Splits an event-stream body into its `data:` payloads (strings).
export function sseData(raw) {
  const out = [];
  for (const block of raw.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l.startsWith('data:'));
    if (lines.length) out.push(lines.map((l) => l.slice(5).replace(/^ /, '')).join('\n'));
  }
  return out;
}

// POSTs a streaming request and collects the whole stream.
export async function postStream(baseUrl, route, body) {
  const res = await fetch(`${baseUrl}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const raw = await res.text();
  const data = sseData(raw);
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
  return { status: res.status, headers: res.headers, raw, data, chunks, doneCount: data.filter((d) => d === '[DONE]').length };
}

// The concatenated content of a chat or text-completion stream.
export function streamText(chunks) {
  let s = '';
  for (const c of chunks) {
    for (const ch of c.choices ?? []) s += ch.delta?.content ?? ch.text ?? '';
  }
  return s;
}

export async function status(baseUrl) {
  return (await getJson(baseUrl, '/api/status')).json;
}

export async function waitFor(predicate, { timeoutMs = 5_000, intervalMs = 25 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await predicate();
    if (last) return last;
    await sleep(intervalMs);
  }
  return last;
}

// RssAnon / RssFile / Threads of a process, from /proc (bytes, count).
export function procMemory(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number((s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) ?? [0, 0])[1]) * 1024;
  return { rssAnon: kb('RssAnon'), rssFile: kb('RssFile'), vmRss: kb('VmRSS'), threads: Number(s.match(/^Threads:\s+(\d+)/m)[1]) };
}

export { sleep };
