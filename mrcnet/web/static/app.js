// The mrcnet web view: draws the topology once (positions from /api/topology), then applies
// every snapshot of /api/events (server-sent events) to the same elements. State the tests
// read is in the DOM: each link's data-state ("up"/"down") and data-load, each queue bar's
// data-depth, <body data-updates> counting the snapshots applied.
"use strict";
const svg = d3.select("#fabric");
// square root: loads of 10-40% (most of a CPU-bound emulation) still read apart
const loadColour = d3.scaleSequentialSqrt(d3.interpolateYlOrRd).domain([0, 1]);
const IDLE = "#c5ccd3";
let topo = null;
let linkSel = null;
const qbars = new Map();  // "switch:port" -> rect
const updates = [];       // wall times (ms) of applied snapshots
window.mrcnetUpdates = updates;

function fmtRate(bps) {
  if (bps >= 1e9) return (bps / 1e9).toFixed(2) + " Gb/s";
  if (bps >= 1e6) return (bps / 1e6).toFixed(1) + " Mb/s";
  if (bps >= 1e3) return (bps / 1e3).toFixed(0) + " kb/s";
  return bps.toFixed(0) + " b/s";
}
function fmtBytes(b) {
  return b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + " MiB" : (b / 1024).toFixed(1) + " KiB";
}

function draw(t) {
  topo = t;
  document.body.dataset.kind = t.kind;
  document.getElementById("title").textContent = `mrcnet: ${t.name}`;
  svg.attr("viewBox", `0 0 ${t.width} ${t.height}`).attr("preserveAspectRatio", "xMidYMid meet")
    .style("max-width", `${1.6 * t.width}px`).style("max-height", `${1.6 * t.height}px`)
    .style("margin", "0 auto");
  const pos = new Map(t.nodes.map(n => [n.id, n]));
  const root = svg.append("g");
  if (t.kind === "packet") {
    const perPlane = (t.width) / t.planes;
    root.append("g").selectAll("text").data(d3.range(t.planes)).join("text")
      .attr("x", p => {
        const xs = t.nodes.filter(n => n.plane === p && n.kind === "switch").map(n => n.x);
        return xs.length ? (d3.min(xs) + d3.max(xs)) / 2 : perPlane * (p + 0.5);
      })
      .attr("y", 16).attr("text-anchor", "middle").attr("fill", "#667")
      .text(p => `plane ${p}`);
  }
  linkSel = root.append("g").selectAll("line").data(t.links).join("line")
    .attr("class", "link").attr("id", l => `link-${l.i}`)
    .attr("data-link", l => `${l.a}:${l.ap}-${l.b}:${l.bp}`)
    .attr("data-state", "up").attr("data-load", 0)
    .attr("x1", l => pos.get(l.a).x).attr("y1", l => pos.get(l.a).y)
    .attr("x2", l => pos.get(l.b).x).attr("y2", l => pos.get(l.b).y)
    .attr("stroke", IDLE).attr("stroke-width", 1.5);
  linkSel.append("title").text(l => `${l.a}:${l.ap} -- ${l.b}:${l.bp}`);
  // the tooltip says the load when the pointer is on the link (not rewritten every update)
  linkSel.on("mouseenter", function (_e, l) {
    const load = +this.getAttribute("data-load");
    this.firstChild.textContent = `${l.a}:${l.ap} -- ${l.b}:${l.bp}: ` +
      (this.getAttribute("data-state") === "down" ? "DOWN"
        : `${(load * 100).toFixed(0)}% (${fmtRate(+this.getAttribute("data-bps"))})`);
  });
  root.append("g").attr("id", "downmarks");
  root.append("g").attr("id", "circuit-layer");
  const nodes = root.append("g").selectAll("g").data(t.nodes).join("g")
    .attr("class", n => n.kind).attr("id", n => `node-${n.id}`)
    .attr("transform", n => `translate(${n.x},${n.y})`);
  nodes.append("title").text(n => n.id);
  const portLink = new Map();
  t.links.forEach(l => { portLink.set(`${l.a}:${l.ap}`, l); portLink.set(`${l.b}:${l.bp}`, l); });
  nodes.filter(n => n.kind === "switch").each(function (n) {
    const g = d3.select(this);
    const label = n.id.replace(/^p\d+-/, "");
    const w = Math.max(44, n.ports.length * 5 + 8, label.length * 6 + 10);
    g.append("rect").attr("class", "box").attr("x", -w / 2).attr("y", -14)
      .attr("width", w).attr("height", 28).attr("rx", 4);
    g.append("text").attr("y", -3).text(label);
    // one slot per port: the bar's height is the egress queue over the link's queue limit
    const slot = (w - 8) / n.ports.length;
    n.ports.forEach((port, k) => {
      const x = -w / 2 + 4 + k * slot;
      g.append("rect").attr("class", "qslot").attr("x", x).attr("y", 2)
        .attr("width", Math.max(1, slot - 1)).attr("height", 9);
      const bar = g.append("rect").attr("class", "qbar").attr("id", `q-${n.id}-${port}`)
        .attr("data-depth", 0).attr("x", x).attr("y", 11)
        .attr("width", Math.max(1, slot - 1)).attr("height", 0);
      bar.append("title").text(`${n.id}:${port} queue`);
      const link = portLink.get(`${n.id}:${port}`);
      qbars.set(`${n.id}:${port}`, {el: bar.node(), depth: 0, limit: (link && link.qbytes) || 1048576});
    });
  });
  nodes.filter(n => n.kind === "host").append("circle").attr("r", 9);
  nodes.filter(n => n.kind === "host").append("text").attr("y", 22).text(n => n.id);
  nodes.filter(n => n.kind === "gpu").append("circle").attr("r", 16);
  nodes.filter(n => n.kind === "gpu").append("text").attr("y", 4).text(n => n.id);
  nodes.filter(n => n.kind === "ocs").append("rect").attr("x", -30).attr("y", -18)
    .attr("width", 60).attr("height", 36).attr("rx", 4);
  nodes.filter(n => n.kind === "ocs").append("text").attr("y", 4).text(n => n.id);
  drawLegend();
}

