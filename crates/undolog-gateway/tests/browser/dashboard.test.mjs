// The dashboard in a real browser: Debian's headless Chromium, driven by playwright-core.
//
// Starts `undolog serve` on a free port with a fresh store and two orgs' keys, then: the page asks
// for a key; an effect appears live after a tool call; a replay is counted; a held call is approved
// by a click and another denied from the keyboard with a reason; an in-doubt effect is marked;
// a session is undone through the confirmation dialog with live progress; the other org sees
// nothing of it. Then, on a gateway with [oauth] and a real identity provider (the npm
// oidc-provider fixture), an approver signs in through the provider's own page and approves a
// held call, which records that person. A held call's webhook notification carries an approve
// link: opened in a fresh browser, it asks for sign-in, then for confirmation, and decides once.
// The fleet views: the last hour's tiles and chart, the tool catalog with each tier's reason,
// filters and pages of sessions and effects, and an in-doubt effect resolved from its queue.
// Saves screenshots under docs/screenshots/. Exits non-zero on any failed check or
// any console error.
//
//   node dashboard.test.mjs            (UNDOLOG_BIN and CHROMIUM override the paths)

import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../../..");
const bin = process.env.UNDOLOG_BIN || path.join(repo, "target/debug/undolog");
const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";
// The README shows these; every run rewrites them from what it saw.
const shots = path.join(repo, "docs/screenshots");
fs.mkdirSync(shots, { recursive: true });
const WAIT = 15_000;

const consoleErrors = [];
const cleanups = [];

function step(text) {
  console.log(`  ✓ ${text}`);
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function createKey(store, org, role) {
  const out = execFileSync(bin, ["keys", "create", "--org", org, "--role", role, "--json", "--store", store], {
    encoding: "utf8",
  });
  return JSON.parse(out).key;
}

/// The identity provider of the OAuth tests, for a gateway at `base`; its issuer URL.
async function startProvider(base) {
  const modules = path.join(repo, "target/fixtures/oidc");
  assert.ok(fs.existsSync(path.join(modules, "node_modules/oidc-provider")), `${modules} is missing: run tests/fixtures/setup.sh`);
  // ESM finds packages next to the script: a copy runs beside the fixture's node_modules.
  const script = path.join(modules, `provider-browser-${process.pid}.mjs`);
  fs.copyFileSync(path.join(repo, "crates/undolog-gateway/tests/fixtures/oidc_provider.mjs"), script);
  cleanups.push(() => fs.rmSync(script, { force: true }));
  const child = spawn("node", [script, "--resource", `${base}/mcp`, "--dashboard-redirect", `${base}/v1/auth/callback`], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.unshift(() => child.kill());
  const line = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) resolve(out.split("\n")[0]);
    });
    child.on("exit", (code) => reject(new Error(`the identity provider exited (${code})`)));
  });
  return JSON.parse(line).issuer;
}

/// A webhook receiver: each POSTed body, parsed, in `heard`.
async function startReceiver() {
  const heard = [];
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => { body += chunk; });
    request.on("end", () => {
      heard.push(JSON.parse(body));
      response.end("ok");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.unshift(() => server.close());
  return { url: `http://127.0.0.1:${server.address().port}/hook`, heard };
}

/// The notification of `approval` the receiver heard, waiting for it.
async function notificationOf(receiver, approval) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const found = receiver.heard.find((n) => n.approval_id === approval);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no notification of ${approval}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function startGateway({ oauth = false, notify = null } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "undolog-dashboard-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = `sqlite://${path.join(dir, "undolog.db")}`;
  // The agents call tools with agents' keys; the people at the dashboard sign in as admins
  // (an agent's key may not decide its own calls).
  const keys = {
    acme: createKey(store, "acme", "agent"),
    acmeAdmin: createKey(store, "acme", "admin"),
    globexAdmin: createKey(store, "globex", "admin"),
  };
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const args = ["serve", "--listen", `127.0.0.1:${port}`, "--store", store];
  let toml = "";
  if (oauth) {
    const issuer = await startProvider(base);
    toml += `[oauth]\nissuer = "${issuer}"\nresource = "${base}/mcp"\ndashboard_client_id = "undolog-dashboard"\n`;
  }
  if (notify) {
    // An SDK caller that goes silent is in doubt after a second (the in-doubt queue's step).
    toml += "[limits]\nsdk_lease_secs = 1\n";
    toml += `[approvals]\npublic_url = "${base}"\nlink_secret = "${"s".repeat(40)}"\n` +
      `[[notify]]\nname = "hook"\nkind = "webhook"\nurl = "${notify}"\nsecret = "${"w".repeat(24)}"\n`;
  }
  if (toml) {
    const config = path.join(dir, "undolog.toml");
    fs.writeFileSync(config, toml);
    args.push("--config", config);
  }
  const log = fs.openSync(path.join(dir, "gateway.log"), "w");
  const child = spawn(bin, args, {
    cwd: dir,
    stdio: ["ignore", log, log],
  });
  let stopping = false;
  cleanups.unshift(() => {
    stopping = true;
    child.kill();
  });
  const failed = new Promise((_, reject) => child.on("exit", (code) => {
    if (stopping) return;
    const output = fs.readFileSync(path.join(dir, "gateway.log"), "utf8");
    reject(new Error(`the gateway exited (${code}):\n${output}`));
  }));
  failed.catch(() => {});
  const deadline = Date.now() + 30_000;
  for (;;) {
    const healthy = await fetch(`${base}/healthz`).then((r) => r.ok, () => false);
    if (healthy) break;
    if (Date.now() > deadline) throw new Error(`the gateway did not come up at ${base}`);
    await Promise.race([new Promise((r) => setTimeout(r, 100)), failed]);
  }
  return { base, keys };
}

/// The REST tool call an agent makes.
async function toolCall(gw, key, session, name, args) {
  const response = await fetch(`${gw.base}/mcp/tool_call`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
      "X-UndoLog-Session-Id": session,
    },
    body: JSON.stringify({ name, arguments: args }),
  });
  return { status: response.status, body: await response.json() };
}

