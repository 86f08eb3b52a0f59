// JS SDK tests against the fake daemon (test/fake_server.js, a TEST DOUBLE).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { FakeDaemon } from './fake_server.js';
import {
  Sandbox, CommandExitError, SandboxNotFoundError, SandboxExpiredError, QuotaExceededError,
  ServiceUnavailableError, NotImplementedByServerError, GuestError, TimeoutError, BadRequestError,
  errorFromResponse, health, version, pool, setPool, ForbiddenError,
} from '../index.js';

let fake;
let socketPath;
before(async () => { fake = await new FakeDaemon().start(); socketPath = fake.socketPath; });
after(async () => { await fake.stop(); });

const TASK = "import json\nprint(json.dumps({'total': sum([3, 4, 5, 6, 7])}))\n";

test('seed flow: write, run as the unprivileged user with a 30 s timeout, kill in finally', async () => {
  const sb = await Sandbox.create({ timeout: 60, socketPath });
  try {
    await sb.files.write('/tmp/task.py', TASK);
    const r = await sb.commands.run('python3 /tmp/task.py', { timeoutMs: 30_000, user: 'sandbox' });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.truncated, false);
    assert.deepEqual(JSON.parse(r.stdout), { total: 25 });
    assert.ok(r.ok);
  } finally {
    await sb.kill();
  }
  const running = await Sandbox.list({ state: 'running', socketPath });
  assert.ok(!running.some((s) => s.sandboxId === sb.sandboxId));
});

test('non-zero exit is a result; check throws CommandExitError with the result', async () => {
  const sb = await Sandbox.create({ socketPath });
  try {
    await sb.files.write('/tmp/bad.py', "raise ValueError('boom')\n");
    const r = await sb.commands.run('python3 /tmp/bad.py');
    assert.equal(r.exitCode, 1);
    assert.match(r.stderr, /ValueError: boom/);
    await assert.rejects(sb.commands.run('python3 /tmp/bad.py', { check: true }), (e) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.result.exitCode, 1);
      return true;
    });
    const t = await sb.commands.run('sleep 5', { timeoutMs: 1000 });
    assert.equal(t.timedOut, true);
  } finally { await sb.kill(); }
});

test('streaming callbacks, argv, envs, cwd, stdin', async () => {
  const sb = await Sandbox.create({ socketPath, envs: { GLOBAL: 'g' } });
  try {
    const out = [];
    const err = [];
    const r = await sb.commands.run('echo a; sleep 0.2; echo b >&2; echo $GLOBAL$X', {
      envs: { X: 'x' }, onStdout: (s) => out.push(s), onStderr: (s) => err.push(s) });
    assert.equal(out.join(''), 'a\ngx\n');
    assert.equal(err.join(''), 'b\n');
    assert.equal(r.stdout, 'a\ngx\n');
    const p = await sb.commands.run(['sh', '-c', 'pwd; cat'], { cwd: '/tmp', stdin: 'in' });
    assert.match(p.stdout, /\/tmp\nin$/);
    const a = await sb.commands.run('python3', { args: ['-c', 'print(1+1)'] });
    assert.equal(a.stdout, '2\n');
  } finally { await sb.kill(); }
});

test('background, reconnect from another client, nothing missed', async () => {
  const sb = await Sandbox.create({ socketPath });
  try {
    const h = await sb.commands.run('for i in $(seq 1 15); do echo l$i; sleep 0.03; done', { background: true });
    await new Promise((r) => setTimeout(r, 150));
    const sb2 = await Sandbox.connect(sb.sandboxId, { accessToken: sb.accessToken, socketPath });
    const seen = [];
    const h2 = await sb2.commands.connect(h.execId, { onStdout: (s) => seen.push(s) });
    const r = await h2.wait({ timeoutMs: 10_000 });
    const expect = Array.from({ length: 15 }, (_, i) => `l${i + 1}\n`).join('');
    assert.equal(r.stdout, expect);
    assert.equal(seen.join(''), expect);
    const slow = await sb.commands.run('sleep 3', { background: true });
    await assert.rejects(slow.wait({ timeoutMs: 300 }), TimeoutError);
    await slow.kill();
    assert.equal((await slow.wait({ timeoutMs: 5000 })).signal, 9);
    const cat = await sb.commands.run('read a; echo got $a', { background: true, stdin: true });
    await cat.sendStdin('x\n');
    await cat.closeStdin();
    assert.equal((await cat.wait()).stdout, 'got x\n');
  } finally { await sb.kill(); }
});

test('stdin/signal answered 501 give a clear error', async () => {
  const sb = await Sandbox.create({ socketPath });
  fake.supportStdinSignal = false;
  try {
    const h = await sb.commands.run('sleep 1', { background: true, stdin: true });
    await assert.rejects(h.kill(), (e) => e instanceof NotImplementedByServerError && /does not support/.test(e.message));
    await assert.rejects(h.sendStdin('x'), NotImplementedByServerError);
  } finally { fake.supportStdinSignal = true; await sb.kill(); }
});

