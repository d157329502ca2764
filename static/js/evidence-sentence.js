// Scroll each evidence passage box to its highlighted sentence (mark.sentence), inside the box
// only: the page itself does not move. Runs on load and after every htmx swap of the workspace
// (a refine can replace the passage). Without JavaScript the card quotes the sentence above the
// box anyway, and "open the passage in context" links to #sentence.
(function () {
  "use strict";
  function scrollBoxes(root) {
    var boxes = (root || document).querySelectorAll("[data-sentence-box]");
    Array.prototype.forEach.call(boxes, function (box) {
      var mark = box.querySelector("mark.sentence");
      if (!mark) return;
      var offset = mark.getBoundingClientRect().top - box.getBoundingClientRect().top;
      // Leave a line of context above the sentence.
      box.scrollTop = Math.max(0, box.scrollTop + offset - 24);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { scrollBoxes(document); });
  document.addEventListener("htmx:afterSettle", function () { scrollBoxes(document); });
})();
