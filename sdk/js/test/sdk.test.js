// JS SDK tests against the fake daemon (test/fake_server.js, a TEST DOUBLE).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import fs from 'node:fs';
import { FakeDaemon } from './fake_server.js';
import {
  Sandbox, CommandExitError, SandboxNotFoundError, SandboxExpiredError, QuotaExceededError,
  ServiceUnavailableError, NotImplementedByServerError, GuestError, TimeoutError, BadRequestError,
  errorFromResponse, health, version, pool, setPool, ForbiddenError, ConflictError,
  templates, getTemplate, deleteTemplate, TemplateNotFoundError, NotFoundError, buildTemplate, WarmupFailedError,
  VERSION,
} from '../index.js';

let fake;
let socketPath;
before(async () => { fake = await new FakeDaemon().start(); socketPath = fake.socketPath; });
after(async () => { await fake.stop(); });

test('the version is the project\'s (vmm/core/version.h) and the package\'s', () => {
  const h = fs.readFileSync(new URL('../../../vmm/core/version.h', import.meta.url), 'utf8');
  const want = /#define TVM_VERSION "([^"]+)"/.exec(h)[1];
  assert.equal(VERSION, want);
  assert.equal(JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version, want);
});

const TASK = "import json\nprint(json.dumps({'total': sum([3, 4, 5, 6, 7])}))\n";
// A Template's keys: camelCase, none of the wire's (created_at, from_sandbox, memory_mib, memory_kib).
const TEMPLATE_KEYS = ['cpus', 'createLatency', 'createdAt', 'fromSandbox', 'memoryKib', 'memoryMib', 'name', 'network',
  'pauseSize', 'pauseTime'];
const assertTemplate = (t) => assert.deepEqual(Object.keys(t).sort(), TEMPLATE_KEYS);

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

