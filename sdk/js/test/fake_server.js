// TEST DOUBLE -- NOT the tinyvmm daemon.
// A node:http fake of `tinyvmm serve` (vmm/serve/API.md v1) on a Unix socket in
// a temp dir, so the JS SDK tests run without KVM. Each "sandbox" is a host
// directory, each exec a host child process run as the current user (no
// isolation). Guest paths map to ROOT + path for file routes; in exec command
// lines, absolute paths under /tmp, /home, /work, /data are rewritten textually.
// Pause, resume and fork as the daemon: a paused sandbox keeps its files, its
// lifetime stops and the routes that need the VM answer 409; a fork copies the
// parent's directory. Only the owner may fork: every caller is `uid` (this
// process's); set a sandbox's `owner` to another uid to play a caller who
// only holds its token.
// Custom templates as the daemon: `templates` maps `${uid}/${name}` to
// {json, root} (root: a copy of the sandbox's directory); each uid sees its
// own only (set `uid` to another to play another caller). A create from a
// template copies its files and takes its shape (400 on another shape or a
// network); `templateQuota` (64) templates per uid.
// What a client sent: `requests` counts every request, `networks` keeps
// each create's and warm-up's "network" body (refused, as the daemon's
// parse_network, when it has a field but enabled, allow_out and dns).
// `poolStats`: the Pool's create_latency, pause_time and pause_size.
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';

