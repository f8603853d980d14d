// Widths of progress bars come as data-width="42.5" (percent): set through the CSSOM, which the
// Content-Security-Policy allows, instead of style="" attributes, which it blocks. Runs on load and after htmx swaps.
(function () {
  function applyWidths(root) {
    (root || document).querySelectorAll("[data-width]").forEach(function (el) {
      var value = parseFloat(el.getAttribute("data-width"));
      if (!isNaN(value)) el.style.width = Math.max(0, Math.min(100, value)) + "%";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { applyWidths(document); });
  document.addEventListener("htmx:afterSwap", function (event) { applyWidths(event.target); });
})();

// A form that asks before it is sent carries data-confirm="question" (an onsubmit="" handler would be inline
// script, which the Content-Security-Policy blocks).
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) event.preventDefault();
});

// A search typed before htmx listened for it is searched once it does, as pressing Enter would: on a page whose
// scripts had not arrived yet (a slow phone, a busy server), and in a panel htmx has just swapped in, whose boxes
// it binds a moment after they are shown. htmx:load fires once it has bound an element, the page's body included.
document.addEventListener("htmx:load", function (event) {
  var root = event.detail.elt;
  var boxes = Array.prototype.slice.call(root.querySelectorAll('input[type="search"]'));
  if (root.matches && root.matches('input[type="search"]')) boxes.push(root);
  boxes.forEach(function (box) {
    if (box.value === box.defaultValue) return;
    if (box.hasAttribute("hx-get")) box.dispatchEvent(new Event("search"));
    else if (box.form && box.form.hasAttribute("hx-get")) box.form.requestSubmit();
  });
});
