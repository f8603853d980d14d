// The endpoint page: the request chart (requests and errors per minute, mean latency) from the chart URL, redrawn
// every 10 s. (Forms that carry data-confirm ask first through js/csp.js, on every page.)
(function () {
  "use strict";

  function draw(canvas, data, chart) {
    var datasets = [
      { label: canvas.dataset.labelRequests, data: data.requests, backgroundColor: "#0b3d91", yAxisID: "y" },
      { label: canvas.dataset.labelErrors, data: data.errors, backgroundColor: "#dc3545", yAxisID: "y" },
      { label: canvas.dataset.labelLatency, data: data.latency_ms, type: "line", borderColor: "#f0ad4e", yAxisID: "ms" },
    ];
    if (chart) {
      chart.data.labels = data.labels;
      chart.data.datasets.forEach(function (set, i) { set.data = datasets[i].data; });
      chart.update();
      return chart;
    }
    return new Chart(canvas, {
      type: "bar",
      data: { labels: data.labels, datasets: datasets },
      options: {
        responsive: true,
        animation: false,
        scales: {
          y: { beginAtZero: true, ticks: { precision: 0 } },
          ms: { beginAtZero: true, position: "right", grid: { drawOnChartArea: false } },
        },
      },
    });
  }

  function start() {
    var canvas = document.getElementById("requests-chart");
    if (canvas && typeof Chart !== "undefined") {
      var chart = null;
      var load = function () {
        fetch(canvas.dataset.url, { credentials: "same-origin" })
          .then(function (r) { return r.json(); })
          .then(function (data) {
            chart = draw(canvas, data, chart);
            canvas.dataset.points = String(data.requests.reduce(function (a, b) { return a + b; }, 0));
          });
      };
      load();
      setInterval(load, 10000);
    }
  }

  document.addEventListener("DOMContentLoaded", start);
})();