test('job limits: memoryMib and pidsMax reach the daemon, oomKilled and pidsLimited come back', async () => {
  const sb = await Sandbox.create({ socketPath });
  try {
    const r = await sb.commands.run('echo ok', { memoryMib: 64, pidsMax: 16 });
    assert.equal(r.stdout, 'ok\n');
    assert.equal(r.oomKilled, false);
    assert.equal(r.pidsLimited, false);
    // the daemon checks them (here the fake, as the real one): they were sent
    await assert.rejects(sb.commands.run('true', { pidsMax: 0 }), /pids_max/);
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
    assert.deepEqual(await h.status(), { execId: h.execId, state: 'running', result: null, error: null });
    await new Promise((r) => setTimeout(r, 150));
    const sb2 = await Sandbox.connect(sb.sandboxId, { accessToken: sb.accessToken, socketPath });
    const seen = [];
    const h2 = await sb2.commands.connect(h.execId, { onStdout: (s) => seen.push(s) });
    const r = await h2.wait({ timeoutMs: 10_000 });
    const expect = Array.from({ length: 15 }, (_, i) => `l${i + 1}\n`).join('');
    assert.equal(r.stdout, expect);
    assert.equal(seen.join(''), expect);
    // status(): camelCase, its result a CommandResult as wait() gives it
    const st = await h.status();
    assert.deepEqual(Object.keys(st).sort(), ['error', 'execId', 'result', 'state']);
    assert.deepEqual([st.execId, st.state, st.error], [h.execId, 'exited', null]);
    assert.deepEqual([st.result.execId, st.result.exitCode, st.result.stdout, st.result.timedOut, st.result.ok], [h.execId, 0, expect, false, true]);
    assert.deepEqual(st.result, r);
    assert.ok(!('exit_code' in st.result) && !('exec_id' in st));
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
  // the wire's Pool (snake_case) comes back camelCase, each number in its place
  fake.poolStats = { create_latency: { hit: { samples: 3, p50_ms: 12, p99_ms: 40 }, miss: { samples: 1, p50_ms: 900, p99_ms: 950 } },
    pause_time: { samples: 2, p50_ms: 150, p99_ms: 300 }, pause_size: { samples: 2, p50_kib: 2048, p99_kib: 4096 } };
  const sized = await setPool(2, { socketPath });
  assert.deepEqual(sized, { template: 'default', size: 2, ready: 2, starting: 0, hits: 0, misses: 0, problems: [], cpus: 1, memoryMib: 256,
    createLatency: { hit: { samples: 3, p50Ms: 12, p99Ms: 40 }, miss: { samples: 1, p50Ms: 900, p99Ms: 950 } },
    pauseTime: { samples: 2, p50Ms: 150, p99Ms: 300 }, pauseSize: { samples: 2, p50Kib: 2048, p99Kib: 4096 } });
  assert.deepEqual(await pool({ socketPath, template: 'default' }), sized);
  await assert.rejects(setPool(-1, { socketPath }), BadRequestError);
  assert.ok(errorFromResponse(403, Buffer.from('{"code":403,"error":"forbidden","message":"m"}')) instanceof ForbiddenError);
  const e = errorFromResponse(410, Buffer.from('{"code":410,"error":"sandbox_expired","message":"m","end_reason":"idle"}'));
  assert.ok(e instanceof SandboxExpiredError);
  assert.equal(e.endReason, 'idle');
});

test('pause and resume: state, 409 twice and on VM routes, files kept, admitted as a create', async () => {
  const sb = await Sandbox.create({ socketPath, timeout: 60 });
  try {
    await sb.files.write('/tmp/keep.txt', 'kept');
    assert.equal(sb.info.forkedFrom, null);
    const info = await sb.pause();
    assert.equal(info.state, 'paused');
    assert.equal(sb.info, info);
    assert.equal((await sb.getInfo()).state, 'paused');
    assert.deepEqual((await Sandbox.list({ state: 'paused', socketPath })).map((i) => i.sandboxId), [sb.sandboxId]);
    await assert.rejects(sb.pause(), (e) => e instanceof ConflictError && e.status === 409 && e.error === 'conflict');
    await assert.rejects(sb.commands.run('true'), (e) => e instanceof ConflictError && /resume/.test(e.message));
    await assert.rejects(sb.files.read('/tmp/keep.txt'), ConflictError);
    fake.capacityFull = true;
    await assert.rejects(sb.resume(), (e) => e instanceof ServiceUnavailableError && e.retryAfter === 1);
    fake.capacityFull = false;
    fake.quota = 0;
    await assert.rejects(sb.resume(), QuotaExceededError);
    fake.quota = 20;
    assert.equal((await sb.resume()).state, 'running');
    assert.equal(sb.info.state, 'running');
    assert.equal(await sb.files.read('/tmp/keep.txt'), 'kept');
    await assert.rejects(sb.resume(), ConflictError); // not paused
    const h = await sb.commands.run('sleep 0.5', { background: true });
    await assert.rejects(sb.pause(), ConflictError); // commands running
    await h.wait({ timeoutMs: 10_000 });
    const byToken = await Sandbox.connect(sb.sandboxId, { accessToken: sb.accessToken, socketPath });
    assert.equal((await byToken.pause()).state, 'paused');
    assert.equal((await byToken.resume()).state, 'running');
  } finally { fake.quota = 20; fake.capacityFull = false; await sb.kill(); }
});

test('fork: children with their own ids and tokens, forkedFrom, copied files; 400, 403, 409', async () => {
  const sb = await Sandbox.create({ socketPath, timeout: 60, metadata: { job: 'fork' }, envs: { X: '1' } });
  const kids = [];
  try {
    await sb.files.write('/tmp/state.txt', 'parent');
    kids.push(...await sb.fork({ count: 3, timeoutS: 120 }));
    assert.equal(kids.length, 3);
    assert.equal(new Set([sb.sandboxId, ...kids.map((k) => k.sandboxId)]).size, 4);
    assert.equal(new Set([sb.accessToken, ...kids.map((k) => k.accessToken)]).size, 4);
    for (const k of kids) {
      assert.ok(k instanceof Sandbox);
      assert.match(k.accessToken, /^[0-9a-f]{32}$/);
      assert.equal(k.info.forkedFrom, sb.sandboxId);
      assert.equal(k.info.state, 'running');
      assert.deepEqual(k.info.metadata, { job: 'fork' });
      assert.equal(k._client.accessToken, k.accessToken); // its own token, not the parent's
      assert.equal(k._client.socketPath, socketPath);
      assert.equal(await k.files.read('/tmp/state.txt'), 'parent');
      assert.equal((await k.commands.run('echo $X')).stdout, '1\n');
      assert.equal((await k.getInfo()).forkedFrom, sb.sandboxId);
    }
    await kids[0].files.write('/tmp/state.txt', 'child 0'); // copies: seen by no other
    assert.equal(await sb.files.read('/tmp/state.txt'), 'parent');
    assert.equal(await kids[1].files.read('/tmp/state.txt'), 'parent');
    assert.equal((await sb.getInfo()).state, 'running');
    assert.equal(sb.info.forkedFrom, null);
    const [one] = await sb.fork();
    kids.push(one);
    assert.equal(one.info.forkedFrom, sb.sandboxId);
    const [grand] = await one.fork({ timeoutS: 30 });
    kids.push(grand);
    assert.equal(grand.info.forkedFrom, one.sandboxId);
    const before = (await Sandbox.list({ socketPath })).length;
    for (const count of [0, 9]) {
      await assert.rejects(sb.fork({ count }), (e) => e instanceof BadRequestError && /count/.test(e.message));
    }
    // a caller who only holds the token (another uid in the fake's eyes): 403
    fake.sandboxes.get(sb.sandboxId).owner = process.getuid() + 1;
    const holder = await Sandbox.connect(sb.sandboxId, { accessToken: sb.accessToken, socketPath });
    await assert.rejects(holder.fork(), (e) => e instanceof ForbiddenError && e.status === 403 && e.error === 'forbidden');
    fake.sandboxes.get(sb.sandboxId).owner = process.getuid();
    await sb.pause();
    await assert.rejects(sb.fork(), ConflictError); // paused: resume first
    await sb.resume();
    fake.capacityFull = true;
    await assert.rejects(sb.fork(), ServiceUnavailableError);
    fake.capacityFull = false;
    assert.equal((await Sandbox.list({ socketPath })).length, before); // no child kept
  } finally {
    fake.capacityFull = false;
    fake.sandboxes.get(sb.sandboxId).owner = process.getuid();
    for (const k of kids) await k.kill();
    await sb.kill();
  }
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

test('templates: build from a warm-up; a failed one is WarmupFailedError and saves nothing', async () => {
  const cmd = 'mkdir -p /tmp/w && echo ready > /tmp/w/f';
  const t = await buildTemplate('warm-js', cmd, { socketPath, memoryMib: 512, timeout: 30 });
  assertTemplate(t);
  assert.deepEqual([t.name, t.cpus, t.memoryMib, t.memoryKib, t.network], ['warm-js', 1, 512, 1024, false]);
  assert.match(t.createdAt, /Z$/);
  assert.equal((await Sandbox.connect(t.fromSandbox, { socketPath })).info.state, 'ended');
  const kid = await Sandbox.create({ socketPath, template: 'warm-js' });
  try {
    assert.equal(await kid.files.read('/tmp/w/f'), 'ready\n');
    await assert.rejects(buildTemplate('bad-js', 'echo no-such-package >&2; exit 4', { socketPath }),
      (e) => e instanceof WarmupFailedError && e.status === 422 && /exited with 4/.test(e.message) && /no-such-package/.test(e.message));
    await assert.rejects(getTemplate('bad-js', { socketPath }), TemplateNotFoundError);
    await assert.rejects(buildTemplate('warm-js', 'true', { socketPath }), ConflictError);
    await assert.rejects(buildTemplate('x', '', { socketPath }), BadRequestError);
    // a snake_case option is refused by name, not left out of the request
    await assert.rejects(buildTemplate('x', 'true', { socketPath, memory_mib: 512 }),
      { name: 'TypeError', message: 'buildTemplate: unknown option memory_mib (did you mean memoryMib?)' });
    // a networked warm-up (network: true is { enabled: true }) makes a networked template
    assert.equal((await buildTemplate('net-js', 'true', { socketPath, network: true })).network, true);
    await assert.rejects(Sandbox.create({ socketPath, template: 'net-js' }), BadRequestError);
    await (await Sandbox.create({ socketPath, template: 'net-js', network: true })).kill();
  } finally {
    await kid.kill();
    await deleteTemplate('warm-js', { socketPath });
    await deleteTemplate('net-js', { socketPath });
  }
});

test('templates: save, list, get, create from it (files, shape), delete', async () => {
  const sb = await Sandbox.create({ socketPath, timeout: 60, cpus: 2, memoryMib: 512 });
  const made = [];
  try {
    assert.deepEqual(await templates({ socketPath }), []);
    await sb.files.write('/tmp/warm.txt', 'warmed up');
    const t = await sb.saveAsTemplate('py-3.12');
    assertTemplate(t);
    assert.deepEqual([t.name, t.fromSandbox, t.cpus, t.memoryMib, t.network], ['py-3.12', sb.sandboxId, 2, 512, false]);
    assert.match(t.createdAt, /Z$/);
    assert.ok(Number.isInteger(t.memoryKib));
    assert.equal((await sb.getInfo()).state, 'running'); // the sandbox runs on
    assert.deepEqual(await templates({ socketPath }), [t]);
    assert.deepEqual(await getTemplate('py-3.12', { socketPath }), t);
    await sb.files.write('/tmp/warm.txt', 'changed after the save');
    for (const opts of [{}, { cpus: 2, memoryMib: 512 }]) {
      const kid = await Sandbox.create({ socketPath, template: 'py-3.12', ...opts });
      made.push(kid);
      assert.notEqual(kid.sandboxId, sb.sandboxId);
      assert.deepEqual([kid.info.template, kid.info.cpus, kid.info.memoryMib, kid.info.forkedFrom], ['py-3.12', 2, 512, null]);
      assert.equal(await kid.files.read('/tmp/warm.txt'), 'warmed up');
      await kid.files.write('/tmp/warm.txt', 'kid'); // a copy: the template is not changed
    }
    const again = await Sandbox.create({ socketPath, template: 'py-3.12' });
    made.push(again);
    assert.equal(await again.files.read('/tmp/warm.txt'), 'warmed up');
    // through a token-carrying handle of the same uid: the token is not needed
    const holder = await Sandbox.connect(sb.sandboxId, { accessToken: sb.accessToken, socketPath });
    assert.equal((await holder.saveAsTemplate('second')).fromSandbox, sb.sandboxId);
    assert.deepEqual((await templates({ socketPath })).map((x) => x.name), ['py-3.12', 'second']);
    assert.equal(await deleteTemplate('py-3.12', { socketPath }), true);
    assert.equal(await deleteTemplate('py-3.12', { socketPath }), false); // twice: false, like kill
    await assert.rejects(getTemplate('py-3.12', { socketPath }), TemplateNotFoundError);
    await assert.rejects(Sandbox.create({ socketPath, template: 'py-3.12' }), (e) => e instanceof BadRequestError && /py-3\.12/.test(e.message));
    assert.equal(await again.isRunning(), true); // sandboxes made from it run on
    assert.equal(await deleteTemplate('second', { socketPath }), true);
  } finally {
    for (const k of made) await k.kill();
    await sb.kill();
  }
});

test('templates: 400 bad name, 409 duplicate / paused / busy, a networked one needs a network, 404 not yours or missing, 400 on another shape', async () => {
  const sb = await Sandbox.create({ socketPath });
  // network: true is { enabled: true } (the fake reads network.enabled); another type is a TypeError, sent nowhere
  const before = fake.sandboxes.size;
  await assert.rejects(Sandbox.create({ socketPath, network: 'yes' }), (e) => e instanceof TypeError && /network: expected true/.test(e.message));
  // an unknown option is a TypeError too, not a default create
  await assert.rejects(Sandbox.create({ socketPath, memory_mib: 512 }), (e) => e instanceof TypeError && /unknown option memory_mib \(did you mean memoryMib\?\)/.test(e.message));
  await assert.rejects(Sandbox.create({ socketPath, netwrk: true }), (e) => e instanceof TypeError && /unknown option netwrk$/.test(e.message));
  assert.equal(fake.sandboxes.size, before);
  const net = await Sandbox.create({ socketPath, network: true });
  const uid = fake.uid;
  try {
    for (const bad of ['', 'default', 'Py', '-x', '.x', 'a/b', 'a b', 'x'.repeat(64)]) {
      await assert.rejects(sb.saveAsTemplate(bad), (e) => e instanceof BadRequestError && e.status === 400 && /name/.test(e.message), bad);
    }
    assert.equal((await sb.saveAsTemplate('x'.repeat(63))).name, 'x'.repeat(63));
    await sb.saveAsTemplate('py');
    await assert.rejects(sb.saveAsTemplate('py'), (e) => e instanceof ConflictError && e.status === 409 && /exists/.test(e.message));
    await sb.pause();
    await assert.rejects(sb.saveAsTemplate('paused'), ConflictError);
    await sb.resume();
    const h = await sb.commands.run('sleep 0.5', { background: true });
    await assert.rejects(sb.saveAsTemplate('busy'), ConflictError);
    await h.wait({ timeoutMs: 10_000 });
    // from a networked sandbox: its creates need a network, others cannot have one
    assert.equal((await net.saveAsTemplate('net')).network, true);
    await assert.rejects(Sandbox.create({ socketPath, template: 'net' }), (e) => e instanceof BadRequestError && /network.enabled true is required/.test(e.message));
    const fromNet = await Sandbox.create({ socketPath, template: 'net', network: { enabled: true } });
    await fromNet.kill();
    // another shape or a network from a template: 400; an unknown template: 400
    await assert.rejects(Sandbox.create({ socketPath, template: 'py', memoryMib: 1024 }), (e) => e instanceof BadRequestError && /leave them out/.test(e.message));
    await assert.rejects(Sandbox.create({ socketPath, template: 'py', cpus: 4 }), BadRequestError);
    await assert.rejects(Sandbox.create({ socketPath, template: 'py', network: { enabled: true } }), (e) => e instanceof BadRequestError && /has no network device/.test(e.message));
    await assert.rejects(Sandbox.create({ socketPath, template: 'never-saved' }), BadRequestError);
    // missing: template_not_found
    await assert.rejects(getTemplate('nope', { socketPath }), (e) => e instanceof TemplateNotFoundError && e instanceof NotFoundError && e.status === 404 && e.error === 'template_not_found');
    assert.equal(await deleteTemplate('nope', { socketPath }), false);
    // another uid: sees none of these, its own names, and not the sandbox (a token does not do)
    fake.uid = uid + 1;
    assert.deepEqual(await templates({ socketPath }), []);
    await assert.rejects(getTemplate('py', { socketPath }), (e) => e instanceof TemplateNotFoundError && e.error === 'template_not_found');
    assert.equal(await deleteTemplate('py', { socketPath }), false);
    await assert.rejects(Sandbox.create({ socketPath, template: 'py' }), BadRequestError);
    const holder = await Sandbox.connect(sb.sandboxId, { accessToken: sb.accessToken, socketPath });
    await assert.rejects(holder.saveAsTemplate('theirs'), (e) => e instanceof SandboxNotFoundError && e.error === 'sandbox_not_found');
    fake.uid = uid;
    assert.equal((await getTemplate('py', { socketPath })).fromSandbox, sb.sandboxId);
    fake.templateQuota = 2;
    await assert.rejects(sb.saveAsTemplate('one-too-many'), QuotaExceededError);
    fake.templateQuota = 64;
    await sb.kill();
    await assert.rejects(sb.saveAsTemplate('ended'), SandboxExpiredError);
    assert.deepEqual((await templates({ socketPath })).map((x) => x.name).sort(), ['net', 'py', 'x'.repeat(63)]);
  } finally {
    fake.uid = uid;
    fake.templateQuota = 64;
    for (const n of ['py', 'x'.repeat(63)]) await deleteTemplate(n, { socketPath });
    await net.kill();
    await sb.kill();
  }
});

test('network: allowOut is sent as the wire allow_out; allow_out or another key is a TypeError naming it, nothing sent', async () => {
  const rules = ['10.211.0.0/16:8080/tcp'];
  const sent = fake.requests;
  const refusals = [
    [{ enabled: true, allow_out: rules }, /^network: unknown option allow_out \(did you mean allowOut\?\)$/],
    [{ enabled: true, allowOut: rules, dnss: [] }, /^network: unknown option dnss$/],
  ];
  for (const [network, message] of refusals) {
    await assert.rejects(Sandbox.create({ socketPath, network }), (e) => e instanceof TypeError && message.test(e.message));
    await assert.rejects(buildTemplate('never-js', 'true', { socketPath, network }), (e) => e instanceof TypeError && message.test(e.message));
  }
  assert.equal(fake.requests, sent); // refused before any request
  const networks = fake.networks.length;
  const sb = await Sandbox.create({ socketPath, network: { enabled: true, allowOut: rules, dns: ['1.1.1.1'] } });
  try {
    assert.deepEqual(fake.networks.slice(networks), [{ enabled: true, allow_out: rules, dns: ['1.1.1.1'] }]);
    const t = await buildTemplate('net-rules-js', 'true', { socketPath, network: { enabled: true, allowOut: [], dns: [] } });
    assert.equal(t.network, true);
    await (await Sandbox.create({ socketPath, template: 'net-rules-js', network: true })).kill();
    assert.deepEqual(fake.networks.slice(networks + 1), [{ enabled: true, allow_out: [], dns: [] }, { enabled: true }]);
  } finally {
    await deleteTemplate('net-rules-js', { socketPath });
    await sb.kill();
  }
});

test('every call refuses an option it does not take, by name, before any request', async () => {
  const sb = await Sandbox.create({ socketPath, timeout: 60 });
  try {
    const sent = fake.requests;
    const refusals = [
      [() => sb.commands.run('true', { timeout_ms: 500 }), /^commands\.run: unknown option timeout_ms \(did you mean timeoutMs\?\)$/],
      [() => sb.commands.run('true', { memory_mib: 64 }), /^commands\.run: unknown option memory_mib \(did you mean memoryMib\?\)$/],
      [() => sb.commands.run('true', { on_stdout: () => {} }), /did you mean onStdout/],
      [() => sb.commands.connect('x', { since: 5 }), /^commands\.connect: unknown option since$/],
      [() => sb.files.write('/tmp/x', 'y', { mod: 0o600 }), /^files\.write: unknown option mod$/],
      [() => sb.files.read('/tmp/x', { encoding: 'utf8' }), /^files\.read: unknown option encoding$/],
      [() => Sandbox.connect(sb.sandboxId, { socketPath, access_token: 'x' }), /did you mean accessToken/],
      [() => Sandbox.list({ socket_path: socketPath }), /^Sandbox\.list: unknown option socket_path \(did you mean socketPath\?\)$/],
      [() => Sandbox.kill(sb.sandboxId, { socketPath, token: 'x' }), /^Sandbox\.kill: unknown option token$/],
      [() => sb.fork({ count: 1, timeout_s: 10 }), /^fork: unknown option timeout_s \(did you mean timeoutS\?\)$/],
      [() => sb.fork(2), /^fork: options are an object \{ count, timeoutS, requestTimeoutMs \}, not number$/],
      [() => sb.pause({ timeout: 1 }), /^pause: unknown option timeout$/],
      [() => sb.saveAsTemplate('t', { name: 't' }), /^saveAsTemplate: unknown option name$/],
      [() => pool({ socketPath, size: 2 }), /^pool: unknown option size$/],
      [() => setPool(2, { socketPath, templ: 'default' }), /^setPool: unknown option templ$/],
      [() => health({ socket: socketPath }), /^health: unknown option socket$/],
      [() => version([socketPath]), /^version: options are an object \{ socketPath \}, not an array$/],
      [() => Sandbox.create({ socketPath, timeout_s: 30 }), /^Sandbox\.create: unknown option timeout_s \(did you mean timeout\?\)$/],
    ];
    for (const [call, message] of refusals) {
      await assert.rejects(call(), (e) => e instanceof TypeError && message.test(e.message), String(call));
    }
    assert.equal(fake.requests, sent);
    // the right names still work, and undefined options are none
    assert.equal((await sb.commands.run('echo ok', { timeoutMs: 5000 })).stdout, 'ok\n');
    assert.equal((await health({ socketPath }, undefined)).status, 'ok');
  } finally {
    await sb.kill();
  }
});
