// Progressive enhancement: keyboard shortcuts, votes without a full reload, live leaderboard refresh.
// Everything works without this file (plain form posts and links).
//
// Accessibility rules kept here: native keys (Enter, Space, Tab) are never taken over; single-key shortcuts
// act only while the battle (or nothing) has focus and can be switched off; after each step focus moves to
// the new content's heading and one short line goes to a status element, never the answers themselves.
(function () {
  "use strict";
  var FRAGMENT = { "X-Arena-Fragment": "1" };
  var STORAGE_KEY = "arena.shortcuts";
  var SITE = " · Arena";
  // True while focus sits where the page put it on load: the first Tab then goes to the skip link,
  // as it would on a page that moved nothing.
  var focusFromLoad = false;

  function area() { return document.getElementById("battle-area"); }

  function shortcutsOn() {
    try { return window.localStorage.getItem(STORAGE_KEY) !== "off"; } catch (e) { return true; }
  }

  function remember(on) {
    try { window.localStorage.setItem(STORAGE_KEY, on ? "on" : "off"); } catch (e) { /* private mode */ }
  }

  // aria-keyshortcuts and the visible key hints only while the shortcuts work.
  function applyShortcutSetting() {
    var on = shortcutsOn();
    document.documentElement.classList.toggle("shortcuts-off", !on);
    document.querySelectorAll("[data-key]").forEach(function (el) {
      if (on) { el.setAttribute("aria-keyshortcuts", el.getAttribute("data-key")); }
      else { el.removeAttribute("aria-keyshortcuts"); }
    });
  }

  function announce(text) {
    var status = document.getElementById("vote-status");
    if (status) { status.textContent = text; }
  }

  function focusHeading() {
    var heading = document.getElementById("area-heading");
    if (!heading) { return; }
    if (heading.dataset.title) { document.title = heading.dataset.title + SITE; }
    heading.focus({ preventScroll: true });
  }

  function swap(html, after) {
    var target = area();
    if (!target) { return; }
    announce("");
    target.innerHTML = html;  // server-rendered, sanitised fragment from our own origin
    applyShortcutSetting();
    window.scrollTo(0, 0);
    focusFromLoad = false;
    focusHeading();
    if (after) { after(); }
  }

  function load(url, options, after) {
    var target = area();
    if (target) { target.setAttribute("aria-busy", "true"); }
    return fetch(url, options).then(function (response) {
      return response.text();
    }).then(function (html) { swap(html, after); }).catch(function () {
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
    load("/vote", { method: "POST", body: body, headers: headers, credentials: "same-origin" }, function () {
      if (document.querySelector(".reveal")) {
        var heading = document.getElementById("area-heading");
        announce("Vote recorded. " + (heading ? heading.textContent : ""));
      }
    });
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

  // A shortcut may act only when focus is in the battle (not in a field there) or on nothing at all.
  function shortcutTarget(target) {
    if (!target || target === document.body || target === document.documentElement) { return true; }
    var tag = (target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable) { return false; }
    var battle = area();
    return !!battle && battle.contains(target);
  }

  // The control a single key stands for: the keys are the battle's own data-key attributes (the vote
  // buttons' come from the outcome vocabulary the server renders), so this file spells none of them.
  function shortcutFor(key) {
    var battle = area();
    if (!battle || !key) { return null; }
    var found = null;
    battle.querySelectorAll("[data-key]").forEach(function (el) {
      if (!found && el.getAttribute("data-key") === key) { found = el; }
    });
    return found;
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    if (event.key === "Tab" && !event.shiftKey && focusFromLoad) {
      var skip = document.querySelector(".skip-link");
      focusFromLoad = false;
      if (skip && document.activeElement === document.getElementById("area-heading")) {
        event.preventDefault();
        skip.focus();
      }
      return;
    }
    if (event.repeat || !shortcutsOn() || !shortcutTarget(event.target)) { return; }
    var key = (event.key || "").toLowerCase();
    var el = shortcutFor(key);
    if (!el) { return; }
    event.preventDefault();
    el.click();
  });

  document.addEventListener("focusin", function (event) {
    if (event.target !== document.getElementById("area-heading")) { focusFromLoad = false; }
  });
  document.addEventListener("mousedown", function () { focusFromLoad = false; });

  var setting = document.querySelector("[data-shortcut-setting]");
  if (setting) {
    var box = setting.querySelector("input");
    box.checked = shortcutsOn();
    box.addEventListener("change", function () {
      remember(box.checked);
      applyShortcutSetting();
      announce(box.checked ? "Keyboard shortcuts on." : "Keyboard shortcuts off.");
    });
    setting.hidden = false;
  }
  applyShortcutSetting();

  // On the vote page the battle's heading takes focus, so a single key votes at once and a screen
  // reader starts at the battle rather than at the site's navigation.
  var start = document.getElementById("area-heading");
  if (start && document.querySelector(".battle") && !window.location.hash) {
    start.focus({ preventScroll: true });
    focusFromLoad = document.activeElement === start;
  }

  // Live leaderboard: refresh the table from the JSON API every few seconds, with a Pause button.
  var live = document.querySelector("[data-live-refresh]");
  if (live) {
    var paused = false;
    var pause = document.getElementById("live-pause");
    var refresh = function () {
      if (paused) { return; }
      fetch(live.getAttribute("data-live-refresh"), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (rows) {
          if (paused) { return; }
          var tbody = live.querySelector("tbody");
          var fresh = document.createElement("tbody");
          var newest = null;
          var withDeviation = rows.some(function (row) { return row.deviation !== null && row.deviation !== undefined; });
          var num = function (v) { return v === null || v === undefined ? "" : v.toFixed(1); };
          rows.forEach(function (row, i) {
            var tr = document.createElement("tr");
            var cells = [String(i + 1), row.model + (row.provisional ? " (provisional)" : ""), row.rating === null ? "—" : row.rating.toFixed(1)];
            if (withDeviation) { cells.push(num(row.deviation), num(row.conservative)); }
            cells.push(String(row.games));
            if (row.provisional) { tr.className = "provisional"; }
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
    if (pause) {
      pause.hidden = false;
      pause.addEventListener("click", function () {
        paused = !paused;
        pause.setAttribute("aria-pressed", paused ? "true" : "false");
        if (!paused) { refresh(); }
      });
    }
    window.setInterval(refresh, 5000);
  }
}());
