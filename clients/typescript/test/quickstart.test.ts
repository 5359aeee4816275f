/**
 * The README's examples (examples/quickstart.mjs, examples/clientTools.mjs), run as a user runs
 * them, against a real server.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

import { startServer, startServerWith } from "./support/server.js";

const QUICKSTART = fileURLToPath(new URL("../../examples/quickstart.mjs", import.meta.url));
const CLIENT_TOOLS = fileURLToPath(new URL("../../examples/clientTools.mjs", import.meta.url));
const PAINTER = fileURLToPath(new URL("../../examples/client-tools/agent.yaml", import.meta.url));
const README = fileURLToPath(new URL("../../README.md", import.meta.url));

test("the README shows the quickstart as it is", async () => {
  const [readme, quickstart] = await Promise.all([readFile(README, "utf8"), readFile(QUICKSTART, "utf8")]);
  assert.ok(readme.includes("```js\n" + quickstart + "```"), "copy examples/quickstart.mjs into the README");
});

test("the quickstart prints the agent's reply as it streams in", async () => {
  const server = await startServer({
    name: "greeter",
    script: 'rules:\n  - when: "Plan the launch party"\n    reply: {text: "Balloons first, then the cake.", delay_ms: 300}\n  - reply: {text: "Hello!"}\n',
  });
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [QUICKSTART, "Plan the launch party"], {
      env: { ...process.env, INFINITY_URL: server.url },
      timeout: 20_000,
    });
    const [streamed, last] = stdout.trimEnd().split("\n");
    // The deltas as they came: all of them, or none when the reply ended before the stream began.
    assert.ok(["Balloons first, then the cake.", ""].includes(streamed ?? ""), stdout);
    assert.match(last ?? "", /^quickstart-\d+: Balloons first, then the cake\.$/);
  } finally {
    await server.stop();
  }
});

test("the README shows the client tools example as it is", async () => {
  const [readme, example] = await Promise.all([readFile(README, "utf8"), readFile(CLIENT_TOOLS, "utf8")]);
  assert.ok(readme.includes("```js\n" + example + "```"), "copy examples/clientTools.mjs into the README");
});

test("the client tools example answers the painter's call", async () => {
  const server = await startServerWith(PAINTER);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [CLIENT_TOOLS, "Paint the sky"], {
      env: { ...process.env, INFINITY_URL: server.url },
      timeout: 20_000,
    });
    assert.equal(stdout, "Painting it teal.\n1 call(s) answered\n");
  } finally {
    await server.stop();
  }
});
