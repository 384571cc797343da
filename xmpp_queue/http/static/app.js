// xmpp-queue dashboard: polls the JSON API once a second and redraws.
// Node names, JIDs and item ids come from users: they are only ever set as
// textContent, never as HTML. The admin token lives in this tab's sessionStorage
// and travels in the Authorization header, never in a URL.
"use strict";

const POLL_MS = 1000;
const TOKEN_KEY = "xmpp-queue-admin-token";
let adminActions = false;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function token() { return sessionStorage.getItem(TOKEN_KEY); }
function isAdmin() { return adminActions && token() !== null; }

function duration(s) {
  if (s === null || s === undefined) return "–";
  const neg = s < 0; s = Math.abs(s);
  let out;
  if (s < 60) out = `${s.toFixed(s < 10 ? 1 : 0)} s`;
  else if (s < 3600) out = `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
  else out = `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return neg ? `${out} ago` : out;
}

/** A number with thousands separators (1,234,567); "–" for none. */
function fmt(n) {
  if (n === null || n === undefined || n === "") return "–";
  return typeof n === "number" ? n.toLocaleString("en-US") : String(n);
}

function sparkline(rates, big, interval) {
  const ns = "http://www.w3.org/2000/svg";
  const w = 300, h = big ? 120 : 24;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const series = [["published", "#2f6fdf"], ["acked", "#16a34a"]];
  const all = series.flatMap(([k]) => rates[k] || []);
  const max = Math.max(1, ...all);
  if (big) {
    for (const f of [0, 0.5, 1]) {  // grid lines at 0, half and the top of the y axis
      const y = (h - 2 - f * (h - 6)).toFixed(1);
      const line = document.createElementNS(ns, "line");
      for (const [k, v] of [["x1", 0], ["x2", w], ["y1", y], ["y2", y]]) line.setAttribute(k, v);
      line.setAttribute("class", "grid");
      line.setAttribute("vector-effect", "non-scaling-stroke");
      svg.append(line);
    }
  }
  for (const [k, color] of series) {
    const values = rates[k] || [];
    if (values.length < 2) continue;
    const step = w / (values.length - 1);
    const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 6)).toFixed(1)}`);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", color);
    line.setAttribute("stroke-width", big ? "2" : "1.5");
    line.setAttribute("vector-effect", "non-scaling-stroke");
    line.setAttribute("class", `series-${k}`);
    svg.append(line);
  }
  if (!big) return svg;
  // Axes: items/s on y (0, half, max), time on x (the oldest sample to now).
  const samples = Math.max((rates.published || []).length, (rates.acked || []).length);
  const span = Math.max(0, samples - 1) * (interval || 1);
  return el("div", { class: "axes" },
    el("div", { class: "y", "data-axis": "y" },
      el("span", {}, `${fmt(max)}/s`), el("span", {}, `${fmt(Math.round(max / 2))}/s`), el("span", {}, "0")),
    svg,
    el("div", { class: "x", "data-axis": "x" },
      el("span", {}, `${duration(span)} ago`), el("span", {}, `${duration(span / 2)} ago`), el("span", {}, "now")));
}

function last(values) { return values && values.length ? values[values.length - 1] : 0; }

function legend(rates) {
  return el("div", { class: "legend" },
    el("span", { class: "p" }, `■ published ${fmt(last(rates.published))}/s`), "  ",
    el("span", { class: "a" }, `■ acked ${fmt(last(rates.acked))}/s`),
    `  (max ${fmt(Math.max(0, ...(rates.published || []), ...(rates.acked || [])))}/s over the last ${Math.max(0, (rates.acked || []).length)} samples)`);
}

function stat(key, label, value) {
  return el("div", { class: `stat ${key}`, "data-key": key },
    el("div", { class: "v" }, fmt(value)), el("div", { class: "k" }, label));
}

async function api(path, options = {}) {
  const headers = Object.assign({ "Accept": "application/json" }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers }));
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

async function act(action, body) {
  return api(`/api/actions/${action}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Authorization": `Bearer ${token()}` },
    body: JSON.stringify(body),
  });
}

function showError(message) {
  const e = document.getElementById("error");
  e.hidden = !message;
  e.textContent = message || "";
}

function showMessage(message) {
  const m = document.getElementById("message");
  if (!m) return;
  m.hidden = !message;
  m.textContent = message || "";
}

function header(data) {
  document.getElementById("service").textContent = data.service || "";
  const c = document.getElementById("connection");
  c.textContent = data.connected ? "XMPP connected" : "XMPP disconnected";
  c.className = `badge ${data.connected ? "ok" : "bad"}`;
  adminActions = Boolean(data.admin_actions);
  const signedIn = isAdmin();
  document.getElementById("signin").hidden = signedIn || !adminActions;
  document.getElementById("admin").hidden = !signedIn;
  for (const e of document.querySelectorAll(".admin-only")) e.hidden = !signedIn;
}

