// tinyvmm: the JavaScript SDK of `tinyvmm serve` (microVM sandboxes).
// Node.js >= 18, no dependencies: HTTP/1.1 + JSON over the daemon's Unix
// socket (option socketPath, else $TINYVMM_SOCKET, else /run/tinyvmm/api.sock).
import http from 'node:http';
import { Readable } from 'node:stream';

export const DEFAULT_SOCKET = '/run/tinyvmm/api.sock';
export const VERSION = '0.3.0'; // the project's (vmm/core/version.h): sdk.test.js checks

/** The socket: the argument, else $TINYVMM_SOCKET, else the default. */
export function resolveSocketPath(socketPath) {
  return socketPath || process.env.TINYVMM_SOCKET || DEFAULT_SOCKET;
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** Base of every SDK error: status (0: no answer), error (API code), message (the server's). */
export class TinyvmmError extends Error {
  constructor(message, { status = 0, error = '', body = {} } = {}) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.error = error;
    this.body = body;
  }
}
export class BadRequestError extends TinyvmmError {}
export class NotFoundError extends TinyvmmError {}
/** 403 forbidden: e.g. sizing the warm pool as a uid other than root or the daemon's. */
export class ForbiddenError extends TinyvmmError {}
export class SandboxNotFoundError extends NotFoundError {}
export class ExecNotFoundError extends NotFoundError {}
/** 404 template_not_found: none of the caller's templates by that name (another uid's is not found either). */
export class TemplateNotFoundError extends NotFoundError {}
export class ConflictError extends TinyvmmError {}
/** 410: the sandbox has ended; endReason is killed|expired|idle|crashed|oom. */
export class SandboxExpiredError extends TinyvmmError {
  constructor(message, opts = {}) {
    super(message, opts);
    this.endReason = opts.endReason ?? opts.body?.end_reason ?? null;
  }
}
export class PayloadTooLargeError extends TinyvmmError {}
/** 422 warmup_failed: a template's warm-up exited non-zero or timed out; the message ends with the end of its stderr. */
export class WarmupFailedError extends TinyvmmError {}
export class QuotaExceededError extends TinyvmmError {}
/** 503 capacity (retryAfter seconds), unavailable (no sandbox can start on the host now: health() says why), or the socket cannot be reached (status 0). */
export class ServiceUnavailableError extends TinyvmmError {
  constructor(message, opts = {}) {
    super(message, opts);
    this.retryAfter = opts.retryAfter ?? null;
  }
}
/** 501: this daemon does not offer the operation (stdin/signal of an exec). */
export class NotImplementedByServerError extends TinyvmmError {}
/** 502: the guest agent refused; the message is the agent's. */
export class GuestError extends TinyvmmError {}
export class InsufficientStorageError extends TinyvmmError {}
/** A client-side wait ran out. A command's own timeout is a result (timedOut), not this. */
export class TimeoutError extends TinyvmmError {}
/** commands.run(..., {check: true}) of a failed command; result is attached. */
export class CommandExitError extends TinyvmmError {
  constructor(result) {
    const what = result.timedOut ? 'timed out'
      : result.signal ? `was killed by signal ${result.signal}` : `exited with code ${result.exitCode}`;
    const tail = (result.stderr || '').trim().split('\n').slice(-3).join(' | ');
    super(`command ${what}${tail ? ': ' + tail : ''}`, { error: 'command_exit' });
    this.result = result;
  }
}

const BY_ERROR = {
  bad_request: BadRequestError, not_found: NotFoundError, forbidden: ForbiddenError, sandbox_not_found: SandboxNotFoundError,
  exec_not_found: ExecNotFoundError, template_not_found: TemplateNotFoundError, conflict: ConflictError, sandbox_expired: SandboxExpiredError,
  payload_too_large: PayloadTooLargeError, warmup_failed: WarmupFailedError, quota_exceeded: QuotaExceededError,
  capacity: ServiceUnavailableError, unavailable: ServiceUnavailableError, not_implemented: NotImplementedByServerError,
  guest_error: GuestError, insufficient_storage: InsufficientStorageError,
};
const BY_STATUS = {
  400: BadRequestError, 403: ForbiddenError, 404: NotFoundError, 409: ConflictError, 410: SandboxExpiredError,
  413: PayloadTooLargeError, 422: WarmupFailedError, 429: QuotaExceededError, 501: NotImplementedByServerError,
  502: GuestError, 503: ServiceUnavailableError, 507: InsufficientStorageError,
};

/** Map an error answer ({code, error, message}) to an exception. */
export function errorFromResponse(status, raw, headers = {}) {
  let body = {};
  const text = Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw ?? '');
  try {
    const p = JSON.parse(text);
    if (p && typeof p === 'object' && !Array.isArray(p)) body = p;
  } catch { /* not JSON */ }
  const error = String(body.error || '');
  const message = String(body.message || (!body.error && text.trim().slice(0, 500)) || http.STATUS_CODES[status] || 'error');
  const Cls = BY_ERROR[error] || BY_STATUS[status] || TinyvmmError;
  const opts = { status, error, body };
  if (Cls === SandboxExpiredError) opts.endReason = body.end_reason ?? null;
  if (Cls === ServiceUnavailableError) {
    const ra = headers['retry-after'];
    opts.retryAfter = ra !== undefined && !Number.isNaN(Number(ra)) ? Number(ra) : null;
  }
  return new Cls(message, opts);
}