async function adminGet(gw, key, pathname) {
  const response = await fetch(`${gw.base}${pathname}`, { headers: { Authorization: `Bearer ${key}` } });
  assert.equal(response.status, 200, `GET ${pathname}`);
  return response.json();
}

async function openDashboard(browser, gw, name) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on("console", (message) => {
    // The identity provider's own sign-in page declares no icon, so the browser may ask it for
    // /favicon.ico and log the 404: not the dashboard's (whose pages declare theirs).
    const at = message.location()?.url ?? "";
    if (message.text().startsWith("Failed to load resource") && at.endsWith("/favicon.ico")) return;
    if (message.type() === "error" || message.type() === "warning") {
      consoleErrors.push(`[${name}] console ${message.type()}: ${message.text()} (at ${at || "?"})`);
    }
  });
  page.on("pageerror", (error) => consoleErrors.push(`[${name}] ${error.message}`));
  await page.goto(gw.base);
  return page;
}

/// Types the key and submits with Enter, as a person at a keyboard does.
async function signIn(page, key, org) {
  await page.locator("#login").waitFor();
  await page.locator("#key").focus();
  await page.keyboard.type(key);
  await page.keyboard.press("Enter");
  await page.locator("#who", { hasText: `org ${org}` }).waitFor();
  await page.locator("#status.live").waitFor();
}

