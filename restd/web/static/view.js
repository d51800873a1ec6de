// shoal's web view: polls restd's JSON and redraws the page's live parts (plain JS, no build step).
"use strict";
(function () {
  const view = document.getElementById("view");
  if (!view) return;
  const page = document.body.dataset.page;
  const features = new Set((view.dataset.features || "").split(" ").filter(Boolean));
  const me = view.dataset.user;
  const POLL_MS = 2000;

  // GET url as JSON; null on 404 (an endpoint this restd does not serve); a bad or expired token
  // sends the browser to the login page, which says which.
  async function getJson(url) {
    const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (r.status === 401) {
      const body = await r.json().catch(() => ({}));
      location.assign(body.login || "/web/login?error=expired");
      throw new Error("not logged in");
    }
    if (r.status === 404) return null;
    if (!r.ok) throw new Error(url + ": HTTP " + r.status);
    return r.json();
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) node.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  function when(value) {
    if (value === null || value === undefined || value === "") return "";
    if (typeof value === "number") {  // unix seconds, shown as squeue shows times (local, to the second)
      if (value <= 0) return "N/A";
      const d = new Date(value * 1000);
      const two = (n) => String(n).padStart(2, "0");
      return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + "T" +
        two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
    }
    return String(value);
  }

  function text(value) {
    if (Array.isArray(value)) return value.map(text).join(", ");
    if (value && typeof value === "object") return JSON.stringify(value);
    return value === undefined || value === null ? "" : String(value);
  }

  function updated(error) {
    const line = document.getElementById("updated");
    line.classList.toggle("error", Boolean(error));
    line.textContent = error ? "not updated: " + error : "updated " + new Date().toLocaleTimeString();
  }

  // --- Nodes: a card per node, a cell per GPU ------------------------------------------------
  function gpuCell(node, gpu, live) {
    const cell = el("div", {
      class: "gpu" + (gpu.held ? " held" : " free") + (live && live.idle ? " idle" : ""),
      "data-node": node.name,
      "data-index": gpu.index,
      "data-job": gpu.job_id,
      "data-user": gpu.user,
    });
    cell.append(el("div", { class: "gpu-name" }, "GPU " + gpu.index + (gpu.type ? " " + gpu.type : "")));
    if (gpu.job_id) {
      cell.append(el("div", { class: "gpu-job" }, "job " + gpu.job_id));
      cell.append(el("div", { class: "gpu-user" }, gpu.user + (gpu.job_name ? " · " + gpu.job_name : "")));
    } else {
      // held by a job PrivateData=jobs hides from this viewer: in use, whose is not shown
      cell.append(el("div", { class: "gpu-job" }, gpu.held ? "in use" : "free"));
    }
    if (live) {
      const util = Number(live.utilization) || 0;
      const bar = el("div", { class: "bar" }, el("span"));
      bar.firstChild.style.width = Math.max(0, Math.min(100, util)) + "%";
      cell.append(el("div", { class: "gpu-util", "data-util": util }, util + "% util"));
      cell.append(bar);
      if (live.memory_total_mb) {
        cell.append(el("div", { class: "gpu-mem" }, live.memory_used_mb + " / " + live.memory_total_mb + " MiB"));
      }
      if (live.idle) cell.append(el("div", { class: "flag" }, "idle" + (live.idle_since ? " since " + when(live.idle_since) : "")));
    }
    return cell;
  }

  function nodeCard(node, live) {
    const state = String(node.state || "");
    const head = el("div", { class: "node-head" },
      el("h2", {}, node.name),
      el("span", { class: "state state-" + state.toLowerCase().split("+")[0] }, state),
      el("span", { class: "cpus" }, node.alloc_cpus + "/" + node.cpus + " CPUs"));
    const card = el("section", { class: "node", "data-node": node.name, "data-state": state }, head);
    if (node.reason) card.append(el("p", { class: "reason" }, node.reason));
    const cells = el("div", { class: "gpus" });
    for (const gpu of node.gpus) cells.append(gpuCell(node, gpu, live.get(node.name + "/" + gpu.index)));
    card.append(node.gpus.length ? cells : el("p", { class: "hint" }, "no GPUs"));
    return card;
  }

  async function drawNodes() {
    const data = await getJson("/web/api/nodes");
    const live = new Map();
    if (features.has("gpus")) {
      const gpus = await getJson("/shoal/v1/gpus");
      if (gpus === null) features.delete("gpus");
      else for (const g of gpus.gpus || []) live.set(g.node + "/" + g.index, g);
    }
    document.getElementById("grid").replaceChildren(...data.nodes.map((n) => nodeCard(n, live)));
  }

  // --- Queue: squeue's jobs, and "why?" where restd explains pending jobs ---------------------
  let whyJob = null;

  async function drawWhy() {
    const panel = document.getElementById("why");
    if (whyJob === null) { panel.hidden = true; return; }
    const why = await getJson("/shoal/v1/why/" + encodeURIComponent(whyJob));
    if (why === null) { panel.hidden = true; return; }
    const facts = el("dl", {});
    for (const [key, label] of [["state", "State"], ["reason", "Reason"],
      ["planned_start", "Planned start"], ["planned_nodes", "Planned nodes"], ["ahead", "Jobs ahead"]]) {
      if (why[key] !== undefined && why[key] !== null && why[key] !== "") {
        facts.append(el("dt", {}, label), el("dd", {}, key === "planned_start" ? when(why[key]) : text(why[key])));
      }
    }
    // waits_for: one {kind, text, ...} per thing the job waits for (shoal why's answer)
    const waits = (Array.isArray(why.waits_for) ? why.waits_for : []).map((w) => (w && w.text) || "").filter(Boolean);
    if (waits.length) {
      const list = el("ul", { class: "waits" });
      for (const w of waits) list.append(el("li", {}, w));
      facts.append(el("dt", {}, "Waits for"), el("dd", {}, list));
    }
    const ideas = el("ul", { class: "suggestions" });
    for (const s of why.suggestions || []) ideas.append(el("li", {}, text(s.change) + " → start " + when(s.planned_start)));
    panel.replaceChildren(el("h2", {}, "Why is job " + (why.job_id || whyJob) + " " + String(why.state || "pending").toLowerCase() + "?"),
      el("p", { class: "why-text" }, text(why.text)), facts, ideas,
      el("button", { type: "button", id: "why-close" }, "close"));
    panel.querySelector("#why-close").addEventListener("click", () => { whyJob = null; panel.hidden = true; });
    panel.hidden = false;
  }

  async function drawQueue() {
    const data = await getJson("/web/api/queue");
    const body = document.querySelector("#queue tbody");
    const rows = data.jobs.map((j) => {
      const row = el("tr", { "data-job": j.job_id, "data-state": j.state, class: j.user === me ? "mine" : "" },
        el("td", {}, j.job_id), el("td", {}, j.name), el("td", {}, j.user), el("td", {}, j.account),
        el("td", {}, j.partition), el("td", { class: "state" }, j.state), el("td", { class: "reason" }, j.reason),
        el("td", {}, j.submit), el("td", { class: "start" }, j.start),
        el("td", {}, j.state === "PENDING" ? j.planned_nodes : j.nodes), el("td", {}, j.gpus || ""),
        el("td", {}, j.time_limit));
      const action = el("td", {});
      if (j.state === "PENDING" && features.has("why")) {
        const button = el("button", { type: "button", class: "why" }, "why?");
        button.addEventListener("click", () => { whyJob = j.id; drawWhy().catch((e) => updated(e.message)); });
        action.append(button);
      }
      row.append(action);
      return row;
    });
    body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 13, class: "hint" }, "No jobs."))]));
    if (whyJob !== null) await drawWhy();
  }

  // --- Fair-share: sshare -a ----------------------------------------------------------------
  async function drawShares() {
    const data = await getJson("/web/api/shares");
    const rows = data.shares.map((s) => {
      const account = el("td", { class: "account" }, s.account);
      account.style.paddingLeft = (0.4 + s.depth * 1.2) + "em";
      return el("tr", { class: s.user ? (s.user === me ? "user mine" : "user") : "acct", "data-account": s.account, "data-user": s.user },
        account, el("td", {}, s.user), el("td", {}, s.raw_shares), el("td", {}, s.norm_shares),
        el("td", {}, s.raw_usage), el("td", {}, s.effective_usage), el("td", {}, s.fairshare));
    });
    document.querySelector("#shares tbody").replaceChildren(...rows);
  }

  // --- What-if: shoal sim on the site's history (restd draws the SVG) -------------------------
  let drawn = "";
  async function drawWhatIf() {
    const data = await getJson("/web/api/whatif");
    const status = document.getElementById("whatif-status");
    status.dataset.state = data.state;
    status.textContent = data.state === "ready" ? "" : data.message || "";
    if (data.state !== "ready") return data.state === "running" ? POLL_MS : 30000;
    const key = JSON.stringify(data.table);
    if (key !== drawn) {
      drawn = key;
      const head = el("tr", {}, ...data.columns.map((c) => el("th", {}, c)));
      document.querySelector("#whatif thead").replaceChildren(head);
      document.querySelector("#whatif tbody").replaceChildren(...data.table.map((r) =>
        el("tr", { "data-policy": r.policy }, ...data.keys.map((k) => el("td", {}, r[k])))));
      const plots = document.getElementById("plots");
      plots.innerHTML = data.plots.join("");  // SVG drawn and escaped by restd
    }
    return 30000;
  }

  const DRAW = { nodes: drawNodes, queue: drawQueue, shares: drawShares, whatif: drawWhatIf };

  async function poll() {
    let next = POLL_MS;
    try {
      const wait = await DRAW[page]();
      if (typeof wait === "number") next = wait;
      updated(null);
    } catch (e) {
      if (e.message === "not logged in") return;
      updated(e.message);
    }
    setTimeout(poll, next);
  }

  if (DRAW[page]) poll();
})();
