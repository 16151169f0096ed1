/* cronsvc customer pages: small progressive enhancements. Every page works without it. */
(function () {
  "use strict";

  function showFor(selector, attr, value) {
    document.querySelectorAll(selector).forEach(function (panel) {
      var wanted = panel.getAttribute(attr).split(" ");
      var on = wanted.indexOf(value) !== -1;
      panel.hidden = !on;
    });
  }

  function syncSchedule(root) {
    var checked = root.querySelector("input[name=schedule_mode]:checked");
    if (checked) showFor("[data-schedule-mode]", "data-schedule-mode", checked.value);
  }

  function syncAuth(root) {
    var select = root.querySelector("select[name=auth_type]");
    if (select) showFor("[data-auth]", "data-auth", select.value);
  }

  function syncKind(root) {
    var checked = root.querySelector("input[name=kind]:checked");
    if (checked) showFor("[data-job-kind]", "data-job-kind", checked.value);
  }

  function addHeaderRow(button) {
    var list = document.getElementById(button.getAttribute("data-add-header"));
    var template = document.getElementById(button.getAttribute("data-row-template") || "header-row-template");
    if (!list || !template) return;
    var row = template.content.firstElementChild.cloneNode(true);
    list.appendChild(row);
    var first = row.querySelector("input");
    if (first) first.focus();
  }

  function drawCharts(root) {
    if (typeof window.Chart === "undefined") return;
    root.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var source = document.getElementById(canvas.getAttribute("data-chart"));
      if (!source) return;
      var data = JSON.parse(source.textContent);
      if (canvas._chart) canvas._chart.destroy();
      var labels = data.labels.map(function (iso) {
        var d = new Date(iso);
        var options = data.bucket_hours >= 24 ? {month: "short", day: "numeric"}
          : {month: "short", day: "numeric", hour: "2-digit", minute: "2-digit"};
        try {
          return d.toLocaleString([], Object.assign({timeZone: data.timezone}, options));
        } catch (e) {  // a timezone this browser does not know: its own
          return d.toLocaleString([], options);
        }
      });
      var kind = canvas.getAttribute("data-kind");
      var datasets = kind === "success"
        ? [{label: "Success rate (%)", data: data.success_rate, borderColor: "#15803d", backgroundColor: "rgba(22,163,74,0.15)", fill: true, spanGaps: true, tension: 0.2}]
        : [{label: "p50 duration (ms)", data: data.p50_ms, borderColor: "#1d4ed8", spanGaps: true, tension: 0.2},
           {label: "p95 duration (ms)", data: data.p95_ms, borderColor: "#b45309", borderDash: [6, 3], spanGaps: true, tension: 0.2}];
      canvas._chart = new window.Chart(canvas, {
        type: "line",
        data: {labels: labels, datasets: datasets},
        options: {
          responsive: true, maintainAspectRatio: false, animation: false,
          scales: {
            x: {ticks: {maxTicksLimit: 8, maxRotation: 0, autoSkip: true}},
            y: kind === "success" ? {min: 0, max: 100} : {beginAtZero: true}
          },
          plugins: {legend: {labels: {boxWidth: 14}}}
        }
      });
    });
  }

  function init(root) {
    syncSchedule(root);
    syncAuth(root);
    syncKind(root);
    drawCharts(root);
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.name === "schedule_mode") syncSchedule(document);
    if (target.name === "auth_type") syncAuth(document);
    if (target.name === "kind") syncKind(document);
  });

  document.addEventListener("click", function (event) {
    var target = event.target.closest("button");
    if (!target) return;
    if (target.hasAttribute("data-add-header")) {
      event.preventDefault();
      addHeaderRow(target);
    } else if (target.hasAttribute("data-remove-row")) {
      event.preventDefault();
      var row = target.closest(".header-row");
      if (row) row.remove();
    } else if (target.hasAttribute("data-browser-timezone")) {
      event.preventDefault();
      var input = document.getElementById(target.getAttribute("data-browser-timezone"));
      try {
        input.value = Intl.DateTimeFormat().resolvedOptions().timeZone;
        input.dispatchEvent(new Event("change", {bubbles: true}));
      } catch (e) { /* old browser: leave the field alone */ }
    } else if (target.hasAttribute("data-copy")) {
      event.preventDefault();
      var text = document.getElementById(target.getAttribute("data-copy")).textContent.trim();
      if (navigator.clipboard) navigator.clipboard.writeText(text).then(function () { target.textContent = "Copied"; });
    }
  });

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:afterSettle", function (event) { init(event.target); });
  // Lists that refresh themselves (hx-trigger="every …") skip a refresh while the tab is hidden,
  // while the focus is in what their data-refresh-paused-by selector names (the search box and
  // filters: what is typed is never swapped away) or while a run's details are open there. A
  // trigger filter would need eval, which the Content-Security-Policy forbids.
  function refreshPaused(elt) {
    var selector = elt.getAttribute("data-refresh-paused-by");
    if (document.hidden) return true;
    if (!selector) return false;
    var active = document.activeElement;
    return Array.prototype.some.call(document.querySelectorAll(selector), function (el) {
      return el.tagName === "DETAILS" || (active && el.contains(active));
    });
  }

  document.addEventListener("htmx:confirm", function (event) {
    var elt = event.detail.elt;
    if (elt.hasAttribute("data-refresh") && refreshPaused(elt)) event.preventDefault();
  });
})();
