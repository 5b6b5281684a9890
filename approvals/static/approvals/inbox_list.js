// The inbox list (approvals/admin/inbox.py): the reason cell expands on click or Enter, and the list asks
// approvals.admin.inbox_updates for new work every ~15 s (and when its tab is shown again). New pauses are
// announced by a banner, "N new pauses waiting — Show", never by reloading under the reviewer's hands
// (a selection or a half-typed search would be lost); Show reloads the list with its filters.
(function () {
  "use strict";

  function toggleReason(node) {
    var expanded = node.classList.toggle("hitl-expanded");
    node.setAttribute("aria-expanded", expanded ? "true" : "false");
  }

  function watchReasons() {
    document.addEventListener("click", function (event) {
      var node = event.target.closest && event.target.closest(".hitl-reason");
      if (node) { toggleReason(node); }
    });
    document.addEventListener("keydown", function (event) {
      var node = event.target.closest && event.target.closest(".hitl-reason");
      if (node && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        toggleReason(node);
      }
    });
  }

  function showBanner(banner, count) {
    var words = count === 1 ? "1 new pause waiting" : count + " new pauses waiting";
    banner.textContent = words + " \u2014 ";
    var link = document.createElement("a");
    link.href = window.location.href;  // the same list: its filters, search and page
    link.textContent = "Show";
    link.className = "hitl-inbox-updates-show";
    banner.appendChild(link);
    banner.hidden = false;
  }

  function watchNewWork() {
    var banner = document.getElementById("hitl-inbox-updates");
    if (!banner || !window.fetch) { return; }
    var url = banner.getAttribute("data-url") + "?since=" + encodeURIComponent(banner.getAttribute("data-since"));
    var interval = parseInt(banner.getAttribute("data-interval"), 10) || 15000;
    var shown = 0, asking = false;

    function ask() {
      if (asking || document.visibilityState === "hidden") { return; }
      asking = true;
      window.fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (answer) {
          if (answer && answer["new"] > 0 && answer["new"] !== shown) {
            shown = answer["new"];
            showBanner(banner, shown);
          }
        })
        .catch(function () { /* signed out or offline: the next poll tries again */ })
        .then(function () { asking = false; });
    }

    window.setInterval(ask, interval);
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") { ask(); }
    });
    window.hitlInbox = { ask: ask };
  }

  document.addEventListener("DOMContentLoaded", function () {
    watchReasons();
    watchNewWork();
  });
})();
