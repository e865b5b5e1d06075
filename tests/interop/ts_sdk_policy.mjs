// The official TypeScript SDK client (tests/peers) as the agent, through `mcpd bridge`,
// making calls mcpd's policy may ask its user about. With "elicitation" it declares the
// capability, and its handler approves a question with "please" in it and denies any
// other. Prints one JSON line: the protocol version, what was asked, each call's result.
//
//   node ts_sdk_policy.mjs PEERS_DIR ASKS CALLS_JSON -- COMMAND [ARG...]
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peers, asks, callsJson] = process.argv.slice(2, 5);
const command = process.argv.slice(process.argv.indexOf("--") + 1);
const sdk = (file) =>
  import(pathToFileURL(path.join(peers, "node_modules/@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { ElicitRequestSchema } = await sdk("types.js");

const capabilities = asks === "elicitation" ? { elicitation: {} } : {};
const client = new Client({ name: "ts-sdk-policy", version: "0" }, { capabilities });
const asked = [];
if (asks === "elicitation") {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const message = request.params.message;
    asked.push(message);
    const content = message.includes("please")
      ? { decision: "approve" }
      : { decision: "deny", reason: "not without a please" };
    return { action: "accept", content };
  });
}
const transport = new StdioClientTransport({
  command: command[0],
  args: command.slice(1),
  stderr: "inherit",
});
let version = null;
transport.setProtocolVersion = (v) => { version = v; }; // told what initialize agreed
await client.connect(transport);
const results = [];
for (const [name, args] of JSON.parse(callsJson)) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
  results.push({
    is_error: Boolean(result.isError),
    text: result.content.filter((c) => c.type === "text").map((c) => c.text),
  });
}
console.log(JSON.stringify({ version, asked, results }));
await client.close();
