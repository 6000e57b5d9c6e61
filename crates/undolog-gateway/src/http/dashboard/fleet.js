// The dashboard's fleet views, beside app.js (whose `state`, `api`, `el`, `badge` and `json` they
// use): the last hour drawn from the gateway's own counting (GET /v1/overview) as SVG, the tool
// catalog (GET /v1/tools), filters and pages for sessions and effects, and resolving in-doubt
// effects.
"use strict";

const PAGE_SIZE = 20;
const SVG_NS = "http://www.w3.org/2000/svg";
// The overview's outcomes, in the order the chart stacks them.
const OUTCOMES = ["executed", "replayed", "held", "failed", "rejected"];

const fleet = {
  pages: { sessions: 0, effects: 0 },
  overviewAt: 0, // when the overview was last read (it is read at most every few seconds)
};

// ---- filters and pages ---------------------------------------------------------------------

function setupFleet() {
  for (const id of ["session-search", "session-state", "since"]) {
    $(id).addEventListener("input", () => { fleet.pages.sessions = 0; renderSessions(); });
  }
  for (const id of ["effect-tool", "effect-tier", "effect-state"]) {
    $(id).addEventListener("input", () => { fleet.pages.effects = 0; renderEffects(); });
  }
  for (const list of ["sessions", "effects"]) {
    $(`${list}-prev`).addEventListener("click", () => turnPage(list, -1));
    $(`${list}-next`).addEventListener("click", () => turnPage(list, 1));
  }
}

function turnPage(list, by) {
  fleet.pages[list] = Math.max(0, fleet.pages[list] + by);
  if (list === "sessions") renderSessions(); else renderEffects();
}

// Updated within the chosen time, or always.
function recent(ms) {
  const minutes = Number($("since").value);
  return !minutes || ms >= Date.now() - minutes * 60_000;
}

function filterSessions(sessions) {
  const text = $("session-search").value.trim().toLowerCase();
  const wanted = $("session-state").value;
  return sessions.filter((s) =>
    (!text || s.id.toLowerCase().includes(text)) && (!wanted || s.state === wanted) && recent(s.updated_at));
}

function filterEffects(effects) {
  const tool = $("effect-tool").value.trim().toLowerCase();
  const tier = $("effect-tier").value;
  const wanted = $("effect-state").value;
  return effects.filter((e) =>
    (!tool || e.tool.toLowerCase().includes(tool)) && (!tier || e.tier === tier) &&
    (!wanted || e.state === wanted) && recent(e.updated_at));
}

// The page of `items` shown for `list`, and the pager under it updated.
function pageOf(items, list) {
  const pages = Math.max(1, Math.ceil(items.length / PAGE_SIZE));
  fleet.pages[list] = Math.min(fleet.pages[list], pages - 1);
  const page = fleet.pages[list];
  $(`${list}-pager`).hidden = items.length <= PAGE_SIZE;
  $(`${list}-page`).textContent = `${page + 1} of ${pages} (${items.length})`;
  $(`${list}-prev`).disabled = page === 0;
  $(`${list}-next`).disabled = page >= pages - 1;
  return items.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
}

// ---- the last hour -------------------------------------------------------------------------

async function loadOverview(force) {
  if (!force && Date.now() - fleet.overviewAt < 3_000) return;
  fleet.overviewAt = Date.now();
  const overview = await api("GET", "/v1/overview");
  const latest = overview.minutes.length ? overview.minutes[overview.minutes.length - 1] : null;
  const thisMinute = latest && latest.at >= Math.floor(Date.now() / 60_000) * 60_000
    ? OUTCOMES.reduce((sum, o) => sum + latest[o], 0) : 0;
  const ms = (v) => (v === null || v === undefined ? "—" : v < 1 ? `${v} ms` : `≤ ${v} ms`);
  const tiles = [
    ["calls this hour", overview.calls],
    ["calls this minute", thisMinute],
    ["p50 / p99", `${ms(overview.p50_ms)} / ${ms(overview.p99_ms)}`],
    ["replay ratio", overview.replay_ratio === null ? "—" : `${Math.round(overview.replay_ratio * 100)}%`],
    ["approvals waiting", overview.approvals_waiting],
  ];
  $("tiles").replaceChildren(...tiles.map(([label, value]) =>
    el("div", { class: "tile", "data-tile": label },
      el("span", { class: "tile-value", text: value }), el("span", { class: "tile-label", text: label }))));
  drawCalls(overview.minutes);
  $("overview-note").textContent = `Counted by ${overview.counted_by}.`;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  return node;
}

