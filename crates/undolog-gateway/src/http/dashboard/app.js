// The UndoLog dashboard. Live through `GET /events` (EventSource, no polling): each event is shown
// in the log and triggers a reload of what it changed, through the authenticated admin API.
"use strict";

const KEY_STORAGE = "undolog.apiKey";

const state = {
  key: sessionStorage.getItem(KEY_STORAGE),
  csrf: null, // a signed-in dashboard's token for requests that change something (cookie sessions)
  selected: null, // session id
  sessions: [],
  effects: [],
  inDoubt: new Set(),
  replays: new Map(), // effect id -> replays seen since the page opened
  tools: new Map(), // effect id -> tool, from effect_intercepted, for the event log
  source: null,
  undoing: null, // session id being undone
  progressFor: null, // session whose undo progress is shown
  approvalsShown: null, // ids of the approvals on screen, to leave an unchanged list alone
  refreshTimer: null,
  dirty: { sessions: false, effects: false, approvals: false },
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class AuthError extends Error {}

// Requests on their way, so that signing out ends the session only once they are answered.
const inFlight = new Set();

async function api(method, path, body) {
  const request = send(method, path, body);
  inFlight.add(request);
  try {
    return await request;
  } finally {
    inFlight.delete(request);
  }
}

async function send(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.key) headers.Authorization = `Bearer ${state.key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state.csrf && method !== "GET") headers["X-UndoLog-CSRF"] = state.csrf;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  if (response.status === 401) throw new AuthError((data && data.error) || "the key was refused");
  if (!response.ok) throw new Error((data && data.error) || `${method} ${path}: ${response.status}`);
  return data;
}

function fmtTime(ms) {
  if (ms === null || ms === undefined) return "";
  const date = new Date(ms);
  const time = date.toLocaleTimeString([], { hour12: false });
  return date.toDateString() === new Date().toDateString()
    ? time : `${date.toLocaleDateString()} ${time}`;
}

function fmtDuration(effect) {
  if (effect.completed_at === null || effect.completed_at === undefined) return "—";
  const ms = effect.completed_at - effect.created_at;
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// JSON on as few lines as the column allows: `{ "amount": 25, "to": "bob" }`.
function json(value) {
  return value === null || value === undefined ? "" : JSON.stringify(value, null, 1).replace(/\s*\n\s*/g, " ");
}

// What a person wants of a tool result: its structured content, else its text, else all of it.
function resultSummary(result) {
  if (result === null || result === undefined || typeof result !== "object") return json(result);
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    return json(result.structuredContent);
  }
  if (Array.isArray(result.content)) {
    const texts = result.content.filter((c) => c && c.type === "text").map((c) => c.text);
    if (texts.length === result.content.length) return texts.join("\n");
  }
  return json(result);
}

function badge(text, cls) {
  return el("span", { class: `badge ${cls || text}`, text: text.replaceAll("_", " ") });
}

function setStatus(text, cls) {
  const status = $("status");
  status.textContent = text;
  status.className = `status ${cls || ""}`;
}

// ---- start, key, sign-out ------------------------------------------------------------------

async function start() {
  keepLink();
  $("link-form").addEventListener("submit", onLinkSubmit);
  $("login-form").addEventListener("submit", onLogin);
  $("sign-out").addEventListener("click", signOut);
  $("undo").addEventListener("click", askUndo);
  $("export").addEventListener("click", exportSession);
  setupFleet();
  $("undo-dialog").addEventListener("close", onUndoDialogClose);
  try {
    const mode = await api("GET", "/v1/auth");
    $("sign-in").hidden = !mode.sign_in;
    if (mode.sign_in) $("sign-in").href = mode.sign_in;
    // Signed in through the identity provider: the cookie stands for the credentials.
    if (mode.api_key_required && !state.key && !mode.signed_in) return showLogin("");
    await enter();
  } catch (e) {
    if (e instanceof AuthError) {
      sessionStorage.removeItem(KEY_STORAGE);
      state.key = null;
      return showLogin("The saved key was refused; enter another.");
    }
    setStatus(`Cannot reach the gateway: ${e.message}`, "down");
  }
}

function showLogin(message) {
  stopEvents();
  $("main").hidden = true;
  $("who").hidden = true;
  $("sign-out").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  setStatus("Signed out", "down");
  $("key").focus();
}

async function onLogin(event) {
  event.preventDefault();
  const key = $("key").value.trim();
  if (!key) return;
  state.key = key;
  try {
    await enter();
    sessionStorage.setItem(KEY_STORAGE, key);
    $("key").value = "";
  } catch (e) {
    state.key = null;
    showLogin(e instanceof AuthError ? "That key was refused; check it and try again." : e.message);
  }
}

async function signOut() {
  stopEvents();
  clearTimeout(state.refreshTimer);
  state.refreshTimer = null;
  if (state.csrf) {
    // Nothing asks with the cookie after it ends: what is on its way is answered first.
    await Promise.allSettled([...inFlight]);
    await api("POST", "/v1/auth/logout", {}).catch(() => null);
    state.csrf = null;
  }
  sessionStorage.removeItem(KEY_STORAGE);
  state.key = null;
  state.selected = null;
  state.approvalsShown = null;
  showLogin("");
}

async function enter() {
  const me = await api("GET", "/v1/whoami");
  $("login").hidden = true;
  $("main").hidden = false;
  $("who").hidden = false;
  state.csrf = me.csrf || null;
  $("who").textContent = state.csrf ? `org ${me.org} · ${me.principal} (${me.role})` : `org ${me.org}`;
  $("sign-out").textContent = state.csrf ? "Sign out" : "Forget key";
  $("sign-out").hidden = !state.key && !state.csrf;
  startEvents();
  await Promise.all([loadSessions(), loadApprovals(), loadInDoubt(), loadOverview(true), loadCatalog()]);
  await askLink();
}

// ---- live events ---------------------------------------------------------------------------

const EVENT_NAMES = [
  "effect_intercepted", "effect_committed", "effect_failed", "effect_replayed",
  "approval_required", "approval_decided", "compensation_step", "session_changed", "lagged",
];

function startEvents() {
  stopEvents();
  const url = state.key ? `/events?access_token=${encodeURIComponent(state.key)}` : "/events";
  const source = new EventSource(url);
  state.source = source;
  let reconnecting = false;
  source.onopen = () => {
    setStatus("Live", "live");
    if (reconnecting) {
      // Events sent while the stream was down are gone: reload everything once.
      state.dirty = { sessions: true, effects: true, approvals: true };
      scheduleRefresh();
    }
    reconnecting = false;
  };
  source.onerror = () => {
    reconnecting = true;
    setStatus(
      source.readyState === EventSource.CLOSED ? "Disconnected; reload the page" : "Reconnecting…",
      "down",
    );
  };
  for (const name of EVENT_NAMES) {
    source.addEventListener(name, (message) => {
      let data = {};
      try { data = JSON.parse(message.data); } catch { /* keep the name */ }
      onEvent(name, data);
    });
  }
}

function stopEvents() {
  if (state.source) state.source.close();
  state.source = null;
}

function onEvent(name, data) {
  logEvent(name, data);
  if (name === "effect_replayed") {
    // The gateway counts since it started; the page, since it opened: the larger is shown.
    const seen = (state.replays.get(data.effect_id) || 0) + 1;
    state.replays.set(data.effect_id, Math.max(seen, data.replays || 0));
  }
  if (name === "compensation_step" && data.session === state.progressFor) {
    const effect = state.effects.find((e) => e.id === data.effect_id);
    const what = effect ? `${effect.tool} #${effect.seq}` : data.effect_id;
    $("undo-steps").append(el("li", {
      text: `${what}: ${data.compensated ? "compensated" : "compensation failed"}`,
    }));
  }
  const touchesSelected = data.session === state.selected;
  const dirty = state.dirty;
  switch (name) {
    case "lagged":
      dirty.sessions = dirty.effects = dirty.approvals = true;
      break;
    case "approval_required":
    case "approval_decided":
      dirty.approvals = true;
      dirty.sessions = true;
      dirty.effects = touchesSelected;
      break;
    default:
      dirty.sessions = true;
      dirty.effects = dirty.effects || touchesSelected;
  }
  scheduleRefresh();
}

