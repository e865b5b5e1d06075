// Drive the official TypeScript SDK client (tests/peers) over Streamable HTTP with a
// bearer token: subscribe to a resource, then print what the server tells it unasked,
// one JSON line each, until stdin closes; then end the session.
//
//   node ts_sdk_news.mjs PEERS_DIR URL TOKEN URI
//
// Lines: {"ready": SESSION_ID}, then {"tools": [NAMES]} each time the SDK refetched the
// tools after a tools/list_changed, and {"method": ..., "params": ...} for any other
// notification.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peers, url, token, uri] = process.argv.slice(2);
const sdk = (file) =>
  import(pathToFileURL(path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const emit = (line) => process.stdout.write(JSON.stringify(line) + "\n");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
transport.onerror = (error) => process.stderr.write(`transport: ${error}\n`);
const client = new Client(
  { name: "ts-sdk-news", version: "0" },
  {
    listChanged: {
      tools: {
        onChanged: (error, tools) =>
          emit(error ? { error: String(error) } : { tools: tools.map((t) => t.name) }),
      },
    },
  },
);
client.fallbackNotificationHandler = async (n) => emit({ method: n.method, params: n.params ?? null });

await client.connect(transport);
await client.subscribeResource({ uri });
emit({ ready: transport.sessionId ?? null });

process.stdin.resume();
await new Promise((resolve) => process.stdin.on("end", resolve));
await transport.terminateSession();
await client.close();
