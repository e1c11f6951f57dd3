// The echo agent on the TypeScript SDK's experimental AcpServer (@agentclientprotocol/sdk 2.4.0), served
// by node:http (HTTP/1.1: Streamable HTTP and WebSocket) on 127.0.0.1, port 0; prints `listening PORT`.
// Needs the SDK and `ws` in a node_modules beside it (tests/test_remote_client.py links one in).
import http from "node:http";
import { WebSocketServer } from "ws";
import { agent } from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } from "@agentclientprotocol/sdk/experimental/node";

const sessions = new Map(); // shared by every connection: sessions outlive connections
let next = 0;
const modes = { currentModeId: "ask", availableModes: ["ask", "architect", "code"].map((id) => ({ id, name: id })) };

function makeAgent() {
  let caps = {};
  return agent()
    .onRequest("initialize", ({ params }) => {
      caps = params.clientCapabilities ?? {};
      return { protocolVersion: 1, agentCapabilities: { loadSession: true, promptCapabilities: { embeddedContext: true } }, authMethods: [], agentInfo: { name: "ts-echo", version: "1" } };
    })
    .onRequest("session/new", ({ params }) => {
      const id = `sess_${++next}`;
      sessions.set(id, { history: [], mode: "ask", cancelled: false });
      return { sessionId: id, modes: { ...modes, currentModeId: "ask" } };
    })
    .onRequest("session/load", async ({ params, client }) => {
      const s = sessions.get(params.sessionId);
      if (!s) throw Object.assign(new Error("Resource not found"), { code: -32002 });
      for (const update of s.history) await client.notify("session/update", { sessionId: params.sessionId, update });
      return { modes: { ...modes, currentModeId: s.mode } };
    })
    .onRequest("session/set_mode", ({ params }) => { sessions.get(params.sessionId).mode = params.modeId; return {}; })
    .onNotification("session/cancel", ({ params }) => { const s = sessions.get(params.sessionId); if (s) s.cancelled = true; })
    .onRequest("session/prompt", async ({ params, client }) => {
      const s = sessions.get(params.sessionId);
      s.cancelled = false;
      const say = async (update) => { if (s.cancelled) return; s.history.push(update); await client.notify("session/update", { sessionId: params.sessionId, update }); };
      for (const block of params.prompt) s.history.push({ sessionUpdate: "user_message_chunk", content: block });
      const text = (params.prompt.find((b) => b.type === "text")?.text ?? "").trim();
      const chunk = (t) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t } });
      if (text === "slow") {
        for (let i = 1; i <= 20 && !s.cancelled; i++) { await say(chunk(`slow ${i}/20\n`)); await new Promise((r) => setTimeout(r, 50)); }
      } else if (text.startsWith("read ")) {
        const r = await client.request("fs/read_text_file", { sessionId: params.sessionId, path: text.slice(5).trim() });
        await say(chunk(r.content));
      } else if (text === "permission") {
        const r = await client.request("session/request_permission", { sessionId: params.sessionId,
          toolCall: { toolCallId: "call_permission_1", title: "Echo permission check", kind: "other", status: "pending" },
          options: [{ optionId: "allow-once", name: "Allow once", kind: "allow_once" }, { optionId: "reject-once", name: "Reject once", kind: "reject_once" }] });
        await say(chunk(r.outcome.outcome === "selected" ? `permission: selected ${r.outcome.optionId}` : "permission: cancelled"));
      } else {
        for (const block of params.prompt) await say({ sessionUpdate: "agent_message_chunk", content: block });
      }
      return { stopReason: s.cancelled ? "cancelled" : "end_turn" };
    });
}

const server = new AcpServer({ createAgent: makeAgent });
const httpServer = http.createServer(createNodeHttpHandler(server));
const wss = new WebSocketServer({ noServer: true });
httpServer.on("upgrade", createNodeWebSocketUpgradeHandler(server, wss));
httpServer.listen(0, "127.0.0.1", () => console.log(`listening ${httpServer.address().port}`));
process.on("SIGTERM", () => { server.close(); httpServer.close(); process.exit(0); });