async function main() {
  assert.ok(fs.existsSync(bin), `${bin} is missing: cargo build -p undolog-cli first`);
  fs.mkdirSync(shots, { recursive: true });
  const receiver = await startReceiver();
  const gw = await startGateway({ notify: receiver.url });
  const browser = await chromium.launch({
    executablePath: browserPath,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  cleanups.unshift(() => browser.close());

  // The page holds no data: with keys configured it asks for one, and shows that key's org.
  const acme = await openDashboard(browser, gw, "acme");
  await acme.locator("#login").waitFor();
  assert.equal(await acme.locator("#main").isHidden(), true, "no data before a key is given");
  await acme.screenshot({ path: path.join(shots, "dashboard-key.png") });
  await signIn(acme, gw.keys.acmeAdmin, "acme");
  const globex = await openDashboard(browser, gw, "globex");
  await signIn(globex, gw.keys.globexAdmin, "globex");
  step("asks for an API key and shows that key's org; events are live");

  // An effect appears live after a tool call.
  const session = "agent-7";
  const transfer = { from_account: "alice", to_account: "bob", amount: 25 };
  let call = await toolCall(gw, gw.keys.acme, session, "transfer", transfer);
  assert.equal(call.body.outcome, "executed", JSON.stringify(call.body));
  await acme.locator('#events li[data-event="effect_committed"]').waitFor();
  const sessionButton = acme.locator(`button[data-session="${session}"]`);
  await sessionButton.waitFor();
  await sessionButton.click();
  const transferRow = acme.locator('#effects tr[data-tool="transfer"]').first();
  await transferRow.locator(".badge.committed").waitFor();
  await transferRow.locator("text=compensable").waitFor();
  assert.match(await transferRow.innerText(), /"amount": 25/);
  assert.match(await transferRow.locator("td").last().innerText(), /\d+(\.\d)? m?s/);
  step("a tool call shows up live: tool, tier, state, arguments, result, duration");

  // The identical call is replayed, and the timeline counts it.
  call = await toolCall(gw, gw.keys.acme, session, "transfer", transfer);
  assert.equal(call.body.outcome, "replayed");
  await transferRow.locator(".replays", { hasText: "replayed ×1" }).waitFor();
  step("a replay is counted on its effect");

  // A second transfer, so the undo has two steps.
  call = await toolCall(gw, gw.keys.acme, session, "transfer",
    { from_account: "alice", to_account: "carol", amount: 5 });
  assert.equal(call.body.outcome, "executed");

  // An irreversible call waits; a click approves it; the retried call runs.
  const email = { to: "bob@example.com", subject: "Your transfer" };
  call = await toolCall(gw, gw.keys.acme, session, "send_email", email);
  assert.equal(call.status, 202, JSON.stringify(call.body));
  const held = acme.locator(`#approvals li[data-approval="${call.body.approval_id}"]`);
  await held.waitFor();
  assert.match(await held.innerText(), /send_email/);
  await acme.locator('#effects tr[data-tool="send_email"] .badge.awaiting_approval').waitFor();
  await acme.screenshot({ path: path.join(shots, "dashboard.png"), fullPage: true });
  await held.getByRole("button", { name: /^Approve send_email/ }).click();
  await held.waitFor({ state: "detached" });
  const approved = await adminGet(gw, gw.keys.acme, `/v1/approvals/${call.body.approval_id}`);
  assert.equal(approved.state, "approved");
  call = await toolCall(gw, gw.keys.acme, session, "send_email", email);
  assert.equal(call.body.outcome, "executed", JSON.stringify(call.body));
  await acme.locator('#effects tr[data-tool="send_email"] .badge.committed').waitFor();
  step("a held call is approved by a click and then runs");

  // Another is denied from the keyboard alone, with a reason.
  call = await toolCall(gw, gw.keys.acme, session, "send_email", { to: "eve@example.com", subject: "secrets" });
  assert.equal(call.status, 202);
  const second = acme.locator(`#approvals li[data-approval="${call.body.approval_id}"]`);
  await second.waitFor();
  const deny = second.getByRole("button", { name: /^Deny send_email/ });
  await deny.focus();
  await acme.keyboard.press("Enter"); // no reason yet: refused, focus moves to the reason
  await second.locator(".error", { hasText: "needs a reason" }).waitFor();
  assert.equal(await acme.evaluate(() => document.activeElement.dataset.reason !== undefined), true);
  await acme.keyboard.type("not a known recipient");
  await acme.keyboard.press("Tab");
  assert.equal(await acme.evaluate(() => document.activeElement.textContent), "Deny");
  await acme.keyboard.press("Space");
  await second.waitFor({ state: "detached" });
  const denied = await adminGet(gw, gw.keys.acme, `/v1/approvals/${call.body.approval_id}`);
  assert.equal(denied.state, "denied");
  assert.equal(denied.reason, "not a known recipient");
  await acme.locator('#effects tr[data-tool="send_email"] .badge.denied').waitFor();
  step("another is denied from the keyboard (Enter, Tab, Space) with its reason");

  // In-doubt effects are marked. A real one needs a lease to expire (minutes), so the page is
  // shown the list the gateway would give for one of this session's effects.
  const effects = await adminGet(gw, gw.keys.acme, `/v1/sessions/${session}/effects`);
  const doubtful = effects.find((e) => e.tool === "transfer");
  await acme.route("**/v1/effects/in_doubt", (route) =>
    route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify([doubtful]) }));
  await toolCall(gw, gw.keys.acme, "agent-8", "get_balance", { account: "alice" });
  await acme.locator(`#effects tr[data-effect="${doubtful.id}"].in-doubt .badge.doubt`).waitFor();
  await acme.locator("#in-doubt li", { hasText: "transfer" }).waitFor();
  await acme.unroute("**/v1/effects/in_doubt");
  await toolCall(gw, gw.keys.acme, "agent-8", "get_balance", { account: "bob" });
  await acme.locator(".badge.doubt").first().waitFor({ state: "detached" });
  step("in-doubt effects are marked in the timeline and listed");

  // Undo from the keyboard: Enter opens the dialog, Escape cancels; then confirm by click.
  await sessionButton.click();
  await acme.locator("#undo").focus();
  await acme.keyboard.press("Enter");
  const dialog = acme.locator("#undo-dialog");
  await dialog.waitFor({ state: "visible" });
  assert.equal(await acme.evaluate(() => document.activeElement.id), "undo-cancel");
  await acme.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  assert.equal((await adminGet(gw, gw.keys.acme, "/v1/sessions")).find((s) => s.id === session).state, "active");
  await acme.locator("#undo").click();
  await dialog.waitFor({ state: "visible" });
  assert.match(await dialog.innerText(), /2 compensable effect\(s\).*1 irreversible/s);
  await acme.locator("#undo-confirm").click();
  await acme.locator("#undo-summary", { hasText: "Session compensated" }).waitFor();
  await acme.locator("#undo-steps li", { hasText: "transfer #" }).nth(1).waitFor();
  assert.equal(await acme.locator("#undo-steps li").count(), 2, "one progress line per step");
  assert.match(await acme.locator("#undo-summary").innerText(), /1 irreversible effect\(s\) could not be undone/);
  await acme.locator(`button[data-session="${session}"] .badge.compensated`).waitFor();
  assert.equal(await acme.locator('#effects tr[data-tool="transfer"] .badge.compensated').count(), 2);
  await acme.screenshot({ path: path.join(shots, "dashboard-undo.png"), fullPage: true });
  const bank = await toolCall(gw, gw.keys.acme, "agent-9", "get_balance", { account: "alice" });
  assert.equal(bank.status, 200);
  step("undo asks first, shows each compensation live, and ends compensated");

  // The session's whole history, saved as one JSON file.
  const [download] = await Promise.all([acme.waitForEvent("download"), acme.locator("#export").click()]);
  assert.equal(download.suggestedFilename(), `undolog-session-${session}.json`);
  const exported = JSON.parse(fs.readFileSync(await download.path(), "utf8"));
  assert.equal(exported.format, "undolog.session-snapshot.v1");
  assert.equal(exported.session.state, "compensated");
  assert.equal(exported.effects.filter((e) => e.tool === "transfer").length, 2);
  step("a session exports as one JSON file: session, effects, approvals, undo stack");

  // The other org saw nothing of it: no sessions, no approvals, no events.
  assert.equal(await globex.locator("#sessions li").count(), 0);
  assert.equal(await globex.locator("#events li").count(), 0);
  assert.equal(await globex.locator("#approvals li").count(), 0);
  assert.equal(await globex.locator("#sessions-empty").isVisible(), true);
  assert.deepEqual(await adminGet(gw, gw.keys.globexAdmin, "/v1/sessions"), []);
  await toolCall(gw, gw.keys.globexAdmin, "globex-1", "get_balance", { account: "alice" });
  await globex.locator('button[data-session="globex-1"]').waitFor();
  await acme.locator('#events li[data-event="effect_committed"]').first().waitFor();
  assert.equal(await acme.locator('button[data-session="globex-1"]').count(), 0);
  step("one org sees nothing of another's sessions, approvals or events");

  await decideFromALink(browser, gw, receiver);
  await fleetViews(acme, gw);

  // Forgetting the key hides everything again.
  await acme.getByRole("button", { name: "Forget key" }).click();
  await acme.locator("#login").waitFor();
  assert.equal(await acme.locator("#main").isHidden(), true);
  step("forgetting the key hides the data");

  await signInThroughTheProvider(browser);

  assert.deepEqual(consoleErrors, [], "the console stays free of errors and warnings");
  step("no errors or warnings in the console");
}

