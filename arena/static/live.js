// Live battle page: send a turn to /battle/stream and draw both answers as they arrive (Server-Sent
// Events read from the POST's own response). Without this file the form posts to /battle and the page
// comes back with both complete answers. Voting, keyboard shortcuts and the reveal are arena.js's.
//
// Accessibility: the answers are not announced while they stream (one short line goes to the status
// region when both are done), and focus moves to the page heading then, so a single key votes.
(function () {
  "use strict";

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

  // A new turn in both panes: the user's text and an empty answer that the stream fills in.
  function startTurn(message) {
    var bodies = {};
    ["a", "b"].forEach(function (side) {
      var list = document.getElementById("conversation-" + side);
      var user = el("li", "turn turn-user");
      user.appendChild(el("span", "role", "user")).setAttribute("lang", "en");
      user.appendChild(el("div", "md", message));
      var answer = el("li", "turn turn-assistant streaming");
      answer.appendChild(el("span", "role", "assistant")).setAttribute("lang", "en");
      var md = answer.appendChild(el("div", "md"));
      md.setAttribute("data-updates", "0");
      list.appendChild(user);
      list.appendChild(answer);
      list.closest(".answer-body").setAttribute("aria-busy", "true");
      bodies[side] = md;
    });
    return bodies;
  }

  function apply(bodies, name, data) {
    if (name === "update" || name === "done" || name === "failed") {
      var md = bodies[data.side];
      md.innerHTML = data.html;  // rendered and sanitised on the server (arena.web.markdown)
      md.setAttribute("data-updates", String(Number(md.getAttribute("data-updates")) + 1));
      if (name !== "update") {
        var item = md.parentNode;
        item.classList.remove("streaming");
        item.closest(".answer-body").removeAttribute("aria-busy");
        item.setAttribute("data-state", name);
        if (name === "failed") {
          item.appendChild(el("p", "failed", "This answer could not be completed.")).setAttribute("data-failed", "");
        }
      }
    } else if (name === "end") {
      var controls = document.getElementById("live-controls");
      controls.innerHTML = data.controls;  // our own server-rendered fragment
      var battle = document.querySelector(".live-battle");
      battle.setAttribute("data-state", data.votable ? "vote" : "ended");
      var heading = document.getElementById("area-heading");
      if (heading) { heading.focus({ preventScroll: true }); }
      var status = document.getElementById("vote-status");
      if (status) {
        status.textContent = data.votable
          ? "Both answers are complete. Vote with A, B, T or X, or continue the conversation."
          : (data.notice || "This battle has ended.");
      }
    }
  }

  // One "event: name\ndata: json" block.
  function parse(block) {
    var name = "message";
    var data = "";
    block.split("\n").forEach(function (line) {
      if (line.indexOf("event:") === 0) { name = line.slice(6).trim(); }
      else if (line.indexOf("data:") === 0) { data += line.slice(5).trim(); }
    });
    return { name: name, data: data ? JSON.parse(data) : {} };
  }

  function send(form) {
    var body = new URLSearchParams(new FormData(form));
    var message = body.get("message") || "";
    var button = form.querySelector("button[type=submit]");
    if (button) { button.disabled = true; }
    notice("");
    return fetch("/battle/stream", {
      method: "POST",
      body: body,
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      credentials: "same-origin"
    }).then(function (response) {
      if (!response.ok || !response.body) {
        return response.json().then(function (answer) {
          notice(answer.detail || "The prompt was not accepted.");
        }, function () { notice("The prompt was not accepted."); }).finally(function () {
          if (button) { button.disabled = false; }
        });
      }
      document.querySelector(".live-battle").setAttribute("data-state", "streaming");
      form.querySelector("textarea").value = "";
      var bodies = startTurn(message);
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
            apply(bodies, event.name, event.data);
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () {
      notice("The connection was lost; please start a new round.");
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "live-form" || !window.TextDecoder || !window.ReadableStream) { return; }
    event.preventDefault();
    send(form);
  });
}());
