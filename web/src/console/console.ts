// The owner's console that herald serves at `/` on the admin listener: plain HTML, this
// script, and the admin API behind a session cookie. Built by build.mjs into
// dist/console/console.js.
//
// The admin token is typed once (or a login link's code, from `herald console`, is taken
// from the address) and traded for an HttpOnly session cookie; the page
// keeps only the session's CSRF token, in memory, and sends it with every change. One
// server-sent event stream (/v1/events) keeps every view current; the views draw from
// the state it fills, so a change shows wherever it matters without a reload.
//
// Every text that comes from a device (names, sensors, messages) goes into the page as
// text, never as markup.

// ---- what the API answers ----

interface DeviceView {
  id: string;
  name: string | null;
  board: string | null;
  firmware: string | null;
  enrolled_at: number;
  last_seen: number | null;
  sensors: Record<string, unknown>;
  /** The person it belongs to (a phone user's id), once set. */
  owner: string | null;
  online: boolean;
}

/** A gadget's record without whether it is online, as `PUT /v1/devices/{id}/owner` answers. */
type DeviceRecord = Omit<DeviceView, "online">;

interface PhoneView {
  id: string;
  user_id: string;
  name: string | null;
  platform: string | null;
  first_seen: number;
  last_seen: number;
  /** The app takes notifications while it is closed. */
  notifications: boolean;
  online: boolean;
}

type Platform = "gadget" | "mobile";

interface PairingRecord {
  platform: Platform;
  user_id: string;
  user_name: string | null;
  code: string | null;
  created_at: number;
  approved_at: number | null;
}

interface OtaView {
  id: number;
  device_id: string;
  sha256: string;
  size: number;
  version: string;
  status: "sending" | "retrying" | "failed" | "done";
  attempts: number;
  bytes_sent: number;
  error: string | null;
  created_at: number;
  updated_at: number;
  online: boolean;
  max_attempts: number;
}

interface HistoryEntry extends OtaView {
  current: boolean;
}

interface PlatformStats {
  online: number;
  turns: number;
  handshakes_ok: number;
  handshakes_refused: number;
  frames_in: number;
  frames_out: number;
  bytes_in: number;
  bytes_out: number;
  errors: number;
}

interface Stats {
  gadget: PlatformStats;
  mobile: PlatformStats;
  ota: [string, number][];
  ota_bytes_sent: number;
}

interface ServerView {
  version: string;
  data_dir: string;
  urls: { gadget: string; mobile: string; chat: string };
  pairing: boolean;
}

interface SessionView {
  csrf: string | null;
  expires_at: number | null;
  pairing: boolean;
}

interface ConversationEvent {
  seq: number;
  at: number;
  kind: string;
  text?: string;
  error?: string;
}

interface ActionSpec {
  name: string;
  description: string;
  params: unknown;
}

interface DeviceDetail extends DeviceView {
  paired: boolean | null;
  profile: { paired: boolean; charset: string; speaker_rate: number | null; actions: ActionSpec[] } | null;
  events: ConversationEvent[];
  ota: OtaView | null;
}

interface PhoneDetail extends PhoneView {
  paired: boolean | null;
  events: ConversationEvent[];
}

interface Check {
  name: string;
  outcome: "ok" | "fail" | "later";
  detail: string;
}

interface UploadView {
  upload: string;
  device_id: string;
  size: number;
  sha256: string;
  version: string;
  project: string;
  board: string | null;
  checks: Check[];
  ready: boolean;
}

// ---- the page ----