// ---------------------------------------------------------------------------
// Transport
// ---------------------------------------------------------------------------

function buildPath(path, query) {
  let p = path.startsWith('/v1/') ? path : '/v1' + path;
  const items = [];
  if (query) {
    const entries = Array.isArray(query) ? query : Object.entries(query);
    for (const [k, v] of entries) {
      if (v === undefined || v === null) continue;
      items.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v)).replace(/%2F/g, '/')}`);
    }
  }
  return items.length ? `${p}?${items.join('&')}` : p;
}

function isStreamBody(b) {
  return b && (typeof b.pipe === 'function' || typeof b[Symbol.asyncIterator] === 'function'
    || (typeof b[Symbol.iterator] === 'function' && typeof b !== 'string' && !ArrayBuffer.isView(b)));
}

/** One daemon socket (and an optional sandbox access token). One connection per request. */
export class Client {
  constructor({ socketPath, accessToken, requestTimeoutMs = 120_000 } = {}) {
    this.socketPath = resolveSocketPath(socketPath);
    this.accessToken = accessToken || null;
    this.requestTimeoutMs = requestTimeoutMs;
  }

  withToken(accessToken) {
    return new Client({ socketPath: this.socketPath, accessToken, requestTimeoutMs: this.requestTimeoutMs });
  }

  /** Send a request; resolve with the unread answer (http.IncomingMessage); reject on 4xx/5xx. */
  open(method, path, { query, json, body, accept = 'application/json', timeoutMs } = {}) {
    const t = timeoutMs === undefined ? this.requestTimeoutMs : timeoutMs;
    const headers = { Accept: accept, Host: 'localhost' };
    if (this.accessToken) headers.Authorization = `Bearer ${this.accessToken}`;
    let payload = null;
    let stream = null;
    if (json !== undefined) {
      payload = Buffer.from(JSON.stringify(json));
      headers['Content-Type'] = 'application/json';
    } else if (body !== undefined && body !== null) {
      headers['Content-Type'] = 'application/octet-stream';
      if (typeof body === 'string') payload = Buffer.from(body, 'utf8');
      else if (ArrayBuffer.isView(body)) payload = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
      else if (body instanceof ArrayBuffer) payload = Buffer.from(body);
      else if (isStreamBody(body)) {
        stream = typeof body.pipe === 'function' ? body : Readable.from(body, { objectMode: false });
        headers['Transfer-Encoding'] = 'chunked';
      } else throw new TypeError('body: a string, Buffer, Uint8Array, Readable or (async) iterable');
    }
    if (payload) headers['Content-Length'] = String(payload.length);
    else if (!stream && (method === 'POST' || method === 'PUT')) headers['Content-Length'] = '0';
    const url = buildPath(path, query);
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (e) => { if (!settled) { settled = true; reject(e); } };
      const req = http.request({ socketPath: this.socketPath, path: url, method, headers, agent: false });
      if (t) {
        req.setTimeout(t, () => req.destroy(new TimeoutError(`${method} ${path}: timed out after ${t} ms`)));
      }
      req.on('error', (e) => {
        if (e instanceof TinyvmmError) return fail(e);
        if ((e.code === 'EPIPE' || e.code === 'ECONNRESET') && !e.retried) {
          // the server may have answered (an error) and closed before taking the
          // whole body: give its answer a moment to win over the broken pipe
          e.retried = true;
          setTimeout(() => req.emit('error', e), 200);
          return;
        }
        if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED' || e.code === 'EACCES') {
          return fail(new ServiceUnavailableError(
            `cannot connect to tinyvmm serve at ${this.socketPath}: ${e.code} (is the daemon running? set TINYVMM_SOCKET or pass socketPath)`));
        }
        fail(new TinyvmmError(`${method} ${path}: connection to ${this.socketPath} failed: ${e.message}`));
      });
      req.on('response', (res) => {
        if (res.statusCode >= 400) {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => fail(errorFromResponse(res.statusCode, Buffer.concat(chunks), res.headers)));
          res.on('error', fail);
          return;
        }
        if (t) req.setTimeout(t, () => res.destroy(new TimeoutError(`${method} ${path}: no data for ${t} ms`)));
        settled = true;
        resolve(res);
      });
      if (stream) {
        stream.on('error', (e) => req.destroy(e));
        stream.pipe(req);
      } else {
        req.end(payload || undefined);
      }
    });
  }

  /** Send a request, resolve with the decoded JSON answer (null if empty). */
  async call(method, path, opts = {}) {
    const res = await this.open(method, path, opts);
    const buf = await readAll(res);
    if (!buf.length) return null;
    try {
      return JSON.parse(buf.toString('utf8'));
    } catch {
      throw new TinyvmmError(`malformed JSON answer (HTTP ${res.statusCode}): ${buf.subarray(0, 200)}`, { status: res.statusCode });
    }
  }
}

async function readAll(res) {
  const chunks = [];
  try {
    for await (const c of res) chunks.push(c);
  } catch (e) {
    throw e instanceof TinyvmmError ? e : new TinyvmmError(`reading the answer failed: ${e.message}`);
  }
  return Buffer.concat(chunks);
}

/** The JSON objects of an ndjson answer, one per line. */
export async function* ndjson(res) {
  let buf = '';
  const dec = new TextDecoder();
  try {
    for await (const chunk of res) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) yield JSON.parse(line);
      }
    }
  } catch (e) {
    if (e instanceof TinyvmmError) throw e;
    if (e instanceof SyntaxError) throw new TinyvmmError(`malformed ndjson line from server: ${e.message}`);
    throw new TinyvmmError(`event stream failed: ${e.message}`);
  } finally {
    res.destroy();
  }
  const rest = buf.trim();
  if (rest) yield JSON.parse(rest);
}

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

/** A wire Result (exec answer, exit event, status().result) as a CommandResult. */
function resultFromJson(d, stdout, stderr) {
  const so = !!d.stdout_truncated;
  const se = !!d.stderr_truncated;
  return {
    execId: d.exec_id ?? null,
    exitCode: d.exit_code ?? -1,
    stdout: stdout ?? d.stdout ?? '',
    stderr: stderr ?? d.stderr ?? '',
    timedOut: !!d.timed_out,
    signal: d.signal || 0,
    truncated: so || se,
    stdoutTruncated: so,
    stderrTruncated: se,
    durationMs: d.wall_ms || 0,
    cpuMs: d.cpu_ms || 0,
    maxRssKib: d.max_rss_kib || 0,
    oomKilled: !!d.oom_killed,
    pidsLimited: !!d.pids_limited,
    get ok() { return this.exitCode === 0 && !this.signal && !this.timedOut; },
  };
}

class Collector {
  constructor(onStdout, onStderr, since = 0) {
    this.on = { stdout: onStdout, stderr: onStderr };
    this.dec = { stdout: new TextDecoder('utf-8'), stderr: new TextDecoder('utf-8') };
    this.parts = { stdout: [], stderr: [] };
    this.offset = since;
  }
  feed(ev) {
    let data = Buffer.from(ev.data || '', 'base64');
    const off = ev.offset ?? this.offset;
    const end = off + data.length;
    if (end <= this.offset) return;
    if (off < this.offset) data = data.subarray(this.offset - off);
    this.offset = end;
    this.emit(ev.type, this.dec[ev.type].decode(data, { stream: true }));
  }
  emit(kind, text) {
    if (!text) return;
    this.parts[kind].push(text);
    if (this.on[kind]) this.on[kind](text);
  }
  finish() {
    for (const k of ['stdout', 'stderr']) this.emit(k, this.dec[k].decode());
  }
  text(kind) { return this.parts[kind].join(''); }
}

async function streamError(sandbox, ev) {
  const err = String(ev.error || 'error');
  const msg = String(ev.message || err);
  if (err === 'sandbox_ended' || err === 'sandbox_expired') {
    let endReason = ev.end_reason ?? null;
    if (endReason === null) {
      try { endReason = (await sandbox.getInfo()).endReason; } catch { /* gone */ }
    }
    return new SandboxExpiredError(msg, { status: 410, error: err, body: ev, endReason });
  }
  if (err === 'guest_error') return new GuestError(msg, { status: 502, error: err, body: ev });
  return new TinyvmmError(msg, { error: err, body: ev });
}

function notImplemented(e, what) {
  if (e instanceof NotImplementedByServerError) {
    return new NotImplementedByServerError(`this tinyvmm serve does not support ${what} (501: ${e.message})`,
      { status: e.status, error: e.error, body: e.body });
  }
  return e;
}

/** GET .../execs/{eid}: {exec_id, state, result, error} as {execId, state, result: CommandResult | null, error}. */
function statusFromJson(d) {
  return {
    execId: d.exec_id, state: d.state, result: d.result ? resultFromJson(d.result) : null,
    error: d.error ? { error: d.error.error, message: d.error.message } : null,
  };
}

/** A command running in the background; it outlives this process (keep execId). */
export class CommandHandle {
  constructor(sandbox, execId, { onStdout, onStderr, since = 0 } = {}) {
    this.sandbox = sandbox;
    this.execId = execId;
    this._col = new Collector(onStdout, onStderr, since);
    this._result = null;
  }
  get _base() { return `/sandboxes/${this.sandbox.sandboxId}/execs/${this.execId}`; }
  get stdout() { return this._col.text('stdout'); }
  get stderr() { return this._col.text('stderr'); }

  /** {execId, state, result: CommandResult | null, error: {error, message} | null} of GET .../execs/{eid}. */
  async status() { return statusFromJson(await this.sandbox._client.call('GET', this._base)); }

  /** Follow the output until the command ends; resolve with its result. timeoutMs bounds this wait only. */
  async wait(o = {}) {
    const { timeoutMs, onStdout, onStderr, check = false } = known(o, 'wait', ['timeoutMs', 'onStdout', 'onStderr', 'check']);
    if (onStdout) this._col.on.stdout = onStdout;
    if (onStderr) this._col.on.stderr = onStderr;
    if (!this._result) this._result = await this._follow(timeoutMs);
    if (check && !this._result.ok) throw new CommandExitError(this._result);
    return this._result;
  }

  async _follow(timeoutMs) {
    const deadline = timeoutMs ? Date.now() + timeoutMs : null;
    for (let drops = 0; ; drops++) {
      let remaining = null;
      if (deadline !== null) {
        remaining = deadline - Date.now();
        if (remaining <= 0) throw new TimeoutError(`exec ${this.execId} still running after ${timeoutMs} ms`);
      }
      const sockT = remaining === null ? 60_000 : Math.max(50, Math.min(remaining, 60_000));
      let exitEv = null;
      try {
        const res = await this.sandbox._client.open('GET', this._base + '/events',
          { query: { since: this._col.offset }, accept: 'application/x-ndjson', timeoutMs: sockT });
        for await (const ev of ndjson(res)) {
          if (ev.type === 'stdout' || ev.type === 'stderr') this._col.feed(ev);
          else if (ev.type === 'exit') { exitEv = ev; break; }
          else if (ev.type === 'error') { this._col.finish(); throw await streamError(this.sandbox, ev); }
          if (deadline !== null && Date.now() >= deadline) {
            throw new TimeoutError(`exec ${this.execId} still running after ${timeoutMs} ms`);
          }
        }
      } catch (e) {
        if (!(e instanceof TimeoutError)) throw e;
        if (deadline !== null && Date.now() >= deadline - 10) {
          throw new TimeoutError(`exec ${this.execId} still running after ${timeoutMs} ms`);
        }
      }
      if (exitEv) {
        this._col.finish();
        try {
          const st = await this.status();
          if (st.result) return st.result;
        } catch { /* fall back to what was streamed */ }
        return resultFromJson({ exec_id: this.execId, ...exitEv }, this.stdout, this.stderr);
      }
      const st = await this.status();
      if (st.state !== 'running') {
        this._col.finish();
        if (st.result) return st.result;
        throw await streamError(this.sandbox, st.error || { error: 'failed', message: 'exec failed' });
      }
      await new Promise((r) => setTimeout(r, Math.min(50 * (drops + 1), 1000)));
    }
  }

  /** Send a signal (default 9, SIGKILL). NotImplementedByServerError if the daemon answers 501. */
  async kill(signal = 9) {
    try {
      await this.sandbox._client.call('POST', this._base + '/signal', { json: { signal } });
    } catch (e) { throw notImplemented(e, `signalling exec ${this.execId}; kill the sandbox instead`); }
  }

  /** Write to the command's stdin. */
  async sendStdin(data) {
    try {
      await this.sandbox._client.call('POST', this._base + '/stdin', { body: data });
    } catch (e) { throw notImplemented(e, 'stdin for a running exec; pass stdin to commands.run instead'); }
  }

  /** Close the command's stdin (a no-op once it has ended). */
  async closeStdin() {
    try {
      await this.sandbox._client.call('POST', this._base + '/stdin', { query: { eof: 1 }, body: '' });
    } catch (e) {
      if (e instanceof ConflictError) return;
      throw notImplemented(e, 'stdin for a running exec');
    }
  }
}

/** sb.commands */
export class Commands {
  constructor(sandbox) { this._sb = sandbox; }

  /**
   * Run a command: a shell line (/bin/sh -c), or an argv (an array, or cmd with args).
   * Resolves with a result ({exitCode, stdout, stderr, timedOut, truncated, ...}); a non-zero
   * exit is a result unless check: true. background: true resolves with a CommandHandle at once.
   * memoryMib and pidsMax limit the command's own cgroup in the guest (oomKilled, pidsLimited).
   */
  async run(cmd, opts = {}) {
    if (opts && 'timeout' in opts) throw new TypeError('commands.run: the option is timeoutMs (milliseconds), not timeout');
    const { args, envs, cwd, user, timeoutMs, stdin, onStdout, onStderr, background = false,
      check = false, maxOutputBytes, memoryMib, pidsMax, requestTimeoutMs } = known(opts, 'commands.run', RUN_OPTIONS);
    const body = {};
    if (Array.isArray(cmd)) body.cmd = [...cmd, ...(args || [])].map(String);
    else if (args) body.cmd = [cmd, ...args].map(String);
    else body.shell = cmd;
    if (envs) body.envs = Object.fromEntries(Object.entries(envs).map(([k, v]) => [k, String(v)]));
    if (cwd !== undefined) body.cwd = cwd;
    if (user !== undefined) body.user = user;
    const ts = timeoutMs === undefined || timeoutMs === null ? null : (timeoutMs <= 0 ? 0 : Math.ceil(timeoutMs / 1000));
    if (ts !== null) body.timeout_s = ts;
    // stdin: true keeps it open for the handle's sendStdin()/closeStdin()
    if (stdin === true) body.stdin = true;
    else if (stdin !== undefined && stdin !== null && stdin !== false) body.stdin_b64 = Buffer.from(stdin).toString('base64');
    if (maxOutputBytes !== undefined) body.max_output_bytes = maxOutputBytes;
    if (memoryMib !== undefined) body.memory_mib = memoryMib;
    if (pidsMax !== undefined) body.pids_max = pidsMax;
    const path = `/sandboxes/${this._sb.sandboxId}/execs`;
    const client = this._sb._client;
    if (background) {
      body.background = true;
      const d = await client.call('POST', path, { json: body });
      return new CommandHandle(this._sb, d.exec_id, { onStdout, onStderr });
    }
    const rt = requestTimeoutMs !== undefined ? requestTimeoutMs : (ts ? ts * 1000 + 60_000 : 0);
    let result;
    if (!onStdout && !onStderr) {
      result = resultFromJson(await client.call('POST', path, { json: body, timeoutMs: rt }));
    } else {
      result = await this._runStreamed(path, body, onStdout, onStderr, rt);
    }
    if (check && !result.ok) throw new CommandExitError(result);
    return result;
  }

  async _runStreamed(path, body, onStdout, onStderr, rt) {
    const col = new Collector(onStdout, onStderr);
    const res = await this._sb._client.open('POST', path,
      { json: body, accept: 'application/x-ndjson', timeoutMs: Math.max(rt || 0, 60_000) });
    let execId = null;
    for await (const ev of ndjson(res)) {
      if (ev.type === 'start') execId = ev.exec_id;
      else if (ev.type === 'stdout' || ev.type === 'stderr') col.feed(ev);
      else if (ev.type === 'exit') {
        col.finish();
        return resultFromJson({ exec_id: execId, ...ev }, col.text('stdout'), col.text('stderr'));
      } else if (ev.type === 'error') {
        col.finish();
        throw await streamError(this._sb, ev);
      }
    }
    if (execId) return new CommandHandle(this._sb, execId, { onStdout, onStderr, since: col.offset }).wait();
    throw new TinyvmmError('the exec stream ended before the command started');
  }

  /** Reattach to a background command; wait() replays its kept output from the start. */
  async connect(execId, o = {}) {
    const { onStdout, onStderr } = known(o, 'commands.connect', ['onStdout', 'onStderr']);
    const h = new CommandHandle(this._sb, execId, { onStdout, onStderr });
    await h.status();
    return h;
  }

  kill(execId, signal = 9) { return new CommandHandle(this._sb, execId).kill(signal); }
  sendStdin(execId, data) { return new CommandHandle(this._sb, execId).sendStdin(data); }
  closeStdin(execId) { return new CommandHandle(this._sb, execId).closeStdin(); }
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

/** sb.files */
export class Files {
  constructor(sandbox) { this._sb = sandbox; }
  get _path() { return `/sandboxes/${this._sb.sandboxId}/files`; }

  /** Write data (string, Buffer/Uint8Array, Readable or async iterable: streamed) to path. */
  async write(path, data, o = {}) {
    const { mode } = known(o, 'files.write', ['mode']);
    const query = { path };
    if (mode !== undefined) query.mode = typeof mode === 'number' ? mode.toString(8).padStart(4, '0') : String(mode);
    const d = await this._sb._client.call('PUT', this._path, { query, body: data });
    return { path: d?.path ?? path, size: d?.size ?? 0 };
  }

  /** Read path: format 'text' (string, default), 'bytes' (Uint8Array/Buffer) or 'stream' (Readable). */
  async read(path, o = {}) {
    const { format = 'text' } = known(o, 'files.read', ['format']);
    if (!['text', 'bytes', 'stream'].includes(format)) throw new TypeError("format: 'text', 'bytes' or 'stream'");
    const res = await this._sb._client.open('GET', this._path, { query: { path }, accept: 'application/octet-stream' });
    if (format === 'stream') return res;
    const buf = await readAll(res);
    return format === 'bytes' ? buf : buf.toString('utf8');
  }

  /** The entries of directory path: [{name, type, size, mode, path}]. */
  async list(path = '/') {
    const d = await this._sb._client.call('GET', `/sandboxes/${this._sb.sandboxId}/fs/list`, { query: { path } });
    const base = d.path ?? path;
    return (d.entries || []).map((e) => ({ ...e, path: base.replace(/\/+$/, '') + '/' + e.name }));
  }

  /** Whether path exists (looked up in its parent's listing). */
  async exists(path) {
    const norm = path.replace(/\/+$/, '');
    const i = norm.lastIndexOf('/');
    if (!norm) return true;
    try {
      return (await this.list(norm.slice(0, i) || '/')).some((e) => e.name === norm.slice(i + 1));
    } catch (e) {
      if (e instanceof GuestError || e instanceof NotFoundError) return false;
      throw e;
    }
  }

  async remove(path) {
    await this._sb._client.call('DELETE', this._path, { query: { path } });
  }
}

// ---------------------------------------------------------------------------
// Sandbox
// ---------------------------------------------------------------------------

function infoFromJson(d) {
  return {
    sandboxId: d.id, id: d.id, state: d.state, template: d.template ?? null,
    createdAt: d.created_at ?? null, expiresAt: d.expires_at ?? null, endedAt: d.ended_at ?? null,
    endReason: d.end_reason ?? null, cpus: d.cpus ?? null, memoryMib: d.memory_mib ?? null,
    idleTimeoutS: d.idle_timeout_s ?? null, fromPool: d.from_pool ?? null,
    forkedFrom: d.forked_from ?? null, metadata: { ...(d.metadata || {}) },
    // with a network: { tap, hostAddress, address } (its TAP, the host's end of its /30, its eth0)
    network: d.network ? { tap: d.network.tap, hostAddress: d.network.host_address, address: d.network.address } : null,
  };
}

const secs = (s) => (s === undefined || s === null ? undefined : Math.ceil(s));

const RUN_OPTIONS = ['args', 'envs', 'cwd', 'user', 'timeoutMs', 'stdin', 'onStdout', 'onStderr', 'background', 'check',
  'maxOutputBytes', 'memoryMib', 'pidsMax', 'requestTimeoutMs'];
const CREATE_OPTIONS = new Set(['template', 'timeout', 'timeoutMs', 'idleTimeout', 'cpus', 'memoryMib', 'envs',
  'secretEnvs', 'metadata', 'network', 'socketPath', 'requestTimeoutMs']);
const NETWORK_OPTIONS = new Set(['enabled', 'allowOut', 'dns']);

// A misspelt or snake_case option would be left out (a default create, no
// rules), silently (Python's keyword arguments refuse it): refused here by
// name, with the camelCase option meant (memory_mib: memoryMib).
function refuseUnknown(opts, known, where) {
  for (const k of Object.keys(opts)) {
    if (!known.has(k)) {
      const camel = k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
      // timeout_s: timeout (seconds are the SDK's default unit)
      const meant = known.has(camel) ? camel : (camel.endsWith('S') && known.has(camel.slice(0, -1)) ? camel.slice(0, -1) : null);
      throw new TypeError(`${where}: unknown option ${k}` + (meant ? ` (did you mean ${meant}?)` : ''));
    }
  }
}

// The options object of a call (undefined: none): refused by name when it
// holds a key the call does not take, or is not an object (fork(2)).
function known(opts, where, names) {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object' || Array.isArray(opts)) {
    throw new TypeError(`${where}: options are an object { ${names.join(', ')} }, not ${Array.isArray(opts) ? 'an array' : typeof opts}`);
  }
  refuseUnknown(opts, new Set(names), where);
  return opts;
}

// The wire's network ({enabled, allow_out, dns}) of the option. true is the
// common case ({ enabled: true }: the default egress rules); any other
// non-object, or an unknown key, is refused here, by name, before a request is sent.
function networkBody(v) {
  if (v === undefined || v === null || v === false) return undefined;
  if (v === true) return { enabled: true };
  if (typeof v !== 'object' || Array.isArray(v)) {
    throw new TypeError(`network: expected true, false or an object { enabled, allowOut, dns }, not ${Array.isArray(v) ? 'an array' : typeof v}`);
  }
  refuseUnknown(v, NETWORK_OPTIONS, 'network');
  const body = {};
  if (v.enabled !== undefined) body.enabled = v.enabled;
  if (v.allowOut !== undefined) body.allow_out = v.allowOut;
  if (v.dns !== undefined) body.dns = v.dns;
  return body;
}

/** A microVM sandbox of `tinyvmm serve`. */
export class Sandbox {
  constructor(info, { client, accessToken } = {}) {
    this._info = infoFromJson(info);
    this.sandboxId = this._info.sandboxId;
    this.accessToken = accessToken || info.access_token || null;
    this._client = this.accessToken ? client.withToken(this.accessToken) : client;
    this.commands = new Commands(this);
    this.files = new Files(this);
  }

  get id() { return this.sandboxId; }
  get info() { return this._info; }

  /**
   * Start a sandbox. timeout: lifetime in seconds (default 300; or timeoutMs), idleTimeout (s),
   * template, cpus, memoryMib, envs, secretEnvs, metadata, socketPath, network: true (the default
   * egress rules: anywhere but other sandboxes) or { enabled, allowOut, dns }.
   * An unknown option (memory_mib, a typo) is a TypeError naming it.
   */
  static async create(opts = {}) {
    refuseUnknown(opts, CREATE_OPTIONS, 'Sandbox.create');
    const body = {};
    const timeout = opts.timeoutMs !== undefined ? opts.timeoutMs / 1000 : opts.timeout;
    const put = (k, v) => { if (v !== undefined && v !== null) body[k] = v; };
    put('template', opts.template);
    put('timeout_s', secs(timeout));
    put('idle_timeout_s', secs(opts.idleTimeout));
    put('cpus', opts.cpus);
    put('memory_mib', opts.memoryMib);
    put('envs', opts.envs);
    put('secret_envs', opts.secretEnvs);
    put('metadata', opts.metadata);
    put('network', networkBody(opts.network));
    const client = new Client({ socketPath: opts.socketPath });
    const d = await client.call('POST', '/sandboxes', { json: body, timeoutMs: opts.requestTimeoutMs ?? 300_000 });
    return new Sandbox(d, { client });
  }

  /** Attach to an existing sandbox (yours, or any with its access token). */
  static async connect(sandboxId, o = {}) {
    const { accessToken, socketPath } = known(o, 'Sandbox.connect', ['accessToken', 'socketPath']);
    const client = new Client({ socketPath, accessToken });
    const d = await client.call('GET', `/sandboxes/${sandboxId}`);
    return new Sandbox(d, { client, accessToken });
  }

  /** Your sandboxes ({state: 'running'|'paused'|'ended', metadata: {k: v}}). */
  static async list(o = {}) {
    const { state, metadata, socketPath } = known(o, 'Sandbox.list', ['state', 'metadata', 'socketPath']);
    const q = [];
    if (state) q.push(['state', state]);
    for (const [k, v] of Object.entries(metadata || {})) q.push([`metadata.${k}`, v]);
    const d = await new Client({ socketPath }).call('GET', '/sandboxes', { query: q });
    return (d.sandboxes || []).map(infoFromJson);
  }

  /** End a sandbox by id; false if there is no such sandbox. */
  static async kill(sandboxId, o = {}) {
    const { accessToken, socketPath } = known(o, 'Sandbox.kill', ['accessToken', 'socketPath']);
    try {
      await new Client({ socketPath, accessToken }).call('DELETE', `/sandboxes/${sandboxId}`);
      return true;
    } catch (e) {
      if (e instanceof SandboxNotFoundError) return false;
      throw e;
    }
  }

  /** End this sandbox; false if the service no longer knows it. */
  async kill() {
    try {
      await this._client.call('DELETE', `/sandboxes/${this.sandboxId}`);
      return true;
    } catch (e) {
      if (e instanceof SandboxNotFoundError) return false;
      throw e;
    }
  }

  /** End the sandbox timeoutMs from now (may shorten; capped by the server); resolves with expiresAt. */
  async setTimeout(timeoutMs) {
    // Milliseconds: 600 (seconds meant) would end the sandbox at once.
    if (!(timeoutMs >= 1000)) throw new RangeError(`setTimeout(${timeoutMs}): milliseconds, at least 1000`);
    const d = await this._client.call('POST', `/sandboxes/${this.sandboxId}/timeout`, { json: { timeout_s: Math.ceil(timeoutMs / 1000) } });
    this._info.expiresAt = d.expires_at;
    return d.expires_at;
  }

  /**
   * Save the sandbox (files, processes, memory) and end its VM: no CPU nor memory, its lifetime stops
   * until resume(). ConflictError (409) while commands run or when paused already.
   * Resolves with (and keeps as .info) the sandbox's info, state 'paused'.
   */
  async pause(o = {}) {
    const { requestTimeoutMs = 300_000 } = known(o, 'pause', ['requestTimeoutMs']);
    this._info = infoFromJson(await this._client.call('POST', `/sandboxes/${this.sandboxId}/pause`, { timeoutMs: requestTimeoutMs }));
    return this._info;
  }

  /**
   * Restore a paused sandbox (files and processes as they were) with a new lifetime of its timeout from now.
   * ConflictError (409) if not paused; QuotaExceededError / ServiceUnavailableError as a create.
   * Resolves with (and keeps as .info) the sandbox's info, state 'running'.
   */
  async resume(o = {}) {
    const { requestTimeoutMs = 300_000 } = known(o, 'resume', ['requestTimeoutMs']);
    this._info = infoFromJson(await this._client.call('POST', `/sandboxes/${this.sandboxId}/resume`, { timeoutMs: requestTimeoutMs }));
    return this._info;
  }

  /**
   * count (1..8, default 1) new sandboxes that start from this one's files and running processes now
   * (the parent is paused for the copy and runs on); each its own id, accessToken and lifetime
   * (timeoutS seconds, default the parent's); info.forkedFrom is this sandbox's id. Only the owner may
   * fork (a token holder gets ForbiddenError); ConflictError while commands run. A paused sandbox
   * is forked from its snapshot and stays paused. All or nothing.
   */
  async fork(o = {}) {
    const { count = 1, timeoutS, requestTimeoutMs = 300_000 } = known(o, 'fork', ['count', 'timeoutS', 'requestTimeoutMs']);
    const body = { count };
    if (timeoutS !== undefined && timeoutS !== null) body.timeout_s = secs(timeoutS);
    const d = await this._client.call('POST', `/sandboxes/${this.sandboxId}/fork`, { json: body, timeoutMs: requestTimeoutMs });
    // Each child on a client of its own: this one may carry the parent's token, which opens no child.
    const base = this._client.withToken(null);
    return (d.sandboxes || []).map((s) => new Sandbox(s, { client: base }));
  }

  /**
   * Save this sandbox (its files and running processes) as the custom template `name` (1 to 63 of
   * a-z 0-9 - _ ., a letter or digit first, not 'default'); Sandbox.create({template: name}) then starts
   * from it with its cpus and memoryMib. The sandbox is paused for the copy and runs on. Resolves with
   * the Template {name, createdAt, fromSandbox, cpus, memoryMib, memoryKib, network} (network: saved
   * from a networked sandbox, so every create from it needs network: {enabled: true}). Only the owner's
   * uid may (a token does not do: SandboxNotFoundError); BadRequestError for a bad name; ConflictError if
   * the name exists, while commands run or when paused; QuotaExceededError past 64.
   */
  async saveAsTemplate(name, o = {}) {
    const { requestTimeoutMs = 300_000 } = known(o, 'saveAsTemplate', ['requestTimeoutMs']);
    // ownership is by uid: the token (if any) is not sent, it would not count
    return templateFromJson(await this._client.withToken(null).call('POST', '/templates',
      { json: { name, from_sandbox: this.sandboxId }, timeoutMs: requestTimeoutMs }));
  }

  async getInfo() {
    this._info = infoFromJson(await this._client.call('GET', `/sandboxes/${this.sandboxId}`));
    return this._info;
  }

  async isRunning() {
    try { return (await this.getInfo()).state === 'running'; } catch (e) {
      if (e instanceof SandboxNotFoundError) return false;
      throw e;
    }
  }

  /** The audit log, as an async iterable of records. */
  async logs() {
    const res = await this._client.open('GET', `/sandboxes/${this.sandboxId}/logs`, { accept: 'application/x-ndjson' });
    return ndjson(res);
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using sb = await Sandbox.create()` kills it at the end of the block
  Sandbox.prototype[Symbol.asyncDispose] = async function dispose() {
    try { await this.kill(); } catch { /* best effort */ }
  };
}

