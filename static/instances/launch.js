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
