// ctxoffload ui: the page. Everything a session holds is put into the document as text
// (text nodes, textContent): never as HTML. The server has already made control characters
// visible (`\x1b`), so nothing it sends acts on the page.
"use strict";

// The token is in the page's own address (what `ctxoffload ui` printed; a reload opens it
// again) and, from there, in this constant only: every request sends it in a header. Never a
// cookie (a browser sends 127.0.0.1's cookies to every port of it, so any other local server
// would receive it), never sessionStorage or localStorage.
const TOKEN_HEADER = "X-Ctxoffload-Token";
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const AUTH = { [TOKEN_HEADER]: TOKEN };

const PARTS = [
  ["system", "system prompt"],
  ["tools", "tool schemas"],
  ["summary", "summary"],
  ["pinned", "pinned messages"],
  ["messages", "messages"],
  ["tool_results", "tool results"],
  ["images", "images"],
];
const MARK_LETTERS = {
  compression: "C", offload: "O", clearing: "X", window: "W", pin: "P",
  resume: "R", fork: "F", subagent: "S", over_window: "!",
};

const state = { session: null, data: null, step: null, panel: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Like replaceChildren, leaving out the parts that are absent (null, undefined, false).
function fill(node, ...children) {
  node.replaceChildren(
    ...children.flat().filter((c) => c !== null && c !== undefined && c !== false),
  );
}

function fmt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "–";
}

// A count as a number to draw with: 0 for what is not one (a record may hold "NaN").
function count(n) {
  return typeof n === "number" && Number.isFinite(n) ? n : 0;
}

