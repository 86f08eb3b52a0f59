// Types of the tinyvmm JavaScript SDK (index.js).
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';

export declare const DEFAULT_SOCKET: string;
export declare const VERSION: string;
export declare function resolveSocketPath(socketPath?: string): string;

export interface ErrorOptions { status?: number; error?: string; body?: Record<string, unknown>; }
/** Base of every SDK error: status (0: no answer), error (API code), message (the server's). */
export declare class TinyvmmError extends Error {
  constructor(message: string, opts?: ErrorOptions);
  status: number;
  error: string;
  body: Record<string, unknown>;
}
export declare class BadRequestError extends TinyvmmError {}
export declare class NotFoundError extends TinyvmmError {}
export declare class ForbiddenError extends TinyvmmError {}
export declare class SandboxNotFoundError extends NotFoundError {}
export declare class ExecNotFoundError extends NotFoundError {}
/** 404 template_not_found: none of the caller's templates by that name */
export declare class TemplateNotFoundError extends NotFoundError {}
export declare class ConflictError extends TinyvmmError {}
export type EndReason = 'killed' | 'expired' | 'idle' | 'crashed' | 'oom';
export declare class SandboxExpiredError extends TinyvmmError {
  constructor(message: string, opts?: ErrorOptions & { endReason?: EndReason | null });
  endReason: EndReason | null;
}
export declare class PayloadTooLargeError extends TinyvmmError {}
/** 422 warmup_failed: a template's warm-up exited non-zero or timed out */
export declare class WarmupFailedError extends TinyvmmError {}
export declare class QuotaExceededError extends TinyvmmError {}
export declare class ServiceUnavailableError extends TinyvmmError {
  constructor(message: string, opts?: ErrorOptions & { retryAfter?: number | null });
  retryAfter: number | null;
}
export declare class NotImplementedByServerError extends TinyvmmError {}
export declare class GuestError extends TinyvmmError {}
export declare class InsufficientStorageError extends TinyvmmError {}
export declare class TimeoutError extends TinyvmmError {}
export declare class CommandExitError extends TinyvmmError {
  constructor(result: CommandResult);
  result: CommandResult;
}
export declare function errorFromResponse(status: number, raw: Buffer | string, headers?: Record<string, string | string[] | undefined>): TinyvmmError;

export interface ClientOptions { socketPath?: string; accessToken?: string | null; requestTimeoutMs?: number; }
export interface RequestOptions {
  query?: Record<string, unknown> | Array<[string, unknown]>;
  json?: unknown;
  body?: string | Uint8Array | ArrayBuffer | Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
  accept?: string;
  /** socket inactivity timeout; 0: none */
  timeoutMs?: number;
}
export declare class Client {
  constructor(opts?: ClientOptions);
  socketPath: string;
  accessToken: string | null;
  withToken(accessToken: string | null): Client;
  open(method: string, path: string, opts?: RequestOptions): Promise<IncomingMessage>;
  call<T = any>(method: string, path: string, opts?: RequestOptions): Promise<T>;
}
export declare function ndjson(res: IncomingMessage): AsyncGenerator<Record<string, any>>;

export interface CommandResult {
  execId: string | null;
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  signal: number;
  /** either stream was capped at maxOutputBytes */
  truncated: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  durationMs: number;
  cpuMs: number;
  maxRssKib: number;
  oomKilled: boolean;
  pidsLimited: boolean;
  /** exit code 0, no signal, no timeout */
  readonly ok: boolean;
}

export type OutputCallback = (text: string) => void;

export interface RunOptions {
  /** with cmd a string: run cmd with these arguments, no shell */
  args?: string[];
  envs?: Record<string, string>;
  cwd?: string;
  user?: 'sandbox' | 'root';
  /** the command's own timeout (rounded up to seconds); a timeout is a result (timedOut) */
  timeoutMs?: number;
  /** Given to the command, then end of file; or true (with background): stdin stays open for sendStdin()/closeStdin(). */
  stdin?: string | Uint8Array | boolean;
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  background?: boolean;
  /** throw CommandExitError for a non-zero exit, a signal or a timeout */
  check?: boolean;
  maxOutputBytes?: number;
  /** limits of the command's own cgroup in the guest (oomKilled, pidsLimited) */
  memoryMib?: number;
  pidsMax?: number;
  requestTimeoutMs?: number;
}

export interface WaitOptions { timeoutMs?: number; onStdout?: OutputCallback; onStderr?: OutputCallback; check?: boolean; }

/** CommandHandle.status(): GET .../execs/{eid}, camelCase. */
export interface CommandStatus {
  execId: string;
  state: 'running' | 'exited' | 'failed';
  /** once exited: the result, as wait() gives it; null while running or when failed */
  result: CommandResult | null;
  /** when failed (e.g. the sandbox ended): the API error code and message; else null */
  error: { error: string; message: string } | null;
}