// Events come in bursts (intercepted, committed...): one reload per burst.
function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(async () => {
    state.refreshTimer = null;
    const { sessions, effects, approvals } = state.dirty;
    state.dirty = { sessions: false, effects: false, approvals: false };
    try {
      const work = [loadInDoubt(), loadOverview(false)];
      if (sessions) work.push(loadSessions());
      if (effects && state.selected) work.push(loadEffects());
      if (approvals) work.push(loadApprovals());
      await Promise.all(work);
    } catch (e) {
      if (e instanceof AuthError) showLogin("The key stopped working; enter another.");
    }
  }, 80);
}

function logEvent(name, data) {
  $("events-empty").hidden = true;
  if (data.effect_id && data.tool) state.tools.set(data.effect_id, data.tool);
  const detail = [];
  const tool = data.tool || state.tools.get(data.effect_id);
  if (tool) detail.push(tool);
  if (data.tier) detail.push(data.tier.replaceAll("_", " "));
  if (data.replays !== undefined) detail.push(`replay ${data.replays}`);
  if (data.reason) detail.push(data.reason);
  if (name === "approval_required" && data.arguments !== undefined) detail.push(json(data.arguments));
  if (data.state) detail.push(data.state);
  if (data.approved !== undefined) detail.push(data.approved ? "approved" : "denied");
  if (data.compensated !== undefined) detail.push(data.compensated ? "compensated" : "failed");
  if (data.error) detail.push(data.error);
  if (data.missed !== undefined) detail.push(`missed ${data.missed}; reloaded`);
  const list = $("events");
  list.prepend(el("li", { "data-event": name },
    el("time", { text: fmtTime(Date.now()) }),
    el("span", { class: "mono", text: name }),
    el("span", { text: data.session || "" }),
    el("span", { text: detail.join(" · ") }),
  ));
  while (list.children.length > 200) list.lastElementChild.remove();
}

