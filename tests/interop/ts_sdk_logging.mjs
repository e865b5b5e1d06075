// Three official TypeScript SDK clients over `mcpd bridge`, for server logging: one asks
// for "debug" and turns on server-everything's simulated logging, one asks for "error",
// one never asks (and tries a level that does not exist). Prints one JSON line.
//
//   node ts_sdk_logging.mjs PEERS_DIR TOOL -- BRIDGE_COMMAND [ARG...]
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peers, tool] = process.argv.slice(2);
const command = process.argv.slice(process.argv.indexOf("--") + 1);
const sdk = (file) =>
  import(pathToFileURL(path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { LoggingMessageNotificationSchema } = await sdk("types.js");
const LOW = new Set(["debug", "info", "notice", "warning"]);

async function agent(name) {
  const client = new Client({ name, version: "0" });
  const messages = [];
  let wake = () => {};
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    messages.push(n.params);
    wake();
  });
  await client.connect(
    new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" }),
  );
  const until = async (done) => {
    while (!done(messages)) await new Promise((resolve) => (wake = resolve));
  };
  return { client, messages, until };
}

const verbose = await agent("verbose");
const severe = await agent("severe");
const silent = await agent("silent");
let refused = null;
try {
  await silent.client.setLoggingLevel("loud");
} catch (e) {
  refused = { code: e.code, message: e.message };
}
const answered = await verbose.client.setLoggingLevel("debug");
await severe.client.setLoggingLevel("error");
await verbose.client.callTool({ name: tool, arguments: {} });
// The simulated levels are random: wait for one of each kind.
await verbose.until((m) => m.some((p) => LOW.has(p.level)) && m.some((p) => !LOW.has(p.level)));
// What mcpd sent the others before the verbose agent's last message precedes these answers.
await severe.client.ping();
await silent.client.ping();
console.log(
  JSON.stringify({
    logging_capability: verbose.client.getServerCapabilities()?.logging ?? null,
    answered,
    refused,
    verbose: verbose.messages,
    severe: severe.messages,
    silent: silent.messages,
  }),
);
await verbose.client.callTool({ name: tool, arguments: {} });
for (const a of [verbose, severe, silent]) await a.client.close();
