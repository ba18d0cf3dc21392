// Cairn dashboard behaviour: inline confirmations, copy buttons, live
// durations and the run console (HTTP log route plus the live channel).
(function () {
  "use strict";
  var MAX_CONSOLE = 512 * 1024;
  // A decision being submitted must not be cut short by the live feed's
  // refresh of the review.
  var submitting = false;
  document.addEventListener("submit", function () { submitting = true; });

  document.addEventListener("click", function (e) {
    var arm = e.target.closest("[data-arm]");
    if (arm) {
      var panel = document.getElementById(arm.getAttribute("data-arm"));
      if (panel) { panel.hidden = false; arm.hidden = true; var f = panel.querySelector("textarea, button"); if (f) f.focus(); }
      return;
    }
    var disarm = e.target.closest("[data-disarm]");
    if (disarm) {
      var p = document.getElementById(disarm.getAttribute("data-disarm"));
      if (p) { p.hidden = true; var a = document.querySelector('[data-arm="' + p.id + '"]'); if (a) { a.hidden = false; a.focus(); } }
      return;
    }
    var copy = e.target.closest("[data-copy]");
    if (copy) {
      var el = document.getElementById(copy.getAttribute("data-copy"));
      if (el && navigator.clipboard) navigator.clipboard.writeText(el.textContent.trim()).then(function () { copy.textContent = "Copied"; });
    }
  });

  function tickDurations() {
    document.querySelectorAll("[data-live-duration]:not([data-ended])").forEach(function (el) {
      var ms = Date.now() - Date.parse(el.getAttribute("data-live-duration"));
      var s = Math.max(0, Math.floor(ms / 1000));
      el.textContent = s < 60 ? s + " s" : Math.floor(s / 60) + " m " + String(s % 60).padStart(2, "0") + " s";
    });
  }

  // Console keeps the newest 512 KiB of text per phase.
  function Console(wrap) {
    this.wrap = wrap;
    this.pre = wrap.querySelector(".console");
    this.stale = wrap.querySelector(".stale");
    this.refresh = wrap.querySelector(".refresh-log");
    this.phase = wrap.getAttribute("data-console-phase");
  }
  Console.prototype.append = function (text) {
    var next = this.pre.textContent + text;
    if (next.length > MAX_CONSOLE) next = next.slice(next.length - MAX_CONSOLE);
    var atEnd = this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 4;
    this.pre.textContent = next;
    if (atEnd) this.pre.scrollTop = this.pre.scrollHeight;
  };

  // unavailable says whether the last log read failed: a console whose
  // read failed says so and offers Refresh log, never an empty log.
  Console.prototype.unavailable = function (failed) {
    var note = this.wrap.querySelector(".log-unavailable");
    if (!note && !failed) return;
    if (!note) {
      note = document.createElement("p");
      note.className = "log-unavailable bad";
      note.setAttribute("role", "status");
      note.textContent = "The log is unavailable right now.";
      this.pre.insertAdjacentElement("afterend", note);
    }
    note.hidden = !failed;
    if (failed) this.refresh.hidden = false;
  };

  function RunChannel(article) {
    this.run = article.getAttribute("data-run");
    this.terminal = article.getAttribute("data-terminal") === "true";
    this.status = article.getAttribute("data-status");
    this.last = 0;
    this.consoles = {};
    this.failures = 0;
    this.loading = null;
    var self = this;
    article.querySelectorAll(".console-wrap").forEach(function (w) {
      var c = new Console(w);
      self.consoles[c.phase] = c;
      c.refresh.addEventListener("click", function () { self.fetchLogs(); });
    });
  }
  RunChannel.prototype.route = function (chunk) {
    // Refresh log and the socket may both deliver a chunk while they
    // race: its sequence says whether it is already shown.
    if (chunk.sequence <= this.last) return;
    var c = this.consoles[chunk.phase];
    if (c) c.append(chunk.body);
    this.last = chunk.sequence;
  };
  // fetchLogs reads everything after the last sequence from the HTTP log
  // route, which stays authoritative.
  RunChannel.prototype.fetchLogs = function () {
    var self = this;
    if (this.loading) return this.loading;
    this.loading = fetch("/api/control-plane/v1/runs/" + encodeURIComponent(this.run) + "/logs?limit=100&after=" + this.last,
      { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("logs " + r.status); return r.json(); })
      .then(function (doc) {
        self.loading = null;
        self.each(function (c) { c.unavailable(false); });
        (doc.data || []).forEach(function (c) { self.route(c); });
        if ((doc.data || []).length === 100) return self.fetchLogs();
      })
      .catch(function () { self.loading = null; self.each(function (c) { c.unavailable(true); }); });
    return this.loading;
  };
  RunChannel.prototype.each = function (fn) {
    Object.keys(this.consoles).forEach(function (k) { fn(this.consoles[k]); }, this);
  };
  RunChannel.prototype.showDetached = function (stale) {
    Object.keys(this.consoles).forEach(function (k) {
      var c = this.consoles[k];
      c.refresh.hidden = false;
      c.stale.hidden = !stale;
    }, this);
  };
  RunChannel.prototype.connect = function () {
    var self = this;
    if (this.terminal) { this.showDetached(false); return; }
    var proto = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(proto + location.host + "/live/runs/" + encodeURIComponent(this.run) + "?after=" + this.last +
      "&status=" + encodeURIComponent(this.status));
    ws.onopen = function () {
      self.failures = 0;
      Object.keys(self.consoles).forEach(function (k) { self.consoles[k].refresh.hidden = true; self.consoles[k].stale.hidden = true; });
    };
    ws.onmessage = function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (err) { return; }
      // Counted for the browser tests: chunks that arrived over the socket.
      try { sessionStorage.setItem("cairn.liveEvents", String(Number(sessionStorage.getItem("cairn.liveEvents") || 0) + 1)); } catch (err) { /* storage off */ }
      if (ev.type === "log") {
        if (ev.sequence !== self.last + 1 && self.last !== 0) {
          // A gap: the HTTP route fills it; the socket carries on.
          self.fetchLogs();
          return;
        }
        self.route(ev);
      } else if (ev.type === "status" || ev.type === "end") {
        if (ev.status !== self.status && !submitting) { location.reload(); }
      }
    };
    ws.onclose = function (e) {
      if (e.code === 1000) { self.terminal = true; self.fetchLogs(); self.showDetached(false); return; }
      self.failures++;
      self.fetchLogs();
      // A socket can be refused because the run finished meanwhile, and a
      // browser does not say why: the HTTP route tells whether the review
      // changed before trying again.
      self.checkStatus().then(function (changed) {
        if (changed) return;
        if (self.failures >= 3) {
          // Repeated failures: say so, and poll the HTTP route instead.
          self.showDetached(true);
          setTimeout(function () { self.fetchLogs().then(function () { self.connect(); }); }, 5000);
          return;
        }
        setTimeout(function () { self.connect(); }, 1000 * self.failures);
      });
    };
  };
  // checkStatus reloads the review when the run's status changed; it
  // resolves to whether it did.
  RunChannel.prototype.checkStatus = function () {
    var self = this;
    return fetch("/api/control-plane/v1/runs/" + encodeURIComponent(this.run), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (doc) {
        if (doc && doc.data && doc.data.status !== self.status && !submitting) { location.reload(); return true; }
        return false;
      })
      .catch(function () { return false; });
  };

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Policy upload: the chosen File is the request body, never read into
  // memory here. The idempotency key is kept for the same archive and
  // workspace, so a retry cannot publish twice, and rotates when either
  // changes. Feedback names no file and repeats no server text.
  function PolicyUpload(section) {
    this.section = section;
    this.workspace = section.getAttribute("data-workspace");
    this.status = section.querySelector("#upload-status");
    this.refresh = section.querySelector("#upload-refresh");
    this.version = null;
    var self = this;
    section.querySelector("#upload-button").addEventListener("click", function () { self.upload(); });
    this.refresh.addEventListener("click", function () { self.refresh.hidden = true; self.watch(); });
  }
  PolicyUpload.prototype.say = function (text) { this.status.textContent = text; };
  PolicyUpload.prototype.keyFor = function (file, set) {
    var identity = [this.workspace, set, file.name, file.size, file.lastModified].join("|");
    var stored = {};
    try { stored = JSON.parse(sessionStorage.getItem("cairn.uploadKey") || "{}"); } catch (e) { stored = {}; }
    if (stored.identity !== identity) {
      var bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      stored = { identity: identity, key: "dashboard-upload-" + Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("") };
      try { sessionStorage.setItem("cairn.uploadKey", JSON.stringify(stored)); } catch (e) { /* storage off: a fresh key each time */ }
    }
    return stored.key;
  };
  PolicyUpload.prototype.upload = function () {
    var self = this;
    var input = this.section.querySelector("#upload-file");
    var set = this.section.querySelector("#upload-set").value;
    var file = input.files && input.files[0];
    if (!file) { this.say("Choose a .tar.gz archive first."); return; }
    this.say("Uploading…");
    fetch("/api/control-plane/v1/workspaces/" + encodeURIComponent(this.workspace) + "/policy-sets/" + encodeURIComponent(set) + "/versions", {
      method: "POST", body: file, credentials: "same-origin",
      headers: { "Content-Type": "application/gzip", "Idempotency-Key": this.keyFor(file, set), "X-CSRF-Token": csrfToken() }
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (doc) {
        if (r.status !== 202 || !doc.data) {
          var code = doc.error && doc.error.code ? " (" + doc.error.code + ")" : "";
          self.say("The upload was refused: status " + r.status + code + ".");
          return;
        }
        self.version = doc.data.id;
        self.say("Version " + doc.data.number + " is building…");
        self.watch();
      });
    }).catch(function () { self.say("The upload did not reach Cairn. Check the connection and try again."); });
  };
  // watch re-reads the version every 2.5 s, at most 12 times; still pending
  // after 30 s, it pauses and offers Refresh status.
  // A new upload or Refresh status replaces the window being watched, so
  // at most one bounded window of checks runs at a time.
  PolicyUpload.prototype.watch = function () {
    var self = this, checks = 0;
    var generation = this.generation = (this.generation || 0) + 1;
    function check() {
      if (generation !== self.generation) return;
      checks++;
      fetch("/api/control-plane/v1/policy-versions/" + encodeURIComponent(self.version), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (doc) {
          var v = doc.data;
          if (v.status === "published") { self.say("Version " + v.number + " is published and can be attached."); return; }
          if (v.status === "failed") { self.say("Version " + v.number + " failed to build: " + v.failure_code + "."); return; }
          if (checks >= 12) { self.say("Version " + v.number + " is still building."); self.refresh.hidden = false; return; }
          setTimeout(check, 2500);
        })
        .catch(function () {
          if (checks >= 12) { self.say("The build status is unavailable right now."); self.refresh.hidden = false; return; }
          setTimeout(check, 2500);
        });
    }
    setTimeout(check, 2500);
  };

  function start() {
    setInterval(tickDurations, 1000);
    var upload = document.getElementById("policy-upload");
    if (upload && upload.querySelector("#upload-button")) new PolicyUpload(upload);
    var article = document.querySelector("article.run");
    if (!article) return;
    var channel = new RunChannel(article);
    var started = false;
    // Consoles load on first expansion; the live feed then appends.
    function open() {
      if (started) return;
      started = true;
      channel.fetchLogs().then(function () { channel.connect(); });
    }
    article.querySelectorAll("details.stage[data-phase]").forEach(function (d) {
      if (d.open) open();
      d.addEventListener("toggle", function () { if (d.open) open(); });
    });
    // A run still in progress keeps its live feed so status changes
    // refresh the review even with every stage collapsed.
    if (!channel.terminal) open();
  }

  document.body.addEventListener("htmx:configRequest", function (e) {
    e.detail.headers["X-CSRF-Token"] = csrfToken();
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