// ---- sessions ------------------------------------------------------------------------------

async function loadSessions() {
  state.sessions = await api("GET", "/v1/sessions");
  renderSessions();
}

function renderSessions() {
  const list = $("sessions");
  $("sessions-empty").hidden = state.sessions.length > 0;
  const newestFirst = [...state.sessions].sort((a, b) => b.updated_at - a.updated_at);
  const shown = pageOf(filterSessions(newestFirst), "sessions");
  const focused = document.activeElement && document.activeElement.dataset.session;
  list.replaceChildren(...shown.map((s) => {
    const item = el("li", { class: s.id === state.selected ? "selected" : "" },
      el("button", {
        type: "button", class: "link", "data-session": s.id,
        "aria-current": s.id === state.selected ? "true" : false,
        onclick: () => selectSession(s.id),
      },
      el("span", { class: "mono", text: s.id }), " ", badge(s.state),
      el("span", { class: "meta", text: `${s.next_seq} effect(s) · updated ${fmtTime(s.updated_at)}` })));
    return item;
  }));
  if (focused) {
    const again = list.querySelector(`[data-session="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
  renderDetailHead();
}

async function selectSession(id) {
  state.selected = id;
  if (state.progressFor !== id) {
    state.progressFor = null;
    $("undo-progress").hidden = true;
  }
  renderSessions();
  await loadEffects();
}

function renderDetailHead() {
  const session = state.sessions.find((s) => s.id === state.selected);
  const title = $("detail-title");
  const undo = $("undo");
  $("export").hidden = !session;
  if (!session) {
    title.textContent = "Session";
    undo.hidden = true;
    return;
  }
  title.replaceChildren("Session ", el("span", { class: "mono", text: session.id }), " ", badge(session.state));
  undo.hidden = false;
  undo.disabled = ["compensating", "compensated"].includes(session.state) || state.undoing !== null;
}

// The session's whole history as one JSON file (undolog.session-snapshot.v1), saved by the browser.
async function exportSession() {
  const id = state.selected;
  try {
    const snapshot = await api("GET", `/v1/sessions/${encodeURIComponent(id)}/export`);
    const blob = new Blob([JSON.stringify(snapshot, null, 2)], { type: "application/json" });
    const link = el("a", { href: URL.createObjectURL(blob), download: `undolog-session-${id}.json` });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  } catch (e) {
    setStatus(`Export failed: ${e.message}`, "down");
  }
}

// ---- a session's effects -------------------------------------------------------------------

async function loadEffects() {
  const id = state.selected;
  const effects = await api("GET", `/v1/sessions/${encodeURIComponent(id)}/effects`);
  if (id !== state.selected) return;
  state.effects = effects;
  renderEffects();
}

function renderEffects() {
  $("detail-empty").hidden = true;
  $("effect-filters").hidden = false;
  $("timeline").hidden = false;
  $("effects").replaceChildren(...pageOf(filterEffects(state.effects), "effects").map((e) => {
    const doubt = state.inDoubt.has(e.id);
    const outcome = e.error !== null && e.error !== undefined
      ? el("span", { class: "error", text: e.error })
      : el("pre", { text: resultSummary(e.result), title: json(e.result) });
    const replays = state.replays.get(e.id) || 0;
    return el("tr", { class: doubt ? "in-doubt" : "", "data-effect": e.id, "data-tool": e.tool },
      el("td", { text: e.seq }),
      el("td", { class: "mono", text: e.tool }),
      el("td", {}, badge(e.tier)),
      el("td", {}, badge(e.state), doubt ? " " : null,
        doubt ? el("span", { class: "badge doubt", title: "The executor vanished before the outcome was recorded; an operator must resolve it", text: "in doubt" }) : null),
      el("td", {}, el("pre", { text: json(e.args) })),
      el("td", {}, outcome),
      el("td", { class: "replays", text: replays ? `replayed ×${replays}` : "—" }),
      el("td", { text: fmtDuration(e), title: "from interception to the recorded outcome (includes any wait for approval)" }),
    );
  }));
}

async function loadInDoubt() {
  const effects = await api("GET", "/v1/effects/in_doubt");
  const before = state.inDoubt;
  state.inDoubt = new Set(effects.map((e) => e.id));
  const changed = before.size !== state.inDoubt.size || [...before].some((id) => !state.inDoubt.has(id));
  $("doubt-title").hidden = effects.length === 0;
  // Rebuilt only when the queue changed: what a person is typing into it stays.
  if (changed || $("in-doubt").children.length !== effects.length) {
    $("in-doubt").replaceChildren(...effects.map((e) => el("li", { "data-effect": e.id },
      el("span", { class: "badge doubt", text: "in doubt" }), " ",
      el("span", { class: "mono", text: `${e.tool} #${e.seq}` }), " in ",
      el("button", { type: "button", class: "link", onclick: () => selectSession(e.session), text: e.session }),
      el("pre", { text: json(e.args) }),
      resolveControls(e),
    )));
  }
  if (changed && state.selected) renderEffects();
}

