// Live battle page: send a turn to /battle/stream and draw both answers as they arrive (Server-Sent
// Events read from the POST's own response). Without this file the form posts to /battle and the page
// comes back with both complete answers. Voting, keyboard shortcuts and the reveal are arena.js's.
//
// Each pane shows its state at once on submit (waiting, writing with a token count, done, failed,
// stopped). The server sends both panes at one shared pace (arena/voting/live_pace.py), one frame per
// network write, so both panes change in the same task here. Stop aborts the request; the server then
// cancels both models' requests.
//
// Accessibility: the answers are not announced while they stream (one short line goes to the status
// region when both are done or the turn stops), and focus moves to the page heading then, so a single
// key votes.
(function () {
  "use strict";

  var ended = ["done", "failed", "stopped"];

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text) { node.textContent = text; }
    return node;
  }

  function notice(text) {
    var line = document.getElementById("live-notice");
    if (line) { line.textContent = text; }
  }

  function announce(text) {
    var status = document.getElementById("vote-status");
    if (status) { status.textContent = text; }
  }

  function battle() { return document.querySelector(".live-battle"); }

  function tokens(n) { return n + (n === 1 ? " token" : " tokens"); }

  // A pane's visible state: the list item's data-state and one line under the role.
  function setState(pane, state, count, message) {
    var words = {
      waiting: "Waiting for the model…",
      streaming: "Writing… " + tokens(count || 0),
      done: "Done · " + tokens(count || 0),
      failed: message || "This answer could not be completed.",
      stopped: "Stopped"
    }[state];
    pane.item.setAttribute("data-state", state);
    pane.state.setAttribute("data-pane-state", state);
    pane.label.textContent = words;
    pane.item.classList.toggle("streaming", ended.indexOf(state) < 0);
    var body = pane.item.closest(".answer-body");
    if (ended.indexOf(state) < 0) { body.setAttribute("aria-busy", "true"); }
    else { body.removeAttribute("aria-busy"); }
  }

  // A new turn in both panes, at once: the user's turn (filled in with the server's rendering of the
  // prompt when the turn is accepted) and an answer in the "waiting" state. A new battle clears the
  // panes first; `undo` puts them back if the server refuses the turn.
  function startTurn(fresh) {
    var panes = {};
    var kept = {};
    ["a", "b"].forEach(function (side) {
      var list = document.getElementById("conversation-" + side);
      var failed = list.parentNode.querySelector("[data-failed]");
      kept[side] = Array.prototype.slice.call(list.children);
      if (fresh) {
        kept[side].forEach(function (node) { list.removeChild(node); });
        if (failed) { failed.hidden = true; }
      }
      var user = el("li", "turn turn-user pending");
      user.appendChild(el("span", "role", "user")).setAttribute("lang", "en");
      var prompt = user.appendChild(el("div", "md"));
      var item = el("li", "turn turn-assistant");
      item.appendChild(el("span", "role", "assistant")).setAttribute("lang", "en");
      var state = item.appendChild(el("p", "pane-state"));
      state.appendChild(el("span", "spinner")).setAttribute("aria-hidden", "true");
      var label = state.appendChild(el("span", "pane-state-text"));
      var md = item.appendChild(el("div", "md"));
      md.setAttribute("data-updates", "0");
      list.appendChild(user);
      list.appendChild(item);
      panes[side] = { list: list, user: user, prompt: prompt, item: item, state: state, label: label, md: md };
      setState(panes[side], "waiting");
    });
    panes.undo = function () {
      ["a", "b"].forEach(function (side) {
        var pane = panes[side];
        pane.list.closest(".answer-body").removeAttribute("aria-busy");
        pane.list.removeChild(pane.user);
        pane.list.removeChild(pane.item);
        if (fresh) { kept[side].forEach(function (node) { pane.list.appendChild(node); }); }
        var failed = pane.list.parentNode.querySelector("[data-failed]");
        if (failed) { failed.hidden = false; }
      });
    };
    return panes;
  }

  function finishControls(html) {
    var controls = document.getElementById("live-controls");
    if (typeof html === "string") { controls.innerHTML = html; }  // our own server-rendered fragment
    else { controls.replaceChildren(html); }
    var heading = document.getElementById("area-heading");
    if (heading) { heading.focus({ preventScroll: true }); }
  }

  function apply(panes, name, data) {
    var pane = data.side ? panes[data.side] : null;
    if (name === "start") {
      ["a", "b"].forEach(function (side) {
        panes[side].prompt.innerHTML = data.html;  // rendered and sanitised like the reveal's prompt
        panes[side].user.classList.remove("pending");
      });
    } else if (name === "reset") {
      pane.md.innerHTML = "";
      var note = pane.item.querySelector(".pane-note") || pane.item.insertBefore(el("p", "pane-note"), pane.md);
      note.textContent = data.notice;
      setState(pane, "waiting");
    } else if (name === "update" || name === "done" || name === "failed") {
      pane.md.innerHTML = data.html;  // rendered and sanitised on the server (arena.web.markdown)
      pane.md.setAttribute("data-updates", String(Number(pane.md.getAttribute("data-updates")) + 1));
      setState(pane, name === "update" ? "streaming" : name, data.tokens, data.message);
      if (name === "failed") {
        pane.item.appendChild(el("p", "failed", data.message)).setAttribute("data-failed", "");
      }
    } else if (name === "end") {
      battle().setAttribute("data-state", data.votable ? "vote" : "ended");
      finishControls(data.controls);
      announce(data.votable
        ? "Both answers are complete. Vote with A, B, T or X, or continue the conversation."
        : (data.notice || "This battle has ended."));
    }
  }

  // One "event: name\ndata: json" block (a block of comment lines only is a heartbeat).
  function parse(block) {
    var name = null;
    var data = "";
    block.split("\n").forEach(function (line) {
      if (line.indexOf("event:") === 0) { name = line.slice(6).trim(); }
      else if (line.indexOf("data:") === 0) { data += line.slice(5).trim(); }
    });
    return { name: name, data: data ? JSON.parse(data) : {} };
  }

  function stop(panes, controller) {
    controller.abort();
    ["a", "b"].forEach(function (side) {
      if (ended.indexOf(panes[side].item.getAttribute("data-state")) < 0) { setState(panes[side], "stopped"); }
    });
    battle().setAttribute("data-state", "ended");
    var stopped = document.getElementById("live-stopped");
    finishControls(stopped.content.cloneNode(true));
    announce("Stopped. This battle ends without a vote.");
  }

  function send(form) {
    var body = new URLSearchParams(new FormData(form));
    var button = form.querySelector("button[type=submit]");
    var stopButton = document.getElementById("live-stop");
    var controller = new AbortController();
    var panes = startTurn(!body.get("token"));
    var previous = battle().getAttribute("data-state");
    battle().setAttribute("data-state", "streaming");
    if (button) { button.disabled = true; }
    notice("");
    if (stopButton) {
      stopButton.hidden = false;
      stopButton.onclick = function () { stop(panes, controller); };
    }
    function refused(text) {
      panes.undo();
      battle().setAttribute("data-state", previous);
      if (stopButton) { stopButton.hidden = true; }
      if (button) { button.disabled = false; }
      notice(text);
    }
    return fetch("/battle/stream", {
      method: "POST",
      body: body,
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      credentials: "same-origin",
      signal: controller.signal
    }).then(function (response) {
      if (!response.ok || !response.body) {
        return response.json().then(function (answer) {
          refused(answer.detail || "The prompt was not accepted.");
        }, function () { refused("The prompt was not accepted."); });
      }
      form.querySelector("textarea").value = "";
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) { return; }
          buffer += decoder.decode(chunk.value, { stream: true });
          var cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            var event = parse(buffer.slice(0, cut));
            buffer = buffer.slice(cut + 2);
            if (event.name) { apply(panes, event.name, event.data); }
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      if (controller.signal.aborted) { return; }  // stopped on purpose: the page already says so
      ["a", "b"].forEach(function (side) {
        if (ended.indexOf(panes[side].item.getAttribute("data-state")) < 0) {
          setState(panes[side], "failed", 0, "The connection was lost.");
        }
      });
      battle().setAttribute("data-state", "ended");
      if (stopButton) { stopButton.hidden = true; }
      notice("The connection was lost; please start a new live battle.");
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "live-form" || !window.TextDecoder || !window.ReadableStream || !window.AbortController) {
      return;
    }
    event.preventDefault();
    send(form);
  });
}());
