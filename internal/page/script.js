"use strict";
(function () {
  var texts = JSON.parse(document.body.getAttribute("data-texts") || "{}");
  var target = document.body.getAttribute("data-return") || "/";
  var first = 0;
  var opensAt = 0;
  var spare = document.createElement("div");
  // A page of the site's own may leave out any element: the script then writes to a spare one.
  var el = function (id) { return document.getElementById(id) || spare; };
  // t is the text key in the page's language, its {names} filled from vars.
  var t = function (key, vars) {
    return (texts[key] || key).replace(/\{(\w+)\}/g, function (m, name) { return vars && name in vars ? String(vars[name]) : m; });
  };
  var sleep = function (ms) { return new Promise(function (r) { setTimeout(r, ms); }); };
  // Each call names the page it waits for: where rooms share a host, herdgate picks the room by it.
  var call = function (method, path, headers) {
    var h = { "Accept": "application/json" };
    for (var k in headers || {}) { h[k] = headers[k]; }
    path += (path.indexOf("?") < 0 ? "?" : "&") + "return=" + encodeURIComponent(target);
    return fetch(path, { method: method, credentials: "same-origin", cache: "no-store", headers: h });
  };
  // An invitation (?invitation=) and a lane's code (?code=) come in the page's address; they leave
  // the address bar at once.
  var params = new URLSearchParams(location.search);
  var invitation = params.get("invitation") || "";
  var laneCode = params.get("code") || "";
  if (invitation || laneCode) {
    params.delete("invitation");
    params.delete("code");
    var rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : ""));
  }
  // The proof of work: the first decimal nonce whose SHA-256 of challenge ":" nonce starts with
  // difficulty zero bits, hashed with WebCrypto in batches.
  var zeroBits = function (b) {
    var n = 0;
    for (var i = 0; i < b.length; i++) {
      if (b[i] === 0) { n += 8; continue; }
      return n + Math.clz32(b[i]) - 24;
    }
    return n;
  };
  var solve = async function (c) {
    var enc = new TextEncoder(), prefix = c.challenge + ":", batch = 128;
    for (var n = 0; ; n += batch) {
      var sums = [];
      for (var i = 0; i < batch; i++) { sums.push(crypto.subtle.digest("SHA-256", enc.encode(prefix + (n + i)))); }
      sums = await Promise.all(sums);
      for (var j = 0; j < batch; j++) {
        if (zeroBits(new Uint8Array(sums[j])) >= c.difficulty) { return prefix + (n + j); }
      }
    }
  };
  window.herdgate = { solve: solve };
  var proof = "";
  // enter enters with the invitation and, when the queue asks for one, a solved proof of work.
  var enter = async function () {
    var res;
    for (var attempt = 0; attempt < 3; attempt++) {
      var headers = {};
      if (invitation) { headers["X-Herdgate-Invitation"] = invitation; }
      if (laneCode) { headers["X-Herdgate-Lane-Code"] = laneCode; }
      if (proof) { headers["X-Herdgate-Proof"] = proof; }
      res = await call("POST", "/.herdgate/enter", headers);
      if (res.status !== 400 && res.status !== 401 && res.status !== 403 && res.status !== 409) { return res; }
      var body = await res.clone().json().catch(function () { return null; });
      if (!body || body.header !== "X-Herdgate-Proof") { return res; }
      el("summary").textContent = t("summaryChecking");
      var c = await (await call("GET", "/.herdgate/challenge")).json();
      proof = await solve(c);
    }
    return res;
  };
  var retryMs = function (res, body, otherwise) {
    if (body && body.retryAfterMs) { return body.retryAfterMs; }
    var s = parseInt(res.headers.get("Retry-After") || "", 10);
    return isNaN(s) ? otherwise : s * 1000;
  };
  var words = function (seconds) {
    if (seconds === null || seconds === undefined) { return ""; }
    if (seconds < 60) { return t("waitUnderMinute"); }
    var m = Math.round(seconds / 60);
    return t(m === 1 ? "waitOneMinute" : "waitMinutes", { minutes: m });
  };
  var clock = function (iso) {
    return new Date(iso).toLocaleTimeString(document.documentElement.lang || [], { hour: "2-digit", minute: "2-digit" });
  };
  var two = function (n) { return (n < 10 ? "0" : "") + n; };
  var tick = function () {
    var left = Math.max(0, Math.ceil((opensAt - performance.now()) / 1000));
    var h = Math.floor(left / 3600), m = Math.floor(left / 60) % 60, sec = left % 60;
    el("countdown").textContent = (h > 0 ? h + ":" + two(m) : String(m)) + ":" + two(sec);
  };
  setInterval(function () { if (opensAt) { tick(); } }, 1000);
  var countdown = function (ms) {
    opensAt = ms ? performance.now() + ms : 0;
    el("countdown").hidden = !opensAt;
    el("position").hidden = !!opensAt;
    if (opensAt) { tick(); }
  };
  var showMessage = function (m) {
    el("message").textContent = m;
    el("message").hidden = !m;
  };
  var setBar = function (pct) {
    el("fill").style.width = pct + "%";
    el("progress").setAttribute("aria-valuenow", String(pct));
  };
  var scheduled = function (b) {
    countdown(b.opensInMs);
    el("title").textContent = t("titleScheduled");
    el("summary").textContent = t("summaryScheduled", { opensAt: clock(b.opensAt), preQueueFrom: clock(b.preQueueFrom) });
    el("wait").textContent = "";
    setBar(0);
  };
  var preQueued = function (b) {
    countdown(b.opensInMs);
    el("title").textContent = t("titlePreQueue");
    el("summary").textContent = t(b.queueDepth === 1 ? "summaryPreQueueOne" : "summaryPreQueue", { depth: b.queueDepth, opensAt: clock(b.opensAt) });
    el("wait").textContent = "";
    setBar(0);
  };
  var opening = function () {
    countdown(null);
    el("title").textContent = t("titleOpening");
    el("position").textContent = "…";
    el("summary").textContent = t("summaryOpening");
    el("wait").textContent = "";
  };
  var closed = function (b) {
    countdown(null);
    el("title").textContent = t("titleClosed");
    el("position").textContent = t("positionClosed");
    el("summary").textContent = b && b.position > 0
      ? t("summaryClosedKept", { position: b.position })
      : b && b.closesAt
        ? t("summaryClosedAt", { closesAt: clock(b.closesAt) })
        : t("summaryClosed");
    el("wait").textContent = "";
  };
  var render = function (b) {
    countdown(null);
    el("title").textContent = t("title");
    if (b.position > 0) {
      if (!first || b.position > first) { first = b.position; }
      el("position").textContent = "#" + b.position;
      // Far from the front the proxy answers with a bound: the visitor is at most that far back.
      el("summary").textContent = t(b.positionIsBound ? "summaryLineBound" : "summaryLine", { position: b.position, depth: b.queueDepth });
      setBar(first > 1 ? Math.round(100 * (first - b.position) / (first - 1)) : 100);
      el("wait").textContent = words(b.estimatedWaitSeconds) + (b.capacityChanged && b.estimatedWaitSeconds !== null ? " " + t("capacityChanged") : "");
    } else {
      el("position").textContent = t("positionNext");
      el("summary").textContent = t("summaryAlmost");
      setBar(100);
      el("wait").textContent = "";
    }
  };
  var run = async function () {
    var res = await enter();
    for (;;) {
      var body = null;
      try { body = await res.json(); } catch (e) { body = null; }
      if (body) { showMessage(body.notice || ""); }
      // A place comes as 200, or as the room's queueing status (202 or 429) with no error in it.
      if (body && !body.error && (res.status === 200 || res.status === 202 || res.status === 429)) {
        if (body.admitted) {
          el("summary").textContent = t("summaryYourTurn");
          location.replace(target);
          return;
        }
        if (body.phase === "Closed" && !(body.position > 0 && body.closesAt)) { closed(body); }
        else if (body.phase === "PreQueue") { preQueued(body); }
        else if (body.phase === "Opening" && !(body.position > 0)) { opening(); }
        else { render(body); }
        await sleep(body.nextPollMs);
        res = await call("GET", "/.herdgate/status");
      } else if (res.status === 404) {
        res = await enter();
      } else if ((res.status === 403 || res.status === 409) && body && /^lane_code_/.test(body.error)) {
        el("title").textContent = t("titleLaneCode");
        el("position").textContent = "";
        el("summary").textContent = t("summaryLaneCode");
        return;
      } else if ((res.status === 401 || res.status === 403 || res.status === 409) && body && /^invitation_/.test(body.error)) {
        el("title").textContent = t("titleInvitation");
        el("position").textContent = "";
        el("summary").textContent = body.error === "invitation_expired"
          ? t("summaryInvitationExpired")
          : t("summaryInvitationOnly");
        return;
      } else if (res.status === 403 && body && body.error === "not_open") {
        scheduled(body);
        await sleep(retryMs(res, body, 1000));
        res = await enter();
      } else if (res.status === 503 && body && body.error === "closed") {
        closed(body);
        // A schedule that closed does not reopen by itself: ask rarely.
        await sleep(retryMs(res, body, body.closesAt ? 60000 : 2000));
        res = await enter();
      } else if (res.status === 503 && body && body.error === "queue_starting") {
        await sleep(retryMs(res, body, 1000));
        res = await enter();
      } else if (res.status === 429 || res.status === 503) {
        if (res.status === 503) { el("summary").textContent = t("summaryBusy"); }
        await sleep(retryMs(res, body, 2000));
        res = await call("GET", "/.herdgate/status");
      } else {
        el("summary").textContent = t("summaryError");
        await sleep(5000);
        res = await call("GET", "/.herdgate/status");
      }
    }
  };
  run().catch(function () {
    el("summary").textContent = t("summaryLost");
  });
})();
