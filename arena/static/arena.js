// Progressive enhancement: keyboard shortcuts, votes without a full reload, live leaderboard refresh.
// Everything works without this file (plain form posts and links).
(function () {
  "use strict";
  var FRAGMENT = { "X-Arena-Fragment": "1" };

  function area() { return document.getElementById("battle-area"); }

  function swap(html) {
    var target = area();
    if (!target) { return; }
    target.innerHTML = html;  // server-rendered, sanitised fragment from our own origin
    window.scrollTo(0, 0);
    var focus = target.querySelector("#next-battle, #vote-form button");
    if (focus) { focus.focus({ preventScroll: true }); }
  }

  function load(url, options) {
    var target = area();
    if (target) { target.setAttribute("aria-busy", "true"); }
    return fetch(url, options).then(function (response) {
      return response.text();
    }).then(swap).catch(function () {
      window.location.href = url;  // fall back to a normal page load
    }).finally(function () {
      if (target) { target.removeAttribute("aria-busy"); }
    });
  }

  function submitVote(form, winner) {
    if (form.dataset.sent) { return; }
    form.dataset.sent = "1";
    var body = new URLSearchParams(new FormData(form));
    body.set("winner", winner);
    var headers = Object.assign({ "Content-Type": "application/x-www-form-urlencoded" }, FRAGMENT);
    load("/vote", { method: "POST", body: body, headers: headers, credentials: "same-origin" });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "vote-form") { return; }
    event.preventDefault();
    var button = event.submitter;
    if (button && button.name === "winner") { submitVote(form, button.value); }
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("#next-battle, .vote-form .skip");
    if (!link || !area()) { return; }
    event.preventDefault();
    load("/vote", { headers: FRAGMENT, credentials: "same-origin" });
  });

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.repeat) { return; }
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || event.target.isContentEditable) { return; }
    var key = event.key.toLowerCase();
    if (key === "enter" && document.getElementById("next-battle")) { key = "n"; }
    var el = document.querySelector('[data-key="' + key + '"]');
    if (!el) { return; }
    event.preventDefault();
    el.click();
  });

  // Live leaderboard: refresh the table from the JSON API without reloading the page.
  var live = document.querySelector("[data-live-refresh]");
  if (live) {
    var refresh = function () {
      fetch(live.getAttribute("data-live-refresh"), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (rows) {
          var tbody = live.querySelector("tbody");
          var fresh = document.createElement("tbody");
          var newest = null;
          rows.forEach(function (row, i) {
            var tr = document.createElement("tr");
            var cells = [String(i + 1), row.model, row.rating === null ? "—" : row.rating.toFixed(1), String(row.games)];
            cells.forEach(function (text, j) {
              var td = document.createElement("td");
              td.textContent = text;
              if (j === 1) { td.className = "model"; }
              if (j >= 2) { td.className = "num"; }
              tr.appendChild(td);
            });
            fresh.appendChild(tr);
            if (row.updated_at && (!newest || row.updated_at > newest)) { newest = row.updated_at; }
          });
          tbody.replaceWith(fresh);
          var stamp = document.getElementById("live-updated");
          if (stamp && newest) { stamp.textContent = newest.replace("T", " ").slice(0, 19) + " UTC"; }
        })
        .catch(function () { /* keep the last table */ });
    };
    window.setInterval(refresh, 5000);
  }
}());
