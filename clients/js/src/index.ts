/**
 * understudy for vitest and Jest.
 *
 * - `connect()` reaches the server at `UNDERSTUDY_URL` (what `understudy test` sets), or starts
 *   `understudy serve` on a free loopback port (`UNDERSTUDY_BIN` or `understudy` on PATH).
 * - `server.attempt({contracts, variants})` creates one attempt (do it per test): its base URLs
 *   (`baseUrl('crm')`, carrying the token), the MCP URL and the header that routes a call
 *   (`mcpUrl('desk')`, `headers`), agent-side events (`event(…)`).
 * - `attempt.finish()` ends the attempt, writes its report (JSON evidence, JUnit XML, HTML) into
 *   the report directory and throws a `VerdictError` carrying the verdict's reasons when the
 *   verdict is `fail` — so the test fails with them. An answer without a verdict is an error,
 *   never a pass.
 * - `withAttempt(name, options, fn)` does all three around `fn`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const API = '/_understudy/api';
const UI = '/_understudy/ui';
const READY = 'understudy listening on ';

/** One reason of a `fail` verdict, as the evidence gives it. */
export interface Reason {
  code: string;
  message: string;
  sequence?: number;
}

/** The test failed because understudy's verdict is `fail`. */
export class VerdictError extends Error {
  constructor(public readonly attemptId: string, public readonly reasons: Reason[],
              public readonly reportDir?: string) {
    super(`understudy verdict fail for attempt ${attemptId}:\n` +
      reasons.map((r) => `  - ${r.code}: ${r.message}`).join('\n') +
      (reportDir ? `\nreports in ${reportDir}` : ''));
    this.name = 'VerdictError';
  }
}

/** understudy could not be reached, or answered something that is not a verdict. */
export class UnderstudyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnderstudyError';
  }
}

export interface ConnectOptions {
  /** A running server; default `UNDERSTUDY_URL`. */
  url?: string;
  /** When no URL: the binary to start (default `UNDERSTUDY_BIN`, else `understudy`). */
  binary?: string;
  /** When starting one: the project file. */
  config?: string;
  /** Admin token (default `UNDERSTUDY_ADMIN_TOKEN`), for a server that asks for one. */
  adminToken?: string;
  /** Where reports go (default `UNDERSTUDY_REPORT_DIR`, else `understudy-report`). */
  reportDir?: string;
}

export interface AttemptOptions {
  contracts?: string[];
  variants?: Record<string, string>;
  testRunId?: string;
  faults?: Record<string, unknown>;
  /** `false`: an attempt with no call may pass (default: it fails `no_calls`). */
  expectCalls?: boolean;
}

export class Server {
  private constructor(public readonly url: string, private readonly child: ChildProcess | undefined,
                      private readonly adminToken: string | undefined,
                      public readonly reportDir: string) {}

