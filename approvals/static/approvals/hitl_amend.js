// A tool call's edit box on the decision page (templates/admin/approvals/pendingapproval/_call_amend.html):
// one edit, two views. The fields (one per argument) and the JSON of all arguments are kept in step: a
// field changed writes its value into the JSON (rebuilt from the shown arguments and the fields when the
// JSON does not read as an object), and a JSON that reads as an object writes each argument back into its
// field. Reset puts every input back to the value the page shows (data-shown). The form works without
// this script (approvals/admin/amend_form.py then takes whichever view was changed).
(function () {
  "use strict";

  function fieldValue(input) {
    var kind = input.getAttribute("data-kind"), text = input.value;
    if (kind === "text") { return text; }
    try { return JSON.parse(text); } catch (error) { return text; }
  }

  function fieldText(input, value) {
    return input.getAttribute("data-kind") === "text" && typeof value === "string"
      ? value : JSON.stringify(value);
  }

  function asObject(text) {
    try {
      var value = JSON.parse(text);
      return value !== null && typeof value === "object" && !Array.isArray(value) ? value : null;
    } catch (error) { return null; }
  }

  function wire(box) {
    var json = box.querySelector("textarea.hitl-amend-json");
    var fields = Array.prototype.slice.call(box.querySelectorAll(".hitl-amend-input[data-argument]"));
    if (!json || !fields.length) { return; }
    fields.forEach(function (field) {
      field.addEventListener("input", function () {
        var arguments_ = asObject(json.value);
        if (arguments_ === null) {  // the JSON does not read: the shown arguments and every field
          arguments_ = asObject(json.getAttribute("data-shown")) || {};
          fields.forEach(function (each) { arguments_[each.getAttribute("data-argument")] = fieldValue(each); });
        }
        arguments_[field.getAttribute("data-argument")] = fieldValue(field);
        json.value = JSON.stringify(arguments_, null, 2);
      });
    });
    json.addEventListener("input", function () {
      var arguments_ = asObject(json.value);
      if (arguments_ === null) { return; }  // not yet an object: the fields stay as they are
      fields.forEach(function (field) {
        var key = field.getAttribute("data-argument");
        if (Object.prototype.hasOwnProperty.call(arguments_, key)) { field.value = fieldText(field, arguments_[key]); }
      });
    });
  }

  function reset(box) {
    box.querySelectorAll("[data-shown]").forEach(function (input) {
      input.value = input.getAttribute("data-shown");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".hitl-amend").forEach(wire);
    document.querySelectorAll("button.hitl-amend-reset[data-box]").forEach(function (button) {
      var box = document.getElementById(button.getAttribute("data-box"));
      if (!box) { return; }
      button.hidden = false;
      button.addEventListener("click", function () { reset(box); });
    });
  });
})();
