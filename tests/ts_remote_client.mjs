// The TypeScript SDK's experimental remote transports (@agentclientprotocol/sdk 2.4.0:
// experimental/ws-client with the `ws` package, experimental/http-client on Node's fetch)
// driving a remote ACP agent at the JSON-RPC level, through the same scenario as the Python
// SDK clients in test_remote_interop.py.
//
//   ACP_TS_MODULES=<node_modules dir> [ACP_TS_TOKEN=<bearer token>] node tests/ts_remote_client.mjs ws|http URL
//
// With ACP_TS_TOKEN, every request and upgrade carries `Authorization: Bearer <token>` (the
// transports' own `headers` option). Prints "ok" and exits 0, or throws (exit 1).
import { pathToFileURL } from "node:url";

const [mode, url] = process.argv.slice(2);
const modules = process.env.ACP_TS_MODULES;
const load = (path) => import(pathToFileURL(`${modules}/${path}`).href);
const token = process.env.ACP_TS_TOKEN;
const headers = token ? { Authorization: `Bearer ${token}` } : {};

let open;
if (mode === "ws") {
  const { createWebSocketStream } = await load("@agentclientprotocol/sdk/dist/transports/ws-stream.js");
  const { WebSocket } = await load("ws/wrapper.mjs");
  open = () => createWebSocketStream(url, { WebSocket, headers });
} else {
  const { createHttpStream } = await load("@agentclientprotocol/sdk/dist/transports/http-stream.js");
  open = () => createHttpStream(url, { headers });
}

const TIMEOUT = 15000;

class Peer {
  constructor(stream) {
    this.writer = stream.writable.getWriter();
    this.reader = stream.readable.getReader();
    this.updates = [];
    this.pending = new Map();
    this.nextId = 0;
    this.permissions = 0;
    this.done = this.pump();
  }

  async pump() {
    for (;;) {
      const { value, done } = await this.reader.read();
      if (done) return;
      if (value.method === "session/update") {
        this.updates.push(value.params);
      } else if (value.method === "session/request_permission") {
        this.permissions += 1;
        const optionId = value.params.options[0].optionId;
        await this.writer.write({ jsonrpc: "2.0", id: value.id, result: { outcome: { outcome: "selected", optionId } } });
      } else if (!("method" in value) && this.pending.has(value.id)) {
        const settle = this.pending.get(value.id);
        this.pending.delete(value.id);
        settle(value);
      }
    }
  }

  async request(method, params) {
    const id = this.nextId++;
    const answer = new Promise((resolve, reject) => {
      this.pending.set(id, resolve);
      setTimeout(() => reject(new Error(`no answer to ${method}`)), TIMEOUT);
    });
    await this.writer.write({ jsonrpc: "2.0", id, method, params });
    const message = await answer;
    if (message.error) throw new Error(`${method}: ${JSON.stringify(message.error)}`);
    return message.result;
  }

  notify(method, params) {
    return this.writer.write({ jsonrpc: "2.0", method, params });
  }

  texts(kind = "agent_message_chunk") {
    return this.updates.filter((u) => u.update.sessionUpdate === kind).map((u) => u.update.content.text);
  }

  async until(predicate, what) {
    const deadline = Date.now() + TIMEOUT;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(this.texts())}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async close() {
    await this.writer.close();
  }
}

function check(condition, what) {
  if (!condition) throw new Error(`failed: ${what}`);
}

const prompt = (sessionId, text) => ({ sessionId, prompt: [{ type: "text", text }] });

const first = new Peer(open());
const init = await first.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
check(init.agentCapabilities.loadSession === true, "loadSession advertised");
const { sessionId } = await first.request("session/new", { cwd: "/tmp", mcpServers: [] });
check((await first.request("session/prompt", prompt(sessionId, "hello ts"))).stopReason === "end_turn", "end_turn");
await first.until(() => first.texts().includes("hello ts"), "the echo");
await first.request("session/prompt", prompt(sessionId, "permission"));
check(first.permissions === 1, "one permission request");
await first.until(() => first.texts().includes("permission: selected allow-once"), "the permission outcome");
const turn = first.request("session/prompt", prompt(sessionId, "slow"));
await first.until(() => first.texts().includes("slow 1/20\n"), "the first slow chunk");
await first.notify("session/cancel", { sessionId });
check((await turn).stopReason === "cancelled", "the cancelled turn");
await first.close();

const again = new Peer(open());
await again.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
await again.request("session/load", { sessionId, cwd: "/tmp", mcpServers: [] });
await again.until(() => again.texts().includes("slow 1/20\n"), "the replayed history");
const users = again.texts("user_message_chunk").slice(0, 3);
check(JSON.stringify(users) === JSON.stringify(["hello ts", "permission", "slow"]), `replayed prompts ${users}`);
check((await again.request("session/prompt", prompt(sessionId, "back"))).stopReason === "end_turn", "after load");
await again.until(() => again.texts().includes("back"), "the echo after load");
await again.close();
console.log("ok");
process.exit(0);