function $<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing`);
  return found as T;
}

const ui = {
  nav: $<HTMLElement>("nav"),
  live: $<HTMLParagraphElement>("live"),
  version: $<HTMLSpanElement>("version"),
  pendingCount: $<HTMLSpanElement>("pending-count"),
  gadgetLink: $<HTMLAnchorElement>("gadget-link"),
  logout: $<HTMLButtonElement>("logout"),
  notice: $<HTMLDivElement>("notice"),
  noticeText: $<HTMLSpanElement>("notice-text"),
  noticeClose: $<HTMLButtonElement>("notice-close"),
  login: $<HTMLElement>("login"),
  loginForm: $<HTMLFormElement>("login-form"),
  token: $<HTMLInputElement>("token"),
  loginError: $<HTMLParagraphElement>("login-error"),
  gadgets: $<HTMLTableElement>("gadgets"),
  gadgetsEmpty: $<HTMLParagraphElement>("gadgets-empty"),
  phones: $<HTMLTableElement>("phones"),
  phonesEmpty: $<HTMLParagraphElement>("phones-empty"),
  pairingHermes: $<HTMLParagraphElement>("pairing-hermes"),
  pairingOwn: $<HTMLDivElement>("pairing-own"),
  pending: $<HTMLTableElement>("pending"),
  pendingEmpty: $<HTMLParagraphElement>("pending-empty"),
  approved: $<HTMLTableElement>("approved"),
  approvedEmpty: $<HTMLParagraphElement>("approved-empty"),
  deviceTitle: $<HTMLHeadingElement>("device-title"),
  deviceGone: $<HTMLParagraphElement>("device-gone"),
  deviceFacts: $<HTMLDListElement>("device-facts"),
  events: $<HTMLOListElement>("events"),
  eventsEmpty: $<HTMLParagraphElement>("events-empty"),
  sendForm: $<HTMLFormElement>("send-form"),
  sendText: $<HTMLTextAreaElement>("send-text"),
  cardForm: $<HTMLFormElement>("card-form"),
  cardTitle: $<HTMLInputElement>("card-title"),
  cardBody: $<HTMLTextAreaElement>("card-body"),
  cardSeconds: $<HTMLInputElement>("card-seconds"),
  actionBox: $<HTMLDivElement>("action-box"),
  actionForm: $<HTMLFormElement>("action-form"),
  actionName: $<HTMLSelectElement>("action-name"),
  actionAbout: $<HTMLParagraphElement>("action-about"),
  actionArgs: $<HTMLTextAreaElement>("action-args"),
  actionResult: $<HTMLPreElement>("action-result"),
  ownerBox: $<HTMLDivElement>("owner-box"),
  ownerForm: $<HTMLFormElement>("owner-form"),
  ownerName: $<HTMLInputElement>("owner-name"),
  ownerClear: $<HTMLButtonElement>("owner-clear"),
  ownerError: $<HTMLParagraphElement>("owner-error"),
  people: $<HTMLDataListElement>("people"),
  deviceResult: $<HTMLParagraphElement>("device-result"),
  forget: $<HTMLButtonElement>("forget"),
  stopNotifications: $<HTMLButtonElement>("stop-notifications"),
  otaForm: $<HTMLFormElement>("ota-form"),
  otaDevice: $<HTMLSelectElement>("ota-device"),
  otaFile: $<HTMLInputElement>("ota-file"),
  otaError: $<HTMLParagraphElement>("ota-error"),
  otaChecked: $<HTMLDivElement>("ota-checked"),
  otaSummary: $<HTMLParagraphElement>("ota-summary"),
  checks: $<HTMLUListElement>("checks"),
  otaPush: $<HTMLButtonElement>("ota-push"),
  updates: $<HTMLTableElement>("updates"),
  updatesEmpty: $<HTMLParagraphElement>("updates-empty"),
  history: $<HTMLTableElement>("history"),
  stats: $<HTMLTableElement>("stats"),
  statsOta: $<HTMLSpanElement>("stats-ota"),
  serverVersion: $<HTMLSpanElement>("server-version"),
  serverData: $<HTMLElement>("server-data"),
};

type Child = Node | string | null | undefined | false;

/** An element with attributes and children; strings become text nodes. */
function el(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

function button(label: string, onClick: () => void, className = ""): HTMLButtonElement {
  const b = el("button", { type: "button" }, label) as HTMLButtonElement;
  if (className) b.className = className;
  b.addEventListener("click", onClick);
  return b;
}

function fillBody(table: HTMLTableElement, rows: HTMLElement[], empty?: HTMLElement): void {
  const body = table.tBodies[0];
  if (!body) return;
  body.replaceChildren(...rows);
  if (empty) empty.hidden = rows.length > 0;
}

/** "12 s ago", "3 min ago", or the date for older times. */
function ago(ms: number | null | undefined): string {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleString();
}

function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

function percent(u: OtaView): number {
  return u.size > 0 ? Math.min(100, Math.floor((u.bytes_sent * 100) / u.size)) : 0;
}

function sensorsText(sensors: Record<string, unknown>): string {
  return Object.entries(sensors)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(", ");
}

/** The notice bar: an error until dismissed, or a short confirmation. */
let noticeTimer: ReturnType<typeof setTimeout> | undefined;
function notify(text: string, kind: "error" | "ok" = "error"): void {
  ui.noticeText.textContent = text;
  ui.notice.dataset["kind"] = kind;
  ui.notice.hidden = false;
  clearTimeout(noticeTimer);
  if (kind === "ok") noticeTimer = setTimeout(() => (ui.notice.hidden = true), 6000);
}
ui.noticeClose.addEventListener("click", () => (ui.notice.hidden = true));

// ---- the API ----

class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let csrf: string | null = null;

/** A call to the admin API; throws an ApiFailure carrying the server's own words. */
async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  let payload: BodyInit | undefined;
  if (method !== "GET" && csrf) headers["X-Herald-CSRF"] = csrf;
  if (body instanceof Blob) {
    payload = body;
    headers["Content-Type"] = "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  let response: Response;
  try {
    const init: RequestInit = { method, headers, credentials: "same-origin" };
    if (payload !== undefined) init.body = payload;
    response = await fetch(path, init);
  } catch {
    throw new ApiFailure(0, "herald did not answer: is it still running?");
  }
  const text = await response.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const said = (data as { error?: unknown } | null)?.error;
    const message = typeof said === "string" ? said : `${response.status} ${response.statusText}`;
    if (response.status === 401 && path !== "/v1/login") loggedOut(message);
    throw new ApiFailure(response.status, message);
  }
  return data as T;
}

/** Show why an action failed in `where`, unless the session ended (the login says so). */
function failedIn(where: HTMLElement, err: unknown): void {
  if (err instanceof ApiFailure && err.status === 401) return;
  where.textContent = err instanceof Error ? err.message : String(err);
}

/** Run an action of the page, showing its failure in the notice bar. */
async function attempt(what: () => Promise<void>): Promise<void> {
  try {
    await what();
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) return;
    notify(err instanceof Error ? err.message : String(err));
  }
}

// ---- what the console knows, kept current by the event stream ----

const state = {
  devices: [] as DeviceView[],
  phones: [] as PhoneView[],
  pairing: null as PairingRecord[] | null,
  ota: [] as OtaView[],
  stats: null as Stats | null,
  server: null as ServerView | null,
  /** Herald approves pairings itself (false: Hermes does). */
  ownPairing: true,
};

let events: EventSource | null = null;

function connectLive(): void {
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
    // A stream refused for an ended session would retry forever: ask why it failed.
    void api<SessionView>("GET", "/v1/session").catch(() => undefined);
  });
  const on = <T>(name: string, apply: (data: T) => void) =>
    source.addEventListener(name, (e) => {
      try {
        apply(JSON.parse((e as MessageEvent<string>).data) as T);
      } catch (err) {
        console.error(`bad ${name} event`, err);
      }
    });
  on<DeviceView[]>("devices", (d) => {
    state.devices = d;
    drawDevices();
    drawPeople();
    drawFirmwareDevices();
    refreshDevice(false);
  });
  on<PhoneView[]>("phones", (p) => {
    state.phones = p;
    drawDevices();
    drawPeople();
    refreshDevice(false);
  });
  on<PairingRecord[] | null>("pairing", (p) => {
    state.pairing = p;
    drawPairing();
  });
  on<OtaView[]>("ota", (o) => {
    state.ota = o;
    drawUpdates();
    refreshDevice(false);
  });
  on<Stats>("stats", (s) => {
    state.stats = s;
    drawStats();
  });
  on<{ platform: Platform; id: string; event: ConversationEvent }>("conversation", (c) => {
    if (current.view === "device" && current.platform === c.platform && current.id === c.id) addEvent(c.event);
  });
  on<{ error: string }>("problem", (p) => notify(`The live view could not look: ${p.error}`));
}

// ---- login ----

function loggedOut(message?: string): void {
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

async function loggedIn(session: SessionView): Promise<void> {
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
      const session = await api<SessionView>("POST", "/v1/login", { token });
      await loggedIn(session);
    } catch (err) {
      ui.loginError.textContent = err instanceof Error ? err.message : String(err);
      ui.token.select();
    }
  })();
});

// A login link from `herald console` carries a single-use code in its fragment
// (`#login=…`), which the browser never sends anywhere: take it out of the address (and
// so of the history) at once, then trade it for a session as the token is traded.
const LINK = /^#login=([0-9A-Za-z]+)$/;