/** Health of the daemon: {status: "ok" or "degraded", sandboxes, problems (why no sandbox can start)}. */
export async function health(o = {}) {
  const { socketPath } = known(o, 'health', ['socketPath']);
  return new Client({ socketPath }).call('GET', '/health');
}

// The wire's {samples, p50_ms, p99_ms} (a create's latency, a pause's time) and {samples, p50_kib, p99_kib}.
const latencyFromJson = (l = {}) => ({ samples: l.samples ?? 0, p50Ms: l.p50_ms ?? null, p99Ms: l.p99_ms ?? null });
const sizesFromJson = (s = {}) => ({ samples: s.samples ?? 0, p50Kib: s.p50_kib ?? null, p99Kib: s.p99_kib ?? null });

/** A wire Pool as {template, size, ready, starting, hits, misses, problems, cpus, memoryMib, createLatency, pauseTime, pauseSize}. */
function poolFromJson(d) {
  return {
    template: d.template, size: d.size, ready: d.ready, starting: d.starting, hits: d.hits, misses: d.misses,
    problems: d.problems ?? [], cpus: d.cpus, memoryMib: d.memory_mib,
    createLatency: { hit: latencyFromJson(d.create_latency?.hit), miss: latencyFromJson(d.create_latency?.miss) },
    pauseTime: latencyFromJson(d.pause_time), pauseSize: sizesFromJson(d.pause_size),
  };
}