const TEMPLATE_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const PATH_RE = /(?<![\w./~-])\/(?:tmp|home|work|data)(?=\/|\b)/g;
const hex = (n) => crypto.randomBytes(n).toString('hex');
const iso = (ms) => (ms == null ? null : new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z'));

class ApiError extends Error {
  constructor(code, error, message, extra = {}) { super(message); Object.assign(this, { code, error, extra }); }
}

export class FakeDaemon {
  constructor() {
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tinyvmm-fake-js-'));
    this.socketPath = path.join(this.tmp, 'api.sock');
    this.sandboxes = new Map();
    this.templates = new Map(); // `${uid}/${name}` -> { json, root }
    this.templateQuota = 64;
    this.quota = 20;
    this.supportStdinSignal = true;
    this.capacityFull = false;
    this.uploads = [];
    this.uid = process.getuid();
    this.requests = 0;
    this.networks = [];
    const lat = () => ({ samples: 0, p50_ms: null, p99_ms: null });
    this.poolStats = { create_latency: { hit: lat(), miss: lat() }, pause_time: lat(),
      pause_size: { samples: 0, p50_kib: null, p99_kib: null } };
  }

  /** A body's "network" (wire names): whether enabled; 400 on an unknown field, as the daemon. */
  network(b) {
    const n = b.network;
    if (n === undefined || n === null) return false;
    if (typeof n !== 'object' || Array.isArray(n)) throw new ApiError(400, 'bad_request', 'network: an object is expected');
    const unknown = Object.keys(n).filter((k) => !['enabled', 'allow_out', 'dns'].includes(k));
    if (unknown.length) throw new ApiError(400, 'bad_request', `network: unknown field "${unknown[0]}"`);
    this.networks.push(n);
    return n.enabled === true;
  }

  start() {
    this.server = http.createServer((req, res) => this.handle(req, res).catch((e) => this.fail(res, e)));
    this.reaper = setInterval(() => {
      for (const sb of this.sandboxes.values()) if (!sb.endedAt && !sb.paused && Date.now() >= sb.expires) this.end(sb, 'expired');
    }, 100);
    return new Promise((resolve) => this.server.listen(this.socketPath, () => resolve(this)));
  }

  async stop() {
    clearInterval(this.reaper);
    for (const sb of this.sandboxes.values()) this.end(sb, 'killed');
    this.server.closeAllConnections?.();
    await new Promise((r) => this.server.close(r));
    fs.rmSync(this.tmp, { recursive: true, force: true });
  }

  fail(res, e) {
    if (!(e instanceof ApiError)) e = new ApiError(500, 'internal', String(e && e.stack || e));
    if (res.headersSent) { res.destroy(); return; }
    const headers = { 'Content-Type': 'application/json', Connection: 'close' };
    if (e.code === 503) headers['Retry-After'] = '1';
    res.writeHead(e.code, headers);
    res.end(JSON.stringify({ code: e.code, error: e.error, message: e.message, ...e.extra }));
  }

  json(res, code, obj) {
    if (obj === null) { res.writeHead(code, { 'Content-Length': '0' }); res.end(); return; }
    const b = Buffer.from(JSON.stringify(obj));
    res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': String(b.length) });
    res.end(b);
  }

  async body(req) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    return Buffer.concat(chunks);
  }

  async jsonBody(req) {
    const b = await this.body(req);
    if (!b.length) return {};
    let d;
    try { d = JSON.parse(b); } catch { throw new ApiError(400, 'bad_request', 'body: malformed JSON'); }
    if (!d || typeof d !== 'object' || Array.isArray(d)) throw new ApiError(400, 'bad_request', 'body: must be an object');
    return d;
  }

  sbJson(sb) {
    return { id: sb.id, state: sb.endedAt ? 'ended' : sb.paused ? 'paused' : 'running', template: sb.template, created_at: iso(sb.created),
      expires_at: iso(sb.expires), ended_at: iso(sb.endedAt), end_reason: sb.endReason, cpus: sb.cpus,
      memory_mib: sb.memory, idle_timeout_s: 0, from_pool: false, forked_from: sb.forkedFrom, network: null, metadata: sb.metadata };
  }

  /** A new sandbox (a copy of parent's directory for a fork, of filesFrom for a create from a template). */
  newSandbox({ timeoutS = 300, cpus = 1, memory = 256, metadata = {}, envs = {}, template = 'default', network = false,
    filesFrom = null }, parent = null) {
    const id = 'sbx_' + hex(16);
    const root = fs.mkdtempSync(path.join(this.tmp, id + '-'));
    const from = parent ? parent.root : filesFrom;
    if (from) fs.cpSync(from, root, { recursive: true, verbatimSymlinks: true });
    fs.mkdirSync(path.join(root, 'tmp'), { recursive: true });
    fs.mkdirSync(path.join(root, 'home/sandbox'), { recursive: true });
    const sb = { id, token: hex(16), owner: parent ? parent.owner : this.uid, root, created: Date.now(),
      timeoutS, expires: Date.now() + timeoutS * 1000, endedAt: null, endReason: null, paused: false,
      forkedFrom: parent ? parent.id : null, template: parent ? parent.template : template, network, cpus, memory, metadata: { ...metadata }, envs: { ...envs }, execs: new Map() };
    this.sandboxes.set(id, sb);
    return sb;
  }

  /** As a create: 503 without capacity, 429 past the owner's limit (n more). */
  admit(owner, n) {
    if (this.capacityFull) throw new ApiError(503, 'capacity', 'no capacity');
    const running = [...this.sandboxes.values()].filter((s) => s.owner === owner && !s.endedAt && !s.paused).length;
    if (running + n > this.quota) throw new ApiError(429, 'quota_exceeded', `at most ${this.quota} sandboxes`);
  }

  end(sb, reason) {
    if (sb.endedAt) return;
    sb.endedAt = Date.now();
    sb.endReason = reason;
    for (const ex of sb.execs.values()) {
      if (!ex.final) {
        try { process.kill(-ex.proc.pid, 'SIGKILL'); } catch { /* gone */ }
        this.finish(ex, { type: 'error', error: 'sandbox_ended', message: `the sandbox ended (${reason})` });
      }
    }
  }

  finish(ex, final) {
    if (ex.final) return;
    ex.final = final;
    if (final.type === 'exit') {
      const { type, ...r } = final;
      ex.result = { ...r, stdout: Buffer.concat(ex.out.stdout).toString('utf8'), stderr: Buffer.concat(ex.out.stderr).toString('utf8') };
    } else ex.error = { error: final.error, message: final.message };
    for (const w of ex.waiters.splice(0)) w();
  }

  gpath(sb, p) {
    if (!p || !p.startsWith('/')) throw new ApiError(400, 'bad_request', 'path: must be absolute');
    const n = path.posix.normalize(p);
    return sb.root + (n === '/' ? '' : n);
  }

  startExec(sb, body) {
    const cap = body.max_output_bytes ?? (1 << 20);
    const rw = (s) => s.replace(PATH_RE, (m) => sb.root + m);
    const argv = body.cmd ? body.cmd.map(rw) : ['/bin/sh', '-c', rw(body.shell)];
    const cwd = body.cwd ? this.gpath(sb, body.cwd) : path.join(sb.root, 'home/sandbox');
    const env = { ...process.env, HOME: path.join(sb.root, 'home/sandbox'), ...sb.envs, ...(body.envs || {}) };
    const ex = { id: 'ex_' + hex(8), events: [{ type: 'start' }], offset: 0, kept: { stdout: 0, stderr: 0 },
      trunc: { stdout: false, stderr: false }, out: { stdout: [], stderr: [] }, final: null, result: null,
      error: null, waiters: [], t0: Date.now(), timedOut: false };
    ex.events[0].exec_id = ex.id;
    return new Promise((resolve, reject) => {
      const proc = spawn(argv[0], argv.slice(1), { cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
      ex.proc = proc;
      proc.on('error', () => reject(new ApiError(502, 'guest_error', `no such file: ${argv[0]}`)));
      proc.on('spawn', () => {
        sb.execs.set(ex.id, ex);
        proc.stdin.on('error', () => {});
        if (body.stdin_b64) proc.stdin.write(Buffer.from(body.stdin_b64, 'base64'));
        if (body.stdin !== true) proc.stdin.end(); // as the daemon: open only when asked
        resolve(ex);
      });
      for (const kind of ['stdout', 'stderr']) {
        proc[kind].on('data', (d) => {
          const room = cap - ex.kept[kind];
          if (room <= 0) { ex.trunc[kind] = true; return; }
          if (d.length > room) { d = d.subarray(0, room); ex.trunc[kind] = true; }
          ex.kept[kind] += d.length;
          ex.out[kind].push(d);
          ex.events.push({ type: kind, offset: ex.offset, data: d.toString('base64') });
          ex.offset += d.length;
          for (const w of ex.waiters.splice(0)) w();
        });
      }
      let timer = null;
      if (body.timeout_s) {
        timer = setTimeout(() => { ex.timedOut = true; try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* */ } }, body.timeout_s * 1000);
      }
      proc.on('close', (code, sig) => {
        clearTimeout(timer);
        const signo = sig ? os.constants.signals[sig] : 0;
        this.finish(ex, { type: 'exit', exec_id: ex.id, exit_code: ex.timedOut ? 124 : (signo ? 128 + signo : code),
          signal: signo, timed_out: ex.timedOut, stdout_truncated: ex.trunc.stdout, stderr_truncated: ex.trunc.stderr,
          oom_killed: false, pids_limited: false, wall_ms: Date.now() - ex.t0, cpu_ms: 0, max_rss_kib: 0 });
      });
    });
  }

  async stream(res, ex, since) {
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'Transfer-Encoding': 'chunked' });
    let i = 0;
    for (;;) {
      while (i < ex.events.length) {
        const ev = ex.events[i++];
        if (ev.type !== 'start' && ev.offset + Buffer.from(ev.data, 'base64').length <= since) continue;
        res.write(JSON.stringify(ev) + '\n');
      }
      if (ex.final) { res.end(JSON.stringify(ex.final) + '\n'); return; }
      await new Promise((r) => { ex.waiters.push(r); });
    }
  }

  lookup(req, sid) {
    const sb = this.sandboxes.get(sid);
    const auth = req.headers.authorization || '';
    if (sb && (auth ? auth === `Bearer ${sb.token}` : sb.owner === this.uid)) return sb;
    throw new ApiError(404, 'sandbox_not_found', `no sandbox ${sid}`);
  }

  /** POST /v1/templates {name, warmup}: the warm-up runs (a host process, as execs here) in a new sandbox, saved if it exits 0. */
  async templateWarmup(res, b) {
    if (typeof b.warmup !== 'string' || !b.warmup || Buffer.byteLength(b.warmup) > 16384) {
      throw new ApiError(400, 'bad_request', 'warmup: a shell command, a string of 1 to 16384 bytes');
    }
    for (const [k, lo, hi] of [['cpus', 1, 8], ['memory_mib', 64, 16384], ['timeout_s', 1, 86400]]) {
      if (k in b && !(Number.isInteger(b[k]) && b[k] >= lo && b[k] <= hi)) throw new ApiError(400, 'bad_request', `${k}: must be an integer in ${lo}..${hi}`);
    }
    const networked = this.network(b);
    const key = `${this.uid}/${b.name}`;
    if (this.templates.has(key)) throw new ApiError(409, 'conflict', `template "${b.name}" exists: DELETE /v1/templates/${b.name} first`);
    this.admit(this.uid, 1);
    const sb = this.newSandbox({ cpus: b.cpus ?? 1, memory: b.memory_mib ?? 256 });
    const timeoutS = b.timeout_s ?? 600;
    const ex = await this.startExec(sb, { shell: b.warmup, timeout_s: timeoutS });
    await new Promise((resolve) => (ex.final ? resolve() : ex.waiters.push(function again() { if (ex.final) resolve(); else ex.waiters.push(again); })));
    this.end(sb, 'killed');
    const r = ex.result;
    if (r.timed_out || r.exit_code) {
      const why = r.timed_out ? `timed out after ${timeoutS} s` : `exited with ${r.exit_code}`;
      throw new ApiError(422, 'warmup_failed', `the warm-up ${why}: ${r.stderr.slice(-400)}`);
    }
    const root = fs.mkdtempSync(path.join(this.tmp, `template-${this.uid}-${b.name}-`));
    fs.cpSync(sb.root, root, { recursive: true, verbatimSymlinks: true });
    const json = { name: b.name, created_at: iso(Date.now()), from_sandbox: sb.id, cpus: sb.cpus, memory_mib: sb.memory, memory_kib: 1024, network: networked,
      create_latency: { samples: 0, p50_ms: null, p99_ms: null }, pause_time: { samples: 0, p50_ms: null, p99_ms: null },
      pause_size: { samples: 0, p50_kib: null, p99_kib: null } };
    this.templates.set(key, { json, root });
    return this.json(res, 201, json);
  }

  /** /v1/templates and /v1/templates/{name}, in serve_template.c's order of checks. */
  async templateRoute(req, res, m, name) {
    if (name === undefined) {
      if (m === 'GET') {
        const mine = [...this.templates.entries()].filter(([k]) => k.startsWith(`${this.uid}/`)).sort(([x], [y]) => (x < y ? -1 : 1));
        return this.json(res, 200, { templates: mine.map(([, t]) => t.json) });
      }
      if (m !== 'POST') throw new ApiError(405, 'method_not_allowed', 'GET or POST');
      const b = await this.jsonBody(req);
      const unknown = Object.keys(b).filter((k) => !['name', 'from_sandbox', 'warmup', 'cpus', 'memory_mib', 'timeout_s', 'network'].includes(k));
      if (unknown.length) throw new ApiError(400, 'bad_request', `body: unknown field ${unknown[0]}`);
      if (typeof b.name !== 'string' || !TEMPLATE_NAME_RE.test(b.name) || b.name === 'default') {
        throw new ApiError(400, 'bad_request', 'name: required, 1 to 63 of a-z 0-9 - _ . (a letter or digit first), not "default"');
      }
      if (('warmup' in b) === ('from_sandbox' in b)) {
        throw new ApiError(400, 'bad_request', 'from_sandbox (save one of your sandboxes) or warmup (a shell command run in a new one): one of the two');
      }
      if ('warmup' in b) return this.templateWarmup(res, b);
      for (const k of ['cpus', 'memory_mib', 'timeout_s', 'network']) {
        if (k in b) throw new ApiError(400, 'bad_request', `${k}: only with warmup (a template from a sandbox has that sandbox's)`);
      }
      if (typeof b.from_sandbox !== 'string') throw new ApiError(400, 'bad_request', 'from_sandbox: required, the id of one of your sandboxes');
      // only the caller's own sandboxes (a token does not do): what is made is theirs
      const sb = this.sandboxes.get(b.from_sandbox);
      if (!sb || sb.owner !== this.uid) throw new ApiError(404, 'sandbox_not_found', `no sandbox ${b.from_sandbox}`);
      if (sb.endedAt) throw new ApiError(410, 'sandbox_expired', `sandbox ended (${sb.endReason})`, { end_reason: sb.endReason });
      const key = `${this.uid}/${b.name}`;
      if (this.templates.has(key)) throw new ApiError(409, 'conflict', `template "${b.name}" exists: DELETE /v1/templates/${b.name} first`);
      const mine = [...this.templates.keys()].filter((k) => k.startsWith(`${this.uid}/`)).length;
      if (mine >= this.templateQuota) throw new ApiError(429, 'quota_exceeded', `uid ${this.uid} has ${mine} templates (the limit)`);
      const why = sb.paused ? 'paused already' : [...sb.execs.values()].some((ex) => !ex.final) ? 'commands are running' : null;
      if (why) throw new ApiError(409, 'conflict', `sandbox ${sb.id} cannot be saved as a template: ${why}`);
      const root = fs.mkdtempSync(path.join(this.tmp, `template-${this.uid}-${b.name}-`));
      fs.cpSync(sb.root, root, { recursive: true, verbatimSymlinks: true });
      const json = { name: b.name, created_at: iso(Date.now()), from_sandbox: sb.id, cpus: sb.cpus, memory_mib: sb.memory, memory_kib: 1024, network: Boolean(sb.network),
      create_latency: { samples: 0, p50_ms: null, p99_ms: null }, pause_time: { samples: 0, p50_ms: null, p99_ms: null },
      pause_size: { samples: 0, p50_kib: null, p99_kib: null } };
      this.templates.set(key, { json, root });
      return this.json(res, 201, json);
    }
    const key = `${this.uid}/${name}`;
    const t = this.templates.get(key);
    if (m !== 'GET' && m !== 'DELETE') throw new ApiError(405, 'method_not_allowed', 'GET or DELETE');
    if (!t) throw new ApiError(404, 'template_not_found', `no template "${name}"`);
    if (m === 'GET') return this.json(res, 200, t.json);
    this.templates.delete(key); // sandboxes made from it run on
    fs.rmSync(t.root, { recursive: true, force: true });
    return this.json(res, 204, null);
  }

  async handle(req, res) {
    const u = new URL(req.url, 'http://localhost');
    const q = u.searchParams;
    const parts = u.pathname.split('/').filter(Boolean);
    const m = req.method;
    this.requests++;
    if (parts[0] !== 'v1') throw new ApiError(404, 'not_found', 'no route');
    const [, a, sid, ...rest] = parts;
    if (a === 'health' && !sid) return this.json(res, 200, { status: 'ok', sandboxes: this.sandboxes.size, problems: [] });
    if (a === 'version' && !sid) return this.json(res, 200, { version: '0.0.0-fake', api: 'v1' });
    if (a === 'templates' && rest.length === 1 && rest[0] === 'pool') {
      if (sid !== 'default') throw new ApiError(404, 'not_found', `no template "${sid}"`);
      if (m === 'PUT') {
        const b = await this.jsonBody(req);
        if (!Number.isInteger(b.size) || b.size < 0 || b.size > 16) throw new ApiError(400, 'bad_request', 'size: 0..16');
        this.poolSize = b.size;
      } else if (m !== 'GET') throw new ApiError(405, 'method_not_allowed', 'GET or PUT');
      return this.json(res, 200, { template: 'default', size: this.poolSize ?? 0, ready: this.poolSize ?? 0, starting: 0,
        hits: 0, misses: 0, problems: [], cpus: 1, memory_mib: 256, ...this.poolStats });
    }
    if (a === 'templates' && !rest.length) return this.templateRoute(req, res, m, sid);
    if (a !== 'sandboxes') throw new ApiError(404, 'not_found', 'no route');
    if (!sid) {
      if (m === 'POST') {
        const b = await this.jsonBody(req);
        let tmpl = null;
        if (b.template !== undefined && b.template !== null && typeof b.template !== 'string') throw new ApiError(400, 'bad_request', 'template: a string (a name)');
        if (b.template && b.template !== 'default') {
          tmpl = this.templates.get(`${this.uid}/${b.template}`);
          if (!tmpl) throw new ApiError(400, 'bad_request', `template: no template "${b.template}" ("default", or yours: GET /v1/templates)`);
        }
        if (b.timeout_s !== undefined && (!Number.isInteger(b.timeout_s) || b.timeout_s < 1)) throw new ApiError(400, 'bad_request', 'timeout_s: integer >= 1');
        if (b.cpus !== undefined && (!Number.isInteger(b.cpus) || b.cpus < 1 || b.cpus > 8)) throw new ApiError(400, 'bad_request', 'cpus: 1..8');
        if (b.memory_mib !== undefined && (!Number.isInteger(b.memory_mib) || b.memory_mib < 64 || b.memory_mib > 16384)) throw new ApiError(400, 'bad_request', 'memory_mib: 64..16384');
        const networked = this.network(b);
        if (tmpl) { // the template's shape: left out or equal; a network exactly when it has one
          const t = tmpl.json;
          for (const k of ['cpus', 'memory_mib']) {
            if (b[k] !== undefined && b[k] !== t[k]) throw new ApiError(400, 'bad_request', `${k}: template "${t.name}" has ${t.cpus} CPUs and ${t.memory_mib} MiB: leave them out`);
          }
          if (networked !== t.network) {
            throw new ApiError(400, 'bad_request', `network: template "${t.name}" ` + (t.network
              ? 'has a network device: network.enabled true is required'
              : 'has no network device (a networked sandbox or warm-up makes one that has)'));
          }
        }
        this.admit(this.uid, 1);
        const sb = this.newSandbox({ timeoutS: b.timeout_s ?? 300, cpus: tmpl ? tmpl.json.cpus : b.cpus ?? 1,
          memory: tmpl ? tmpl.json.memory_mib : b.memory_mib ?? 256, template: tmpl ? tmpl.json.name : 'default',
          network: networked, filesFrom: tmpl ? tmpl.root : null,
          metadata: b.metadata || {}, envs: { ...(b.envs || {}), ...(b.secret_envs || {}) } });
        return this.json(res, 201, { ...this.sbJson(sb), access_token: sb.token });
      }
      if (m === 'GET') {
        const state = q.get('state');
        const meta = [...q.entries()].filter(([k]) => k.startsWith('metadata.')).map(([k, v]) => [k.slice(9), v]);
        const out = [...this.sandboxes.values()].filter((s) => s.owner === this.uid).map((s) => this.sbJson(s))
          .filter((s) => (!state || s.state === state) && meta.every(([k, v]) => s.metadata[k] === v));
        return this.json(res, 200, { sandboxes: out });
      }
      throw new ApiError(405, 'method_not_allowed', m);
    }
    const sb = this.lookup(req, sid);
    if (!rest.length) {
      if (m === 'GET') return this.json(res, 200, this.sbJson(sb));
      if (m === 'DELETE') { this.end(sb, 'killed'); return this.json(res, 204, null); }
      throw new ApiError(405, 'method_not_allowed', m);
    }
    if (sb.endedAt && !(rest.join('/') === 'logs' && m === 'GET')) throw new ApiError(410, 'sandbox_expired', `sandbox ended (${sb.endReason})`, { end_reason: sb.endReason });
    const key = rest.join('/');
    if (key === 'pause' && m === 'POST') {
      if (sb.paused) throw new ApiError(409, 'conflict', `sandbox ${sb.id} cannot be paused: paused already`);
      if ([...sb.execs.values()].some((ex) => !ex.final)) throw new ApiError(409, 'conflict', `sandbox ${sb.id} cannot be paused: commands are running`);
      sb.paused = true;
      return this.json(res, 200, this.sbJson(sb));
    }
    if (key === 'resume' && m === 'POST') {
      if (!sb.paused) throw new ApiError(409, 'conflict', `sandbox ${sb.id} is not paused`);
      this.admit(sb.owner, 1);
      sb.paused = false;
      sb.expires = Date.now() + sb.timeoutS * 1000; // a new lifetime from now
      return this.json(res, 200, this.sbJson(sb));
    }
    if (sb.paused && key !== 'logs') {
      await this.body(req);
      throw new ApiError(409, 'conflict', `sandbox ${sb.id} is paused: POST /v1/sandboxes/${sb.id}/resume first`);
    }
    if (key === 'fork' && m === 'POST') {
      const b = await this.jsonBody(req);
      // the owner's, not a token holder's: checked first, as the daemon
      if (this.uid !== sb.owner) throw new ApiError(403, 'forbidden', `only the owner of sandbox ${sb.id} may fork it (its token grants that sandbox alone)`);
      const unknown = Object.keys(b).filter((k) => k !== 'count' && k !== 'timeout_s');
      if (unknown.length) throw new ApiError(400, 'bad_request', `body: unknown field ${unknown[0]}`);
      const count = b.count ?? 1;
      if (!Number.isInteger(count) || count < 1 || count > 8) throw new ApiError(400, 'bad_request', 'count: an integer in 1..8');
      const timeoutS = b.timeout_s ?? sb.timeoutS;
      if (!Number.isInteger(timeoutS) || timeoutS < 1) throw new ApiError(400, 'bad_request', 'timeout_s: integer >= 1');
      if ([...sb.execs.values()].some((ex) => !ex.final)) throw new ApiError(409, 'conflict', `sandbox ${sb.id} cannot be forked: commands are running`);
      this.admit(sb.owner, count);
      const kids = Array.from({ length: count }, () => this.newSandbox({ timeoutS, cpus: sb.cpus, memory: sb.memory,
        metadata: sb.metadata, envs: sb.envs }, sb));
      return this.json(res, 201, { sandboxes: kids.map((k) => ({ ...this.sbJson(k), access_token: k.token })) });
    }
    if (key === 'timeout' && m === 'POST') {
      const b = await this.jsonBody(req);
      if (!Number.isInteger(b.timeout_s)) throw new ApiError(400, 'bad_request', 'timeout_s: integer');
      sb.expires = Date.now() + b.timeout_s * 1000;
      return this.json(res, 200, { expires_at: iso(sb.expires) });
    }
    if (key === 'execs' && m === 'POST') {
      const b = await this.jsonBody(req);
      if (!b.cmd === !b.shell) throw new ApiError(400, 'bad_request', 'cmd or shell');
      for (const [k, hi] of [['memory_mib', 1 << 20], ['pids_max', 1 << 22]]) {
        if (b[k] !== undefined && (!Number.isInteger(b[k]) || b[k] < 1 || b[k] > hi)) throw new ApiError(400, 'bad_request', `${k}: integer in 1..${hi}`);
      }
      const ex = await this.startExec(sb, b);
      if (b.background) return this.json(res, 201, { exec_id: ex.id });
      if ((req.headers.accept || '').includes('application/x-ndjson')) return this.stream(res, ex, 0);
      while (!ex.final) await new Promise((r) => ex.waiters.push(r));
      if (ex.result) return this.json(res, 200, ex.result);
      throw new ApiError(410, 'sandbox_expired', ex.error.message, { end_reason: sb.endReason });
    }
    if (rest[0] === 'execs') {
      const ex = sb.execs.get(rest[1]);
      if (!ex) throw new ApiError(404, 'exec_not_found', `no exec ${rest[1]}`);
      if (rest.length === 2 && m === 'GET') return this.json(res, 200, { exec_id: ex.id, state: ex.final ? (ex.result ? 'exited' : 'failed') : 'running', result: ex.result, error: ex.error });
      if (rest[2] === 'events' && m === 'GET') return this.stream(res, ex, Number(q.get('since') || 0));
      if ((rest[2] === 'stdin' || rest[2] === 'signal') && m === 'POST') {
        if (!this.supportStdinSignal) { await this.body(req); throw new ApiError(501, 'not_implemented', `${rest[2]} not implemented`); }
        if (ex.final) { await this.body(req); throw new ApiError(409, 'conflict', 'the exec has ended'); }
        if (rest[2] === 'signal') {
          const b = await this.jsonBody(req);
          try { process.kill(-ex.proc.pid, b.signal); } catch { /* gone */ }
          return this.json(res, 200, {});
        }
        const data = await this.body(req);
        if (data.length) ex.proc.stdin.write(data);
        if (q.get('eof') === '1') ex.proc.stdin.end();
        return this.json(res, 200, {});
      }
      throw new ApiError(405, 'method_not_allowed', m);
    }
    if (key === 'files') {
      const p = q.get('path');
      const hp = this.gpath(sb, p);
      if (m === 'PUT') {
        fs.mkdirSync(path.dirname(hp), { recursive: true });
        const out = fs.createWriteStream(hp, { mode: parseInt(q.get('mode') || '0644', 8) });
        let n = 0;
        for await (const c of req) { n += c.length; if (!out.write(c)) await new Promise((r) => out.once('drain', r)); }
        await new Promise((r) => out.end(r));
        fs.chmodSync(hp, parseInt(q.get('mode') || '0644', 8));
        this.uploads.push({ path: p, size: n, chunked: /chunked/i.test(req.headers['transfer-encoding'] || '') });
        return this.json(res, 201, { path: p, size: n });
      }
      if (m === 'GET') {
        if (!fs.existsSync(hp) || !fs.statSync(hp).isFile()) throw new ApiError(502, 'guest_error', 'no such file');
        res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Transfer-Encoding': 'chunked' });
        for await (const c of fs.createReadStream(hp)) { if (!res.write(c)) await new Promise((r) => res.once('drain', r)); }
        return res.end();
      }
      if (m === 'DELETE') {
        try { fs.unlinkSync(hp); } catch { throw new ApiError(502, 'guest_error', 'no such file'); }
        return this.json(res, 204, null);
      }
    }
    if (key === 'fs/list' && m === 'GET') {
      const p = q.get('path') || '/';
      const hp = this.gpath(sb, p);
      let names;
      try { names = fs.readdirSync(hp).sort(); } catch { throw new ApiError(502, 'guest_error', 'no such directory'); }
      const entries = names.map((name) => {
        const st = fs.lstatSync(path.join(hp, name));
        const type = st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
        return { name, type, size: st.size, mode: st.mode & 0o7777 };
      });
      return this.json(res, 200, { path: p, entries });
    }
    throw new ApiError(404, 'not_found', 'no route');
  }
}