// ---- approvals -----------------------------------------------------------------------------

async function loadApprovals() {
  const pending = await api("GET", "/v1/approvals?status=pending");
  const withEffects = await Promise.all(pending.map(async (a) => {
    try {
      return { approval: a, effect: await api("GET", `/v1/effects/${a.effect}`) };
    } catch {
      return { approval: a, effect: null };
    }
  }));
  renderApprovals(withEffects);
}

function renderApprovals(items) {
  const shown = items.map(({ approval }) => approval.id).join(" ");
  if (shown === state.approvalsShown) return; // leave focus and typing alone
  state.approvalsShown = shown;
  $("approvals-empty").hidden = items.length > 0;
  $("approvals-count").textContent = items.length ? `(${items.length})` : "";
  const list = $("approvals");
  const keep = list.contains(document.activeElement) ? document.activeElement : null;
  const keepLabel = keep && (keep.getAttribute("aria-label") || keep.id);
  const keepReasons = new Map([...list.querySelectorAll("input[data-reason]")]
    .map((input) => [input.dataset.reason, input.value]));
  list.replaceChildren(...items.map(({ approval, effect }) => {
    const reasonId = `reason-${approval.id}`;
    const reason = el("input", {
      type: "text", id: reasonId, "data-reason": approval.id, placeholder: "why not",
      "aria-describedby": `hint-${approval.id}`,
    });
    reason.value = keepReasons.get(approval.id) || "";
    const message = el("p", { class: "error", id: `hint-${approval.id}`, role: "alert" });
    const tool = effect ? effect.tool : "a call";
    return el("li", { "data-approval": approval.id },
      el("div", { class: "what" }, el("span", { class: "mono", text: tool }), " in ",
        el("span", { class: "mono", text: approval.session })),
      effect ? el("pre", { text: json(effect.args) }) : null,
      el("div", { class: "meta", text: `requested ${fmtTime(approval.requested_at)} · expires ${fmtTime(approval.expires_at)}` }),
      el("div", { class: "actions" },
        el("button", {
          type: "button", "aria-label": `Approve ${tool} in ${approval.session}`, text: "Approve",
          onclick: (ev) => decide(approval.id, "approve", null, ev.currentTarget, message),
        }),
      ),
      el("div", { class: "actions" },
        el("label", { for: reasonId, text: "Reason" }),
        reason,
        el("button", {
          type: "button", class: "secondary", "aria-label": `Deny ${tool} in ${approval.session}`, text: "Deny",
          onclick: (ev) => {
            const why = reason.value.trim();
            if (!why) {
              message.textContent = "A denial needs a reason; the agent sees it.";
              reason.focus();
              return;
            }
            decide(approval.id, "deny", why, ev.currentTarget, message);
          },
        }),
      ),
      message,
    );
  }));
  if (keep) {
    const again = [...list.querySelectorAll("button, input")]
      .find((node) => (node.getAttribute("aria-label") || node.id) === keepLabel);
    if (again) again.focus();
    else $("approvals-title").focus();
  }
}