export declare class CommandHandle {
  readonly sandbox: Sandbox;
  readonly execId: string;
  readonly stdout: string;
  readonly stderr: string;
  /** the command's state now (no waiting) */
  status(): Promise<CommandStatus>;
  wait(opts?: WaitOptions): Promise<CommandResult>;
  kill(signal?: number): Promise<void>;
  sendStdin(data: string | Uint8Array): Promise<void>;
  closeStdin(): Promise<void>;
}

export declare class Commands {
  run(cmd: string | string[], opts: RunOptions & { background: true }): Promise<CommandHandle>;
  run(cmd: string | string[], opts?: RunOptions & { background?: false }): Promise<CommandResult>;
  connect(execId: string, opts?: { onStdout?: OutputCallback; onStderr?: OutputCallback }): Promise<CommandHandle>;
  kill(execId: string, signal?: number): Promise<void>;
  sendStdin(execId: string, data: string | Uint8Array): Promise<void>;
  closeStdin(execId: string): Promise<void>;
}

export interface EntryInfo { name: string; type: 'file' | 'dir' | 'symlink' | 'other'; size: number; mode: number; path: string; }
export type WriteData = string | Uint8Array | ArrayBuffer | Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export declare class Files {
  write(path: string, data: WriteData, opts?: { mode?: number | string }): Promise<{ path: string; size: number }>;
  read(path: string, opts?: { format?: 'text' }): Promise<string>;
  read(path: string, opts: { format: 'bytes' }): Promise<Buffer>;
  read(path: string, opts: { format: 'stream' }): Promise<IncomingMessage>;
  list(path?: string): Promise<EntryInfo[]>;
  exists(path: string): Promise<boolean>;
  remove(path: string): Promise<void>;
}

export interface SandboxInfo {
  sandboxId: string;
  id: string;
  state: 'running' | 'paused' | 'ended';
  template: string | null;
  createdAt: string | null;
  expiresAt: string | null;
  endedAt: string | null;
  endReason: EndReason | null;
  cpus: number | null;
  memoryMib: number | null;
  idleTimeoutS: number | null;
  /** its create took a sandbox of the daemon's warm pool */
  fromPool: boolean | null;
  /** the id of the sandbox it was forked from (Sandbox.fork), or null */
  forkedFrom: string | null;
  /** with a network: its TAP on the host, the host's end of its /30 and its eth0's address (each null while it has none); null without a network */
  network: { tap: string | null; hostAddress: string | null; address: string | null } | null;
  metadata: Record<string, string>;
}

/** A sandbox's network (sent as the API's {enabled, allow_out, dns}); any other key (allow_out too) is a TypeError. */
export interface NetworkOptions {
  /** give the sandbox a network device (TAP, /30, eth0); false or left out: none */
  enabled?: boolean;
  /** egress rules, 'CIDR[:PORT[/tcp|udp]]' (at most 32); left out with dns too: the default rules (anywhere but other sandboxes); [] with dns []: nothing goes out */
  allowOut?: string[];
  /** resolvers the sandbox may reach (at most 4); the first IPv4 one is its resolver */
  dns?: string[];
}

export interface CreateOptions {
  /** 'default' (the base image) or one of your templates (saveAsTemplate, buildTemplate): then leave cpus and memoryMib out, and give network exactly when the template has one */
  template?: string;
  /** lifetime in seconds (default 300) */
  timeout?: number;
  /** lifetime in milliseconds (rounded up to seconds); wins over timeout */
  timeoutMs?: number;
  /** seconds without a request or a running command before the sandbox ends */
  idleTimeout?: number;
  cpus?: number;
  memoryMib?: number;
  envs?: Record<string, string>;
  secretEnvs?: Record<string, string>;
  metadata?: Record<string, string>;
  network?: boolean | NetworkOptions;
  socketPath?: string;
  requestTimeoutMs?: number;
}

export interface ForkOptions {
  /** children to make, 1..8 (default 1) */
  count?: number;
  /** each child's lifetime in seconds (default: the parent's) */
  timeoutS?: number;
  requestTimeoutMs?: number;
}

