// Deciding from a notification's link (`/?link=TOKEN`), beside app.js (whose `api`, `$`,
// `fmtTime` and `loadApprovals` it uses): the token is kept through sign-in, and what it asks is
// shown for confirmation; nothing is decided until the person confirms.
"use strict";

// An approve or deny link being followed: kept while the person signs in.
const LINK_STORAGE = "undolog.link";

// `/?link=TOKEN`: the token is kept for after sign-in and taken off the address bar.
function keepLink() {
  const url = new URL(location.href);
  const token = url.searchParams.get("link");
  if (!token) return;
  sessionStorage.setItem(LINK_STORAGE, token);
  url.searchParams.delete("link");
  history.replaceState(null, "", url.pathname + url.search + url.hash);
}

// Shows what the kept link asks; nothing is decided until the person confirms.
async function askLink() {
  const token = sessionStorage.getItem(LINK_STORAGE);
  if (!token) return;
  $("link-error").textContent = "";
  $("link-reason").value = "";
  let view;
  try {
    view = await api("GET", `/v1/links/${encodeURIComponent(token)}`);
  } catch (e) {
    if (e instanceof AuthError) throw e;
    return showLinkRefused("This link cannot be used", e.message);
  }
  if (view.approval.state !== "pending") {
    const by = view.approval.decided_by
      ? ` by ${view.approval.decided_by}${view.approval.decided_via ? ` through ${view.approval.decided_via}` : ""}`
      : "";
    return showLinkRefused("This call was already decided",
      `${view.tool} was already decided: ${view.approval.state}${by}.`);
  }
  const approve = view.decision === "approve";
  $("link-dialog-title").textContent = approve ? "Approve this call?" : "Deny this call?";
  $("link-dialog-text").textContent =
    `${view.tool} (${view.tier.replaceAll("_", " ")}) in session ${view.approval.session}, ` +
    `requested by ${view.approval.requested_by || "unknown"} at ${fmtTime(view.approval.requested_at)}; ` +
    `the request expires at ${fmtTime(view.approval.expires_at)}. It waits because ${view.reason}.`;
  $("link-dialog-args").textContent = JSON.stringify(view.arguments, null, 2);
  $("link-reason-need").textContent = approve ? "(optional)" : "(the agent is told)";
  $("link-reason").required = !approve;
  $("link-confirm").textContent = approve ? "Approve" : "Deny";
  $("link-confirm").className = approve ? "" : "danger";
  $("link-confirm").hidden = false;
  openLinkDialog();
}

// The link is spent or refused: said, with nothing to confirm.
function showLinkRefused(title, text) {
  sessionStorage.removeItem(LINK_STORAGE);
  $("link-dialog-title").textContent = title;
  $("link-dialog-text").textContent = text;
  $("link-dialog-args").textContent = "";
  $("link-confirm").hidden = true;
  openLinkDialog();
}

function openLinkDialog() {
  if (!$("link-dialog").open) $("link-dialog").showModal();
}

async function onLinkSubmit(event) {
  const token = sessionStorage.getItem(LINK_STORAGE);
  if (event.submitter && event.submitter.value !== "confirm") {
    sessionStorage.removeItem(LINK_STORAGE);
    return; // the dialog closes
  }
  event.preventDefault();
  const reason = $("link-reason").value.trim();
  try {
    const decided = await api("POST", `/v1/links/${encodeURIComponent(token)}`, reason ? { reason } : {});
    sessionStorage.removeItem(LINK_STORAGE);
    $("link-dialog").close();
    setStatus(`Approval ${decided.id} ${decided.state}`, "live");
    await loadApprovals();
  } catch (e) {
    $("link-error").textContent = e.message;
  }
}
