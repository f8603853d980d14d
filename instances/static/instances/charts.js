// Draws every <canvas class="comparison-chart" data-chart="…"> from the JSON the page embeds with json_script.
// Values arrive as decimal strings; they are converted only to be plotted (the tables show the exact figures).
(function () {
  "use strict";
  var palette = ["#0b3d91", "#f0ad4e", "#198754", "#dc3545", "#6f42c1"];

  function draw(canvas) {
    var source = document.getElementById(canvas.dataset.chart);
    if (!source || typeof Chart === "undefined") return;
    var spec = JSON.parse(source.textContent);
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: spec.labels,
        datasets: spec.datasets.map(function (set, i) {
          return {
            label: set.label,
            data: set.data.map(function (v) { return v === null ? null : Number(v); }),
            backgroundColor: palette[i % palette.length],
          };
        }),
      },
      options: {
        responsive: true,
        plugins: { legend: { display: spec.datasets.length > 1 } },
        scales: { y: { beginAtZero: true, title: { display: true, text: spec.unit } } },
      },
    });
  }

  document.querySelectorAll("canvas.comparison-chart").forEach(draw);
})();
