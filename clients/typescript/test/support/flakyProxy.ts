/**
 * A TCP proxy that cuts connections: at random (seeded), or at the requests a test names.
 *
 * It reads the HTTP requests going through (a head, then `Content-Length` bytes of body), to
 * rewrite their `Host` to the server's (on loopback `infinity serve` answers only requests that
 * name it), and so that a test can cut at a request: before it reaches the server, or after the
 * server got it but before its answer gets back (the server acted; the client never learns it).
 *
 * The random cuts depend only on the seed and the connection's number: connection `k` is cut,
 * or not, at the same byte whatever else happens, so a failure is replayed with the same seed.
 */
import { connect, createServer, type Socket } from "node:net";

/** Where a test cuts at a request. */
export type At = "before" | "after";

export interface FlakyProxy {
  /** `http://127.0.0.1:PORT`, forwarding to the target. */
  url: string;
  /** The seed of the random cuts (`undefined`: none). */
  seed: number | undefined;
  /** What was cut, in order: `connection K: up after N bytes`, or `before|after REQUEST LINE`. */
  cuts: string[];
  /** How many connections came through. */
  connections(): number;
  /** Cuts the next request whose request line (`POST /threads/...`) matches, once. */
  cutAt(requestLine: RegExp, at: At): void;
  stop(): Promise<void>;
}

export interface FlakyOptions {
  /** Cut connections at random, from this seed. */
  seed?: number;
  /** The share of connections cut (default 0.7). */
  rate?: number;
  /** A cut comes within this many bytes of the connection's start, either way (default 1500). */
  within?: number;
}

export async function startFlakyProxy(targetPort: number, options: FlakyOptions = {}): Promise<FlakyProxy> {
  const { seed, rate = 0.7, within = 1500 } = options;
  const open = new Set<Socket>();
  const cuts: string[] = [];
  const targets: { pattern: RegExp; at: At }[] = [];
  let connections = 0;

  const randomCut = (number: number): { way: "up" | "down"; after: number } | undefined => {
    if (seed === undefined) return undefined;
    const random = seeded(`${seed}/${number}`);
    if (random() >= rate) return undefined;
    return { way: random() < 0.5 ? "up" : "down", after: Math.floor(random() * within) };
  };

  const targeted = (head: string): At | undefined => {
    const line = head.split("\r\n", 1)[0] ?? "";
    const index = targets.findIndex((t) => t.pattern.test(line));
    const target = targets[index];
    if (target === undefined) return undefined;
    targets.splice(index, 1);
    cuts.push(`${target.at} ${line}`);
    return target.at;
  };

  const server = createServer((client) => {
    const number = connections++;
    const cut = randomCut(number);
    const left = { up: cut?.way === "up" ? cut.after : Infinity, down: cut?.way === "down" ? cut.after : Infinity };
    const upstream = connect(targetPort, "127.0.0.1");
    let ended = false;
    const end = (): void => {
      ended = true;
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    };
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => {
        open.delete(socket);
        if (!ended) end();
      });
      socket.on("error", () => {});
    }
    /** Writes `data` going `way`, or the part of it before the cut: false once cut. */
    const forward = (way: "up" | "down", data: Buffer): boolean => {
      const sink = way === "up" ? upstream : client;
      if (data.length >= left[way]) {
        sink.write(data.subarray(0, left[way]));
        cuts.push(`connection ${number}: ${way} after ${cut?.after ?? 0} bytes`);
        end();
        return false;
      }
      left[way] -= data.length;
      sink.write(data);
      return true;
    };
    let pending = Buffer.alloc(0);
    let cutAnswer = false;
    client.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const headEnd = pending.indexOf("\r\n\r\n");
        if (headEnd === -1) return;
        const head = pending.subarray(0, headEnd + 4).toString("latin1");
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (pending.length < headEnd + 4 + length) return;
        const body = pending.subarray(headEnd + 4, headEnd + 4 + length);
        pending = pending.subarray(headEnd + 4 + length);
        const at = targeted(head);
        if (at === "before") return end();
        if (at === "after") cutAnswer = true; // before the server can answer
        const rewritten = head.replace(/\r\nhost:[^\r]*/i, `\r\nHost: 127.0.0.1:${targetPort}`);
        if (!forward("up", Buffer.concat([Buffer.from(rewritten, "latin1"), body]))) return;
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      if (ended) return;
      if (cutAnswer) return end();
      forward("down", chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    seed,
    cuts,
    connections: () => connections,
    cutAt: (pattern, at) => {
      targets.push({ pattern, at });
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A generator of numbers in [0, 1) determined by `text` (FNV-1a, then mulberry32). */
function seeded(text: string): () => number {
  let state = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) state = Math.imul(state ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