  /** `UNDERSTUDY_URL` (or `url`), else a server of its own. */
  static async connect(options: ConnectOptions = {}): Promise<Server> {
    const adminToken = options.adminToken ?? process.env.UNDERSTUDY_ADMIN_TOKEN;
    const reportDir = options.reportDir ?? process.env.UNDERSTUDY_REPORT_DIR ?? 'understudy-report';
    const url = options.url ?? process.env.UNDERSTUDY_URL;
    if (url) return new Server(url.replace(/\/$/, ''), undefined, adminToken, reportDir);
    const binary = options.binary ?? process.env.UNDERSTUDY_BIN ?? 'understudy';
    const work = mkdtempSync(join(tmpdir(), 'understudy-js-'));
    const args = ['serve', '--listen', '127.0.0.1:0', '--data-dir', join(work, 'data')];
    if (options.config) args.push('--config', options.config);
    const env = { ...process.env };
    delete env.UNDERSTUDY_ADMIN_TOKEN;
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let log = '';
    child.stderr?.on('data', (b: Buffer) => { log = (log + b.toString()).slice(-4000); });
    const started = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new UnderstudyError(`understudy serve did not become ready in 30 s; its log:\n${log}`)), 30_000);
      child.once('error', (e) => { clearTimeout(timer); reject(new UnderstudyError(`cannot start ${binary}: ${e.message}`)); });
      child.once('exit', (code) => { clearTimeout(timer); reject(new UnderstudyError(`understudy serve exited with ${code}; its log:\n${log}`)); });
      child.stdout?.on('data', (b: Buffer) => {
        out += b.toString();
        const line = out.split('\n').find((l) => l.startsWith(READY));
        if (line) { clearTimeout(timer); resolve(line.slice(READY.length).trim()); }
      });
    });
    child.removeAllListeners('exit');
    return new Server(started, child, undefined, reportDir);
  }

  /** Stops the server this helper started (a server found at `UNDERSTUDY_URL` is left alone). */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => { clearTimeout(kill); resolve(); });
      child.kill('SIGTERM');
    });
  }

  async request(method: string, path: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.adminToken) headers.authorization = `Bearer ${this.adminToken}`;
    let r: Response;
    try {
      r = await fetch(this.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new UnderstudyError(`understudy at ${this.url} cannot be reached: ${(e as Error).message}`);
    }
    const text = await r.text();
    let json: any = undefined;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: r.status, json, text };
  }

  /** A new attempt: its own state, evidence and lease. */
  async attempt(options: AttemptOptions = {}): Promise<Attempt> {
    const body: Record<string, unknown> = {};
    if (options.contracts?.length) body.contracts = options.contracts;
    if (options.variants) body.variants = options.variants;
    if (options.testRunId) body.test_run_id = options.testRunId;
    if (options.faults) body.faults = options.faults;
    if (options.expectCalls === false) body.expect_calls = false;
    const r = await this.request('POST', `${API}/attempts`, body);
    if (r.status !== 201) throw new UnderstudyError(`attempt creation answered ${r.status}: ${r.text.slice(0, 500)}`);
    return new Attempt(this, r.json);
  }
}

export class Attempt {
  readonly id: string;
  readonly token: string;
  readonly baseUrls: Record<string, string>;
  private ended: unknown;

  constructor(readonly server: Server, created: any) {
    this.id = created.attempt_id;
    this.token = created.token;
    this.baseUrls = created.base_urls ?? {};
  }

  /** The attempt's base URL of an integration (`http://HOST:PORT/~<token>/<name>`). */
  baseUrl(integration: string): string {
    const u = this.baseUrls[integration];
    if (!u) throw new UnderstudyError(`no integration ${JSON.stringify(integration)}; the project has ${Object.keys(this.baseUrls).sort().join(', ')}`);
    return u;
  }

  /** The MCP endpoint of an integration without the token in the path: send `headers` with it. */
  mcpUrl(integration: string): string {
    this.baseUrl(integration);
    return `${this.server.url}/${integration}`;
  }

  /** The header that routes a call to this attempt (`Understudy-Attempt`). */
  get headers(): Record<string, string> {
    return { 'Understudy-Attempt': this.token };
  }

  /** The variables `understudy test` gives its command, for a child process of the test. */
  get env(): Record<string, string> {
    const env: Record<string, string> = {
      UNDERSTUDY_URL: this.server.url, UNDERSTUDY_ATTEMPT: this.token, UNDERSTUDY_ATTEMPT_ID: this.id };
    for (const [name, url] of Object.entries(this.baseUrls)) {
      env[`UNDERSTUDY_URL_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`] = url;
    }
    return env;
  }

  /** An agent-side event (what the agent said or saw); returns its sequence. */
  async event(name: string, options: { kind?: 'agent_message' | 'caller_message' | 'checkpoint' | 'final_state'; text?: string; data?: Record<string, unknown> } = {}): Promise<number> {
    const body: Record<string, unknown> = { name, kind: options.kind ?? 'checkpoint' };
    if (options.text !== undefined) body.text = options.text;
    if (options.data !== undefined) body.data = options.data;
    const r = await this.server.request('POST', `${API}/attempts/${this.id}/events`, body);
    if (r.status !== 201) throw new UnderstudyError(`event ${name} answered ${r.status}: ${r.text.slice(0, 500)}`);
    return r.json.sequence;
  }