// --- the overview -----------------------------------------------------------------------

// One page of queues at a time, filtered, sorted and paged by the server
// (/api/queues?q=&sort=&desc=&offset=&limit=): hundreds of queues cost one page.
const view = { q: "", sort: "node", desc: false, offset: 0, limit: 50 };

const QUEUE_SPEC = {
  columns: 10, empty: "no queue matches", rowClass: "queue", attr: "data-node",
  key: (q) => q.node,
  cellClasses: ["node", "num waiting", "num delayed", "num in-flight", "num dead-letters", "num oldest",
    "num subscribers", "num acks", "num redeliveries", "rate"],
  texts: (q) => [q.node, fmt(q.waiting), fmt(q.delayed ?? 0), fmt(q.in_flight), fmt(q.dead_letters),
    duration(q.oldest_waiting_seconds), fmt(q.subscribers), fmt(q.acks_last_hour),
    fmt(q.redeliveries_last_hour), ""],
};

async function refreshOverview() {
  const params = new URLSearchParams({ q: view.q, sort: view.sort, desc: view.desc ? "1" : "0",
    offset: String(view.offset), limit: String(view.limit) });
  const data = await api(`/api/queues?${params}`);
  header(data);
  sharded = Boolean(data.sharded);
  if (data.matched && view.offset >= data.matched) {  // the filter left fewer pages
    view.offset = Math.max(0, Math.floor((data.matched - 1) / view.limit) * view.limit);
    return refreshOverview();
  }
  syncRows("#queues", data.queues, QUEUE_SPEC);
  const byNode = new Map(data.queues.map((q) => [q.node, q]));
  for (const tr of document.querySelectorAll("#queues tbody tr[data-node]")) {
    const q = byNode.get(tr.dataset.key);
    const name = tr.children[0];
    if (!name.querySelector("a")) {
      name.replaceChildren(el("a", { href: `/queue?node=${encodeURIComponent(q.node)}` }, q.node));
    }
    const rate = tr.children[9];
    rate.replaceChildren(sparkline(q.rates, false),
      el("span", { class: "now" }, `${fmt(last(q.rates.published))} / ${fmt(last(q.rates.acked))}`));
  }
  for (const th of document.querySelectorAll("#queues th[data-sort]")) {
    if (th.dataset.sort === view.sort) th.setAttribute("aria-sort", view.desc ? "descending" : "ascending");
    else th.removeAttribute("aria-sort");
  }
  const first = data.matched ? view.offset + 1 : 0;
  const lastRow = view.offset + data.queues.length;
  document.getElementById("range").textContent =
    `${fmt(first)}-${fmt(lastRow)} of ${fmt(data.matched)}` +
    (data.matched !== data.total ? ` (filtered from ${fmt(data.total)})` : "");
  document.getElementById("prev").disabled = view.offset === 0;
  document.getElementById("next").disabled = lastRow >= data.matched;
  const where = sharded ? ` on this shard (${data.service})` : "";
  document.getElementById("summary").textContent =
    `${fmt(data.total)} queue(s)${where}: ${fmt(data.waiting)} waiting, ${fmt(data.in_flight)} in flight.`;
}

function setUpOverview() {
  for (const th of document.querySelectorAll("#queues th[data-sort]")) {
    th.addEventListener("click", () => {
      const key = th.dataset.sort;
      // A figure sorts largest first on its first click; the name A to Z.
      view.desc = view.sort === key ? !view.desc : key !== "node";
      view.sort = key;
      view.offset = 0;
      refreshOverview().catch((e) => showError(`cannot load: ${e.message}`));
    });
  }
  let typing = null;
  document.getElementById("filter").addEventListener("input", (event) => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      view.q = event.target.value.trim();
      view.offset = 0;
      refreshOverview().catch((e) => showError(`cannot load: ${e.message}`));
    }, 150);
  });
  const page = (delta) => {
    view.offset = Math.max(0, view.offset + delta * view.limit);
    refreshOverview().catch((e) => showError(`cannot load: ${e.message}`));
  };
  document.getElementById("prev").addEventListener("click", () => page(-1));
  document.getElementById("next").addEventListener("click", () => page(1));
  document.getElementById("per-page").addEventListener("change", (event) => {
    view.limit = Number(event.target.value);
    view.offset = 0;
    refreshOverview().catch((e) => showError(`cannot load: ${e.message}`));
  });
}

