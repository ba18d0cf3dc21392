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
        (doc.data || []).forEach(function (c) { self.route(c); });
        if ((doc.data || []).length === 100) return self.fetchLogs();
      })
      .catch(function () { self.loading = null; });
    return this.loading;
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
    var ws = new WebSocket(proto + location.host + "/live/runs/" + encodeURIComponent(this.run) + "?after=" + this.last);
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
      if (self.failures >= 3) {
        // Repeated failures: say so, and poll the HTTP route instead.
        self.showDetached(true);
        setTimeout(function () { self.fetchLogs().then(function () { self.connect(); }); }, 5000);
        return;
      }
      setTimeout(function () { self.connect(); }, 1000 * self.failures);
    };
  };

  function start() {
    setInterval(tickDurations, 1000);
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
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) e.detail.headers["X-CSRF-Token"] = meta.getAttribute("content");
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