  async evidence(): Promise<any> {
    const r = await this.server.request('GET', `${API}/attempts/${this.id}/evidence`);
    if (r.status !== 200) throw new UnderstudyError(`evidence answered ${r.status}: ${r.text.slice(0, 500)}`);
    return r.json;
  }

  /** Ends the attempt (once): its state is dropped, its evidence kept. */
  async end(): Promise<void> {
    if (this.ended !== undefined) return;
    const r = await this.server.request('DELETE', `${API}/attempts/${this.id}`);
    if (r.status !== 200) throw new UnderstudyError(`ending the attempt answered ${r.status}: ${r.text.slice(0, 500)}`);
    this.ended = r.json;
  }

  /** `<dir>/<stem>.json|.xml|.html`: the evidence, the JUnit XML and the HTML report. */
  async writeReports(dir: string, stem: string): Promise<string[]> {
    mkdirSync(dir, { recursive: true });
    const out: string[] = [];
    const env = await this.evidence();
    const json = join(dir, `${stem}.json`);
    writeFileSync(json, JSON.stringify(env, null, 2));
    out.push(json);
    for (const [suffix, path] of [['.html', `${UI}/attempts/${this.id}`], ['.xml', `${UI}/attempts/${this.id}/junit.xml`]] as const) {
      const r = await this.server.request('GET', path);
      if (r.status !== 200) throw new UnderstudyError(`GET ${path} answered ${r.status}`);
      const p = join(dir, `${stem}${suffix}`);
      writeFileSync(p, r.text);
      out.push(p);
    }
    return out;
  }

  /**
   * Ends the attempt, writes its reports under `stem` (default: the attempt id) and throws
   * `VerdictError` with the verdict's reasons when the verdict is `fail`; returns the evidence.
   */
  async finish(stem?: string): Promise<any> {
    await this.end();
    const env = await this.evidence();
    const name = safeStem(stem ?? this.id);
    await this.writeReports(this.server.reportDir, name);
    if (env?.verdict !== 'pass' && env?.verdict !== 'fail') {
      throw new UnderstudyError(`the evidence of attempt ${this.id} holds no verdict (got ${JSON.stringify(env?.verdict)})`);
    }
    if (env.verdict === 'fail') {
      throw new VerdictError(this.id, (env.verdict_reasons ?? []) as Reason[], this.server.reportDir);
    }
    return env;
  }
}

function safeStem(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 120) || 'attempt';
}

/** Connects once per process (the first call starts or finds the server). */
let shared: Promise<Server> | undefined;
export function connect(options: ConnectOptions = {}): Promise<Server> {
  shared ??= Server.connect(options);
  return shared;
}

/** Stops the shared server if this helper started it (call in `afterAll`). */
export async function disconnect(): Promise<void> {
  const s = shared;
  shared = undefined;
  if (s) await (await s).close();
}

/**
 * One attempt around `fn`: created before, finished after (reports written as `name`); the
 * verdict's reasons fail the test. `fn`'s own error wins, after the attempt is ended.
 * Resolves to `fn`'s result and the attempt's evidence (verdict `pass`).
 */
export async function withAttempt<T>(name: string, options: AttemptOptions & ConnectOptions,
                                     fn: (attempt: Attempt) => Promise<T>): Promise<{ result: T; evidence: any }> {
  const server = await connect(options);
  const attempt = await server.attempt({ testRunId: options.testRunId ?? name, ...options });
  let result: T;
  try {
    result = await fn(attempt);
  } catch (e) {
    try { await attempt.finish(name); } catch { /* the test's own error is the one to show */ }
    throw e;
  }
  const evidence = await attempt.finish(name);
  return { result, evidence };
}