export declare class Sandbox {
  readonly sandboxId: string;
  readonly id: string;
  readonly accessToken: string | null;
  readonly info: SandboxInfo;
  readonly commands: Commands;
  readonly files: Files;
  static create(opts?: CreateOptions): Promise<Sandbox>;
  static connect(sandboxId: string, opts?: { accessToken?: string; socketPath?: string }): Promise<Sandbox>;
  static list(opts?: { state?: 'running' | 'paused' | 'ended'; metadata?: Record<string, string>; socketPath?: string }): Promise<SandboxInfo[]>;
  static kill(sandboxId: string, opts?: { accessToken?: string; socketPath?: string }): Promise<boolean>;
  kill(): Promise<boolean>;
  /** end the sandbox timeoutMs from now (rounded up to seconds); resolves with the new expiresAt (RFC 3339) */
  setTimeout(timeoutMs: number): Promise<string>;
  /** save the sandbox and end its VM (ConflictError while commands run or when paused already); info.state 'paused' */
  pause(opts?: { requestTimeoutMs?: number }): Promise<SandboxInfo>;
  /** restore a paused sandbox with a new lifetime (ConflictError if not paused); info.state 'running' */
  resume(opts?: { requestTimeoutMs?: number }): Promise<SandboxInfo>;
  /** count (1..8) children from this sandbox's state now, each with its own accessToken; owner only (ForbiddenError) */
  fork(opts?: ForkOptions): Promise<Sandbox[]>;
  /** save this sandbox (files, processes) as template `name`; owner's uid only; ConflictError if the name exists, while commands run or paused; a networked sandbox makes a networked template */
  saveAsTemplate(name: string, opts?: { requestTimeoutMs?: number }): Promise<Template>;
  getInfo(): Promise<SandboxInfo>;
  isRunning(): Promise<boolean>;
  logs(): Promise<AsyncGenerator<Record<string, any>>>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Percentiles of the last 256 (ms); null without samples. */
export interface PoolLatency { samples: number; p50Ms: number | null; p99Ms: number | null }
/** Percentiles of the last 256 (KiB); null without samples. */
export interface PoolSize { samples: number; p50Kib: number | null; p99Kib: number | null }
/** The warm pool of a template (GET/PUT /v1/templates/{name}/pool). */
export interface Pool {
  template: string;
  /** sandboxes kept restored ahead of creates (setPool) */
  size: number;
  /** pooled sandboxes ready to be taken, and being restored */
  ready: number;
  starting: number;
  /** creates that took a pooled sandbox (hits) and that restored one on demand (misses) */
  hits: number;
  misses: number;
  /** why it cannot fill now (health's problems: no usable /dev/kvm, ...); empty when it can */
  problems: string[];
  cpus: number;
  memoryMib: number;
  /** from a create's request to its answer, with a pooled sandbox (hit) or without (miss) */
  createLatency: { hit: PoolLatency; miss: PoolLatency };
  /** the pauses of the template's sandboxes: how long */
  pauseTime: PoolLatency;
  /** the pauses of the template's sandboxes: the memory file's allocated size */
  pauseSize: PoolSize;
}
export declare function pool(opts?: { template?: string; socketPath?: string }): Promise<Pool>;
export declare function setPool(size: number, opts?: { template?: string; socketPath?: string }): Promise<Pool>;
/** A custom template: a named snapshot of one of the caller's sandboxes (POST /v1/templates). */
export interface Template {
  /** 1 to 63 of a-z 0-9 - _ . (a letter or digit first), not 'default' */
  name: string;
  /** RFC 3339 */
  createdAt: string;
  /** the sandbox it was saved from (for buildTemplate: the warm-up's, ended) */
  fromSandbox: string;
  cpus: number;
  memoryMib: number;
  /** its memory file on disk (a diff against the default template) */
  memoryKib: number;
  /** saved from a networked sandbox: every create from it needs network.enabled true */
  network: boolean;
  /** creates from it (ms from request to answer) and its sandboxes' pauses, as Pool has them */
  createLatency: PoolLatency;
  pauseTime: PoolLatency;
  pauseSize: PoolSize;
}
export declare function templates(opts?: { socketPath?: string }): Promise<Template[]>;
/** build template `name`: the daemon runs `sh -c warmup` as root in a new sandbox (no network unless `network`: then a networked template, whose creates need one too), saves it once it exits 0 and ends it; WarmupFailedError (422) otherwise, nothing saved */
export declare function buildTemplate(name: string, warmup: string, opts?: { cpus?: number; memoryMib?: number; timeout?: number; network?: boolean | NetworkOptions; socketPath?: string; requestTimeoutMs?: number }): Promise<Template>;
export declare function getTemplate(name: string, opts?: { socketPath?: string }): Promise<Template>;
export declare function deleteTemplate(name: string, opts?: { socketPath?: string }): Promise<boolean>;
/** cpu_budget_s / cpu_used_s: the daily CPU budget per owner and the caller's use today (null without a budget) */
export declare function health(opts?: { socketPath?: string }): Promise<{ status: 'ok' | 'degraded'; sandboxes: number; problems: string[]; cpu_budget_s: number | null; cpu_used_s: number | null }>;
export declare function version(opts?: { socketPath?: string }): Promise<{ version: string; api: string }>;

export default Sandbox;