async function decide(id, verdict, reason, button, message) {
  button.disabled = true;
  try {
    await api("POST", `/v1/approvals/${id}/${verdict}`, reason ? { reason } : {});
    message.textContent = "";
  } catch (e) {
    message.textContent = e.message;
    button.disabled = false;
  }
  await loadApprovals().catch(() => {});
}

// ---- undo ----------------------------------------------------------------------------------

function askUndo() {
  const session = state.selected;
  if (!session) return;
  const compensable = state.effects.filter((e) => e.tier === "compensable" && e.state === "committed").length;
  const irreversible = state.effects.filter((e) => e.tier === "irreversible" && e.state === "committed").length;
  $("undo-dialog-text").textContent =
    `Session ${session}: ${compensable} compensable effect(s) will be undone, newest first, ` +
    `by running their compensations.` +
    (irreversible ? ` ${irreversible} irreversible effect(s) cannot be undone and will be reported.` : "");
  $("undo-dialog").returnValue = "";
  $("undo-dialog").showModal();
}

function onUndoDialogClose() {
  if ($("undo-dialog").returnValue === "confirm") runUndo(state.selected);
  else $("undo").focus();
}

async function runUndo(session) {
  state.undoing = session;
  state.progressFor = session;
  $("undo-progress").hidden = false;
  $("undo-steps").replaceChildren();
  $("undo-summary").textContent = "Undoing…";
  renderDetailHead();
  try {
    const report = await api("POST", `/v1/sessions/${encodeURIComponent(session)}/undo`, {});
    const notUndoable = report.not_undoable.length
      ? ` ${report.not_undoable.length} irreversible effect(s) could not be undone.` : "";
    $("undo-summary").textContent =
      `Session ${report.state.replaceAll("_", " ")}: ${report.steps.length} step(s).${notUndoable}`;
  } catch (e) {
    $("undo-summary").textContent = `Undo failed: ${e.message}`;
  } finally {
    state.undoing = null;
    await Promise.all([loadSessions(), loadEffects()]).catch(() => {});
    $("undo-summary").focus();
  }
}

document.addEventListener("DOMContentLoaded", start);
