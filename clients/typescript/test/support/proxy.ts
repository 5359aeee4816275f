/**
 * A TCP proxy in front of the server whose connections a test can cut, and which can refuse new
 * ones for a while: a network that drops, to see an event stream resume by itself.
 *
 * It is meant for requests without a body (the event stream's GETs): it rewrites their `Host`
 * header to the target's, because `infinity serve` on loopback answers only requests that name
 * it (its DNS-rebinding guard).
 */
import { connect, createServer, type Socket } from "node:net";

export interface Proxy {
  /** `http://127.0.0.1:PORT`, forwarding to the target. */
  url: string;
  /** The head of each request that came through (request line and headers), in order. */
  requests: string[];
  /** Closes every open connection at once, as a dropped network would. */
  cut(): void;
  /** While refusing, each new connection is closed as soon as it opens. */
  refuse(refusing: boolean): void;
  stop(): Promise<void>;
}

export async function startProxy(targetPort: number): Promise<Proxy> {
  const open = new Set<Socket>();
  const requests: string[] = [];
  let refusing = false;
  const server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, "127.0.0.1");
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => {});
    }
    client.on("data", (chunk: Buffer) => {
      const text = chunk.toString("latin1");
      requests.push(text.split("\r\n\r\n")[0] ?? text);
      upstream.write(Buffer.from(text.replace(/^host:[^\r\n]*/im, `Host: 127.0.0.1:${targetPort}`), "latin1"));
    });
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  const cut = (): void => {
    for (const socket of open) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    cut,
    refuse: (value) => {
      refusing = value;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        cut();
        server.close(() => resolve());
      }),
  };
}