function drawLegend() {
  const g = d3.select("#legend");
  const grad = g.append("defs").append("linearGradient").attr("id", "lg");
  d3.range(0, 1.01, 0.1).forEach(v => grad.append("stop").attr("offset", `${v * 100}%`)
    .attr("stop-color", loadColour(v)));
  g.append("rect").attr("x", 10).attr("y", 4).attr("width", 240).attr("height", 12)
    .attr("fill", "url(#lg)");
  const x = d3.scaleLinear().domain([0, 1]).range([10, 250]);
  g.append("g").attr("class", "axis").attr("transform", "translate(0,18)")
    .call(d3.axisBottom(x).ticks(5).tickFormat(d3.format(".0%")));
}

function apply(s) {
  if (!topo || s.error) {
    if (s.error) status(`source: ${s.error}`, true);
    return;
  }
  const unit = s.time === "virtual" ? `virtual s (TDF ${s.tdf})` : "s";
  document.getElementById("clock").textContent = `t = ${s.t.toFixed(2)} ${unit}`;
  document.getElementById("source").textContent = s.source;
  if (topo.kind === "packet") applyPacket(s); else applyCircuit(s);
  updates.push(performance.now());
  if (updates.length > 600) updates.shift();
  document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
  if (document.body.dataset.updates === "1") performance.mark("mrcnet-first-snapshot");
  status(`${document.body.dataset.updates} updates`, false);
}