// --- every shard (a sharded deployment) -------------------------------------------------

// A shard's dashboard also lists every queue of the deployment, read from the shared
// database (/api/deployment, asked only when /api/queues says "sharded"). A queue
// of this shard links to its page; another shard's queue names that shard (its page is
// on that shard's dashboard).
const DEPLOYMENT_SPEC = {
  columns: 7, empty: "no queue on any shard", rowClass: "placed", attr: "data-node",
  key: (q) => q.node,
  cellClasses: ["node", "shard", "num waiting", "num delayed", "num in-flight", "num oldest",
    "num subscribers"],
  texts: (q) => [q.node, q.shard, fmt(q.waiting), fmt(q.delayed), fmt(q.in_flight),
    duration(q.oldest_waiting_seconds), fmt(q.subscribers)],
};
let deploymentAt = 0;
let sharded = false;

async function refreshDeployment() {
  if (!sharded || Date.now() - deploymentAt < 5000) return;  // the server reads every 5 s
  deploymentAt = Date.now();
  const summary = document.getElementById("deployment-summary");
  document.getElementById("deployment").hidden = false;
  let data;
  try {
    data = await api("/api/deployment");
  } catch (e) {  // the shard's own queues above still show
    summary.textContent = `cannot read every shard's queues: ${e.message}`;
    return;
  }
  syncRows("#deployment-queues", data.queues, DEPLOYMENT_SPEC);
  const byNode = new Map(data.queues.map((q) => [q.node, q]));
  for (const tr of document.querySelectorAll("#deployment-queues tbody tr[data-node]")) {
    const q = byNode.get(tr.dataset.key);
    const name = tr.children[0];
    const linked = Boolean(name.querySelector("a"));  // a moved queue gains or loses its link
    if (q.here && !linked) {
      name.replaceChildren(el("a", { href: `/queue?node=${encodeURIComponent(q.node)}` }, q.node));
    } else if (!q.here && linked) {
      name.replaceChildren(q.node);
    }
  }
  summary.textContent =
    `${fmt(data.queues.length)} queue(s) on ${fmt(data.shards.length)} shard(s): ` +
    `${fmt(data.waiting)} waiting, ${fmt(data.in_flight)} in flight ` +
    `(committed figures from the shared database; this page is ${data.shard}'s).`;
}

// --- one queue --------------------------------------------------------------------------

// Rows are kept by key and updated in place, so a button under the pointer is not
// replaced between press and release by the next poll.
function syncRows(selector, list, spec) {
  const body = document.querySelector(`${selector} tbody`);
  if (!list.length) {
    body.replaceChildren(el("tr", {}, el("td", { class: "empty", colSpan: spec.columns }, spec.empty)));
    return;
  }
  const existing = new Map();
  for (const tr of body.querySelectorAll("tr[data-key]")) existing.set(tr.dataset.key, tr);
  const admin = String(isAdmin());
  const wanted = list.map((x) => {
    const key = spec.key(x);
    let tr = existing.get(key);
    const texts = spec.texts(x);
    if (!tr || tr.dataset.admin !== admin) {
      tr = el("tr", { class: spec.rowClass, "data-key": key, "data-admin": admin });
      if (spec.attr) tr.setAttribute(spec.attr, key);
      texts.forEach((_, i) => tr.append(el("td", { class: (spec.cellClasses || [])[i] || "" })));
      if (spec.action && isAdmin()) tr.append(el("td", {}, spec.action(x)));
    }
    texts.forEach((t, i) => {
      const text = String(t);
      if (tr.children[i].textContent !== text) tr.children[i].textContent = text;
    });
    return tr;
  });
  const same = wanted.length === body.children.length && wanted.every((tr, i) => body.children[i] === tr);
  if (!same) body.replaceChildren(...wanted);
}

function lockSpec(node) {
  return {
    columns: 8, empty: "no item is locked", rowClass: "lock", attr: "data-item",
    key: (l) => l.item,
    cellClasses: ["item", "holder", "locked", "deadline", "deliveries", "last-error", "attributes"],
    texts: (l) => [l.item, l.holder || "–", duration(l.locked_seconds),
      l.deadline_in_seconds === null ? "–" : `in ${duration(l.deadline_in_seconds)}`, l.deliveries,
      l.last_error || "–", attributes(l.attributes)],
    action: (l) => el("button", {
      class: "unlock", type: "button", onclick: () => run("unlock", { node, item: l.item }),
    }, "Unlock"),
  };
}

