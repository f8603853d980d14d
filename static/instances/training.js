// The instance page's training curves: one line per scalar tag (loss, accuracy, …) by step, refreshed every 15 s.
(function () {
  "use strict";
  const canvas = document.getElementById("training-chart");
  if (!canvas || typeof Chart === "undefined") return;
  const empty = document.getElementById("training-empty");
  const colours = ["#dc3545", "#198754", "#0d6efd", "#fd7e14", "#6f42c1", "#20c997"];
  const chart = new Chart(canvas, {
    type: "line",
    data: { datasets: [] },
    options: { animation: false, parsing: false, scales: { x: { type: "linear", title: { display: true, text: "step" } } } },
  });
  function refresh() {
    fetch(canvas.dataset.url, { headers: { Accept: "application/json" } })
      .then((response) => (response.ok ? response.json() : null))
      .then((data) => {
        if (!data) return;
        const tags = Object.keys(data.curves);
        chart.data.datasets = tags.map((tag, i) => ({
          label: tag,
          data: data.curves[tag].map(([x, y]) => ({ x: x, y: y })),
          borderColor: colours[i % colours.length],
          pointRadius: 0,
          tension: 0.2,
        }));
        chart.update();
        const points = tags.reduce((n, tag) => n + data.curves[tag].length, 0);
        canvas.dataset.points = String(points);
        empty.hidden = points > 0;
      })
      .catch(() => {});
  }
  refresh();
  setInterval(refresh, 15000);
})();
