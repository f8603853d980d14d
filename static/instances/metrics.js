// The instance page's metrics chart: card utilisation and memory per minute, refreshed every 15 s.
(function () {
  "use strict";
  const canvas = document.getElementById("metrics-chart");
  if (!canvas || typeof Chart === "undefined") return;
  const chart = new Chart(canvas, {
    type: "line",
    data: {
      labels: [],
      datasets: [
        { label: canvas.dataset.labelUtil, data: [], borderColor: "#198754", tension: 0.3, pointRadius: 0 },
        { label: canvas.dataset.labelMemory, data: [], borderColor: "#0d6efd", tension: 0.3, pointRadius: 0 },
      ],
    },
    options: { animation: false, scales: { y: { min: 0, max: 100 } } },
  });
  function refresh() {
    fetch(canvas.dataset.url, { headers: { Accept: "application/json" } })
      .then((response) => (response.ok ? response.json() : null))
      .then((data) => {
        if (!data) return;
        chart.data.labels = data.labels;
        chart.data.datasets[0].data = data.card_utilisation;
        chart.data.datasets[1].data = data.memory_used;
        chart.update();
      })
      .catch(() => {});
  }
  refresh();
  setInterval(refresh, 15000);
})();