const SUBSCRIBER_SPEC = {
  columns: 5, empty: "no subscriber", rowClass: "subscriber", attr: "data-subid",
  key: (sub) => sub.subid,
  cellClasses: ["jid", "window", "in-flight", "idle", "muted"],  // idle: since its last delivery, ack or nack
  texts: (sub) => [sub.active ? `${sub.jid} (active)` : sub.jid, sub.queue_requests ?? "–", sub.in_flight,
    duration(sub.idle_seconds), sub.subid],
};

/** Delete and Move buttons for one stored item of *node* (admin only). */
function itemActions(node, item, moveTo) {
  return el("span", { class: "item-actions" },
    el("button", { class: "delete-item danger", type: "button", onclick: () => {
      if (confirm(`Delete item '${item}' of '${node}'? This cannot be undone.`)) {
        run("delete-item", { node, item });
      }
    } }, "Delete"), " ",
    el("button", { class: "move-item", type: "button", onclick: () => {
      const target = prompt(`Move item '${item}' to which node?`, moveTo);
      if (target) run("move-item", { node, item, target: target.trim() });
    } }, "Move…"));
}

function itemSpec(node) {
  return {
    columns: 8, empty: "no item is stored", rowClass: "item", attr: "data-item",
    key: (i) => i.item,
    cellClasses: ["item", "state", "num", "num", "num", "attributes", "payload"],
    texts: (i) => [i.item, i.holder ? `${i.state} by ${i.holder}` : i.state, fmt(i.deliveries),
      duration(i.age_seconds), fmt(i.size), attributes(i.attributes), i.payload ?? "–"],
    action: (i) => itemActions(node, i.item, `${node}/parked`),
  };
}

function deadSpec(q) {
  const deadNode = q.config.dead_letter;
  return {
    columns: 9, empty: "no dead letter", rowClass: "dead-letter", attr: "data-item",
    key: (d) => d.item,
    cellClasses: ["item", "num", "reason", "last-error", "at", "num", "attributes", "payload"],
    texts: (d) => [d.origin_item, fmt(d.deliveries), d.reason || "–", d.last_error || "–",
      d.dead_lettered_at || "–", fmt(d.size), attributes(d.attributes), d.payload ?? "–"],
    action: (d) => itemActions(deadNode, d.item, q.node),
  };
}

/** The JID of a single-active queue's active subscriber, or "none". */
function activeJid(q) {
  const active = q.subscribers.find((sub) => sub.active);
  return active ? active.jid : "none";
}

const AFFILIATION_SPEC = {
  columns: 2, empty: "nobody is affiliated", rowClass: "affiliation", attr: "data-jid",
  key: (a) => a.jid,
  texts: (a) => [a.jid, a.affiliation],
};

/** Push subscriptions: the service sends them masked (secrets and the URL's query). */
function pushSpec(node) {
  return {
    columns: 5, empty: "no push subscriptions", rowClass: "push", attr: "data-id",
    key: (p) => p.id,
    cellClasses: ["id", "url", "auth", "num max-in-flight"],
    texts: (p) => [p.id, p.url, p.auth, p.max_in_flight],
    action: (p) => el("button", { class: "push-remove danger", type: "button", onclick: () => {
      if (confirm(`Remove push subscription ${p.id} (${p.url})? Items it holds go back to the queue.`)) {
        run("push-remove", { node, id: p.id });
      }
    } }, "Remove"),
  };
}

/** An item's attributes (its publisher's SHIM headers) as "k=v, k=v", or "–". */
function attributes(attrs) {
  const pairs = Object.entries(attrs || {});
  return pairs.length ? pairs.map(([k, v]) => `${k}=${v}`).join(", ") : "–";
}

async function run(action, body) {
  try {
    const result = await act(action, body);
    showMessage(`${result.action}: ${result.message}`);
    showError("");
  } catch (e) {
    showError(`${action} refused: ${e.message}`);
  }
  await refreshQueue();
}

