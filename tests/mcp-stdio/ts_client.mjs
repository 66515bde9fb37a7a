// The official TypeScript MCP SDK's stdio client (@modelcontextprotocol/sdk, pinned in
// package.json) against a stdio server, for tests/it/mcp_stdio.rs. Copied next to the
// node_modules it imports from (target/mcp-stdio/) and run there:
//   node ts_client.mjs PLAN_JSON   (PLAN as python_client.py's, session era only)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const plan = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({ command: plan.command, args: plan.args, env: plan.env });
const client = new Client({ name: "understudy-ts-test", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const results = [];
for (const call of plan.calls ?? []) {
  results.push(await client.callTool({ name: call.name, arguments: call.arguments ?? {} }));
}
const out = {
  version: transport._protocolVersion ?? client.getServerVersion()?.version,
  server: client.getServerVersion(),
  tools: tools.tools.map((t) => t.name).sort(),
  results,
};
await client.close();
console.log(JSON.stringify(out));