test('files: write kinds, 20 MiB streamed round trip, list, remove', async () => {
  const sb = await Sandbox.create({ socketPath });
  try {
    assert.equal((await sb.files.write('/tmp/a.txt', 'h\u00e9')).size, 3);
    assert.equal(await sb.files.read('/tmp/a.txt'), 'h\u00e9');
    await sb.files.write('/tmp/b.bin', new Uint8Array([0, 255]));
    assert.deepEqual([...(await sb.files.read('/tmp/b.bin', { format: 'bytes' }))], [0, 255]);
    const blob = crypto.randomBytes(20 << 20);
    const chunks = [];
    for (let i = 0; i < blob.length; i += 1 << 20) chunks.push(blob.subarray(i, i + (1 << 20)));
    const w = await sb.files.write('/tmp/big.bin', Readable.from(chunks));
    assert.equal(w.size, blob.length);
    assert.equal(fake.uploads.at(-1).chunked, true);
    const s = await sb.files.read('/tmp/big.bin', { format: 'stream' });
    const parts = [];
    for await (const c of s) parts.push(c);
    assert.ok(Buffer.concat(parts).equals(blob));
    await sb.files.write('/tmp/run.sh', '#!/bin/sh\necho ran\n', { mode: 0o755 });
    const entries = await sb.files.list('/tmp');
    assert.deepEqual(entries.map((e) => e.name), ['a.txt', 'b.bin', 'big.bin', 'run.sh']);
    assert.equal(entries.find((e) => e.name === 'run.sh').mode, 0o755);
    assert.equal(entries[0].path, '/tmp/a.txt');
    assert.equal((await sb.commands.run('/tmp/run.sh')).stdout, 'ran\n');
    await sb.files.remove('/tmp/a.txt');
    assert.equal(await sb.files.exists('/tmp/a.txt'), false);
    await assert.rejects(sb.files.read('/tmp/a.txt'), (e) => e instanceof GuestError && /no such file/.test(e.message));
  } finally { await sb.kill(); }
});

test('errors: not found, expired, quota, capacity, bad request, no daemon', async () => {
  await assert.rejects(Sandbox.connect('sbx_' + '0'.repeat(32), { socketPath }), SandboxNotFoundError);
  const sb = await Sandbox.create({ socketPath, metadata: { t: 'err' } });
  await assert.rejects(Sandbox.connect(sb.sandboxId, { accessToken: 'f'.repeat(32), socketPath }), SandboxNotFoundError);
  assert.equal((await Sandbox.list({ metadata: { t: 'err' }, socketPath }))[0].sandboxId, sb.sandboxId);
  assert.equal(await Sandbox.kill(sb.sandboxId, { socketPath }), true);
  await assert.rejects(sb.commands.run('true'), (e) => e instanceof SandboxExpiredError && e.endReason === 'killed');
  fake.quota = 0;
  await assert.rejects(Sandbox.create({ socketPath }), QuotaExceededError);
  fake.quota = 20;
  fake.capacityFull = true;
  await assert.rejects(Sandbox.create({ socketPath }), (e) => e instanceof ServiceUnavailableError && e.retryAfter === 1);
  fake.capacityFull = false;
  await assert.rejects(Sandbox.create({ socketPath, cpus: 99 }), (e) => e instanceof BadRequestError && /cpus/.test(e.message));
  await assert.rejects(Sandbox.create({ socketPath: '/nonexistent/api.sock' }), ServiceUnavailableError);
  assert.equal((await health({ socketPath })).status, 'ok');
  assert.equal((await version({ socketPath })).api, 'v1');
  assert.equal((await pool({ socketPath })).size, 0);
  assert.equal((await setPool(2, { socketPath })).size, 2);
  assert.equal((await pool({ socketPath, template: 'default' })).ready, 2);
  await assert.rejects(setPool(-1, { socketPath }), BadRequestError);
  assert.ok(errorFromResponse(403, Buffer.from('{"code":403,"error":"forbidden","message":"m"}')) instanceof ForbiddenError);
  const e = errorFromResponse(410, Buffer.from('{"code":410,"error":"sandbox_expired","message":"m","end_reason":"idle"}'));
  assert.ok(e instanceof SandboxExpiredError);
  assert.equal(e.endReason, 'idle');
});

test('kill during a background exec ends the wait with SandboxExpiredError', async () => {
  const sb = await Sandbox.create({ socketPath });
  const h = await sb.commands.run('sleep 10', { background: true });
  setTimeout(() => sb.kill(), 200);
  await assert.rejects(h.wait({ timeoutMs: 10_000 }), (e) => e instanceof SandboxExpiredError && e.endReason === 'killed');
});

test('setTimeout and expiry', async () => {
  const sb = await Sandbox.create({ socketPath, timeout: 30 });
  assert.match(await sb.setTimeout(1000), /Z$/);
  await new Promise((r) => setTimeout(r, 1500));
  await assert.rejects(sb.files.list('/'), (e) => e instanceof SandboxExpiredError && e.endReason === 'expired');
});

test('an early error answer during an upload is reported, not a broken pipe', async () => {
  const sb = await Sandbox.create({ socketPath });
  await sb.kill();
  for (let i = 0; i < 3; i++) {
    await assert.rejects(sb.files.write('/tmp/big.bin', Readable.from([Buffer.alloc(8 << 20)])),
      (e) => e instanceof SandboxExpiredError && e.endReason === 'killed');
    await assert.rejects(sb.files.write('/tmp/big.bin', Buffer.alloc(8 << 20)), SandboxExpiredError);
  }
});
