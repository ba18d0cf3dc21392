// A small agent on the official TypeScript MCP SDK, for the end-to-end
// tests. It knows only the endpoint (MCP_URL) and a workspace
// (WORKSPACE_ID). It prints one JSON object per line on stdout:
// {"authorize": url} when a person must authorize it (the test answers
// with the URL the browser was sent back to, on stdin), then
// {"tools": [...]}, {"run": {...}} and {"changes": {...}}.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const endpoint = new URL(process.env.MCP_URL);
const workspaceId = process.env.WORKSPACE_ID;
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const store = {};
const provider = {
  get redirectUrl() { return "http://127.0.0.1:9/ts-callback"; },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK agent",
      redirect_uris: ["http://127.0.0.1:9/ts-callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => store.client,
  saveClientInformation: (info) => { store.client = info; },
  tokens: () => store.tokens,
  saveTokens: (tokens) => { store.tokens = tokens; },
  redirectToAuthorization: (url) => { say({ authorize: url.toString() }); },
  saveCodeVerifier: (v) => { store.verifier = v; },
  codeVerifier: () => store.verifier,
};

async function connect() {
  const client = new Client({ name: "cairn-e2e-ts", version: "1.0.0" });
  let transport = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
  try {
    await client.connect(transport);
    return client;
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const { value: back } = await lines.next();
  const code = new URL(back).searchParams.get("code");
  await transport.finishAuth(code);
  transport = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: ${res.content.map((c) => c.text).join("")}`);
  return res.structuredContent.data;
}

const client = await connect();
const { tools } = await client.listTools();
say({ tools: tools.map((t) => t.name) });
const cv = await call(client, "upload_configuration", {
  workspace_id: workspaceId,
  files: { "main.tf": 'resource "terraform_data" "typescript" {\n  input = "from the TypeScript SDK"\n}\n' },
});
const run = await call(client, "start_run", {
  workspace_id: workspaceId, configuration_version_id: cv.id, kind: "plan_only", message: "proposed by the TypeScript SDK",
});
const deadline = Date.now() + 180_000;
let current = run;
while (current.status !== "planned_and_finished") {
  if (current.status === "errored" || Date.now() > deadline) throw new Error(`run ${run.id} is ${current.status}`);
  await new Promise((r) => setTimeout(r, 250));
  current = await call(client, "get_run", { run_id: run.id });
}
say({ run: current });
say({ changes: await call(client, "get_plan_changes", { run_id: run.id }) });
await client.close();
process.exit(0);
