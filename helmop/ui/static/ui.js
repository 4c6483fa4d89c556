// helmop web UI: makes a page live. The server sends a note (kind, namespace) when something the viewer may
// list changes; the page then reads itself again, with the viewer's rights, and swaps its #live part.
// Without this script every page is complete; it only stops updating by itself.
"use strict";
(function () {
  const body = document.body;
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!body.dataset.live || !live || !window.EventSource) return;
  const scope = body.dataset.namespace || "";
  let pending = null, reading = false, again = false;

  async function refresh() {
    pending = null;
    if (reading) { again = true; return; }
    reading = true;
    try {
      const answer = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
      if (answer.ok || answer.status === 403 || answer.status === 404) {
        const page = new DOMParser().parseFromString(await answer.text(), "text/html");
        const fresh = page.getElementById("live");
        if (fresh) {
          live.replaceChildren(...fresh.childNodes);
          live.dataset.updated = String(Date.now());
        }
      }
    } catch (e) {
      status.textContent = "Live updates interrupted; retrying";
    } finally {
      reading = false;
      if (again) { again = false; schedule(); }
    }
  }

  function schedule() {
    if (!pending) pending = setTimeout(refresh, 250);
  }

  const source = new EventSource(body.dataset.live);
  source.onopen = function () { status.textContent = "Live"; body.dataset.liveOpen = "1"; };
  source.onerror = function () { status.textContent = "Live updates interrupted; reconnecting"; };
  source.onmessage = function (message) {
    let note;
    try { note = JSON.parse(message.data); } catch (e) { return; }
    if (scope && note.namespace && note.namespace !== scope) return;
    schedule();
  };
})();