/** A wire Template as {name, createdAt, fromSandbox, cpus, memoryMib, memoryKib, network, createLatency, pauseTime, pauseSize}. */
function templateFromJson(d) {
  return {
    name: d.name, createdAt: d.created_at, fromSandbox: d.from_sandbox, cpus: d.cpus,
    memoryMib: d.memory_mib, memoryKib: d.memory_kib, network: !!d.network,
    createLatency: latencyFromJson(d.create_latency), pauseTime: latencyFromJson(d.pause_time),
    pauseSize: sizesFromJson(d.pause_size),
  };
}

/** The warm pool of a template: Pool {template, size, ready, starting, hits, misses, problems, cpus, memoryMib, createLatency, pauseTime, pauseSize}. */
export async function pool(o = {}) {
  const { template = 'default', socketPath } = known(o, 'pool', ['template', 'socketPath']);
  return poolFromJson(await new Client({ socketPath }).call('GET', `/templates/${encodeURIComponent(template)}/pool`));
}
/** Keep `size` sandboxes restored ahead of creates (root or the daemon's uid, else ForbiddenError); resolves with the Pool. */
export async function setPool(size, o = {}) {
  const { template = 'default', socketPath } = known(o, 'setPool', ['template', 'socketPath']);
  return poolFromJson(await new Client({ socketPath }).call('PUT', `/templates/${encodeURIComponent(template)}/pool`, { json: { size } }));
}
/** The caller's custom templates ('default' always exists and is not listed): Template[]. */
export async function templates(o = {}) {
  const { socketPath } = known(o, 'templates', ['socketPath']);
  return ((await new Client({ socketPath }).call('GET', '/templates')).templates || []).map(templateFromJson);
}
/**
 * Build the template `name` from a warm-up: the daemon runs `sh -c warmup` as root in a new sandbox of the
 * default template (cpus, memoryMib; no network unless network, as Sandbox.create's: then the template is
 * networked and every create from it needs network too) and, once it exits 0, saves it and ends it. timeout: the
 * warm-up's, in seconds (the daemon's default 600). Resolves to the Template; WarmupFailedError (422) when
 * the warm-up exits non-zero or times out (nothing saved), ConflictError if the name exists or is being built.
 */
