// src/console/console.ts
function $(id) {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing`);
  return found;
}
var ui = {
  nav: $("nav"),
  live: $("live"),
  version: $("version"),
  pendingCount: $("pending-count"),
  gadgetLink: $("gadget-link"),
  logout: $("logout"),
  notice: $("notice"),
  noticeText: $("notice-text"),
  noticeClose: $("notice-close"),
  login: $("login"),
  loginForm: $("login-form"),
  token: $("token"),
  loginError: $("login-error"),
  gadgets: $("gadgets"),
  gadgetsEmpty: $("gadgets-empty"),
  phones: $("phones"),
  phonesEmpty: $("phones-empty"),
  pairingHermes: $("pairing-hermes"),
  pairingOwn: $("pairing-own"),
  pending: $("pending"),
  pendingEmpty: $("pending-empty"),
  approved: $("approved"),
  approvedEmpty: $("approved-empty"),
  deviceTitle: $("device-title"),
  deviceGone: $("device-gone"),
  deviceFacts: $("device-facts"),
  events: $("events"),
  eventsEmpty: $("events-empty"),
  sendForm: $("send-form"),
  sendText: $("send-text"),
  cardForm: $("card-form"),
  cardTitle: $("card-title"),
  cardBody: $("card-body"),
  cardSeconds: $("card-seconds"),
  actionBox: $("action-box"),
  actionForm: $("action-form"),
  actionName: $("action-name"),
  actionAbout: $("action-about"),
  actionArgs: $("action-args"),
  actionResult: $("action-result"),
  ownerBox: $("owner-box"),
  ownerForm: $("owner-form"),
  ownerName: $("owner-name"),
  ownerClear: $("owner-clear"),
  ownerError: $("owner-error"),
  people: $("people"),
  deviceResult: $("device-result"),
  forget: $("forget"),
  stopNotifications: $("stop-notifications"),
  otaForm: $("ota-form"),
  otaDevice: $("ota-device"),
  otaFile: $("ota-file"),
  otaError: $("ota-error"),
  otaChecked: $("ota-checked"),
  otaSummary: $("ota-summary"),
  checks: $("checks"),
  otaPush: $("ota-push"),
  updates: $("updates"),
  updatesEmpty: $("updates-empty"),
  history: $("history"),
  stats: $("stats"),
  statsOta: $("stats-ota"),
  serverVersion: $("server-version"),
  serverData: $("server-data")
};
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) {
    if (child === null || child === void 0 || child === false) continue;
    node.append(child);
  }
  return node;
}
function button(label, onClick, className = "") {
  const b = el("button", { type: "button" }, label);
  if (className) b.className = className;
  b.addEventListener("click", onClick);
  return b;
}
function fillBody(table, rows, empty) {
  const body = table.tBodies[0];
  if (!body) return;
  body.replaceChildren(...rows);
  if (empty) empty.hidden = rows.length > 0;
}
function ago(ms) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1e3));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleString();
}
function bytes(n) {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}
function percent(u) {
  return u.size > 0 ? Math.min(100, Math.floor(u.bytes_sent * 100 / u.size)) : 0;
}
function sensorsText(sensors) {
  return Object.entries(sensors).map(([k, v]) => `${k}=${String(v)}`).join(", ");
}
var noticeTimer;
function notify(text, kind = "error") {
  ui.noticeText.textContent = text;
  ui.notice.dataset["kind"] = kind;
  ui.notice.hidden = false;
  clearTimeout(noticeTimer);
  if (kind === "ok") noticeTimer = setTimeout(() => ui.notice.hidden = true, 6e3);
}
ui.noticeClose.addEventListener("click", () => ui.notice.hidden = true);
var ApiFailure = class extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
};
var csrf = null;
async function api(method, path, body) {
  const headers = {};
  let payload;
  if (method !== "GET" && csrf) headers["X-Herald-CSRF"] = csrf;
  if (body instanceof Blob) {
    payload = body;
    headers["Content-Type"] = "application/octet-stream";
  } else if (body !== void 0) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    const init = { method, headers, credentials: "same-origin" };
    if (payload !== void 0) init.body = payload;
    response = await fetch(path, init);
  } catch {
    throw new ApiFailure(0, "herald did not answer: is it still running?");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const said2 = data?.error;
    const message = typeof said2 === "string" ? said2 : `${response.status} ${response.statusText}`;
    if (response.status === 401 && path !== "/v1/login") loggedOut(message);
    throw new ApiFailure(response.status, message);
  }
  return data;
}
function failedIn(where, err) {
  if (err instanceof ApiFailure && err.status === 401) return;
  where.textContent = err instanceof Error ? err.message : String(err);
}
async function attempt(what) {
  try {
    await what();
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) return;
    notify(err instanceof Error ? err.message : String(err));
  }
}
var state = {
  devices: [],
  phones: [],
  pairing: null,
  ota: [],
  stats: null,
  server: null,
  /** Herald approves pairings itself (false: Hermes does). */
  ownPairing: true
};
var events = null;
function connectLive() {
  events?.close();
  const source = new EventSource("/v1/events");
  events = source;
  ui.live.textContent = "Connecting…";
  ui.live.dataset["state"] = "connecting";
  source.addEventListener("open", () => {
    ui.live.textContent = "Live";
    ui.live.dataset["state"] = "live";
  });
  source.addEventListener("error", () => {
    ui.live.textContent = "Reconnecting…";
    ui.live.dataset["state"] = "down";
    void api("GET", "/v1/session").catch(() => void 0);
  });
  const on = (name, apply) => source.addEventListener(name, (e) => {
    try {
      apply(JSON.parse(e.data));
    } catch (err) {
      console.error(`bad ${name} event`, err);
    }
  });
  on("devices", (d) => {
    state.devices = d;
    drawDevices();
    drawPeople();
    drawFirmwareDevices();
    refreshDevice(false);
  });
  on("phones", (p) => {
    state.phones = p;
    drawDevices();
    drawPeople();
    refreshDevice(false);
  });
  on("pairing", (p) => {
    state.pairing = p;
    drawPairing();
  });
  on("ota", (o) => {
    state.ota = o;
    drawUpdates();
    refreshDevice(false);
  });
  on("stats", (s) => {
    state.stats = s;
    drawStats();
  });
  on("conversation", (c) => {
    if (current.view === "device" && current.platform === c.platform && current.id === c.id) addEvent(c.event);
  });
  on("problem", (p) => notify(`The live view could not look: ${p.error}`));
}
function loggedOut(message) {
  events?.close();
  events = null;
  csrf = null;
  ui.nav.hidden = true;
  ui.live.textContent = "";
  delete ui.live.dataset["state"];
  show("login");
  if (message) ui.loginError.textContent = /session ended/.test(message) ? message : "";
  ui.token.focus();
}
async function loggedIn(session) {
  csrf = session.csrf;
  state.ownPairing = session.pairing;
  ui.nav.hidden = false;
  ui.loginError.textContent = "";
  ui.token.value = "";
  connectLive();
  await attempt(loadServer);
  route();
}
ui.loginForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const token = ui.token.value.trim();
  ui.loginError.textContent = "";
  void (async () => {
    try {
      const session = await api("POST", "/v1/login", { token });
      await loggedIn(session);
    } catch (err) {
      ui.loginError.textContent = err instanceof Error ? err.message : String(err);
      ui.token.select();
    }
  })();
});
var LINK = /^#login=([0-9A-Za-z]+)$/;
function redeemLink() {
  const code = LINK.exec(location.hash)?.[1];
  if (code === void 0) return false;
  history.replaceState(null, "", location.pathname + location.search);
  void (async () => {
    try {
      const session = await api("POST", "/v1/login", { code });
      await loggedIn(session);
    } catch (err) {
      loggedOut();
      ui.loginError.textContent = err instanceof Error ? err.message : String(err);
    }
  })();
  return true;
}
ui.logout.addEventListener(
  "click",
  () => void attempt(async () => {
    await api("DELETE", "/v1/session");
    loggedOut();
  })
);
var current = { view: "login", platform: "gadget", id: "" };
function show(view) {
  current.view = view;
  document.body.dataset["view"] = view;
  for (const section of document.querySelectorAll("main > section.view")) {
    section.hidden = section.id !== (view === "login" ? "login" : `view-${view}`);
  }
  for (const link of ui.nav.querySelectorAll("a[data-view]")) {
    if (link.dataset["view"] === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}
function route() {
  if (!csrf) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const [name = "devices", platform, id] = parts;
  switch (name) {
    case "pairing":
      show("pairing");
      drawPairing();
      break;
    case "firmware":
      show("firmware");
      drawFirmwareDevices();
      drawUpdates();
      void attempt(loadHistory);
      break;
    case "server":
      show("server");
      drawServer();
      drawStats();
      break;
    case "device":
      if ((platform === "gadget" || platform === "mobile") && id) {
        current.platform = platform;
        current.id = id;
        show("device");
        openDevice();
        break;
      }
      location.hash = "#/devices";
      break;
    default:
      show("devices");
      drawDevices();
  }
}
window.addEventListener("hashchange", () => {
  if (!redeemLink()) route();
});
function deviceLink(platform, id, label) {
  return el("a", { href: `#/device/${platform}/${encodeURIComponent(id)}` }, label);
}
function onlineCell(online) {
  return el("td", {}, el("span", { class: "state", "data-online": String(online) }, online ? "online" : "offline"));
}
function drawDevices() {
  fillBody(
    ui.gadgets,
    state.devices.map(
      (d) => el(
        "tr",
        { "data-id": d.id },
        el("td", {}, deviceLink("gadget", d.id, d.name ?? d.id), d.name ? el("div", { class: "hint" }, d.id) : null),
        onlineCell(d.online),
        el("td", {}, d.owner ?? "—"),
        el("td", {}, d.board ?? "—"),
        el("td", {}, d.firmware ?? "—"),
        el("td", {}, sensorsText(d.sensors) || "—"),
        el("td", {}, d.online ? "now" : ago(d.last_seen))
      )
    ),
    ui.gadgetsEmpty
  );
  fillBody(
    ui.phones,
    state.phones.map(
      (p) => el(
        "tr",
        { "data-id": p.id },
        el("td", {}, deviceLink("mobile", p.id, p.name ?? p.id), p.name ? el("div", { class: "hint" }, p.id) : null),
        onlineCell(p.online),
        el("td", {}, p.user_id),
        el("td", {}, p.platform ?? "—"),
        el("td", {}, p.notifications ? "on" : "off"),
        el("td", {}, p.online ? "now" : ago(p.last_seen))
      )
    ),
    ui.phonesEmpty
  );
}
function drawPeople() {
  const phones = /* @__PURE__ */ new Map();
  for (const p of state.phones) phones.set(p.user_id, [...phones.get(p.user_id) ?? [], p.name ?? p.id]);
  for (const d of state.devices) if (d.owner !== null && !phones.has(d.owner)) phones.set(d.owner, []);
  const options = [...phones.keys()].sort().map((person) => {
    const has = phones.get(person) ?? [];
    return el("option", has.length ? { value: person, label: `${person}: ${has.join(", ")}` } : { value: person });
  });
  ui.people.replaceChildren(...options);
}
var ownerFields = /* @__PURE__ */ new Map();
function ownerCell(p) {
  if (p.platform !== "gadget") return el("td", {}, "—");
  let input = ownerFields.get(p.user_id);
  if (!input) {
    input = el("input", { class: "owner", list: "people", autocomplete: "off", spellcheck: "false", placeholder: "nobody yet" });
    ownerFields.set(p.user_id, input);
  }
  return el("td", {}, el("label", {}, el("span", { class: "sr-only" }, `Owner of ${p.user_name ?? p.user_id}`), input));
}
function who(p) {
  const gadget = p.platform === "gadget" && state.devices.some((d) => d.id === p.user_id);
  const label = p.user_name ? `${p.user_name} (${p.user_id})` : p.user_id;
  return el("td", {}, gadget ? deviceLink("gadget", p.user_id, label) : label);
}
function drawPairing() {
  ui.pairingHermes.hidden = state.ownPairing;
  ui.pairingOwn.hidden = state.pairing === null;
  const pairings = state.pairing ?? [];
  const pending = pairings.filter((p) => p.approved_at === null);
  const approved = pairings.filter((p) => p.approved_at !== null);
  ui.pendingCount.textContent = String(pending.length);
  ui.pendingCount.hidden = pending.length === 0;
  for (const user of ownerFields.keys()) {
    if (!pending.some((p) => p.platform === "gadget" && p.user_id === user)) ownerFields.delete(user);
  }
  const typing = [...ownerFields.values()].find((input) => input === document.activeElement);
  const [start, end] = [typing?.selectionStart ?? null, typing?.selectionEnd ?? null];
  fillBody(
    ui.pending,
    pending.map(
      (p) => el(
        "tr",
        { "data-user": p.user_id },
        el("td", {}, p.platform),
        who(p),
        el("td", {}, el("code", {}, p.code ?? "—")),
        el("td", {}, ago(p.created_at)),
        ownerCell(p),
        el(
          "td",
          { class: "actions" },
          button("Approve", () => void approve(p)),
          button("Deny", () => void revoke(p, "Denied"), "danger")
        )
      )
    ),
    ui.pendingEmpty
  );
  if (typing?.isConnected) {
    typing.focus();
    typing.setSelectionRange(start, end);
  }
  fillBody(
    ui.approved,
    approved.map(
      (p) => el(
        "tr",
        { "data-user": p.user_id },
        el("td", {}, p.platform),
        who(p),
        el("td", {}, ago(p.approved_at)),
        el("td", { class: "actions" }, button("Revoke", () => void revoke(p, "Revoked"), "danger"))
      )
    ),
    ui.approvedEmpty
  );
}
async function approve(p) {
  await attempt(async () => {
    const body = p.code ? { platform: p.platform, code: p.code } : { platform: p.platform, user_id: p.user_id };
    const owner = p.platform === "gadget" ? ownerFields.get(p.user_id)?.value.trim() ?? "" : "";
    if (owner) body["owner"] = owner;
    await api("POST", "/v1/pairing/approve", body);
    notify(`Approved ${p.user_name ?? p.user_id}${owner ? ` for ${owner}` : ""}.`, "ok");
  });
}
async function revoke(p, done) {
  await attempt(async () => {
    await api("POST", "/v1/pairing/revoke", { platform: p.platform, user_id: p.user_id });
    notify(`${done} ${p.user_name ?? p.user_id}.`, "ok");
  });
}
var detail = null;
var shownSeq = /* @__PURE__ */ new Map();
var ownerShown;
function openDevice() {
  detail = null;
  shownSeq = /* @__PURE__ */ new Map();
  ui.events.replaceChildren();
  ui.deviceFacts.replaceChildren();
  ui.deviceGone.hidden = true;
  ui.deviceResult.textContent = "";
  ui.actionResult.textContent = "";
  ui.ownerError.textContent = "";
  ownerShown = void 0;
  ui.deviceTitle.textContent = current.id;
  refreshDevice(true);
}
var refreshing = false;
var refreshAgain = false;
function refreshDevice(force) {
  if (current.view !== "device") return;
  if (!force && detail === null) return;
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  const path = current.platform === "gadget" ? "/v1/devices/" : "/v1/phones/";
  const asked = `${current.platform}/${current.id}`;
  void api("GET", path + encodeURIComponent(current.id)).then((d) => {
    if (asked !== `${current.platform}/${current.id}`) return;
    detail = d;
    drawDevice(d);
  }).catch((err) => {
    if (err instanceof ApiFailure && err.status === 404) {
      ui.deviceGone.textContent = `${err.message}.`;
      ui.deviceGone.hidden = false;
      ui.deviceFacts.replaceChildren();
    } else if (!(err instanceof ApiFailure && err.status === 401)) {
      notify(err instanceof Error ? err.message : String(err));
    }
  }).finally(() => {
    refreshing = false;
    if (refreshAgain) {
      refreshAgain = false;
      refreshDevice(false);
    }
  });
}
function fact(name, value) {
  return [el("dt", {}, name), el("dd", {}, value)];
}
function isGadget(d) {
  return current.platform === "gadget" && "enrolled_at" in d;
}
function drawDevice(d) {
  ui.deviceGone.hidden = true;
  ui.deviceTitle.textContent = d.name ?? d.id;
  const facts = [
    ...fact("Id", el("code", {}, d.id)),
    ...fact("State", el("span", { class: "state", "data-online": String(d.online) }, d.online ? "online" : "offline")),
    ...fact("Paired", d.paired === null ? "ask Hermes" : d.paired ? "yes" : "no")
  ];
  if (isGadget(d)) {
    facts.push(
      ...fact("Owner", d.owner ?? "—"),
      ...fact("Board", d.board ?? "—"),
      ...fact("Firmware", d.firmware ?? "—"),
      ...fact("Sensors", sensorsText(d.sensors) || "—"),
      ...fact("Enrolled", ago(d.enrolled_at)),
      ...fact("Last seen", d.online ? "now" : ago(d.last_seen))
    );
    if (d.profile) facts.push(...fact("Speaker", d.profile.speaker_rate ? `${d.profile.speaker_rate} Hz` : "none"));
    if (d.ota) facts.push(...fact("Firmware update", `${d.ota.version}: ${d.ota.status}, ${percent(d.ota)}%`));
    drawActions(d.profile?.actions ?? [], d.online);
    drawOwner(d.owner);
  } else {
    facts.push(
      ...fact("User", d.user_id),
      ...fact("App", d.platform ?? "—"),
      ...fact("Notifications", d.notifications ? "on" : "off"),
      ...fact("Last seen", d.online ? "now" : ago(d.last_seen))
    );
    ui.actionBox.hidden = true;
    ui.ownerBox.hidden = true;
  }
  ui.forget.hidden = !isGadget(d);
  ui.stopNotifications.hidden = isGadget(d) || !d.notifications;
  ui.deviceFacts.replaceChildren(...facts);
  for (const event of d.events) addEvent(event);
  ui.eventsEmpty.hidden = shownSeq.size > 0;
}
function drawActions(actions, online) {
  ui.actionBox.hidden = false;
  const chosen = ui.actionName.value;
  ui.actionName.replaceChildren(...actions.map((a) => el("option", { value: a.name }, a.name)));
  if (actions.some((a) => a.name === chosen)) ui.actionName.value = chosen;
  const none = actions.length === 0;
  ui.actionName.disabled = none;
  const about = actions.find((a) => a.name === ui.actionName.value);
  ui.actionAbout.textContent = none ? online ? "This device offers no actions." : "Its actions show while it is online." : about?.description ?? "";
}
function drawOwner(owner) {
  ui.ownerBox.hidden = false;
  ui.ownerClear.disabled = owner === null;
  if (owner === ownerShown) return;
  ownerShown = owner;
  ui.ownerName.value = owner ?? "";
}
async function setOwner(owner) {
  const id = current.id;
  ui.ownerError.textContent = "";
  said("");
  try {
    const record = await api("PUT", `/v1/devices/${encodeURIComponent(id)}/owner`, { owner });
    if (detail && isGadget(detail) && detail.id === record.id) {
      detail.owner = record.owner;
      drawDevice(detail);
    }
    said(record.owner === null ? "It belongs to nobody in particular now." : `It belongs to ${record.owner} now.`);
  } catch (err) {
    failedIn(ui.ownerError, err);
  }
}
ui.ownerForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const owner = ui.ownerName.value.trim();
  if (owner) void setOwner(owner);
});
ui.ownerClear.addEventListener("click", () => void setOwner(null));
ui.actionName.addEventListener("change", () => {
  if (detail && isGadget(detail)) drawActions(detail.profile?.actions ?? [], detail.online);
});
var KIND = {
  message: "reply",
  transcript: "heard",
  card: "card",
  prompt: "question",
  withdrawn: "question withdrawn",
  voice: "voice",
  image: "picture",
  document: "file",
  notice: "notice",
  action: "action",
  turn_ended: "turn ended"
};
function addEvent(event) {
  const item = el(
    "li",
    { "data-seq": String(event.seq), "data-kind": event.kind },
    el("span", { class: "kind" }, KIND[event.kind] ?? event.kind),
    el("span", { class: "when" }, new Date(event.at).toLocaleTimeString()),
    el("span", { class: "text" }, event.text ?? ""),
    event.error ? el("span", { class: "why" }, `Failed: ${event.error}`) : null
  );
  if (event.error) item.classList.add("failed");
  const shown = shownSeq.get(event.seq);
  if (shown) {
    shown.replaceWith(item);
  } else {
    ui.events.append(item);
    while (ui.events.children.length > 50) {
      const first = ui.events.firstElementChild;
      if (!first) break;
      shownSeq.delete(Number(first.dataset["seq"]));
      first.remove();
    }
    ui.events.scrollTop = ui.events.scrollHeight;
  }
  shownSeq.set(event.seq, item);
  ui.eventsEmpty.hidden = true;
}
function chat() {
  return { platform: current.platform, id: current.id };
}
function said(text) {
  ui.deviceResult.textContent = text;
}
ui.sendForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const text = ui.sendText.value.trim();
  if (!text) return;
  void attempt(async () => {
    said("");
    await api("POST", "/v1/deliver", { chat: chat(), text });
    ui.sendText.value = "";
    said("Message sent.");
  });
});
ui.cardForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const seconds = ui.cardSeconds.value.trim();
  const body = { chat: chat(), title: ui.cardTitle.value, body: ui.cardBody.value };
  if (seconds !== "") body["ttl_s"] = Number(seconds);
  void attempt(async () => {
    said("");
    await api("POST", "/v1/display", body);
    said("Card shown.");
  });
});
ui.actionForm.addEventListener("submit", (e) => {
  e.preventDefault();
  let args;
  try {
    args = JSON.parse(ui.actionArgs.value.trim() || "{}");
  } catch {
    ui.actionResult.textContent = 'The arguments are not JSON: write an object such as {"on": true}.';
    return;
  }
  const name = ui.actionName.value;
  if (!name) return;
  ui.actionResult.textContent = `Running ${name}…`;
  void (async () => {
    try {
      const answer = await api("POST", "/v1/action", { device_id: current.id, name, args });
      ui.actionResult.textContent = `${name}: ${JSON.stringify(answer.result, null, 2)}`;
    } catch (err) {
      ui.actionResult.textContent = `${name} failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  })();
});
ui.forget.addEventListener("click", () => {
  const id = current.id;
  if (!window.confirm(`Forget ${id}? It must enroll and pair again.`)) return;
  void attempt(async () => {
    await api("DELETE", `/v1/devices/${encodeURIComponent(id)}`);
    notify(`Forgot ${id}.`, "ok");
    location.hash = "#/devices";
  });
});
ui.stopNotifications.addEventListener("click", () => {
  const id = current.id;
  void attempt(async () => {
    await api("DELETE", `/v1/push/${encodeURIComponent(id)}`);
    notify(`No more notifications to ${id}.`, "ok");
    ui.stopNotifications.hidden = true;
  });
});
var checked = null;
function drawFirmwareDevices() {
  const chosen = ui.otaDevice.value;
  const options = state.devices.map(
    (d) => el("option", { value: d.id }, `${d.name ?? d.id} — ${d.online ? "online" : "offline"}${d.board ? `, ${d.board}` : ""}`)
  );
  ui.otaDevice.replaceChildren(...options);
  if (state.devices.some((d) => d.id === chosen)) ui.otaDevice.value = chosen;
  else {
    const online = state.devices.find((d) => d.online);
    if (online) ui.otaDevice.value = online.id;
  }
}
function statusCell(u) {
  return el("td", {}, el("span", { class: `status-${u.status}` }, u.status));
}
function drawUpdates() {
  fillBody(
    ui.updates,
    state.ota.map((u) => {
      const bar = el("progress", { max: "100", value: String(percent(u)) });
      bar.setAttribute("aria-label", `${u.device_id}: ${percent(u)}%`);
      return el(
        "tr",
        { "data-device": u.device_id, "data-status": u.status },
        el("td", {}, deviceLink("gadget", u.device_id, u.device_id)),
        el("td", {}, u.version),
        statusCell(u),
        el("td", {}, bar, el("span", { class: "percent" }, ` ${percent(u)}%`)),
        el("td", {}, `${u.attempts} of ${u.max_attempts}`),
        el("td", {}, u.error ?? ""),
        el("td", {}, ago(u.created_at))
      );
    }),
    ui.updatesEmpty
  );
  if (current.view === "firmware" && state.ota.some((u) => u.status === "done" || u.status === "failed")) void loadHistoryQuietly();
}
var historyKey = "";
async function loadHistoryQuietly() {
  const key = state.ota.map((u) => `${u.id}:${u.status}`).join();
  if (key === historyKey) return;
  historyKey = key;
  await attempt(loadHistory);
}
async function loadHistory() {
  const entries = await api("GET", "/v1/ota/history");
  fillBody(
    ui.history,
    entries.map(
      (u) => el(
        "tr",
        {},
        el("td", {}, u.device_id),
        el("td", {}, u.version),
        statusCell(u),
        el("td", {}, bytes(u.size)),
        el("td", {}, el("code", { title: u.sha256 }, u.sha256.slice(0, 12))),
        el("td", {}, new Date(u.created_at).toLocaleString()),
        el("td", {}, new Date(u.updated_at).toLocaleString())
      )
    )
  );
}
ui.otaForm.addEventListener("submit", (e) => {
  e.preventDefault();
  const device = ui.otaDevice.value;
  const file = ui.otaFile.files?.[0];
  ui.otaError.textContent = "";
  ui.otaChecked.hidden = true;
  checked = null;
  if (!device) {
    ui.otaError.textContent = "No gadget has enrolled yet: there is nothing to update.";
    return;
  }
  if (!file) {
    ui.otaError.textContent = "Choose the image file first.";
    return;
  }
  void (async () => {
    try {
      const upload = await api("POST", `/v1/ota/uploads?device=${encodeURIComponent(device)}`, file);
      checked = upload;
      drawChecks(upload);
    } catch (err) {
      failedIn(ui.otaError, err);
    }
  })();
});
function drawChecks(upload) {
  ui.otaSummary.textContent = `${upload.project} ${upload.version} for ${upload.device_id}: ${bytes(upload.size)}, SHA-256 ${upload.sha256.slice(0, 16)}…`;
  ui.checks.replaceChildren(
    ...upload.checks.map((c) => el("li", { "data-check": c.name, "data-outcome": c.outcome }, `${c.name}: ${c.detail}`))
  );
  ui.otaPush.disabled = !upload.ready;
  ui.otaChecked.hidden = false;
}
ui.otaPush.addEventListener("click", () => {
  const upload = checked;
  if (!upload) return;
  ui.otaError.textContent = "";
  ui.otaPush.disabled = true;
  void (async () => {
    try {
      await api("POST", `/v1/ota/uploads/${encodeURIComponent(upload.upload)}/push`);
      notify(`Sending ${upload.version} to ${upload.device_id}.`, "ok");
      ui.otaChecked.hidden = true;
      checked = null;
      ui.otaFile.value = "";
    } catch (err) {
      ui.otaPush.disabled = false;
      failedIn(ui.otaError, err);
    }
  })();
});
function sameHost(url) {
  try {
    const u = new URL(url);
    u.hostname = location.hostname;
    return u.toString();
  } catch {
    return url;
  }
}
async function loadServer() {
  const server = await api("GET", "/v1/server");
  state.server = server;
  state.ownPairing = server.pairing;
  ui.version.textContent = server.version;
  ui.gadgetLink.href = `/gadget/?url=${encodeURIComponent(sameHost(server.urls.gadget))}`;
  drawServer();
  drawPairing();
}
function drawServer() {
  const server = state.server;
  if (!server) return;
  for (const name of ["gadget", "mobile", "chat"]) {
    $(`url-${name}`).textContent = server.urls[name];
    const img = $(`qr-${name}`);
    const src = `/v1/qr?for=${name}`;
    if (img.getAttribute("src") !== src) img.src = src;
  }
  ui.serverVersion.textContent = server.version;
  ui.serverData.textContent = server.data_dir;
}
function drawStats() {
  const s = state.stats;
  if (!s) return;
  const row = (label, pick) => el("tr", {}, el("th", { scope: "row" }, label), el("td", {}, pick(s.gadget)), el("td", {}, pick(s.mobile)));
  fillBody(ui.stats, [
    row("Online", (p) => String(p.online)),
    row("Turns", (p) => String(p.turns)),
    row("Handshakes (refused)", (p) => `${p.handshakes_ok} (${p.handshakes_refused})`),
    row("Frames in / out", (p) => `${p.frames_in} / ${p.frames_out}`),
    row("Bytes in / out", (p) => `${bytes(p.bytes_in)} / ${bytes(p.bytes_out)}`),
    row("Errors sent", (p) => String(p.errors))
  ]);
  ui.statsOta.textContent = s.ota.length ? s.ota.map(([status, n]) => `${n} ${status}`).join(", ") : "none";
}
setInterval(() => {
  if (current.view === "devices") drawDevices();
  if (current.view === "pairing") drawPairing();
}, 1e4);
if (!redeemLink()) void (async () => {
  try {
    const session = await api("GET", "/v1/session");
    if (!session.csrf) throw new ApiFailure(401, "");
    await loggedIn(session);
  } catch {
    loggedOut();
  }
})();
