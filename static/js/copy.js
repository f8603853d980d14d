// Copy buttons: <button data-copy-target="#id" data-copied-label="Copied"> copies the value (or text) of the
// element #id to the clipboard and says so for two seconds. One listener on the document serves every button,
// including those htmx swaps in later.
(function () {
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy-target"));
    if (!source || !navigator.clipboard) return;
    var text = "value" in source ? source.value : source.textContent.trim();
    navigator.clipboard.writeText(text).then(function () {
      var label = button.textContent;
      button.textContent = button.getAttribute("data-copied-label") || label;
      setTimeout(function () { button.textContent = label; }, 2000);
    });
  });
})();
