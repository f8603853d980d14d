// The instance page's logs panel: htmx replaces the tail every 2 s while the instance is live, and the status poll
// moves the panel into its re-rendered block (hx-preserve); a moved element loses its scroll position. Around
// every swap this keeps the tail scrolled to its newest line, or, when the reader has scrolled up, where they were.
(function () {
  "use strict";
  let following = true;
  let position = 0;

  function text() {
    return document.querySelector("#instance-logs pre");
  }

  function remember() {
    const pre = text();
    following = !pre || pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    position = pre ? pre.scrollTop : 0;
  }

  function restore() {
    const pre = text();
    if (pre) pre.scrollTop = following ? pre.scrollHeight : position;
  }

  // The reader's own scrolling (scroll events do not bubble: caught on the way down), and a snapshot before every
  // swap, which may move the panel.
  document.addEventListener(
    "scroll",
    function (event) {
      if (event.target === text()) remember();
    },
    true,
  );
  document.body.addEventListener("htmx:beforeSwap", remember);
  document.body.addEventListener("htmx:afterSwap", restore);
  document.body.addEventListener("htmx:afterSettle", restore);
  // The whole panel arrives anew when the instance's status changes: start at its end.
  document.body.addEventListener("htmx:oobAfterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "instance-logs") {
      following = true;
      restore();
    }
  });
  restore();
})();