const shown = [];  // per link: [state, load in 0.1% steps] last drawn
function applyPacket(s) {
  const down = new Set(s.down);
  const els = linkSel.nodes();
  topo.links.forEach((l, k) => {
    const load = s.load[l.i] || 0;
    const state = down.has(l.i) ? "down" : "up";
    const step = Math.round(load * 1000);
    const last = shown[k];
    if (last && last[0] === state && last[1] === step) return;  // nothing to redraw
    shown[k] = [state, step];
    const el = els[k];
    if (!last || last[0] !== state) {
      el.setAttribute("data-state", state);
      el.classList.toggle("down", state === "down");
    }
    el.setAttribute("data-load", load.toFixed(3));
    el.setAttribute("data-bps", s.bps[l.i] || 0);
    el.setAttribute("stroke", load < 0.005 ? IDLE : loadColour(Math.min(1, load)));
    el.setAttribute("stroke-width", 1.5 + 3 * Math.min(1, load));
  });
  const marks = d3.select("#downmarks").selectAll("text").data(s.down, i => i);
  marks.join("text").attr("class", "downmark")
    .attr("x", i => (+linkSel.nodes()[i].getAttribute("x1") + +linkSel.nodes()[i].getAttribute("x2")) / 2)
    .attr("y", i => (+linkSel.nodes()[i].getAttribute("y1") + +linkSel.nodes()[i].getAttribute("y2")) / 2)
    .text("✕");
  const rows = [];
  for (const [key, q] of qbars) {
    const cut = key.lastIndexOf(":");
    const depth = (s.depth[key.slice(0, cut)] || {})[key.slice(cut + 1)] || 0;
    if (depth > 0) rows.push([key, depth]);
    if (depth === q.depth) continue;
    q.depth = depth;
    const h = 9 * Math.min(1, depth / q.limit);
    q.el.setAttribute("data-depth", depth);
    q.el.setAttribute("height", h);
    q.el.setAttribute("y", 11 - h);
  }
  rows.sort((a, b) => b[1] - a[1]);
  d3.select("#queues tbody").selectAll("tr").data(rows.slice(0, 8)).join("tr")
    .html(r => `<td>${r[0]}</td><td>${fmtBytes(r[1])}</td>`);
  const maxPlane = Math.max(1, ...s.planes);
  d3.select("#planes").selectAll("div.plane").data(s.planes).join("div").attr("class", "plane")
    .html((b, p) => `plane ${p}: ${fmtRate(b)}<div class="planebar" style="width:${(100 * b / maxPlane).toFixed(0)}%"></div>`);
  const t = s.totals || {};
  document.getElementById("totals").textContent =
    `drops ${t.drops ?? "-"} · trims ${t.trims ?? "-"} · ECN ${t.ecn ?? "-"} · EVs bad ${t.ev_bad ?? "-"}`;
  d3.select("#down").selectAll("li").data(s.down, i => i).join("li")
    .text(i => { const l = topo.links[i]; return `${l.a}:${l.ap} -- ${l.b}:${l.bp}`; });
  qpTable(s.qps || []);
}

const QP_ROWS = 40;
function qpTable(qps) {
  const more = qps.length - QP_ROWS;
  d3.select("#qps tbody").selectAll("tr").data(qps.slice(0, QP_ROWS), q => q.qp).join("tr")
    .attr("class", q => (q.bad || q.denied) ? "qp-bad" : null)
    .attr("title", q => q.not_good.join("\n"))
    .html(q => `<td>${q.qp}</td><td>${q.good ?? "-"}</td><td>${q.bad}</td><td>${q.denied}</td>`);
  d3.select("#qps tfoot").remove();
  if (more > 0) d3.select("#qps").append("tfoot").append("tr").append("td").attr("colspan", 4)
    .text(`${more} more QPs, ${qps.slice(QP_ROWS).filter(q => q.bad || q.denied).length} of them with EVs not GOOD`);
}

