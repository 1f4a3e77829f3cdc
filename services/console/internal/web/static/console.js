// The console's only script (no build step, no external URLs). Two behaviours:
//
//  - an element with data-refresh-url is replaced every data-refresh-seconds by the HTML fragment
//    that URL answers (the overview's tables, from /api/overview); a failed refresh keeps the last
//    tables and says why next to the timestamp;
//  - a form with class "replay" is not sent while its reason is blank: the message is shown
//    beside the button instead (the server refuses a blank reason too).
"use strict";

document.querySelectorAll("[data-refresh-url]").forEach(function (box) {
  var url = box.getAttribute("data-refresh-url");
  var seconds = Number(box.getAttribute("data-refresh-seconds")) || 5;
  var status = document.getElementById(box.getAttribute("data-refresh-status"));
  function say(text) { if (status) { status.textContent = text; } }
  function refresh() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (resp) {
        if (resp.status === 401) { throw new Error("signed out: reload the page to sign in again"); }
        if (!resp.ok) { throw new Error("refresh failed: HTTP " + resp.status); }
        return resp.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        say("updated " + new Date().toLocaleTimeString());
      })
      .catch(function (err) { say(String(err.message || err)); })
      .finally(function () { setTimeout(refresh, seconds * 1000); });
  }
  setTimeout(refresh, seconds * 1000);
});

document.querySelectorAll("form.replay").forEach(function (form) {
  form.addEventListener("submit", function (ev) {
    var reason = form.querySelector("input[name=reason]");
    var message = form.querySelector(".form-error");
    if (reason && reason.value.trim() === "") {
      ev.preventDefault();
      if (message) { message.textContent = "A reason is required: say why this is replayed (it is recorded)."; }
      reason.focus();
      return;
    }
    if (message) { message.textContent = ""; }
  });
});
