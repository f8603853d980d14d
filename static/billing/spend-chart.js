// The daily spend chart: reads the series the page embedded with json_script (amounts are strings, never floats
// on the server) and draws it with the vendored Chart.js.
(function () {
  "use strict";
  function draw() {
    var canvas = document.getElementById("spend-chart");
    var source = document.getElementById("spend-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels.map(function (d) { return d.slice(5); }),
        datasets: [{ label: data.label, data: data.values.map(Number), backgroundColor: "#c0392b" }],
      },
      options: {
        animation: false,
        plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true, ticks: { callback: function (v) { return "¥" + v; } } } },
      },
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
