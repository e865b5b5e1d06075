// Drive the official TypeScript SDK client (tests/peers) against mcpd; print what it
// saw as one JSON line.
//
//   node ts_sdk_probe.mjs PEERS_DIR http URL TOKEN TOOL ARGS_JSON
//   node ts_sdk_probe.mjs PEERS_DIR stdio TOOL ARGS_JSON -- COMMAND [ARG...]
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peers, mode, ...rest] = process.argv.slice(2);
const sdk = (file) =>
  import(pathToFileURL(path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");

let transport, tool, args;
if (mode === "http") {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  const [url, token] = rest;
  [tool, args] = [rest[2], JSON.parse(rest[3])];
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  const { StdioClientTransport } = await sdk("client/stdio.js");
  [tool, args] = [rest[0], JSON.parse(rest[1])];
  const command = rest.slice(rest.indexOf("--") + 1);
  transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
}

const client = new Client({ name: "ts-sdk-probe", version: "0" });
await client.connect(transport);
const listed = await client.listTools();
const progress = [];
const result = await client.callTool({ name: tool, arguments: args }, undefined, {
  onprogress: (p) => progress.push(p.progress),
});
console.log(
  JSON.stringify({
    protocol_version: transport.protocolVersion ?? null,
    session: transport.sessionId ?? null,
    server: client.getServerVersion()?.name ?? null,
    tools: listed.tools.map((t) => t.name),
    is_error: Boolean(result.isError),
    text: result.content.filter((c) => c.type === "text").map((c) => c.text),
    progress,
  }),
);
await client.close();
