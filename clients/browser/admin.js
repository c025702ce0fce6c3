// The admin page: the /admin/ JSON calls of server/admin.py, shown as tables. The token stays in
// this tab's sessionStorage and goes out only in the Authorization header. Every text from the
// server (names above all) is set with textContent, never parsed as HTML.

const TOKEN_KEY = "blackdrez.admin-token";
const $ = (selector) => document.querySelector(selector);

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text ?? "";
  if (className) td.className = className;
  return td;
}

function button(parent, label, onclick, className) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (className) b.className = className;
  b.addEventListener("click", onclick);
  parent.append(b);
  return b;
}

function say(text, error = false) {
  $("#status").textContent = text;
  $("#status").className = error ? "error" : "";
}

async function call(path, method = "GET") {
  const token = sessionStorage.getItem(TOKEN_KEY) ?? "";
  const response = await fetch(`/admin/${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${response.status}: ${body.error ?? response.statusText}`);
  return body;
}

const seatText = (seat) => (seat === null ? "·" : `${seat.name}${seat.bot ? " (bot)" : ""}${seat.connected ? "" : " (away)"}`);

function showNodes(nodes) {
  const body = $("#nodes tbody");
  body.replaceChildren();
  for (const node of nodes) {
    const row = body.insertRow();
    cell(row, node.id, "mono");
    cell(row, node.live ? "yes" : "NO");
    cell(row, String(node.tables));
    cell(row, String(node.players));
    cell(row, node.connections === undefined ? "(ask that node)" : String(node.connections));
  }
}

function showTables(tables) {
  const body = $("#tables tbody");
  body.replaceChildren();
  for (const table of tables) {
    const row = body.insertRow();
    row.dataset.table = table.id;
    cell(row, table.id, "mono");
    cell(row, table.game);
    cell(row, table.status);
    cell(row, table.host_node, "mono");
    cell(row, table.seats.map(seatText).join(", "));
    const actions = cell(row, "");
    button(actions, "Events", () => showTable(table.id));
    button(actions, "Close", () => act(`close?table=${encodeURIComponent(table.id)}`, `Close table ${table.id}?`), "danger");
  }
  if (tables.length === 0) cell(body.insertRow(), "No live table.").colSpan = 6;
}

async function showTable(id) {
  try {
    const { table, recent, log_entries: total } = await call(`table?id=${encodeURIComponent(id)}`);
    $("#detail").hidden = false;
    $("#detail-id").textContent = `${table.id} on ${table.host_node} (${total} log entries)`;
    const seats = $("#detail-seats");
    seats.replaceChildren();
    table.seats.forEach((seat, index) => {
      if (seat === null) return;
      const span = document.createElement("span");
      span.textContent = `seat ${index}: ${seatText(seat)} `;
      seats.append(span);
      const query = `remove?table=${encodeURIComponent(id)}&player=${encodeURIComponent(seat.player)}`;
      button(seats, "Remove", () => act(query, `Remove ${seat.name} from ${id}?`), "danger");
    });
    const body = $("#events tbody");
    body.replaceChildren();
    for (const entry of recent.slice().reverse()) {
      const row = body.insertRow();
      cell(row, String(entry.seq));
      cell(row, new Date(entry.at * 1000).toLocaleTimeString());
      cell(row, entry.name || entry.player || "(the table)");
      cell(row, JSON.stringify(entry.command), "mono");
    }
  } catch (error) {
    say(String(error.message), true);
  }
}

const lineText = (line) => `${line.name}${line.seat === null ? " (watching)" : ""}${line.bot ? " (bot)" : ""}: ${line.text}`;

function showReports(reports) {
  const body = $("#reports tbody");
  body.replaceChildren();
  for (const report of reports) {
    const row = body.insertRow();
    row.dataset.report = report.id;
    cell(row, new Date(report.at * 1000).toLocaleString());
    cell(row, report.table, "mono");
    cell(row, lineText(report.line));
    cell(row, `${report.reporter_name}${report.reason ? `: ${report.reason}` : ""}`);
    cell(row, report.context.map(lineText).join("\n"), "context");
  }
  if (reports.length === 0) cell(body.insertRow(), "No report.").colSpan = 5;
}

async function act(query, question) {
  if (!confirm(question)) return;
  try {
    await call(query, "POST");
    say("Done.");
    await refresh();
  } catch (error) {
    say(String(error.message), true);
  }
}

async function refresh() {
  try {
    const [{ nodes }, { tables }, { reports }] = await Promise.all([call("nodes"), call("tables"), call("reports")]);
    showNodes(nodes);
    showTables(tables);
    showReports(reports);
    say(`${tables.length} live table(s) on ${nodes.length} node(s), ${new Date().toLocaleTimeString()}.`);
  } catch (error) {
    say(String(error.message), true);
  }
}

$("#login").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("#token").value);
  refresh();
});
$("#refresh").addEventListener("click", refresh);
if (sessionStorage.getItem(TOKEN_KEY)) refresh();
