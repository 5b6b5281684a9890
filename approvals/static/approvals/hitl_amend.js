// Reset of a tool call's edit box on the decision page (templates/admin/approvals/pendingapproval/
// _call_amend.html): every input of the box goes back to the value the page shows (data-shown). The form
// works without this script; it only reveals and runs the Reset buttons.
(function () {
  "use strict";
  function reset(box) {
    box.querySelectorAll("[data-shown]").forEach(function (input) {
      input.value = input.getAttribute("data-shown");
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("button.hitl-amend-reset[data-box]").forEach(function (button) {
      var box = document.getElementById(button.getAttribute("data-box"));
      if (!box) { return; }
      button.hidden = false;
      button.addEventListener("click", function () { reset(box); });
    });
  });
})();
