// Live character count under the Community Notes rule: each URL counts as one character.
// The limit, the URL pattern and the trailing punctuation come from the textarea's data
// attributes (notes.forms.NoteForm, from crowdnotes_site.lib.text_rules), so there is one rule, in Python.
(function () {
  "use strict";
  function noteLength(text, appended, urlRe, trailingRe) {
    var length = text.length;
    (text.match(urlRe) || []).forEach(function (url) {
      var kept = url.replace(trailingRe, "");
      length -= kept.length - 1;
    });
    return length + appended;
  }
  function bind() {
    var area = document.querySelector("[data-note-editor]");
    var out = document.getElementById("note-count");
    if (!area || !out) return;
    var limit = parseInt(area.dataset.limit, 10);
    var urls = parseInt(area.dataset.urls, 10) || 0;
    var urlRe = new RegExp(area.dataset.urlPattern, "gi");
    var trailingRe = new RegExp("[" + area.dataset.urlTrailing.replace(/[\]\\^-]/g, "\\$&") + "]+$");
    function update() {
      var text = area.value.replace(/\s+/g, " ").trim();
      var n = noteLength(text, urls, urlRe, trailingRe);
      out.textContent = n;
      var over = n > limit;
      out.classList.toggle("over", over);
      area.setAttribute("aria-invalid", over ? "true" : "false");
      // Looked up each time: a confirmed passage swaps in a new button (htmx, out of band). A button
      // the server disabled (no confirmed passage yet: data-blocked) stays disabled whatever the length.
      var button = document.getElementById("submit-note");
      if (button) {
        button.disabled = over || button.dataset.blocked === "1";
        button.title = over ? "Over the limit by " + (n - limit) + " characters" : "";
      }
      var warn = document.getElementById("note-over");
      if (over && !warn) {
        warn = document.createElement("p");
        warn.id = "note-over";
        warn.className = "error";
        warn.setAttribute("role", "alert");
        out.parentNode.after(warn);
      }
      if (warn) warn.textContent = over ? "Too long: " + n + " of " + limit + " characters. Shorten it by " + (n - limit) + "." : "";
    }
    area.addEventListener("input", update);
    document.body.addEventListener("htmx:afterSettle", update);
    update();
  }
  document.addEventListener("DOMContentLoaded", bind);
})();
