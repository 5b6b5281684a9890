// Keeps every <time class="hitl-time"> current without a reload (approvals/admin/times.py renders them,
// with the same rules): "in 12 min", "12 min ago", and a passed deadline "overdue by 12 min", marked
// overdue (the element and its table row get the hitl-overdue / hitl-overdue-row classes).
(function () {
  "use strict";
  var MINUTE = 60, HOUR = 3600, DAY = 86400;

  function spanText(seconds) {
    var whole = Math.floor(Math.abs(seconds));
    if (whole < MINUTE) { return "<1 min"; }
    if (whole < HOUR) { return Math.floor(whole / MINUTE) + " min"; }
    if (whole < 2 * DAY) {
      var minutesTotal = Math.floor(whole / MINUTE);
      var hours = Math.floor(minutesTotal / 60), minutes = minutesTotal % 60;
      return minutes ? hours + " h " + minutes + " min" : hours + " h";
    }
    var hoursTotal = Math.floor(whole / HOUR);
    var days = Math.floor(hoursTotal / 24), restHours = hoursTotal % 24;
    return restHours ? days + " days " + restHours + " h" : days + " days";
  }

  function relativeText(when, now, deadline) {
    var seconds = (when - now) / 1000;
    if (seconds >= 0) { return "in " + spanText(seconds); }
    return deadline ? "overdue by " + spanText(seconds) : spanText(seconds) + " ago";
  }

  function refresh(root) {
    var now = Date.now();
    var nodes = (root || document).querySelectorAll("time.hitl-time[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var node = nodes[i], when = Date.parse(node.getAttribute("datetime"));
      if (isNaN(when)) { continue; }
      var deadline = node.hasAttribute("data-deadline");
      node.textContent = relativeText(when, now, deadline);
      var overdue = deadline && when < now;
      node.classList.toggle("hitl-overdue", overdue);
      var row = node.closest("tr");
      if (row && deadline) { row.classList.toggle("hitl-overdue-row", overdue); }
    }
  }

  window.hitlTimes = { refresh: refresh, relativeText: relativeText, spanText: spanText };
  document.addEventListener("DOMContentLoaded", function () {
    refresh();
    window.setInterval(refresh, 15000);
  });
})();