async function refreshQueue() {
  const node = new URLSearchParams(location.search).get("node") || "";
  const [overview, q] = await Promise.all([
    api("/api/queues"),
    api(`/api/queue?node=${encodeURIComponent(node)}`),
  ]);
  header(overview);
  document.title = `xmpp-queue: ${q.node}`;
  document.getElementById("title").textContent = q.title ? `${q.node} (${q.title})` : q.node;
  const s = q.summary || {};
  document.getElementById("figures").replaceChildren(
    stat("waiting", "waiting", q.waiting),
    stat("delayed", "of them delayed", q.delayed ?? 0),
    stat("in-flight", "in flight", q.in_flight),
    stat("dead-letters", "dead letters", s.dead_letters ?? "–"),
    stat("oldest", "oldest waiting", duration(s.oldest_waiting_seconds)),
    stat("acks", "acks (1 h)", s.acks_last_hour ?? "–"),
    stat("redeliveries", "redeliveries (1 h)", s.redeliveries_last_hour ?? "–"));
  document.getElementById("chart").replaceChildren(sparkline(q.rates, true, q.interval));
  document.getElementById("chart-legend").replaceChildren(legend(q.rates));
  document.getElementById("lock-count").textContent = `(${fmt(q.in_flight)})`;
  syncRows("#locks", q.locks, lockSpec(q.node));
  syncRows("#subscribers", q.subscribers, SUBSCRIBER_SPEC);
  document.getElementById("dead-count").textContent = `(${fmt(s.dead_letters ?? q.dead_letters.length)})`;
  document.getElementById("dead-node").textContent = `in node ${q.config.dead_letter}`;
  syncRows("#dead", q.dead_letters, deadSpec(q));
  document.getElementById("item-count").textContent =
    `(${fmt(q.items.length)} oldest of ${fmt(q.waiting + q.in_flight)})`;
  syncRows("#items", q.items, itemSpec(q.node));
  syncRows("#affiliations", q.affiliations || [], AFFILIATION_SPEC);
  syncRows("#push", q.push || [], pushSpec(q.node));
  const c = q.config;
  document.getElementById("config").textContent =
    `lock timeout ${c.lock_timeout} s · max deliveries ${c.max_deliveries || "no limit"} · ` +
    `retry delay ${c.retry_delay} s (max ${c.retry_delay_max} s)` +
    (c.ordered ? " · ordered by ordering-key" : "") +
    (c.single_active ? ` · single active consumer: ${activeJid(q)}` : "");
}

// --- sign in ----------------------------------------------------------------------------

function setUpSignIn(refresh) {
  document.getElementById("signin").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = document.getElementById("token");
    const candidate = input.value.trim();
    input.value = "";
    try {
      await api("/api/token", { method: "POST", headers: { "Authorization": `Bearer ${candidate}` } });
      sessionStorage.setItem(TOKEN_KEY, candidate);
      showError("");
    } catch (e) {
      showError(`sign-in refused: ${e.message}`);
    }
    await refresh();
  });
  document.getElementById("signout").addEventListener("click", async () => {
    sessionStorage.removeItem(TOKEN_KEY);
    await refresh();
  });
  const purge = document.getElementById("purge");
  if (purge) {
    purge.addEventListener("click", () => {
      const node = new URLSearchParams(location.search).get("node");
      if (confirm(`Remove every item of '${node}'? This cannot be undone.`)) {
        run("purge", { node, confirm: true });
      }
    });
  }
  const affiliate = document.getElementById("affiliate");
  if (affiliate) {
    affiliate.addEventListener("submit", (event) => {
      event.preventDefault();
      run("affiliation", {
        node: new URLSearchParams(location.search).get("node"),
        jid: document.getElementById("affiliate-jid").value.trim(),
        affiliation: document.getElementById("affiliate-as").value,
      });
    });
  }
  const pushForm = document.getElementById("push-add");
  if (pushForm) setUpPushForm(pushForm);
  const redrive = document.getElementById("redrive");
  if (redrive) {
    redrive.addEventListener("click", () => {
      run("redrive", { node: new URLSearchParams(location.search).get("node") });
    });
  }
}

/** The add form: the secret box is on only with an auth that needs one, and is
 * emptied once sent (accepted or not), so the page never keeps or shows it. */
function setUpPushForm(form) {
  const auth = document.getElementById("push-auth");
  const secret = document.getElementById("push-secret");
  auth.addEventListener("change", () => {
    secret.disabled = auth.value === "none";
    secret.required = !secret.disabled;
    if (secret.disabled) secret.value = "";
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      node: new URLSearchParams(location.search).get("node"),
      url: document.getElementById("push-url").value.trim(),
      auth: auth.value,
      max_in_flight: document.getElementById("push-max").value.trim(),
    };
    if (auth.value !== "none") body.secret = secret.value;
    secret.value = "";
    await run("push-add", body);
    if (document.getElementById("error").hidden) document.getElementById("push-url").value = "";
  });
}

function start() {
  const page = document.body.dataset.page;
  const overview = async () => { await refreshOverview(); await refreshDeployment(); };
  const refresh = page === "queue" ? refreshQueue : overview;
  setUpSignIn(refresh);
  if (page === "overview") setUpOverview();
  const tick = async () => {
    try {
      await refresh();
      if (page === "overview") showError("");
    } catch (e) {
      showError(`cannot load: ${e.message}`);
    }
    setTimeout(tick, POLL_MS);
  };
  tick();
}

start();