// Calls per minute over the last 30 minutes, stacked by outcome.
function drawCalls(minutes) {
  const chart = $("calls-chart");
  const width = 600, height = 90, slots = 30;
  const now = Math.floor(Date.now() / 60_000);
  const byMinute = new Map(minutes.map((m) => [m.at / 60_000, m]));
  const totals = [];
  for (let i = 0; i < slots; i += 1) {
    const m = byMinute.get(now - slots + 1 + i);
    totals.push(m ? OUTCOMES.reduce((sum, o) => sum + m[o], 0) : 0);
  }
  const top = Math.max(1, ...totals);
  const bar = width / slots;
  chart.setAttribute("viewBox", `0 0 ${width} ${height + 14}`);
  const title = chart.querySelector("title");
  chart.replaceChildren(title);
  chart.append(svg("line", { x1: 0, y1: height, x2: width, y2: height, class: "axis" }));
  for (let i = 0; i < slots; i += 1) {
    const m = byMinute.get(now - slots + 1 + i);
    if (!m) continue;
    let y = height;
    for (const outcome of OUTCOMES) {
      if (!m[outcome]) continue;
      const h = (m[outcome] / top) * (height - 4);
      y -= h;
      const rect = svg("rect", { x: i * bar + 1, y, width: bar - 2, height: h, class: `bar ${outcome}` });
      rect.append(svg("title", {}));
      rect.firstChild.textContent = `${m[outcome]} ${outcome}`;
      chart.append(rect);
    }
  }
  const label = (x, text, anchor) => {
    const node = svg("text", { x, y: height + 12, "text-anchor": anchor, class: "chart-label" });
    node.textContent = text;
    return node;
  };
  chart.append(label(0, "30 min ago", "start"), label(width, `now · peak ${top}/min`, "end"));
  $("chart-legend").replaceChildren(...OUTCOMES.map((o) =>
    el("span", { class: "legend" }, el("span", { class: `swatch ${o}` }), o)));
}

// ---- the tool catalog ----------------------------------------------------------------------

async function loadCatalog() {
  const tools = await api("GET", "/v1/tools");
  $("catalog-empty").hidden = tools.length > 0;
  $("catalog").hidden = tools.length === 0;
  $("catalog-rows").replaceChildren(...tools.map((t) => {
    const undo = t.compensation
      ? el("span", {}, el("span", { class: "mono", text: t.compensation.tool || t.compensation.kind }), " ",
        el("pre", { text: json(t.compensation.args) }))
      : el("span", { class: "meta", text: t.tier === "compensable" ? "none configured" : "—" });
    return el("tr", { "data-tool": t.name },
      el("td", { class: "mono", text: t.name }),
      el("td", {}, badge(t.tier), t.requires_approval ? " " : null,
        t.requires_approval ? badge("requires approval", "awaiting_approval") : null),
      el("td", { text: t.why, "data-source": t.tier_source }),
      el("td", {}, el("span", { class: "mono", text: t.upstream }),
        t.upstream_tool !== t.name ? ` (${t.upstream_tool})` : ""),
      el("td", {}, undo));
  }));
}

// ---- in doubt: resolved by a person --------------------------------------------------------

// The controls that record what really happened to an in-doubt effect (admin).
function resolveControls(effect) {
  const outcome = el("select", { "aria-label": `What happened to ${effect.tool} #${effect.seq}` },
    el("option", { value: "failed", text: "it did not happen" }),
    el("option", { value: "committed", text: "it happened" }));
  const detail = el("input", {
    type: "text", "aria-label": "Why it failed, or its result as JSON", placeholder: "why it failed",
  });
  outcome.addEventListener("input", () => {
    detail.placeholder = outcome.value === "failed" ? "why it failed" : "its result as JSON ({} if none)";
  });
  const error = el("p", { class: "error", role: "alert" });
  const button = el("button", { type: "button", text: "Resolve" });
  button.addEventListener("click", async () => {
    error.textContent = "";
    let body;
    if (outcome.value === "failed") {
      if (!detail.value.trim()) { error.textContent = "Say why it failed."; detail.focus(); return; }
      body = { outcome: "failed", error: detail.value.trim() };
    } else {
      try { body = { outcome: "committed", result: JSON.parse(detail.value.trim() || "{}") }; } catch {
        error.textContent = "The result is not JSON."; detail.focus(); return;
      }
    }
    try {
      await api("POST", `/v1/effects/${encodeURIComponent(effect.id)}/resolve`, body);
      await loadInDoubt();
      if (state.selected === effect.session) await loadEffects();
    } catch (e) {
      error.textContent = e.message;
    }
  });
  return el("div", { class: "resolve" }, outcome, detail, button, error);
}