function applyCircuit(s) {
  const pos = new Map(topo.nodes.map(n => [n.id, n]));
  const circuits = s.circuits || [];
  const colour = d3.scaleOrdinal(d3.schemeTableau10);
  const path = c => {
    const a = pos.get(c[0].split(":")[0]), b = pos.get(c[1].split(":")[0]);
    if (!a || !b) return "";
    const mx = (a.x + b.x) / 2, my = (a.y + b.y) / 2;
    const cx = topo.width / 2, cy = topo.height / 2;
    return `M${a.x},${a.y} Q${(mx + cx) / 2},${(my + cy) / 2} ${b.x},${b.y}`;
  };
  d3.select("#circuit-layer").selectAll("path").data(circuits, c => c.join(">")).join("path")
    .attr("class", "circuit").attr("d", path).attr("stroke", c => colour(c[0]))
    .attr("data-circuit", c => c.join(" -> "));
  d3.select("#circuits").selectAll("li").data(circuits, c => c.join(">"))
    .join("li").text(c => `${c[0]} → ${c[1]}`);
  timeline(s.collective);
}

function timeline(coll) {
  const tl = d3.select("#timeline").classed("on", !!coll);
  tl.selectAll("*").remove();
  if (!coll || !coll.records || coll.records.length < 1) return;
  const recs = coll.records;
  const t0 = recs[0].last_arrival_s;
  const t1 = Math.max(...recs.map(r => Math.max(r.last_arrival_s, r.released_s, r.dark_end_s)));
  const w = tl.node().clientWidth || 800;
  const x = d3.scaleLinear().domain([0, Math.max(1e-6, t1 - t0)]).range([40, w - 20]);
  tl.append("text").attr("x", 40).attr("y", 14)
    .text(`${coll.session}: ${recs.length - 1 >= 0 ? recs.length - 1 : 0} of ${coll.steps} steps` +
          ` done, ${coll.reconfigurations} reconfigurations${coll.done ? " (finished)" : ""}`);
  const steps = [];
  for (let i = 0; i + 1 < recs.length; i++) steps.push([recs[i].released_s, recs[i + 1].last_arrival_s, i + 1]);
  tl.append("g").selectAll("rect").data(steps).join("rect")
    .attr("class", d => d[2] % 2 ? "step odd" : "step")
    .attr("x", d => x(d[0] - t0)).attr("width", d => Math.max(1, x(d[1] - t0) - x(d[0] - t0)))
    .attr("y", 24).attr("height", 30).append("title")
    .text(d => `step ${d[2]}: ${((d[1] - d[0]) * 1e3).toFixed(2)} ms`);
  tl.append("g").selectAll("text").data(steps.filter(d => x(d[1] - t0) - x(d[0] - t0) > 14))
    .join("text").attr("class", "steplabel").attr("x", d => (x(d[0] - t0) + x(d[1] - t0)) / 2)
    .attr("y", 43).text(d => d[2]);
  document.getElementById("collective").textContent =
    `${coll.session}: ${Math.max(0, recs.length - 1)} of ${coll.steps} steps, ` +
    `${coll.reconfigurations} reconfigurations${coll.done ? ", finished" : ", running"}` +
    (coll.error ? ` (error: ${coll.error})` : "");
  const darks = recs.filter(r => r.reconfigured && r.dark_end_s > r.dark_start_s);
  tl.append("g").selectAll("rect").data(darks).join("rect").attr("class", "dark")
    .attr("x", r => x(r.dark_start_s - t0)).attr("width", r => Math.max(1, x(r.dark_end_s - t0) - x(r.dark_start_s - t0)))
    .attr("y", 58).attr("height", 14).append("title").text(r => `OCS dark before step ${r.step + 1}`);
  tl.append("text").attr("x", 4).attr("y", 43).attr("font-size", 10).text("steps");
  tl.append("text").attr("x", 4).attr("y", 69).attr("font-size", 10).text("dark");
  tl.append("g").attr("class", "axis").attr("transform", "translate(0,78)")
    .call(d3.axisBottom(x).ticks(8).tickFormat(v => `${(v * 1e3).toFixed(1)} ms`));
}

function status(text, bad) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.classList.toggle("bad", !!bad);
}

fetch("/api/topology").then(r => r.json()).then(t => {
  draw(t);
  const es = new EventSource("/api/events");
  es.addEventListener("snapshot", e => apply(JSON.parse(e.data)));
  es.onerror = () => status("disconnected (retrying)", true);
}).catch(e => status(`cannot load the topology: ${e}`, true));
