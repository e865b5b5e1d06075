// The official TypeScript SDK client (tests/peers) as a legacy host, through `mcpd bridge`:
// it lists the tools, then calls each named one. Prints one JSON line: the protocol
// version, each listed tool's output schema by name (null: none), and for each call
// whether it is an error, its texts and its structured content (null: none). A list or
// call the SDK refuses ends the script with the SDK's error.
//
//   node ts_sdk_shapes.mjs PEERS_DIR TOOLS_JSON -- COMMAND [ARG...]
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peers, toolsJson] = process.argv.slice(2, 4);
const command = process.argv.slice(process.argv.indexOf("--") + 1);
const sdk = (file) =>
  import(pathToFileURL(path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const client = new Client({ name: "ts-sdk-shapes", version: "0" }, { capabilities: {} });
const transport = new StdioClientTransport({
  command: command[0],
  args: command.slice(1),
  stderr: "inherit",
});
let version = null;
transport.setProtocolVersion = (v) => { version = v; }; // told what initialize agreed
await client.connect(transport);
const listed = {};
for (const tool of (await client.listTools()).tools) {
  listed[tool.name] = tool.outputSchema ?? null;
}
const results = {};
for (const name of JSON.parse(toolsJson)) {
  const result = await client.callTool({ name, arguments: {} });
  results[name] = {
    is_error: Boolean(result.isError),
    texts: result.content.filter((c) => c.type === "text").map((c) => c.text),
    structured: result.structuredContent ?? null,
  };
}
console.log(JSON.stringify({ version, listed, results }));
await client.close();
