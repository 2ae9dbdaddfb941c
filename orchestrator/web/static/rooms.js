// The room list, through the API (the page itself holds no room data): refreshed every two seconds; a new
// room opens its page.
"use strict";

function ago(ts) {
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ts * 1000).toLocaleString();
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

async function refresh() {
  const r = await api("/rooms");
  if (!r.ok) return;
  const rooms = await r.json();
  const body = document.querySelector("#rooms tbody");
  body.replaceChildren();
  rooms.slice().reverse().forEach((room) => {
    const row = body.insertRow();
    const a = document.createElement("a");
    a.href = withToken(`/rooms/${encodeURIComponent(room.id)}`);
    a.textContent = room.name;
    row.insertCell().append(a, Object.assign(document.createElement("span"),
      { className: "muted small", textContent: ` ${room.id}` }));
    cell(row, room.floor);
    cell(row, ago(room.last_activity) + (room.busy ? " · working" : ""));
    cell(row, String(room.running_tasks));
    cell(row, String(room.messages));
  });
  document.getElementById("no-rooms").hidden = rooms.length > 0;
}

document.getElementById("new-room").addEventListener("submit", async (e) => {
  e.preventDefault();
  const name = document.getElementById("room-name").value.trim();
  const r = await api("/rooms", { method: "POST", json: { name } });
  const body = await r.json();
  if (!r.ok) {
    document.getElementById("new-room-error").textContent = body.error;
    return;
  }
  location.href = body.url;
});

refresh();
setInterval(refresh, 2000);
