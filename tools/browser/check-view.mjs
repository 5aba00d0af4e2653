// Loads an anode view page in headless Chromium (Debian's /usr/bin/chromium) over the
// DevTools protocol and reports what the page shows, as one JSON line on stdout:
//   node [--experimental-websocket] tools/browser/check-view.mjs URL [--updates N] [--timeout S]
//        [--screenshot PNG]
// It waits (at most S seconds, default 60) until the page has received N updates over its
// WebSocket (default 3) and records the header numbers after each, then prints
//   {"title", "nodes", "circles", "links", "conn", "updates", "times": [...], "events": [...]}.
// Exit status 1 with a message on stderr if Chromium does not start or the page never
// reaches N updates; the message says how far it got (Chromium started, page loaded, the
// updates seen and what the page last showed).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const args = process.argv.slice(2);
const url = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const wantUpdates = Number(opt("--updates", "3"));
const shot = opt("--screenshot", null);
const timeoutS = Number(opt("--timeout", "60"));
const chrome = process.env.CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "anode-view-chromium-"));

function fail(msg) {
  process.stderr.write(`check-view: ${msg}\n`);
  cleanup();
  process.exit(1);
}
let browser = null;
function cleanup() {
  if (browser) browser.kill("SIGKILL");
  try { rmSync(profile, { recursive: true, force: true }); } catch {}
}
// How far the check got, for the message if it times out.
let stage = "waiting for Chromium to start";
setTimeout(() => fail(`timed out after ${timeoutS} s, ${stage}`), timeoutS * 1000).unref();

browser = spawn(chrome, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--window-size=1280,800", `--user-data-dir=${profile}`, "--remote-debugging-port=0",
  "about:blank",
], { stdio: ["ignore", "ignore", "pipe"] });
browser.on("error", e => fail(`cannot start ${chrome}: ${e.message}`));

const wsUrl = await new Promise(resolve => {
  let buf = "";
  browser.stderr.on("data", d => {
    buf += d.toString();
    const m = buf.match(/DevTools listening on (ws:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
});

// Node >= 22 has WebSocket, 20.10+ with --experimental-websocket; older ones use the `ws`
// package, which scripts/setup.sh installs into tools/browser/node_modules for them.
const WebSocketImpl = globalThis.WebSocket ?? (await import("ws")).default;
stage = "Chromium started, connecting to it";
const ws = new WebSocketImpl(wsUrl);
await new Promise((res, rej) => { ws.onopen = res; ws.onerror = () => rej(new Error("CDP")); });
let next = 1;
const pending = new Map();
ws.onmessage = ev => {
  const m = JSON.parse(String(ev.data));
  if (m.id && pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); }
};
function send(method, params = {}, sessionId) {
  const id = next++;
  ws.send(JSON.stringify({ id, method, params, sessionId }));
  return new Promise(res => pending.set(id, res)).then(m => {
    if (m.error) fail(`${method}: ${JSON.stringify(m.error)}`);
    return m.result;
  });
}

stage = `loading ${url}`;
const { targetId } = await send("Target.createTarget", { url });
const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
const read = async () => {
  const r = await send("Runtime.evaluate", {
    expression: `JSON.stringify({
      title: document.getElementById("title").textContent,
      nodes: Number(document.getElementById("nodecount").textContent),
      links: Number(document.getElementById("linkcount").textContent),
      circles: document.querySelectorAll("circle.node").length,
      conn: document.getElementById("conn").textContent,
      updates: Number(document.getElementById("updates").textContent),
      time: document.getElementById("time").textContent,
      events: document.getElementById("events").textContent,
    })`,
    returnByValue: true,
  }, sessionId);
  // Before the page has loaded, the expression throws: not yet.
  return typeof r.result?.value === "string" ? JSON.parse(r.result.value) : null;
};

const times = [], events = [];
let last = null, seen = 0;
while (seen < wantUpdates) {
  await new Promise(r => setTimeout(r, 50));
  const now = await read();
  if (!now) continue;
  last = now;
  stage = `page loaded, ${last.updates} of ${wantUpdates} updates, showing ${JSON.stringify(last)}`;
  if (last.updates > seen) {
    seen = last.updates;
    times.push(last.time);
    events.push(last.events);
  }
}
if (shot) {
  await new Promise(r => setTimeout(r, 300));
  const { data } = await send("Page.captureScreenshot", { format: "png" }, sessionId);
  writeFileSync(shot, Buffer.from(data, "base64"));
}
process.stdout.write(JSON.stringify({ ...last, times, events }) + "\n");
ws.close();
cleanup();
process.exit(0);