/// The overview, the catalog, filters and pages, and the in-doubt queue's resolve.
async function fleetViews(page, gw) {
  // The last hour, from the gateway's own counting: tiles and a chart of calls by outcome.
  await page.reload();
  await page.locator("#status.live").waitFor();
  const calls = page.locator('.tile[data-tile="calls this hour"] .tile-value');
  await calls.waitFor();
  assert.ok(Number(await calls.innerText()) >= 8, await calls.innerText());
  assert.match(await page.locator('.tile[data-tile="replay ratio"]').innerText(), /\d+%/);
  assert.ok(await page.locator("#calls-chart rect.bar.executed").count() >= 1);
  assert.ok(await page.locator("#calls-chart rect.bar.replayed").count() >= 1);
  await page.locator(".overview").screenshot({ path: path.join(shots, "dashboard-overview.png") });
  step("the last hour: calls, p50/p99, replay ratio and approvals waiting, charted by outcome");

  // The catalog: each tool's tier and why, its upstream, what undoes it.
  const transfer = page.locator('#catalog-rows tr[data-tool="transfer"]');
  await transfer.waitFor();
  assert.match(await transfer.innerText(), /compensable[\s\S]*the configuration says compensable[\s\S]*demo[\s\S]*transfer/);
  assert.match(await transfer.innerText(), /\{\{args\.from_account\}\}/);
  assert.match(await page.locator('#catalog-rows tr[data-tool="send_email"]').innerText(), /irreversible/);
  await page.locator(".tools").screenshot({ path: path.join(shots, "dashboard-tools.png") });
  step("the tool catalog says each tier and why, the upstream, and the compensation");

  // Sessions page by 20; the filters narrow them.
  for (let i = 0; i < 22; i += 1) {
    const read = await toolCall(gw, gw.keys.acme, `page-${String(i).padStart(2, "0")}`, "get_balance", { account: "alice" });
    assert.equal(read.status, 200);
  }
  await page.locator('button[data-session="page-21"]').waitFor();
  assert.equal(await page.locator("#sessions li").count(), 20);
  assert.match(await page.locator("#sessions-page").innerText(), /^1 of 2 \(\d+\)$/);
  await page.locator("#sessions-next").click();
  assert.match(await page.locator("#sessions-page").innerText(), /^2 of 2/);
  assert.ok(await page.locator("#sessions li").count() >= 1);
  await page.locator("#session-search").fill("agent-7");
  await page.locator("#sessions li").first().waitFor();
  assert.equal(await page.locator("#sessions li").count(), 1, "only the session searched for");
  assert.equal(await page.locator("#sessions-pager").isHidden(), true);
  await page.locator("#session-state").selectOption("active");
  await page.locator("#sessions-empty").waitFor({ state: "hidden" });
  assert.equal(await page.locator("#sessions li").count(), 0, "agent-7 is compensated, not active");
  await page.locator("#session-state").selectOption("");
  await page.locator('button[data-session="agent-7"]').click();
  await page.locator('#effects tr[data-tool="transfer"]').first().waitFor();
  await page.locator("#effect-tier").selectOption("irreversible");
  assert.deepEqual(
    [...new Set(await page.locator("#effects tr").evaluateAll((rows) => rows.map((r) => r.dataset.tool)))],
    ["send_email"],
  );
  await page.locator("#effect-state").selectOption("denied");
  assert.equal(await page.locator("#effects tr").count(), 1, "the one denied email");
  await page.screenshot({ path: path.join(shots, "dashboard-filters.png"), fullPage: true });
  await page.locator("#effect-tier").selectOption("");
  await page.locator("#effect-state").selectOption("");
  await page.locator("#session-search").fill("");
  step("sessions page by 20; search, state, tier and tool filters narrow sessions and effects");

  // An SDK caller that never reports: its effect is in doubt until a person resolves it.
  const started = await fetch(`${gw.base}/v1/effects`, {
    method: "POST",
    headers: { Authorization: `Bearer ${gw.keys.acme}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      session_id: "sdk-1", tool: "charge_card", arguments: { cents: 500 }, tier: "compensable",
      compensation: { kind: "local", function: "refund_card" },
    }),
  }).then((r) => r.json());
  assert.equal(started.outcome, "execute", JSON.stringify(started));
  await new Promise((r) => setTimeout(r, 1_500));
  await toolCall(gw, gw.keys.acme, "sdk-nudge", "get_balance", { account: "bob" });
  const doubt = page.locator(`#in-doubt li[data-effect="${started.effect_id}"]`);
  await doubt.waitFor();
  await doubt.getByRole("button", { name: "Resolve" }).click();
  await doubt.locator(".error", { hasText: "Say why it failed" }).waitFor();
  await doubt.locator("input").fill("the card was never charged (checked with the processor)");
  await page.locator(".approvals").screenshot({ path: path.join(shots, "dashboard-in-doubt.png") });
  await doubt.getByRole("button", { name: "Resolve" }).click();
  await doubt.waitFor({ state: "detached" });
  const resolved = await adminGet(gw, gw.keys.acmeAdmin, `/v1/effects/${started.effect_id}`);
  assert.equal(resolved.state, "failed");
  assert.equal(resolved.error, "the card was never charged (checked with the processor)");
  step("an in-doubt effect is resolved from its queue, with the reason kept");
}

/// A held call's notification link, opened in a browser that is not signed in: the page asks for
/// a key, then shows what the link asks and decides only on confirmation, once.
async function decideFromALink(browser, gw, receiver) {
  const call = await toolCall(gw, gw.keys.acme, "agent-10", "send_email", { to: "board@example.com", subject: "Q3" });
  assert.equal(call.status, 202, JSON.stringify(call.body));
  const notice = await notificationOf(receiver, call.body.approval_id);
  assert.equal(notice.tool, "send_email");
  const page = await openDashboard(browser, { base: notice.links.approve }, "link");
  await signIn(page, gw.keys.acmeAdmin, "acme");
  assert.equal(new URL(page.url()).searchParams.get("link"), null, "the token leaves the address bar");
  const dialog = page.locator("#link-dialog");
  await dialog.waitFor({ state: "visible" });
  await page.locator("#link-dialog-title", { hasText: "Approve this call?" }).waitFor();
  assert.match(await dialog.innerText(), /send_email \(irreversible\) in session agent-10/);
  assert.match(await dialog.innerText(), /board@example\.com/);
  const pending = await adminGet(gw, gw.keys.acmeAdmin, `/v1/approvals/${call.body.approval_id}`);
  assert.equal(pending.state, "pending", "opening the link decided nothing");
  await page.screenshot({ path: path.join(shots, "dashboard-link.png") });
  await page.locator("#link-confirm").click();
  await dialog.waitFor({ state: "hidden" });
  const approved = await adminGet(gw, gw.keys.acmeAdmin, `/v1/approvals/${call.body.approval_id}`);
  assert.equal(approved.state, "approved");
  assert.equal(approved.decided_via, "link:hook");
  step("a notification's link asks for sign-in, then confirmation, and approves");

  await page.goto(notice.links.approve);
  await dialog.waitFor({ state: "visible" });
  await page.locator("#link-dialog-title", { hasText: "already decided" }).waitFor();
  assert.equal(await page.locator("#link-confirm").isHidden(), true);
  await page.locator("#link-cancel").click();
  await dialog.waitFor({ state: "hidden" });
  await page.context().close();
  step("the same link again says the call was already decided, and offers nothing to click");
}

/// A gateway with [oauth]: carol signs in on the identity provider's page and approves a call an
/// agent's key made; the approval names her. Signing out hides the data again.
async function signInThroughTheProvider(browser) {
  const gw = await startGateway({ oauth: true });
  const page = await openDashboard(browser, gw, "sso");
  const signInLink = page.getByRole("link", { name: "Sign in with your identity provider" });
  await signInLink.waitFor();
  await page.screenshot({ path: path.join(shots, "dashboard-sign-in.png") });
  await signInLink.click();
  await page.locator("#username").waitFor(); // the provider's page, not the gateway's
  assert.notEqual(new URL(page.url()).port, new URL(gw.base).port);
  await page.locator("#username").fill("carol");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#who", { hasText: "org acme · oauth:carol (approver)" }).waitFor();
  await page.locator("#status.live").waitFor();
  step("an approver signs in through the identity provider's own page");

  const call = await toolCall(gw, gw.keys.acme, "sso-1", "send_email", { to: "ceo@example.com", subject: "hi" });
  assert.equal(call.status, 202, JSON.stringify(call.body));
  const held = page.locator(`#approvals li[data-approval="${call.body.approval_id}"]`);
  await held.waitFor();
  await held.getByRole("button", { name: /^Approve send_email/ }).click();
  await held.waitFor({ state: "detached" });
  const approval = await adminGet(gw, gw.keys.acmeAdmin, `/v1/approvals/${call.body.approval_id}`);
  assert.equal(approval.state, "approved");
  assert.equal(approval.decided_by, "oauth:carol");
  step("the signed-in approver approves a held call, and the approval names her");

  await page.getByRole("button", { name: "Sign out" }).click();
  await page.locator("#login").waitFor();
  await page.reload();
  await page.locator("#login").waitFor();
  assert.equal(await page.locator("#main").isHidden(), true);
  step("signing out ends the session: a reload asks again");
}

try {
  await main();
  console.log("dashboard browser test: passed");
} catch (error) {
  console.error("dashboard browser test: FAILED");
  console.error(error);
  if (consoleErrors.length) console.error(consoleErrors.join("\n"));
  process.exitCode = 1;
} finally {
  for (const cleanup of cleanups) await Promise.resolve().then(cleanup).catch(() => {});
}