const BUILD_OPTIONS = new Set(['cpus', 'memoryMib', 'timeout', 'network', 'socketPath', 'requestTimeoutMs']);

export async function buildTemplate(name, warmup, opts = {}) {
  refuseUnknown(opts, BUILD_OPTIONS, 'buildTemplate');
  const { cpus, memoryMib, timeout, network, socketPath, requestTimeoutMs = ((timeout ?? 600) + 900) * 1000 } = opts;
  const json = { name, warmup };
  const net = networkBody(network);
  if (net !== undefined) json.network = net;
  if (cpus !== undefined) json.cpus = cpus;
  if (memoryMib !== undefined) json.memory_mib = memoryMib;
  if (timeout !== undefined) json.timeout_s = timeout;
  return templateFromJson(await new Client({ socketPath }).call('POST', '/templates', { json, timeoutMs: requestTimeoutMs }));
}
/** One of the caller's templates, else TemplateNotFoundError. */
export async function getTemplate(name, o = {}) {
  const { socketPath } = known(o, 'getTemplate', ['socketPath']);
  return templateFromJson(await new Client({ socketPath }).call('GET', `/templates/${encodeURIComponent(name)}`));
}
/** Delete one of the caller's templates: true, or false if there is none by that name. Sandboxes made from it run on. */
export async function deleteTemplate(name, o = {}) {
  const { socketPath } = known(o, 'deleteTemplate', ['socketPath']);
  try {
    await new Client({ socketPath }).call('DELETE', `/templates/${encodeURIComponent(name)}`);
    return true;
  } catch (e) {
    if (e instanceof TemplateNotFoundError) return false;
    throw e;
  }
}
/** Version of the daemon: {version, api}. */
export async function version(o = {}) {
  const { socketPath } = known(o, 'version', ['socketPath']);
  return new Client({ socketPath }).call('GET', '/version');
}

export default Sandbox;
