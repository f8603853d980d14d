// The launch wizard re-renders through htmx on every change except typing the name. The name field's change
// events stop here (capture phase, before the wizard's listener) instead of in an hx-trigger filter, which htmx
// would have to eval — and the Content-Security-Policy forbids eval.
document.addEventListener(
  "change",
  function (event) {
    if (event.target.matches && event.target.matches("#launch-form [name=name]")) event.stopPropagation();
  },
  true,
);

// While the launch is being sent, a change does not re-render the wizard: the re-render's request would replace
// the launch's (hx-sync), the browser would drop its answer and stay on the wizard although the machine may have
// started. htmx:confirm comes before hx-sync is applied, so cancelling it there leaves the launch in flight.
let launching = false;
// The request's own element (requestConfig.elt): once its answer replaced the form, htmx tells an ancestor instead.
function isLaunch(event) {
  const config = event.detail.requestConfig;
  return config && config.elt && config.elt.id === "launch-form" && config.verb === "post";
}
document.addEventListener("htmx:beforeRequest", function (event) {
  if (isLaunch(event)) launching = true;
});
for (const ended of ["htmx:afterRequest", "htmx:onLoadError"]) {
  document.addEventListener(ended, function (event) {
    if (isLaunch(event)) launching = false;
  });
}
document.addEventListener("htmx:confirm", function (event) {
  if (launching && event.detail.verb === "get" && event.target.closest && event.target.closest("#launch-form")) {
    event.preventDefault();
  }
});
// A new wizard in the page is the launch's answer (or a later re-render): nothing is being sent any more.
document.addEventListener("htmx:load", function (event) {
  if (event.detail.elt && event.detail.elt.id === "launch-form") launching = false;
});
