// research-bench viewer: the one script. On a run page it follows the run's live event feed
// (Server-Sent Events from /api/runs/<run>/events/stream) and, when a trial starts or finishes,
// fetches the page again and swaps the #live region in place, highlighting rows that changed;
// the feed's `end` event (the run is no longer running) closes it, with one last refresh if
// the page showed the run running.
// It also toggles all trajectory steps open or closed. No library, no network beyond this server.
(function () {
  "use strict";

  document.addEventListener("click", function (e) {
    var t = e.target.closest("[data-toggle-steps]");
    if (!t) return;
    e.preventDefault();
    var open = t.getAttribute("data-toggle-steps") === "open";
    document.querySelectorAll("li.step > details").forEach(function (d) { d.open = open; });
  });

  var live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  var run = live.getAttribute("data-run");
  var last = live.getAttribute("data-last-event") || "0";
  var pending = null;
  var updates = 0;

  function rowStates(root) {
    var m = {};
    root.querySelectorAll("tr.trial-row").forEach(function (tr) {
      m[tr.getAttribute("data-trial")] = tr.textContent;
    });
    return m;
  }

  function refresh() {
    pending = null;
    fetch(window.location.href, { headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("live");
        var cur = document.getElementById("live");
        if (!next || !cur) return;
        var before = rowStates(cur);
        cur.innerHTML = next.innerHTML;
        ["data-last-event", "data-status"].forEach(function (a) {
          cur.setAttribute(a, next.getAttribute(a));
        });
        updates += 1;
        cur.setAttribute("data-updates", String(updates));
        cur.querySelectorAll("tr.trial-row").forEach(function (tr) {
          if (before[tr.getAttribute("data-trial")] !== tr.textContent) tr.classList.add("fresh");
        });
      })
      .catch(function () { /* the next event retries */ });
  }

  var source = new EventSource("/api/runs/" + encodeURIComponent(run) + "/events/stream?after=" + encodeURIComponent(last));
  function schedule() { if (!pending) pending = setTimeout(refresh, 250); }
  ["trial_started", "trial_finished", "run_finished", "run_resumed"].forEach(function (kind) {
    source.addEventListener(kind, schedule);
  });
  // The server's last event: the run is not running (any more); the feed closes (no
  // reconnection). The page is fetched again only if it showed the run running: a page
  // rendered after the run ended is current, and swapping it would pull the rows from under
  // the reader's cursor (a click landing on a row that is being replaced is lost).
  source.addEventListener("end", function () {
    source.close();
    if (live.getAttribute("data-status") === "running") schedule();
  });
})();
