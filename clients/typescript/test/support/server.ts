/**
 * A real `infinity serve` for the tests: on a free loopback port, in memory, with an agent on the
 * offline scripted model, checking every request and answer against the OpenAPI document
 * (`INFINITY_CHECK_API=1`: a mismatch is answered 500 naming it, so the tests fail on it).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root: this file is built to clients/typescript/.test-build/test/support/. */
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../../..");

/** The binary under test: `INFINITY_BIN`, or the workspace's debug build of this checkout. */
export const INFINITY_BIN =
  process.env.INFINITY_BIN ??
  join(process.env.CARGO_TARGET_DIR ?? join(REPO, "target"), "debug", "infinity");

/** The OpenAPI document the types were generated from (as `npm run generate` reads it). */
export const OPENAPI_DOCUMENT =
  process.env.INFINITY_OPENAPI ?? join(REPO, "clients", "openapi.json");

/** An agent for the scripted model: its name, its script's YAML, and its tool servers. */
export interface AgentSpec {
  name: string;
  script: string;
  toolServers?: string[];
  /** More of the agent file, as YAML: e.g. its `client_tools:` and `approvals:`. */
  extra?: string;
}

/** A running server. */
export interface Served {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  /** What the server wrote so far (its log), to explain a failure. */
  output(): string;
  /** Stops it and removes its files. */
  stop(): Promise<void>;
}

/** Starts `infinity serve` with `agent`; tries other ports if another process takes one first. */
export async function startServer(agent: AgentSpec): Promise<Served> {
  const dir = await mkdtemp(join(tmpdir(), "infinity-client-test-"));
  await writeAgent(dir, agent);
  try {
    const served = await startServerWith(join(dir, "agent.yaml"));
    const stop = async (): Promise<void> => {
      await served.stop();
      await rm(dir, { recursive: true, force: true });
    };
    return { ...served, stop };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** A server on a store of its own (`--store`), which a test may kill and start again. */
export interface Restartable extends Served {
  /** Kills it at once (SIGKILL), as a crash or a pulled plug would. */
  kill(): Promise<void>;
  /** Starts it again as it was: the same port, store and agent. */
  restart(): Promise<void>;
}

/** Starts `infinity serve --store DIR` with `agent`, on a free port it keeps across restarts. */
export async function startRestartable(agent: AgentSpec): Promise<Restartable> {
  const dir = await mkdtemp(join(tmpdir(), "infinity-client-test-"));
  await writeAgent(dir, agent);
  const args = ["--store", join(dir, "store")];
  let failure = "";
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    let started = await launch(join(dir, "agent.yaml"), port, args);
    if (!started.ok) {
      failure = started.output();
      continue;
    }
    let log = started.output;
    const kill = async (): Promise<void> => {
      if (!started.ok) return;
      const { child } = started;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    };
    return {
      url: `http://127.0.0.1:${port}`,
      output: () => log(),
      kill,
      restart: async () => {
        const before = log();
        started = await launch(join(dir, "agent.yaml"), port, args);
        const again = started.output;
        log = () => `${before}\n--- started again ---\n${again()}`;
        if (!started.ok) throw new Error(`infinity serve did not start again:\n${log()}`);
      },
      stop: async () => {
        if (started.ok) await stopChild(started.child);
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error(`infinity serve did not start:\n${failure}`);
}

/** Starts `infinity serve --agent AGENT_FILE` (an example's agent, say), as `startServer` does. */
export async function startServerWith(agentFile: string): Promise<Served> {
  let failure = "";
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const started = await launch(agentFile, port);
    if (started.ok) {
      const { child, output } = started;
      return { url: `http://127.0.0.1:${port}`, output, stop: () => stopChild(child) };
    }
    failure = started.output();
  }
  throw new Error(`infinity serve did not start:\n${failure}`);
}

/** Writes `agent.yaml` and its `script.yaml` in `dir`. */
async function writeAgent(dir: string, agent: AgentSpec): Promise<void> {
  await writeFile(join(dir, "script.yaml"), agent.script);
  const servers = agent.toolServers?.length ? `tool_servers: [${agent.toolServers.join(", ")}]\n` : "";
  await writeFile(join(dir, "agent.yaml"), `name: ${agent.name}\nmodel: script:script.yaml\n${servers}${agent.extra ?? ""}`);
}

type Launched =
  | { ok: true; child: ChildProcess; output: () => string }
  | { ok: false; output: () => string };

/** Runs the server on `port` and waits until it answers `/health` (or exits). */
async function launch(agentFile: string, port: number, args: string[] = []): Promise<Launched> {
  const env: NodeJS.ProcessEnv = { ...process.env, INFINITY_CHECK_API: "1" };
  // The scripted model, not a real one; and no token on loopback.
  delete env.ANTHROPIC_API_KEY;
  delete env.OPENAI_API_KEY;
  delete env.INFINITY_SERVE_TOKEN;
  const child = spawn(INFINITY_BIN, ["serve", "--agent", agentFile, "--port", String(port), ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
  let exited = false;
  child.on("exit", () => (exited = true));
  child.on("error", (error) => {
    exited = true;
    log += `\n${error.message}`;
  });
  const output = (): string => log;
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && !exited) {
    try {
      const health = await fetch(`http://127.0.0.1:${port}/health`);
      // The port may belong to someone else's server: ours prints where it serves.
      if (health.ok && log.includes(`127.0.0.1:${port}`)) return { ok: true, child, output };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await stopChild(child);
  return { ok: false, output };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
  await exited;
  clearTimeout(timer);
}

/** A port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/**
 * Polls `check` until it gives a value other than `undefined`/`false`, or fails naming `what`
 * after `ms`. The tests wait this way, never with fixed sleeps, so a loaded machine only makes
 * them slower.
 */
export async function until<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last === undefined ? "" : `: ${String(last)}`}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