/** Log in with the link's code, if the address holds one; whether it did. */
function redeemLink(): boolean {
  const code = LINK.exec(location.hash)?.[1];
  if (code === undefined) return false;
  history.replaceState(null, "", location.pathname + location.search);
  void (async () => {
    try {
      const session = await api<SessionView>("POST", "/v1/login", { code });
      await loggedIn(session);
    } catch (err) {
      loggedOut();
      ui.loginError.textContent = err instanceof Error ? err.message : String(err);
    }
  })();
  return true;
}

ui.logout.addEventListener("click", () =>
  void attempt(async () => {
    await api("DELETE", "/v1/session");
    loggedOut();
  }),
);

// ---- views and routing ----

type View = "login" | "devices" | "pairing" | "device" | "firmware" | "server";
const current: { view: View; platform: Platform; id: string } = { view: "login", platform: "gadget", id: "" };

function show(view: View): void {
  current.view = view;
  document.body.dataset["view"] = view;
  for (const section of document.querySelectorAll<HTMLElement>("main > section.view")) {
    section.hidden = section.id !== (view === "login" ? "login" : `view-${view}`);
  }
  for (const link of ui.nav.querySelectorAll<HTMLAnchorElement>("a[data-view]")) {
    if (link.dataset["view"] === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function route(): void {
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

function deviceLink(platform: Platform, id: string, label: string): HTMLElement {
  return el("a", { href: `#/device/${platform}/${encodeURIComponent(id)}` }, label);
}

function onlineCell(online: boolean): HTMLElement {
  return el("td", {}, el("span", { class: "state", "data-online": String(online) }, online ? "online" : "offline"));
}

// ---- devices ----

function drawDevices(): void {
  fillBody(
    ui.gadgets,
    state.devices.map((d) =>
      el(
        "tr",
        { "data-id": d.id },
        el("td", {}, deviceLink("gadget", d.id, d.name ?? d.id), d.name ? el("div", { class: "hint" }, d.id) : null),
        onlineCell(d.online),
        el("td", {}, d.owner ?? "—"),
        el("td", {}, d.board ?? "—"),
        el("td", {}, d.firmware ?? "—"),
        el("td", {}, sensorsText(d.sensors) || "—"),
        el("td", {}, d.online ? "now" : ago(d.last_seen)),
      ),
    ),
    ui.gadgetsEmpty,
  );
  fillBody(
    ui.phones,
    state.phones.map((p) =>
      el(
        "tr",
        { "data-id": p.id },
        el("td", {}, deviceLink("mobile", p.id, p.name ?? p.id), p.name ? el("div", { class: "hint" }, p.id) : null),
        onlineCell(p.online),
        el("td", {}, p.user_id),
        el("td", {}, p.platform ?? "—"),
        el("td", {}, p.notifications ? "on" : "off"),
        el("td", {}, p.online ? "now" : ago(p.last_seen)),
      ),
    ),
    ui.phonesEmpty,
  );
}

// ---- people ----

/**
 * The people a gadget can belong to, as far as the console can tell: its phones' users
 * and the owners already set. Herald lists no app token's user that has no phone yet: the
 * owner fields take any name, and herald says whether it is someone.
 */
function drawPeople(): void {
  const phones = new Map<string, string[]>();
  for (const p of state.phones) phones.set(p.user_id, [...(phones.get(p.user_id) ?? []), p.name ?? p.id]);
  for (const d of state.devices) if (d.owner !== null && !phones.has(d.owner)) phones.set(d.owner, []);
  const options = [...phones.keys()]
    .sort()
    .map((person) => {
      const has = phones.get(person) ?? [];
      return el("option", has.length ? { value: person, label: `${person}: ${has.join(", ")}` } : { value: person });
    });
  ui.people.replaceChildren(...options);
}

// ---- pairing ----

/** The owner field of each waiting gadget, by its id: kept across redraws with what was typed. */
const ownerFields = new Map<string, HTMLInputElement>();

function ownerCell(p: PairingRecord): HTMLElement {
  if (p.platform !== "gadget") return el("td", {}, "—");
  let input = ownerFields.get(p.user_id);
  if (!input) {
    input = el("input", { class: "owner", list: "people", autocomplete: "off", spellcheck: "false", placeholder: "nobody yet" }) as HTMLInputElement;
    ownerFields.set(p.user_id, input);
  }
  return el("td", {}, el("label", {}, el("span", { class: "sr-only" }, `Owner of ${p.user_name ?? p.user_id}`), input));
}

function who(p: PairingRecord): HTMLElement {
  const gadget = p.platform === "gadget" && state.devices.some((d) => d.id === p.user_id);
  const label = p.user_name ? `${p.user_name} (${p.user_id})` : p.user_id;
  return el("td", {}, gadget ? deviceLink("gadget", p.user_id, label) : label);
}

function drawPairing(): void {
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
  // Redrawn rows take the same owner fields: one being typed in keeps its place.
  const typing = [...ownerFields.values()].find((input) => input === document.activeElement);
  const [start, end] = [typing?.selectionStart ?? null, typing?.selectionEnd ?? null];
  fillBody(
    ui.pending,
    pending.map((p) =>
      el(
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
          button("Deny", () => void revoke(p, "Denied"), "danger"),
        ),
      ),
    ),
    ui.pendingEmpty,
  );
  if (typing?.isConnected) {
    typing.focus();
    typing.setSelectionRange(start, end);
  }
  fillBody(
    ui.approved,
    approved.map((p) =>
      el(
        "tr",
        { "data-user": p.user_id },
        el("td", {}, p.platform),
        who(p),
        el("td", {}, ago(p.approved_at)),
        el("td", { class: "actions" }, button("Revoke", () => void revoke(p, "Revoked"), "danger")),
      ),
    ),
    ui.approvedEmpty,
  );
}

async function approve(p: PairingRecord): Promise<void> {
  await attempt(async () => {
    const body: Record<string, string> = p.code ? { platform: p.platform, code: p.code } : { platform: p.platform, user_id: p.user_id };
    // Only a gadget takes an owner; herald refuses a name that is nobody, and the pairing waits.
    const owner = p.platform === "gadget" ? (ownerFields.get(p.user_id)?.value.trim() ?? "") : "";
    if (owner) body["owner"] = owner;
    await api("POST", "/v1/pairing/approve", body);
    notify(`Approved ${p.user_name ?? p.user_id}${owner ? ` for ${owner}` : ""}.`, "ok");
  });
}

async function revoke(p: PairingRecord, done: string): Promise<void> {
  await attempt(async () => {
    await api("POST", "/v1/pairing/revoke", { platform: p.platform, user_id: p.user_id });
    notify(`${done} ${p.user_name ?? p.user_id}.`, "ok");
  });
}

// ---- one device ----

let detail: DeviceDetail | PhoneDetail | null = null;
let shownSeq = new Map<number, HTMLElement>();
/** The owner the owner field was last given (undefined: none yet), so a refresh keeps what is typed. */
let ownerShown: string | null | undefined;

function openDevice(): void {
  detail = null;
  shownSeq = new Map();
  ui.events.replaceChildren();
  ui.deviceFacts.replaceChildren();
  ui.deviceGone.hidden = true;
  ui.deviceResult.textContent = "";
  ui.actionResult.textContent = "";
  ui.ownerError.textContent = "";
  ownerShown = undefined;
  ui.deviceTitle.textContent = current.id;
  refreshDevice(true);
}

let refreshing = false;
let refreshAgain = false;

/** Load the open device again (the stream said something changed). */
function refreshDevice(force: boolean): void {
  if (current.view !== "device") return;
  if (!force && detail === null) return;
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  const path = current.platform === "gadget" ? "/v1/devices/" : "/v1/phones/";
  const asked = `${current.platform}/${current.id}`;
  void api<DeviceDetail | PhoneDetail>("GET", path + encodeURIComponent(current.id))
    .then((d) => {
      if (asked !== `${current.platform}/${current.id}`) return;
      detail = d;
      drawDevice(d);
    })
    .catch((err: unknown) => {
      if (err instanceof ApiFailure && err.status === 404) {
        ui.deviceGone.textContent = `${err.message}.`;
        ui.deviceGone.hidden = false;
        ui.deviceFacts.replaceChildren();
      } else if (!(err instanceof ApiFailure && err.status === 401)) {
        notify(err instanceof Error ? err.message : String(err));
      }
    })
    .finally(() => {
      refreshing = false;
      if (refreshAgain) {
        refreshAgain = false;
        refreshDevice(false);
      }
    });
}

function fact(name: string, value: Child): Node[] {
  return [el("dt", {}, name), el("dd", {}, value)];
}

function isGadget(d: DeviceDetail | PhoneDetail): d is DeviceDetail {
  return current.platform === "gadget" && "enrolled_at" in d;
}

function drawDevice(d: DeviceDetail | PhoneDetail): void {
  ui.deviceGone.hidden = true;
  ui.deviceTitle.textContent = d.name ?? d.id;
  const facts: Node[] = [
    ...fact("Id", el("code", {}, d.id)),
    ...fact("State", el("span", { class: "state", "data-online": String(d.online) }, d.online ? "online" : "offline")),
    ...fact("Paired", d.paired === null ? "ask Hermes" : d.paired ? "yes" : "no"),
  ];
  if (isGadget(d)) {
    facts.push(
      ...fact("Owner", d.owner ?? "—"),
      ...fact("Board", d.board ?? "—"),
      ...fact("Firmware", d.firmware ?? "—"),
      ...fact("Sensors", sensorsText(d.sensors) || "—"),
      ...fact("Enrolled", ago(d.enrolled_at)),
      ...fact("Last seen", d.online ? "now" : ago(d.last_seen)),
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
      ...fact("Last seen", d.online ? "now" : ago(d.last_seen)),
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

function drawActions(actions: ActionSpec[], online: boolean): void {
  ui.actionBox.hidden = false;
  const chosen = ui.actionName.value;
  ui.actionName.replaceChildren(...actions.map((a) => el("option", { value: a.name }, a.name)));
  if (actions.some((a) => a.name === chosen)) ui.actionName.value = chosen;
  const none = actions.length === 0;
  ui.actionName.disabled = none;
  const about = actions.find((a) => a.name === ui.actionName.value);
  ui.actionAbout.textContent = none
    ? online
      ? "This device offers no actions."
      : "Its actions show while it is online."
    : (about?.description ?? "");
}
function drawOwner(owner: string | null): void {
  ui.ownerBox.hidden = false;
  ui.ownerClear.disabled = owner === null;
  if (owner === ownerShown) return;
  ownerShown = owner;
  ui.ownerName.value = owner ?? "";
}

/** Give the open gadget to `owner`, or to nobody; herald's refusal shows by the field. */
async function setOwner(owner: string | null): Promise<void> {
  const id = current.id;
  ui.ownerError.textContent = "";
  said("");
  try {
    const record = await api<DeviceRecord>("PUT", `/v1/devices/${encodeURIComponent(id)}/owner`, { owner });
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

const KIND: Record<string, string> = {
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
  turn_ended: "turn ended",
};

/** Add an event to the list, or update the one with its number (a streamed reply). */
function addEvent(event: ConversationEvent): void {
  const item = el(
    "li",
    { "data-seq": String(event.seq), "data-kind": event.kind },
    el("span", { class: "kind" }, KIND[event.kind] ?? event.kind),
    el("span", { class: "when" }, new Date(event.at).toLocaleTimeString()),
    el("span", { class: "text" }, event.text ?? ""),
    event.error ? el("span", { class: "why" }, `Failed: ${event.error}`) : null,
  );
  if (event.error) item.classList.add("failed");
  const shown = shownSeq.get(event.seq);
  if (shown) {
    shown.replaceWith(item);
  } else {
    ui.events.append(item);
    while (ui.events.children.length > 50) {
      const first = ui.events.firstElementChild as HTMLElement | null;
      if (!first) break;
      shownSeq.delete(Number(first.dataset["seq"]));
      first.remove();
    }
    ui.events.scrollTop = ui.events.scrollHeight;
  }
  shownSeq.set(event.seq, item);
  ui.eventsEmpty.hidden = true;
}

function chat(): { platform: Platform; id: string } {
  return { platform: current.platform, id: current.id };
}

function said(text: string): void {
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
  const body: Record<string, unknown> = { chat: chat(), title: ui.cardTitle.value, body: ui.cardBody.value };
  if (seconds !== "") body["ttl_s"] = Number(seconds);
  void attempt(async () => {
    said("");
    await api("POST", "/v1/display", body);
    said("Card shown.");
  });
});

ui.actionForm.addEventListener("submit", (e) => {
  e.preventDefault();
  let args: unknown;
  try {
    args = JSON.parse(ui.actionArgs.value.trim() || "{}");
  } catch {
    ui.actionResult.textContent = "The arguments are not JSON: write an object such as {\"on\": true}.";
    return;
  }
  const name = ui.actionName.value;
  if (!name) return;
  ui.actionResult.textContent = `Running ${name}…`;
  void (async () => {
    try {
      const answer = await api<{ result: unknown }>("POST", "/v1/action", { device_id: current.id, name, args });
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

// ---- firmware ----

let checked: UploadView | null = null;

function drawFirmwareDevices(): void {
  const chosen = ui.otaDevice.value;
  const options = state.devices.map((d) =>
    el("option", { value: d.id }, `${d.name ?? d.id} — ${d.online ? "online" : "offline"}${d.board ? `, ${d.board}` : ""}`),
  );
  ui.otaDevice.replaceChildren(...options);
  if (state.devices.some((d) => d.id === chosen)) ui.otaDevice.value = chosen;
  else {
    const online = state.devices.find((d) => d.online);
    if (online) ui.otaDevice.value = online.id;
  }
}

function statusCell(u: OtaView): HTMLElement {
  return el("td", {}, el("span", { class: `status-${u.status}` }, u.status));
}

function drawUpdates(): void {
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
        el("td", {}, ago(u.created_at)),
      );
    }),
    ui.updatesEmpty,
  );
  if (current.view === "firmware" && state.ota.some((u) => u.status === "done" || u.status === "failed")) void loadHistoryQuietly();
}

let historyKey = "";
async function loadHistoryQuietly(): Promise<void> {
  const key = state.ota.map((u) => `${u.id}:${u.status}`).join();
  if (key === historyKey) return;
  historyKey = key;
  await attempt(loadHistory);
}

async function loadHistory(): Promise<void> {
  const entries = await api<HistoryEntry[]>("GET", "/v1/ota/history");
  fillBody(
    ui.history,
    entries.map((u) =>
      el(
        "tr",
        {},
        el("td", {}, u.device_id),
        el("td", {}, u.version),
        statusCell(u),
        el("td", {}, bytes(u.size)),
        el("td", {}, el("code", { title: u.sha256 }, u.sha256.slice(0, 12))),
        el("td", {}, new Date(u.created_at).toLocaleString()),
        el("td", {}, new Date(u.updated_at).toLocaleString()),
      ),
    ),
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
      const upload = await api<UploadView>("POST", `/v1/ota/uploads?device=${encodeURIComponent(device)}`, file);
      checked = upload;
      drawChecks(upload);
    } catch (err) {
      failedIn(ui.otaError, err);
    }
  })();
});

function drawChecks(upload: UploadView): void {
  ui.otaSummary.textContent = `${upload.project} ${upload.version} for ${upload.device_id}: ${bytes(upload.size)}, SHA-256 ${upload.sha256.slice(0, 16)}…`;
  ui.checks.replaceChildren(
    ...upload.checks.map((c) => el("li", { "data-check": c.name, "data-outcome": c.outcome }, `${c.name}: ${c.detail}`)),
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
      await api<OtaView>("POST", `/v1/ota/uploads/${encodeURIComponent(upload.upload)}/push`);
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

// ---- server ----

/** The gadget URL on the host this page was loaded from: the in-tab gadget only
 * connects to its own host (a link naming another could relay its key). */
function sameHost(url: string): string {
  try {
    const u = new URL(url);
    u.hostname = location.hostname;
    return u.toString();
  } catch {
    return url;
  }
}

async function loadServer(): Promise<void> {
  const server = await api<ServerView>("GET", "/v1/server");
  state.server = server;
  state.ownPairing = server.pairing;
  ui.version.textContent = server.version;
  ui.gadgetLink.href = `/gadget/?url=${encodeURIComponent(sameHost(server.urls.gadget))}`;
  drawServer();
  drawPairing();
}

function drawServer(): void {
  const server = state.server;
  if (!server) return;
  for (const name of ["gadget", "mobile", "chat"] as const) {
    $<HTMLElement>(`url-${name}`).textContent = server.urls[name];
    const img = $<HTMLImageElement>(`qr-${name}`);
    const src = `/v1/qr?for=${name}`;
    if (img.getAttribute("src") !== src) img.src = src;
  }
  ui.serverVersion.textContent = server.version;
  ui.serverData.textContent = server.data_dir;
}

function drawStats(): void {
  const s = state.stats;
  if (!s) return;
  const row = (label: string, pick: (p: PlatformStats) => string) =>
    el("tr", {}, el("th", { scope: "row" }, label), el("td", {}, pick(s.gadget)), el("td", {}, pick(s.mobile)));
  fillBody(ui.stats, [
    row("Online", (p) => String(p.online)),
    row("Turns", (p) => String(p.turns)),
    row("Handshakes (refused)", (p) => `${p.handshakes_ok} (${p.handshakes_refused})`),
    row("Frames in / out", (p) => `${p.frames_in} / ${p.frames_out}`),
    row("Bytes in / out", (p) => `${bytes(p.bytes_in)} / ${bytes(p.bytes_out)}`),
    row("Errors sent", (p) => String(p.errors)),
  ]);
  ui.statsOta.textContent = s.ota.length ? s.ota.map(([status, n]) => `${n} ${status}`).join(", ") : "none";
}

// Relative times age while nobody changes anything.
setInterval(() => {
  if (current.view === "devices") drawDevices();
  if (current.view === "pairing") drawPairing();
}, 10_000);

// ---- start ----

if (!redeemLink()) void (async () => {
  try {
    const session = await api<SessionView>("GET", "/v1/session");
    if (!session.csrf) throw new ApiFailure(401, "");
    await loggedIn(session);
  } catch {
    loggedOut();
  }
})();
