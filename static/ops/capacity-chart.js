// The capacity chart on /ops/capacity/: cards in use per chip over the last day (from the snapshots the
// capacity beat records), drawn with the vendored Chart.js. The page embeds the series with json_script.
(function () {
  "use strict";
  var COLOURS = ["#c0392b", "#2c7be5", "#00a65a", "#f39c12", "#6f42c1", "#20c997", "#6c757d"];
  function draw() {
    var canvas = document.getElementById("capacity-chart");
    var source = document.getElementById("capacity-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    var datasets = data.datasets.map(function (set, i) {
      return { label: set.label, data: set.data, borderColor: COLOURS[i % COLOURS.length], tension: 0.2, pointRadius: 0 };
    });
    datasets.push({ label: canvas.dataset.totalLabel || "total", data: data.total, borderColor: "#adb5bd", borderDash: [4, 4], pointRadius: 0 });
    new Chart(canvas, {
      type: "line",
      data: { labels: data.labels, datasets: datasets },
      options: { animation: false, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
