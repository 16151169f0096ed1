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

  // Chart times: in the job's timezone (as every time of its page), in the viewer's own
  // 12/24-hour convention (their locale's; no hour12 forced).
  function timeFormat(zone, options) {
    try {
      return new Intl.DateTimeFormat(undefined, Object.assign({timeZone: zone}, options));
    } catch (e) {  // a timezone this browser does not know: its own
      return new Intl.DateTimeFormat(undefined, options);
    }
  }

  // A tick says the time, and the date too where the day changes (or on whole-day buckets):
  // short labels that Chart.js can space without overlapping.
  function tickLabels(data) {
    var day = timeFormat(data.timezone, {month: "short", day: "numeric"});
    var time = timeFormat(data.timezone, {hour: "numeric", minute: "2-digit"});
    var previousDay = null;
    return data.labels.map(function (iso) {
      var d = new Date(iso), dayText = day.format(d);
      var label = data.bucket_hours >= 24 ? dayText
        : (dayText !== previousDay ? [time.format(d), dayText] : time.format(d));
      previousDay = dayText;
      return label;
    });
  }

  // A bucket with runs between two without: drawn as a dot big enough to see (a job that ran
  // once shows that run).
  function pointRadius(context) {
    var values = context.dataset.data, i = context.dataIndex;
    var alone = (i === 0 || values[i - 1] == null) && (i === values.length - 1 || values[i + 1] == null);
    return alone ? 4 : 2;
  }

  function drawCharts(root) {
    if (typeof window.Chart === "undefined") return;
    root.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var source = document.getElementById(canvas.getAttribute("data-chart"));
      if (!source) return;
      var data = JSON.parse(source.textContent);
      if (canvas._chart) canvas._chart.destroy();
      var labels = tickLabels(data);
      var full = timeFormat(data.timezone, {dateStyle: "medium", timeStyle: "short"});
      var kind = canvas.getAttribute("data-kind");
      var line = {spanGaps: true, tension: 0.2, pointRadius: pointRadius, pointHoverRadius: 5, clip: false};
      var datasets = kind === "success"
        ? [Object.assign({label: "Success rate (%)", data: data.success_rate, borderColor: "#15803d", pointBackgroundColor: "#15803d", backgroundColor: "rgba(22,163,74,0.15)", fill: true}, line)]
        : [Object.assign({label: "p50 duration (ms)", data: data.p50_ms, borderColor: "#1d4ed8", pointBackgroundColor: "#1d4ed8"}, line),
           Object.assign({label: "p95 duration (ms)", data: data.p95_ms, borderColor: "#b45309", pointBackgroundColor: "#b45309", borderDash: [6, 3]}, line)];
      canvas._chart = new window.Chart(canvas, {
        type: "line",
        data: {labels: labels, datasets: datasets},
        options: {
          responsive: true, maintainAspectRatio: false, animation: false,
          layout: {padding: {top: 6, right: 6}},
          scales: {
            x: {ticks: {maxRotation: 0, autoSkip: true, autoSkipPadding: 16},
                title: {display: true, text: "Time (" + data.timezone + ")"}},
            y: kind === "success" ? {min: 0, max: 100, title: {display: true, text: "% succeeded"}}
              : {beginAtZero: true, title: {display: true, text: "ms"}}
          },
          plugins: {
            legend: {labels: {boxWidth: 14}},
            tooltip: {callbacks: {title: function (items) {
              return items.length ? full.format(new Date(data.labels[items[0].dataIndex])) : "";
            }}}
          }
        }
      });
    });
  }

  // Where the clipboard is refused (an http page, a browser's policy): the text is selected
  // for the person to copy.
  function selectText(id) {
    var range = document.createRange();
    range.selectNodeContents(document.getElementById(id));
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
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
    } else if (target.hasAttribute("data-preset")) {
      // A preset fills its field, which then tells the live preview as typing would.
      event.preventDefault();
      var field = document.getElementById(target.getAttribute("data-preset"));
      field.value = target.getAttribute("data-value");
      field.dispatchEvent(new Event("input", {bubbles: true}));
      field.dispatchEvent(new Event("change", {bubbles: true}));
    } else if (target.hasAttribute("data-copy")) {
      event.preventDefault();
      var text = document.getElementById(target.getAttribute("data-copy")).textContent.trim();
      var done = function () { target.textContent = "Copied"; };
      if (navigator.clipboard) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(target.getAttribute("data-copy")); });
      } else {
        selectText(target.getAttribute("data-copy"));
      }
    }
  });

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:afterSettle", function (event) { init(event.target); });
  // Lists that refresh themselves (hx-trigger="every …") skip a refresh while the tab is hidden,
  // while the focus is in what their data-refresh-paused-by selector names (the search box and
  // filters: what is typed is never swapped away), while a search they name is still on its way
  // (htmx marks it htmx-request: a refresh built from the list's older query would land after it
  // and show stale results) or while a run's details are open there. A trigger filter would need
  // eval, which the Content-Security-Policy forbids.
  function refreshPaused(elt) {
    var selector = elt.getAttribute("data-refresh-paused-by");
    if (document.hidden) return true;
    if (!selector) return false;
    var active = document.activeElement;
    return Array.prototype.some.call(document.querySelectorAll(selector), function (el) {
      return el.tagName === "DETAILS" || el.classList.contains("htmx-request") || (active && el.contains(active));
    });
  }

  document.addEventListener("htmx:confirm", function (event) {
    var elt = event.detail.elt;
    if (elt.hasAttribute("data-refresh") && refreshPaused(elt)) event.preventDefault();
  });
})();