async function api(name, params) {
  const query = new URLSearchParams(params || {});
  const response = await fetch(`/api/${name}?${query}`, { headers: AUTH, credentials: "omit" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

function showError(where, error) {
  fill(where, el("p", { class: "error" }, String(error.message || error)));
}

// -- the sessions ---------------------------------------------------------------------------

async function loadSessions() {
  const nav = document.getElementById("sessions");
  try {
    const data = await api("sessions");
    document.getElementById("workspace").textContent = data.workspace;
    if (!data.sessions.length) {
      fill(nav, el("p", { class: "muted" }, "No sessions yet."));
      return;
    }
    fill(nav,
      ...data.sessions.map((row) =>
        el(
          "a",
          {
            href: `#session=${encodeURIComponent(row.session)}`,
            class: row.session === state.session ? "current" : null,
            dataset: { session: row.session },
            style: `margin-left: ${Math.min(row.depth || 0, 8) * 1}em`,
            onclick: (event) => {
              event.preventDefault();
              openSession(row.session);
            },
          },
          (row.depth ? "↳ " : "") + row.session,
          el(
            "small",
            {},
            `${fmt(row.steps)} steps · ${fmt(row.compressions)} compressions · ${row.last_activity || ""}`,
          ),
        ),
      ),
    );
  } catch (error) {
    showError(nav, error);
  }
}

// -- one session ----------------------------------------------------------------------------

async function openSession(session, keepPanel) {
  state.session = session;
  history.replaceState(null, "", `#session=${encodeURIComponent(session)}`);
  for (const link of document.querySelectorAll("#sessions a")) {
    link.classList.toggle("current", link.dataset.session === session);
  }
  const head = document.getElementById("session-head");
  let data;
  try {
    data = await api("session", { session });
  } catch (error) {
    showError(head, error);
    return;
  }
  if (state.session !== session) return;
  state.data = data;
  fill(head,
    el("h2", {}, `session ${data.session}`),
    el(
      "p",
      { class: "muted" },
      [data.path, data.agent && `agent ${data.agent}`, data.model && `model ${data.model}`,
        data.context_window && `window ${fmt(data.context_window)} tokens`,
        `${data.steps.length} model calls`].filter(Boolean).join(" · "),
    ),
    data.not_recorded ? el("p", { class: "muted", id: "not-recorded" }, data.not_recorded) : null,
    data.damaged_lines
      ? el("p", { class: "error" }, `${data.damaged_lines} damaged line(s) of events.jsonl skipped`)
      : null,
  );
  drawLegend(data);
  drawTimeline(data);
  drawCompare(data);
  drawEvents(data);
  if (!keepPanel) {
    state.step = null;
    fill(document.getElementById("panel"));
  } else if (state.panel) {
    state.panel();
  }
}

function drawLegend(data) {
  const legend = document.getElementById("legend");
  legend.hidden = !data.steps.length;
  fill(legend,
    ...PARTS.map(([part, label]) =>
      el("span", {}, el("span", { class: `swatch part-${part}` }), label),
    ),
    el("span", {}, el("span", { class: "swatch", style: "border-top: 2px dashed #dc2626" }), "trigger line"),
    el("span", {}, el("span", { class: "swatch", style: "border-top: 2px dashed #111827" }), "window"),
    el("span", { class: "muted" }, "marks: C compression · O offload · X clearing · W window · P pin · R resume · S sub-agent · ! sent over the window"),
  );
}

function drawTimeline(data) {
  const box = document.getElementById("timeline");
  box.hidden = !data.steps.length;
  if (!data.steps.length) {
    fill(box);
    return;
  }
  const height = 230; // pixels for the tallest of the window and the steps
  let top = 1;
  for (const step of data.steps) {
    top = Math.max(top, count(step.context_window), count(step.tokens_counted), total(step));
  }
  top *= 1.05;
  const px = (tokens) => Math.max(0, (count(tokens) / top) * height);
  const children = [];
  const last = data.steps[data.steps.length - 1];
  if (count(last.context_window)) {
    children.push(el("div", { class: "rule window", style: `bottom: ${px(last.context_window)}px` },
      el("span", {}, `window ${fmt(last.context_window)}`)));
  }
  if (count(last.trigger_tokens)) {
    children.push(el("div", { class: "rule trigger", style: `bottom: ${px(last.trigger_tokens)}px` },
      el("span", {}, `trigger ${fmt(last.trigger_tokens)}`)));
  }
  // On a long timeline, a number every 5th, 10th, 50th... bar, so the numbers stay legible.
  const every = [1, 5, 10, 50, 100, 500, 1000].find((n) => data.steps.length / n <= 60) || 5000;
  for (const step of data.steps) {
    const segments = [];
    if (step.window) {
      for (const [part, label] of PARTS) {
        const tokens = step.window[part] || 0;
        segments.push(el("div", {
          class: `seg part-${part}`,
          style: `height: ${px(tokens)}px`,
          title: `${label}: ${fmt(tokens)} tokens`,
          dataset: { part, tokens: String(tokens) },
        }));
      }
    } else {
      segments.push(el("div", {
        class: "seg part-unknown",
        style: `height: ${px(step.tokens_counted || 0)}px`,
        title: `${fmt(step.tokens_counted)} tokens (this record does not say what filled them)`,
        dataset: { part: "unknown", tokens: String(step.tokens_counted || 0) },
      }));
    }
    const marks = step.marks.map((mark) =>
      el("span", { class: `mark ${mark.mark}`, title: mark.text }, MARK_LETTERS[mark.mark] || "•"));
    children.push(el(
      "div",
      {
        class: "step" + (state.step === step.step ? " current" : ""),
        dataset: { step: String(step.step), tokens: String(step.tokens_counted) },
        title: `step ${step.step}: ${fmt(step.tokens_counted)} tokens counted, ${step.outcome}`,
        onclick: () => openStep(step.step),
      },
      el("div", { class: "marks" }, marks),
      el("div", { class: "bar" }, segments),
      el("div", { class: "label" }, step.step % every === 0 || step === data.steps[0] ? String(step.step) : "\u00a0"),
    ));
  }
  fill(box, el("div", { class: "track" }, children));
  const current = box.querySelector(".step.current") || box.querySelector(".step:last-child");
  if (current) current.scrollIntoView({ block: "nearest", inline: "nearest" });
}

function total(step) {
  return step.window ? Object.values(step.window).reduce((a, b) => a + count(b), 0) : 0;
}

function drawCompare(data) {
  const form = document.getElementById("compare");
  form.hidden = data.steps.length < 2;
  const options = () => data.steps.map((s) => el("option", { value: String(s.step) }, String(s.step)));
  const from = document.getElementById("compare-from");
  const to = document.getElementById("compare-to");
  const keep = [from.value, to.value];
  fill(from, ...options());
  fill(to, ...options());
  if (data.steps.length >= 2) {
    from.value = keep[0] || String(data.steps[data.steps.length - 2].step);
    to.value = keep[1] || String(data.steps[data.steps.length - 1].step);
  }
}

function drawEvents(data) {
  document.getElementById("events-title").hidden = !data.lines.length;
  fill(document.getElementById("events"),
    ...data.lines.map((line) =>
      el("pre", { class: `event ${line.kind}`, dataset: { kind: line.kind } }, line.lines.join("\n"))),
  );
}

// -- a step, a file, a difference, a search ---------------------------------------------------

function showPanel(render) {
  state.panel = render;
  return render();
}

async function openStep(step, full) {
  state.step = step;
  for (const bar of document.querySelectorAll(".step")) {
    bar.classList.toggle("current", bar.dataset.step === String(step));
  }
  const facts = state.data.steps.find((s) => s.step === step);
  return showPanel(async () => {
    const panel = document.getElementById("panel");
    let data;
    try {
      data = await api("step", { session: state.session, step, full: full ? "1" : "0" });
    } catch (error) {
      showError(panel, error);
      return;
    }
    const rows = [];
    if (facts && facts.window) {
      for (const [part, label] of PARTS) {
        rows.push(el("tr", { dataset: { part } },
          el("td", {}, el("span", { class: `swatch part-${part}` }), label),
          el("td", { class: "n" }, fmt(facts.window[part] || 0))));
      }
    }
    fill(panel,
      el("h3", { id: "step-title" }, `step ${step}: the model was sent ${data.messages.length} messages` +
        (facts ? ` · ${fmt(facts.tokens_counted)} tokens counted` +
          (facts.input_tokens ? ` · ${fmt(facts.input_tokens)} input tokens reported` : "") : "")),
      rows.length ? el("table", { class: "parts" }, rows) : null,
      ...data.messages.map((msg) =>
        el("div", { class: "message", dataset: { id: msg.id } },
          el("div", { class: "head" }, `[${msg.position}] ${msg.role}` + (msg.name ? ` (${msg.name})` : "") + ` · id ${msg.id}`),
          el("pre", { class: "body" }, linkedParts(msg.parts)),
          msg.chars_left_out
            ? el("button", { class: "link", type: "button", onclick: () => openStep(step, true) },
              `${fmt(msg.chars_left_out)} more characters: show all`)
            : null)),
    );
  });
}

function linkedParts(parts) {
  return parts.map((part) =>
    part.path
      ? el("a", {
        class: "ref", href: "#", dataset: { path: part.path },
        onclick: (event) => { event.preventDefault(); openFile(part.path, 1); },
      }, part.text)
      : part.text);
}

async function openFile(path, offset) {
  return showPanel(async () => {
    const panel = document.getElementById("panel");
    let data;
    try {
      data = await api("file", { path, offset });
    } catch (error) {
      showError(panel, error);
      return;
    }
    fill(panel,
      el("h3", {}, `${data.shown_as} (read-only, as the agent's Read tool shows it)`),
      el("pre", { id: "file-text", class: data.error ? "error" : null }, data.text),
      data.next_offset
        ? el("button", { class: "link", type: "button", onclick: () => openFile(path, data.next_offset) },
          `next lines from ${fmt(data.next_offset)}`)
        : null,
      state.step !== null
        ? el("button", { class: "link", type: "button", onclick: () => openStep(state.step) },
          ` back to step ${state.step}`)
        : null,
    );
  });
}

async function openDiff(from, to) {
  return showPanel(async () => {
    const panel = document.getElementById("panel");
    let data;
    try {
      data = await api("diff", { session: state.session, from, to });
    } catch (error) {
      showError(panel, error);
      return;
    }
    const list = (title, entries, cls) => [
      el("h4", {}, `${title} (${entries.length})`),
      ...entries.map((e) => el("div", { class: `message ${cls}` },
        el("div", { class: "head" }, `${e.role} · id ${e.id}`), el("pre", {}, e.text))),
    ];
    fill(panel,
      el("h3", {}, `from step ${data.from} to step ${data.to}: ${data.kept} messages sent both times`),
      ...list("left the context", data.left, "left"),
      ...list("came in", data.entered, "entered"),
      ...list("changed under the same id", data.changed, "changed"),
    );
  });
}

async function runSearch(pattern) {
  const params = {
    pattern,
    fixed: document.getElementById("fixed").checked ? "1" : "0",
    ignore_case: document.getElementById("icase").checked ? "1" : "0",
  };
  if (document.getElementById("this-session").checked && state.session) params.session = state.session;
  return showPanel(async () => {
    const panel = document.getElementById("panel");
    fill(panel, el("p", { class: "muted" }, "searching…"));
    let data;
    try {
      data = await api("search", params);
    } catch (error) {
      showError(panel, error);
      return;
    }
    fill(panel,
      el("h3", { id: "search-title" }, `${fmt(data.total)} matching lines` +
        (data.total > data.matches.length ? ` (the first ${fmt(data.matches.length)} shown)` : "")),
      ...data.matches.map((hit) =>
        el("div", { class: "hit", dataset: { path: hit.path, line: String(hit.line) } },
          el("a", {
            class: "ref", href: "#",
            onclick: (event) => { event.preventDefault(); openFile(hit.path, Math.max(1, hit.line - 5)); },
          }, `${hit.shown_as}:${hit.line}`),
          el("pre", {}, hit.text))),
      ...(data.notes || []).map((note) => el("p", { class: "muted" }, note)),
    );
  });
}

// -- live updates ---------------------------------------------------------------------------
//
// One stream for all the tabs of this viewer. A browser opens at most six connections to a
// host, and a stream holds one for as long as it is open: with a stream per tab, a seventh
// tab waited forever. The tab holding the lock (one holder per origin, so per viewer) opens
// the stream and passes on what it hears over a BroadcastChannel; when that tab closes, the
// next tab in line takes the lock and opens the stream, and every tab reloads what it shows,
// so a change made in between is not missed.

const LIVE = "ctxoffload-live";

function follow() {
  const channel = "BroadcastChannel" in window ? new BroadcastChannel(LIVE) : null;
  if (!channel || !(navigator.locks && navigator.locks.request)) {
    stream(null);  // no way to share: a stream of its own
    return;
  }
  let leading = false;
  let on = false;
  channel.onmessage = (event) => {
    const message = event.data;
    if (message.kind === "ask") {
      if (leading) channel.postMessage({ kind: "status", on });
    } else {
      hear(message);
    }
  };
  navigator.locks.request(LIVE, async () => {
    leading = true;
    // Held until the tab closes, or until its token is refused: then another tab may lead.
    await stream((message) => {
      if (message.kind === "status") on = message.on;
      channel.postMessage(message);
    });
    leading = false;
  });
  channel.postMessage({ kind: "ask" });  // the badge of a tab that joins
}

// Open the stream; what it hears is shown here and, with `tell`, passed to the other tabs.
// It is read with fetch, not EventSource: EventSource cannot send a header, and the token
// would have to travel in the stream's URL, where nothing else of the data takes it. A stream
// that ends or fails is opened again after `retry` (what the server asks, 2 s); one refused
// (403: a viewer started again on this port, with another token) is not, and the returned
// promise ends, so another tab may lead.
async function stream(tell) {
  const say = (message) => {
    hear(message);
    if (tell) tell(message);
  };
  let opened = false;
  let retry = 2000;
  for (;;) {
    try {
      const response = await fetch("/api/live", {
        headers: AUTH, credentials: "omit", cache: "no-store",
      });
      if (response.status === 403) {
        say({ kind: "status", on: false });
        return;
      }
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      say({ kind: "status", on: true });
      // Reconnected, or taking over from a tab that closed: changes may have been missed.
      if (opened || tell) say({ kind: "change", sessions: [] });
      opened = true;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = { name: "message", data: [] };
          for (const line of buffer.slice(0, end).split("\n")) {
            const colon = line.indexOf(":");
            if (colon === 0) continue; // a comment: the keep-alive
            const field = colon < 0 ? line : line.slice(0, colon);
            const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") event.name = text;
            else if (field === "data") event.data.push(text);
            else if (field === "retry" && /^\d+$/.test(text)) retry = Number(text);
          }
          buffer = buffer.slice(end + 2);
          if (event.name === "change") {
            say({ kind: "change", ...JSON.parse(event.data.join("\n")) });
          }
        }
      }
    } catch (error) {
      // the server stopped, or the connection broke: try again below
    }
    say({ kind: "status", on: false });
    await new Promise((resolve) => setTimeout(resolve, retry));
  }
}

function hear(message) {
  if (message.kind === "status") {
    const badge = document.getElementById("live");
    badge.className = message.on ? "live on" : "live off";
    badge.title = message.on ? "live updates: on" : "live updates: reconnecting";
  } else if (message.kind === "change") {
    loadSessions();
    if (state.session && (!message.sessions.length || message.sessions.includes(state.session))) {
      openSession(state.session, true);
    }
  }
}

// -- start ----------------------------------------------------------------------------------

function start() {
  document.getElementById("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const pattern = document.getElementById("search").value;
    if (pattern) runSearch(pattern);
  });
  document.getElementById("compare").addEventListener("submit", (event) => {
    event.preventDefault();
    openDiff(document.getElementById("compare-from").value, document.getElementById("compare-to").value);
  });
  const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
  loadSessions().then(() => {
    const first = document.querySelector("#sessions a");
    const session = wanted || (first && first.dataset.session);
    if (session) openSession(session);
  });
  follow();
}

start();
