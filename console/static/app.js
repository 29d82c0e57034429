// ribkeeper console: hand-written, no dependencies, no build step.
// Everything shown comes from the /v1 API of this origin, called with the
// bearer token the operator logged in with (kept in sessionStorage); the
// event stream (/v1/events) keeps the pages current without reloading.
// Text from the API is only ever set as textContent, never as HTML.
(() => {
  'use strict';

  const TOKEN_KEY = 'ribkeeper.token';
  const MAX_ROWS = 500; // rules shown at once; the filter narrows the rest

  const S = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    me: null, // {name, role}
    status: null,
    rules: [],
    series: null,
    rule: null, // the rule shown on its page
    incidents: [],
    incident: null, // the incident shown on its page
    history: [],
    lastId: null, // id of the last event received
    stream: null, // AbortController of the event stream
    view: '',
    timers: {},
  };

  // ---- small helpers ----

  const $ = (sel, root) => (root || document).querySelector(sel);

  // el('td', {class: 'x', title: 't'}, 'text', child...) builds an element;
  // strings become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const canWrite = () => S.me && S.me.role === 'write';

  // fmtDur says a number of seconds the way people read it: "2h 05m".
  function fmtDur(sec) {
    sec = Math.max(0, Math.floor(sec));
    const d = Math.floor(sec / 86400), h = Math.floor(sec % 86400 / 3600);
    const m = Math.floor(sec % 3600 / 60), s = sec % 60;
    const p2 = (n) => String(n).padStart(2, '0');
    if (d > 0) return d + 'd ' + h + 'h';
    if (h > 0) return h + 'h ' + p2(m) + 'm';
    if (m > 0) return m + 'm ' + p2(s) + 's';
    return s + 's';
  }

  function fmtSeconds(s) {
    if (s >= 1) return s.toFixed(2) + ' s';
    if (s >= 0.001) return (s * 1000).toFixed(1) + ' ms';
    return Math.round(s * 1e6) + ' µs';
  }

  // A moment in the browser's time zone, which it names (the API's
  // times are UTC): "25/11/2026, 20:15:03 UTC", "…, 21:15:03 CET".
  function fmtTime(iso) {
    if (!iso) return '';
    const t = new Date(iso);
    return t.toLocaleString(undefined, {hour12: false, timeZoneName: 'short'});
  }

  // Rule text as words that never break inside (an address, tcp-flags,
  // ==443): a line breaks only between words.
  function words(text) {
    const out = el('span', {class: 'words'});
    String(text).split(' ').forEach((w, i) => {
      if (i) out.append(' ');
      out.append(el('span', {class: 'nw', text: w}));
    });
    return out;
  }

  // A value of a history entry: times in the same form as elsewhere.
  function historyValue(k, v) {
    if (v && /_at$/.test(k) && !isNaN(Date.parse(v))) return fmtTime(v);
    return v || '""';
  }

  function ago(iso) {
    if (!iso) return '';
    return fmtDur((Date.now() - Date.parse(iso)) / 1000) + ' ago';
  }

  // ---- the API ----

  class APIError extends Error {
    constructor(status, e) {
      super(e.message || ('HTTP ' + status));
      this.status = status;
      this.code = e.code || '';
      this.field = e.field || '';
      this.column = e.column || 0;
    }
  }

  async function api(method, path, body) {
    const headers = {Accept: 'application/json'};
    if (S.token) headers.Authorization = 'Bearer ' + S.token;
    const init = {method, headers, cache: 'no-store', credentials: 'omit'};
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, {message: 'ribkeeper cannot be reached (' + e.message + '); is the daemon running?'});
    }
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      data = null;
    }
    if (!res.ok) {
      const e = (data && data.error) || {message: 'HTTP ' + res.status};
      if (res.status === 401 && S.me) loggedOut('Your token is no longer accepted: ' + e.message);
      throw new APIError(res.status, e);
    }
    return data;
  }

  // ---- flash messages ----

  function flash(msg, isError) {
    const f = $('#flash');
    f.textContent = msg;
    f.className = 'flash' + (isError ? ' flash-error' : '');
    f.hidden = false;
    clearTimeout(S.timers.flash);
    S.timers.flash = setTimeout(() => { f.hidden = true; }, isError ? 15000 : 5000);
  }

  // ---- login ----

  function showView(name) {
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + name;
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('current', a.dataset.view === name || (name === 'rule' && a.dataset.view === 'rules') ||
        (name === 'incident' && a.dataset.view === 'incidents'));
    }
    S.view = name;
  }

  function showLogin(msg) {
    for (const id of ['nav', 'who', 'logout', 'live']) $('#' + id).hidden = true;
    showView('login');
    const err = $('#login-error');
    err.textContent = msg || '';
    err.hidden = !msg;
    $('#login-token').focus();
  }

  function loggedOut(msg) {
    $('#flash').hidden = true;
    if (S.stream) S.stream.abort();
    S.stream = null;
    S.me = null;
    S.token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(msg);
  }

  async function start() {
    try {
      S.me = await api('GET', '/v1/whoami');
    } catch (e) {
      if (e.status === 401) {
        const had = S.token !== '';
        S.token = '';
        sessionStorage.removeItem(TOKEN_KEY);
        showLogin(had ? 'The saved token is not accepted any more: ' + e.message : '');
        return;
      }
      showView('login');
      const err = $('#login-error');
      err.textContent = e.message;
      err.hidden = false;
      return;
    }
    enter();
  }

  $('#login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const token = $('#login-token').value.trim();
    if (!token) return;
    S.token = token;
    try {
      S.me = await api('GET', '/v1/whoami');
    } catch (e) {
      S.token = '';
      showLogin(e.status === 401 ? 'That token is not accepted: ' + e.message : e.message);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $('#login-token').value = '';
    enter();
  });

  $('#logout').addEventListener('click', () => loggedOut(''));

  function enter() {
    // What another token's pages showed is drawn again for this one (its
    // controls depend on the role).
    S.rules = [];
    S.rulesSig = null;
    S.status = null;
    S.rule = null;
    const write = canWrite();
    document.body.classList.toggle('readonly', !write);
    $('#nav').hidden = false;
    $('#nav-add').hidden = !write;
    const who = $('#who');
    // A listener without tokens has no login and names its requests
    // "tcp": say what that means instead.
    const name = S.token === '' ? 'no login (listener without tokens)' : S.me.name;
    clear(who).append(el('span', {text: name, title: S.token === '' ? 'anyone who can reach this listener has these rights' : 'the token you logged in with'}), ' ',
      el('span', {class: 'badge ' + (write ? 'b-write' : 'b-read'), text: write ? 'can change rules' : 'read-only'}));
    // A scoped token sees and changes only rules inside its prefixes.
    if ((S.me.prefixes || []).length) {
      who.append(' ', el('span', {class: 'scope', title: 'this token sees and changes only rules inside these prefixes',
        text: 'scope ' + S.me.prefixes.join(', ')}));
    }
    who.hidden = false;
    $('#logout').hidden = S.token === ''; // a listener without tokens has no login
    connectEvents();
    route();
    loadSeries();
    clearInterval(S.timers.series);
    S.timers.series = setInterval(loadSeries, 60000);
  }

  // ---- routing ----

  function route() {
    if (!S.me) return;
    const h = location.hash.replace(/^#\/?/, '');
    const parts = h.split('/');
    if (parts[0] === 'rules' && /^\d+$/.test(parts[1] || '')) {
      showView('rule');
      S.rule = S.rules.find((r) => r.id === Number(parts[1])) || null;
      renderRule();
      loadRule(Number(parts[1]));
    } else if (parts[0] === 'rules') {
      showView('rules');
      renderRules();
      loadRules();
    } else if (parts[0] === 'incidents' && /^\d+$/.test(parts[1] || '')) {
      showView('incident');
      S.incident = S.incidents.find((x) => x.id === Number(parts[1])) || null;
      renderIncident();
      loadIncident(Number(parts[1]));
    } else if (parts[0] === 'incidents') {
      showView('incidents');
      renderIncidents();
      loadIncidents();
    } else if (parts[0] === 'add' && canWrite()) {
      showView('add');
      prepareAdd();
    } else {
      if (h !== 'overview' && h !== '') location.hash = '#/overview';
      showView('overview');
      renderOverview();
      loadStatus();
    }
  }
  window.addEventListener('hashchange', route);

  // ---- loading, debounced ----

  function later(what, fn, ms) {
    clearTimeout(S.timers[what]);
    S.timers[what] = setTimeout(fn, ms === undefined ? 250 : ms);
  }

  async function loadStatus() {
    try {
      S.status = await api('GET', '/v1/status');
    } catch (e) {
      if (e.status !== 401) flash('Status: ' + e.message, true);
      return;
    }
    renderOverview();
  }

  async function loadSeries() {
    try {
      S.series = await api('GET', '/v1/series');
    } catch (e) {
      S.series = null;
    }
    renderChart();
  }

  async function loadRules() {
    let out;
    try {
      out = await api('GET', '/v1/rules?order=precedence');
    } catch (e) {
      if (e.status !== 401) flash('Rules: ' + e.message, true);
      return;
    }
    const rules = out.rules || [];
    const sig = JSON.stringify(rules);
    if (sig === S.rulesSig) return; // nothing new: keep the page as it is
    S.rulesSig = sig;
    S.rules = rules;
    renderRules();
    if (S.view === 'rule' && S.rule) {
      const r = S.rules.find((x) => x.id === S.rule.id);
      if (r) {
        S.rule = r;
        renderRule();
      }
    }
  }

  async function loadRule(id) {
    try {
      const [r, h] = await Promise.all([api('GET', '/v1/rules/' + id), api('GET', '/v1/rules/' + id + '/history')]);
      S.rule = r;
      S.history = h.events || [];
    } catch (e) {
      if (e.status === 404) {
        S.rule = null;
        S.history = [];
        renderRule('No rule with id ' + id + '.');
        return;
      }
      if (e.status !== 401) flash('Rule ' + id + ': ' + e.message, true);
      return;
    }
    renderRule();
  }

  async function loadIncidents() {
    let out;
    try {
      out = await api('GET', '/v1/incidents?limit=500');
    } catch (e) {
      if (e.status !== 401) flash('Incidents: ' + e.message, true);
      return;
    }
    S.incidents = out.incidents || [];
    renderIncidents();
  }

  async function loadIncident(id) {
    try {
      S.incident = await api('GET', '/v1/incidents/' + id);
    } catch (e) {
      if (e.status === 404) {
        S.incident = null;
        renderIncident('No incident with id ' + id + ' (ended ones are kept up to [incidents] keep_ended).');
        return;
      }
      if (e.status !== 401) flash('Incident ' + id + ': ' + e.message, true);
      return;
    }
    renderIncident();
  }

  function reloadAll() {
    loadStatus();
    loadRules();
    loadSeries();
    if (S.view === 'rule' && S.rule) loadRule(S.rule.id);
    if (S.view === 'incidents') loadIncidents();
    if (S.view === 'incident' && S.incident) loadIncident(S.incident.id);
  }

  // ---- the event stream ----

  function setLive(on) {
    const l = $('#live');
    l.hidden = false;
    l.className = 'live ' + (on ? 'on' : 'off');
    l.textContent = on ? 'live' : 'reconnecting…';
    l.title = on ? 'Following changes as they happen (GET /v1/events)' : 'The event stream is down; reconnecting';
    // What failed while the daemon was away is no longer news.
    if (on && $('#flash').classList.contains('flash-error')) $('#flash').hidden = true;
  }

  async function connectEvents() {
    if (S.stream) S.stream.abort();
    const ctl = new AbortController();
    S.stream = ctl;
    let delay = 1000;
    while (!ctl.signal.aborted) {
      try {
        const headers = {Accept: 'text/event-stream'};
        if (S.token) headers.Authorization = 'Bearer ' + S.token;
        if (S.lastId !== null) headers['Last-Event-ID'] = S.lastId;
        const res = await fetch('/v1/events', {headers, signal: ctl.signal, cache: 'no-store', credentials: 'omit'});
        if (res.status === 401) {
          loggedOut('Your token is no longer accepted.');
          return;
        }
        if (res.ok && res.body) {
          setLive(true);
          delay = 1000;
          await readStream(res.body, onEvent);
        }
      } catch (_) {
        // the daemon went away, or the stream was aborted
      }
      if (ctl.signal.aborted) return;
      setLive(false);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 15000);
    }
  }

  // readStream parses server-sent events (id, event, data lines; a blank
  // line ends an event) and calls fn for each.
  async function readStream(body, fn) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = {id: null, type: 'message', data: []};
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          // An id alone (an event this token may not see) still moves
          // the id to resume from.
          if (ev.data.length || ev.id !== null) fn(ev);
          ev = {id: null, type: 'message', data: []};
          continue;
        }
        if (line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let val = c < 0 ? '' : line.slice(c + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'id') ev.id = val;
        else if (field === 'event') ev.type = val;
        else if (field === 'data') ev.data.push(val);
      }
    }
  }

  function onEvent(ev) {
    if (ev.id !== null) S.lastId = ev.id;
    if (!ev.data.length) return;
    let d;
    try {
      d = JSON.parse(ev.data.join('\n'));
    } catch (_) {
      return;
    }
    switch (ev.type) {
      case 'hello':
      case 'reset':
        reloadAll();
        break;
      case 'rule':
        // A rule too large for an event comes as its id and state: read
        // it again instead.
        if (d.truncated) {
          if (S.view === 'rule' && S.rule && S.rule.id === d.id) later('history', () => loadRule(d.id));
        } else {
          applyRule(d);
        }
        refresh();
        break;
      case 'rules':
      case 'peer':
      case 'pass':
        refresh();
        break;
      case 'incident':
        if (S.view === 'incidents') later('incidents', loadIncidents);
        if (S.view === 'incident' && S.incident && S.incident.id === d.id) later('incident', () => loadIncident(d.id));
        break;
    }
  }

  // refresh reads again, soon and once for a burst of events, what the
  // page shows: the status on the overview; the list (delivery,
  // precedence, shadowing) on the rules pages. Other pages read theirs
  // when they are opened.
  function refresh() {
    if (S.view === 'overview') later('status', loadStatus);
    if (S.view === 'rules' || S.view === 'rule') later('rules', loadRules);
  }

  function applyRule(r) {
    const i = S.rules.findIndex((x) => x.id === r.id);
    if (i >= 0) {
      // keep what only the list knows until it is listed again
      r.peers = r.peers || S.rules[i].peers;
      r.announced_to = r.announced_to || S.rules[i].announced_to;
      S.rules[i] = r;
    } else {
      S.rules.unshift(r);
    }
    if (S.view === 'rules') renderRules();
    if (S.view === 'rule' && S.rule && S.rule.id === r.id) {
      S.rule = r;
      renderRule();
      later('history', () => loadRule(r.id));
    }
  }

  // ---- overview ----

  function stateBadge(state) {
    return el('span', {class: 'badge s-' + state, text: state});
  }

  // A session's state: BGP's "active" is a session trying to connect,
  // not a rule's active.
  function peerBadge(state) {
    return el('span', {class: 'badge p-' + state, text: state});
  }

  function renderOverview() {
    const st = S.status;
    if (!st) return;
    const counts = clear($('#counts'));
    const c = st.rules || {};
    const card = (label, n, cls, sub) => el('div', {class: 'count ' + (cls || '')},
      el('div', {class: 'n', text: String(n === undefined ? '–' : n)}), el('div', {class: 'label', text: label}),
      sub ? el('div', {class: 'muted small'}, sub) : null);
    // One family and its count never break over two lines.
    const fam = el('span', {});
    Object.entries(c.by_family || {}).forEach(([f, n], i) => {
      if (i) fam.append(', ');
      fam.append(el('span', {class: 'nw', text: f + ' ' + n}));
    });
    const peers = st.peers || [];
    const down = peers.filter((p) => p.state !== 'established');
    const none = peers.length > 0 && down.length === peers.length;
    counts.append(
      card('active', c.active, 'c-active', fam),
      // Announced to the speaker: with every session down no router
      // holds them, and the card says so instead of staying calm.
      card('announced', c.announced, none && c.announced ? 'c-alarm' : 'c-announced',
        none && c.announced ? 'by this site, but no router has them: every session is down' : 'by this site'),
      card('withdrawing', c.withdrawing, 'c-withdrawing'),
      card('withdrawn', c.withdrawn),
      card('expired', c.expired),
      card('peers up', (peers.length - down.length) + '/' + peers.length, down.length ? 'c-alarm' : 'c-peers',
        down.length ? down.length + ' down' : ''));
    const alarm = clear($('#peer-alarm'));
    alarm.hidden = !down.length;
    if (down.length) {
      alarm.append(el('strong', {text: none
        ? 'No router is reachable: every BGP session is down, so no rule reaches the network.'
        : down.length + ' of ' + peers.length + ' BGP sessions down: those routers do not get the rules.'}));
      const ul = el('ul', {});
      for (const p of down) {
        ul.append(el('li', {},
          el('span', {class: 'nw mono', text: p.address}), p.description ? ' (' + p.description + ')' : '',
          ' ' + p.state + (p.since ? ' for ' + fmtDur((Date.now() - Date.parse(p.since)) / 1000) : ''),
          p.last_error ? ': ' + p.last_error : '', p.hint ? el('div', {class: 'small', text: p.hint}) : null));
      }
      alarm.append(ul);
    }

    // A scoped token sees its own rules' counts, not the appliance's
    // passes nor the paths sent to each peer.
    const scoped = !!(S.me && S.me.prefixes && S.me.prefixes.length);
    const lp = clear($('#last-pass'));
    const p = st.last_pass;
    if (!p && scoped) {
      lp.append(el('p', {class: 'muted', text: 'Passes are the whole appliance\'s work: a token scoped to ' + S.me.prefixes.join(', ') + ' sees its own rules only.'}));
    } else if (!p) {
      lp.append(el('p', {class: 'muted', text: 'No pass yet.'}));
    } else {
      lp.append(el('p', {},
        el('span', {class: 'badge r-' + p.result, text: p.result}), ' ',
        el('span', {text: 'started ' + fmtTime(p.started) + ' (', }), el('span', {'data-ago': p.started, text: ago(p.started)}),
        el('span', {text: '), took ' + fmtSeconds(p.duration_seconds)})));
      lp.append(kv([['added', p.added], ['updated', p.updated], ['withdrawn', p.withdrawn], ['finished', p.finished],
        ['in the RIB as wanted', p.adopted], ['orphans', p.orphans], ['pending', p.pending], ['errors', p.errors]]));
      if (p.err) lp.append(el('p', {class: 'error', text: p.err}));
      if (p.capped) lp.append(el('p', {class: 'error', text: 'Orphan withdrawals were capped (max_withdraw_per_pass).'}));
    }
    const ss = clear($('#since-start'));
    const t = st.since_start;
    if (t) {
      ss.append(el('p', {class: 'muted', text: 'since ' + fmtTime(t.started)}));
      ss.append(kv([['passes', t.passes], ['passes with errors', t.error_passes], ['added', t.added], ['updated', t.updated], ['withdrawn', t.withdrawn],
        ['drift: re-added', t.readded], ['drift: orphans withdrawn', t.orphans_withdrawn], ['drift: replaced', t.replaced],
        ['speaker restarts', t.speaker_restarts], ['peer resets', t.peer_resets]]));
    }

    const tb = clear($('#peers tbody'));
    for (const pr of st.peers || []) {
      const up = pr.state === 'established';
      const why = [];
      if (!up && pr.last_error) why.push(el('div', {text: pr.last_error + (pr.last_error_at ? ' (' + ago(pr.last_error_at) + ')' : '')}));
      if (!up && pr.hint) why.push(el('div', {class: 'muted small', text: pr.hint}));
      if (up && pr.last_error) why.push(el('div', {class: 'muted small', text: 'last down: ' + pr.last_error}));
      tb.append(el('tr', {'data-peer': pr.address, class: up ? '' : 'down'},
        el('td', {}, el('span', {class: 'mono nw', text: pr.address}),
          pr.description ? el('div', {class: 'muted small peer-desc', text: pr.description}) : null),
        el('td', {text: String(pr.asn)}),
        el('td', {}, peerBadge(pr.state)),
        el('td', up && pr.since ? {'data-since': pr.since, text: fmtDur((Date.now() - Date.parse(pr.since)) / 1000)}
          : {class: 'muted', text: pr.since ? 'down for ' + fmtDur((Date.now() - Date.parse(pr.since)) / 1000) : '–'}),
        el('td', {text: up && !scoped ? String(pr.sent) : '–'}),
        el('td', {text: String(pr.flaps)}),
        el('td', {class: 'why'}, ...why)));
    }
    if (!(st.peers || []).length) tb.append(el('tr', {}, el('td', {colspan: 7, class: 'muted', text: 'No neighbors configured.'})));

    const errs = clear($('#status-errors'));
    for (const e of st.errors || []) errs.append(el('li', {class: 'error', text: e}));
    const dl = clear($('#known-sites'));
    for (const s of st.sites || []) dl.append(el('option', {value: s}));
  }

  function kv(pairs) {
    const d = el('dl', {class: 'kv'});
    for (const [k, v] of pairs) d.append(el('dt', {text: k}), el('dd', {text: String(v === undefined ? '–' : v)}));
    return d;
  }

  // renderChart draws the series as SVG: active rules as a line (left
  // axis), drift repairs per sample as bars (right axis).
  function renderChart() {
    const box = clear($('#chart'));
    const pts = (S.series && S.series.points) || [];
    if (pts.length < 2) {
      box.append(el('p', {class: 'muted', text: 'Collecting samples (one every ' +
        fmtDur((S.series && S.series.interval_seconds) || 60) + '); the chart appears after the second.'}));
      $('#chart-range').textContent = '';
      return;
    }
    const W = 860, H = 220, L = 48, R = 44, T = 12, B = 26;
    const t0 = Date.parse(pts[0].at), t1 = Date.parse(pts[pts.length - 1].at);
    const span = Math.max(t1 - t0, 1);
    // Both axes have 4 divisions of a round step, so that their labels
    // sit on the same grid lines.
    const step = (max) => {
      const raw = Math.max(max, 1) / 4;
      const p = Math.pow(10, Math.floor(Math.log10(raw)));
      const m = [1, 2, 5, 10].find((k) => k * p >= raw);
      return Math.max(1, m * p);
    };
    const topA = 4 * step(Math.max(...pts.map((p) => p.active)));
    const topD = 4 * step(Math.max(...pts.map((p) => p.drift_repairs)));
    const x = (t) => L + (W - L - R) * (Date.parse(t) - t0) / span;
    const yA = (v) => T + (H - T - B) * (1 - v / topA);
    const yD = (v) => T + (H - T - B) * (1 - v / topD);
    const g = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'chart-svg', role: 'img',
      'aria-label': 'active rules and drift repairs over time'});
    for (let i = 0; i <= 4; i++) {
      const y = yA(topA * i / 4);
      g.append(svg('line', {x1: L, x2: W - R, y1: y, y2: y, class: 'grid'}));
      g.append(svg('text', {x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'axis a-active'}, String(topA * i / 4)));
      g.append(svg('text', {x: W - R + 6, y: y + 4, class: 'axis a-drift'}, String(topD * i / 4)));
    }
    for (let i = 0; i <= 4; i++) {
      const t = new Date(t0 + span * i / 4);
      const xx = L + (W - L - R) * i / 4;
      g.append(svg('text', {x: xx, y: H - 6, 'text-anchor': 'middle', class: 'axis'},
        t.toLocaleTimeString(undefined, {hour: '2-digit', minute: '2-digit', hour12: false})));
    }
    const bw = Math.max(1, (W - L - R) / pts.length * 0.6);
    for (const p of pts) {
      if (!p.drift_repairs) continue;
      const y = yD(p.drift_repairs);
      g.append(svg('rect', {x: x(p.at) - bw / 2, y, width: bw, height: H - B - y, class: 'bar-drift'},
        svg('title', {}, fmtTime(p.at) + ': ' + p.drift_repairs + ' drift repairs')));
    }
    let d = '';
    pts.forEach((p, i) => { d += (i ? 'L' : 'M') + x(p.at).toFixed(1) + ' ' + yA(p.active).toFixed(1); });
    g.append(svg('path', {d, class: 'line-active'}));
    const last = pts[pts.length - 1];
    g.append(svg('circle', {cx: x(last.at), cy: yA(last.active), r: 3, class: 'dot-active'},
      svg('title', {}, fmtTime(last.at) + ': ' + last.active + ' active rules')));
    box.append(g);
    box.append(el('div', {class: 'legend'},
      el('span', {class: 'k k-active'}), 'active rules (left axis)  ',
      el('span', {class: 'k k-drift'}), 'drift repairs per sample (right axis)'));
    $('#chart-range').textContent = '(last ' + fmtDur(span / 1000) + ', one sample every ' + fmtDur(S.series.interval_seconds) + ')';
  }

  // ---- rules ----

  for (const id of ['f-state', 'f-family', 'f-site', 'f-text']) {
    $('#' + id).addEventListener('input', renderRules);
  }
  $('#filters').addEventListener('submit', (ev) => ev.preventDefault());

  function matches(r) {
    const st = $('#f-state').value, fam = $('#f-family').value;
    const site = $('#f-site').value.trim().toLowerCase(), q = $('#f-text').value.trim().toLowerCase();
    if (st === 'current' ? (r.state !== 'active' && r.state !== 'withdrawing') : (st && r.state !== st)) return false;
    if (fam && r.family !== fam) return false;
    if (site && r.sites.length && !r.sites.some((s) => s.toLowerCase().includes(site))) return false;
    if (q) {
      const hay = [String(r.id), r.text, r.reason, r.actor, r.state, r.family, r.last_error].join(' ').toLowerCase();
      if (!q.split(/\s+/).every((w) => hay.includes(w))) return false;
    }
    return true;
  }

  function timeLeft(r) {
    if (r.state === 'withdrawn' || r.state === 'expired') return el('span', {class: 'muted', text: '–'});
    if (!r.expires_at) return el('span', {class: 'muted', text: 'never'});
    return el('span', {'data-expires': r.expires_at, text: leftText(r.expires_at)});
  }

  function leftText(iso) {
    const s = (Date.parse(iso) - Date.now()) / 1000;
    return s <= 0 ? 'expiring' : fmtDur(s);
  }

  function delivery(r) {
    if (r.state !== 'active' && r.state !== 'withdrawing') return el('span', {class: 'muted', text: '–'});
    // A rule from an event carries no delivery: the list, read again at
    // once, has it.
    if (!r.announced_to) return el('span', {class: 'muted', title: 'reading which routers have it', text: '…'});
    const [n, total] = r.announced_to.split('/').map(Number);
    const cls = total > 0 && n === total ? 'ok' : (n === 0 ? 'warn' : 'partial');
    return el('span', {class: 'deliv ' + cls, title: (r.peers || []).length ? 'in the Adj-RIB-Out of ' + r.peers.join(', ') : 'no established peer holds it',
      text: r.announced_to + (total ? ' peers' : '')});
  }

  function withdrawButton(r) {
    if (!canWrite() || r.state !== 'active' || r.origin) return null;
    return el('button', {type: 'button', class: 'danger small withdraw', 'data-withdraw': r.id,
      onclick: () => confirmWithdraw(r)}, 'Withdraw');
  }

  function renderRules() {
    if (S.view !== 'rules') return;
    const tb = clear($('#rules-table tbody'));
    const shown = S.rules.filter(matches);
    for (const r of shown.slice(0, MAX_ROWS)) {
      // The place in the routers' order comes from the server: the same
      // under any filter.
      const prec = r.state === 'active' ? r.precedence : 0;
      const ruleCell = el('td', {class: 'rule-text'},
        el('a', {href: '#/rules/' + r.id, class: 'mono'}, words(r.text)),
        r.shadowed_by ? el('div', {class: 'shadow', text: '⚠ never applies: rule ' + r.shadowed_by +
          ' comes first in the routers\' order and matches all of its traffic'}) : null,
        r.last_error ? el('div', {class: 'error small', text: r.last_error}) : null,
        r.origin ? el('div', {class: 'muted small', text: 'declared in ' + r.origin}) : null,
        r.set ? el('div', {class: 'muted small', text: 'set ' + r.set}) : null);
      tb.append(el('tr', {'data-rule': r.id, class: r.shadowed_by ? 'shadowed' : ''},
        el('td', {class: 'num', title: prec ? 'place in the order routers apply ' + r.family + ' rules in' : ''},
          el('a', {href: '#/rules/' + r.id, text: '#' + r.id}), prec ? el('div', {class: 'muted small', text: 'prec. ' + prec}) : null),
        el('td', {}, stateBadge(r.state)),
        el('td', {class: 'small nw', text: r.family}),
        ruleCell,
        el('td', {}, timeLeft(r)),
        el('td', {}, delivery(r)),
        el('td', {class: 'reason', text: r.reason}),
        el('td', {class: 'small', text: r.sites.length ? r.sites.join(', ') : 'all'}),
        el('td', {class: 'small', text: r.actor}),
        el('td', {}, withdrawButton(r))));
    }
    if (!shown.length) {
      tb.append(el('tr', {}, el('td', {colspan: 10, class: 'muted',
        text: S.rules.length ? 'No rule matches the filter.' : 'No rules yet.'})));
    }
    $('#rules-count').textContent = shown.length > MAX_ROWS
      ? 'Showing ' + MAX_ROWS + ' of ' + shown.length + ' matching rules; narrow the filter to see the rest.'
      : shown.length + ' of ' + S.rules.length + ' rules.';
  }

  function renderRule(missing) {
    const card = clear($('#rule-card'));
    const tb = clear($('#history tbody'));
    const r = S.rule;
    if (!r) {
      card.append(el('p', {class: 'muted', text: missing || 'Loading…'}));
      return;
    }
    card.append(el('h1', {}, 'Rule ' + r.id + ' ', stateBadge(r.state)));
    card.append(el('p', {}, el('code', {class: 'big'}, words(r.text))));
    if (r.shadowed_by) {
      card.append(el('p', {class: 'shadow'}, '⚠ never applies: ',
        el('a', {href: '#/rules/' + r.shadowed_by, text: 'rule ' + r.shadowed_by}),
        ' comes first in the routers\' order and matches all of its traffic'));
    }
    const exp = r.expires_at ? el('span', {}, fmtTime(r.expires_at) + ' (', timeLeft(r), ')') : 'never';
    const d = el('dl', {class: 'kv wide'});
    const row = (k, v) => d.append(el('dt', {text: k}), el('dd', {}, v));
    row('family', r.family);
    if (r.precedence) row('precedence', 'no. ' + r.precedence + ' in the order routers apply ' + r.family + ' rules in (no. 1 applies first)');
    row('match', el('code', {text: r.match}));
    row('action', el('code', {text: r.action}));
    row('reason', r.reason || '–');
    row('actor', r.actor);
    row('sites', r.sites.length ? r.sites.join(', ') : 'every site');
    if (r.origin) row('declared in', r.origin + ' (a static rule: change it in that configuration)');
    if (r.set) row('set', r.set + ' (applying the set again puts back what it says)');
    row('created', fmtTime(r.created_at));
    row('updated', fmtTime(r.updated_at));
    row('expires', exp);
    row('announced', r.announced ? 'yes' : 'no');
    if (r.announced_to) row('delivered to', r.announced_to + ' peers' + ((r.peers || []).length ? ': ' + r.peers.join(', ') : ''));
    if (r.last_error) row('last error', el('span', {class: 'error', text: r.last_error}));
    card.append(d);
    const b = withdrawButton(r);
    if (b) card.append(el('div', {class: 'actions'}, b));

    for (const e of S.history) {
      const ch = el('td', {class: 'changes'});
      const keys = new Set([...Object.keys(e.old || {}), ...Object.keys(e.new || {})]);
      for (const k of keys) {
        const o = (e.old || {})[k], n = (e.new || {})[k];
        if (o === n) continue;
        ch.append(el('div', {}, el('span', {class: 'muted', text: k + ': '}),
          o !== undefined ? el('del', {text: historyValue(k, o)}) : null, o !== undefined && n !== undefined ? ' → ' : null,
          n !== undefined ? el('ins', {text: historyValue(k, n)}) : null));
      }
      tb.append(el('tr', {}, el('td', {class: 'small', text: fmtTime(e.at)}), el('td', {text: e.kind}),
        el('td', {text: e.actor}), el('td', {text: e.site || ''}), ch));
    }
    if (!S.history.length) tb.append(el('tr', {}, el('td', {colspan: 5, class: 'muted', text: 'No history.'})));
  }

  // ---- incidents ----

  function vectorText(v) {
    const parts = [];
    if (v.protocol) parts.push(v.protocol);
    if ((v.dst_ports || []).length) parts.push('dst ' + v.dst_ports.join(','));
    if ((v.src_ports || []).length) parts.push('src ' + v.src_ports.join(','));
    if (v.tcp_flags) parts.push('flags ' + v.tcp_flags);
    return parts.length ? parts.join(' ') : 'any';
  }

  function incidentState(inc) {
    const b = el('span', {}, stateBadge(inc.state));
    if (inc.shadow) b.append(' ', el('span', {class: 'badge s-shadow', title: 'shadow mode: the playbook writes nothing', text: 'shadow'}));
    if (inc.state === 'holding' && inc.ends_at) b.append(el('div', {class: 'muted small', text: 'until ' + fmtTime(inc.ends_at)}));
    return b;
  }

  function peak(inc) {
    const p = [];
    if (inc.peak_pps) p.push(inc.peak_pps.toLocaleString() + ' pps');
    if (inc.peak_bps) p.push(inc.peak_bps.toLocaleString() + ' bps');
    return p.join(', ') || '–';
  }

  function renderIncidents() {
    if (S.view !== 'incidents') return;
    const tb = clear($('#incidents-table tbody'));
    for (const inc of S.incidents) {
      tb.append(el('tr', {'data-incident': inc.id},
        el('td', {class: 'num'}, el('a', {href: '#/incidents/' + inc.id, text: '#' + inc.id})),
        el('td', {}, incidentState(inc)),
        el('td', {class: 'mono', text: inc.target}),
        el('td', {class: 'small', text: vectorText(inc.vector)}),
        el('td', {class: 'small', text: inc.source}),
        el('td', {class: 'small', text: inc.playbook}),
        el('td', {class: 'step', text: inc.step + '/' + inc.steps}),
        el('td', {class: 'num', text: String(inc.signals)}),
        el('td', {class: 'small', text: peak(inc)}),
        el('td', {class: 'small', title: fmtTime(inc.opened_at), text: ago(inc.opened_at)})));
    }
    if (!S.incidents.length) {
      tb.append(el('tr', {}, el('td', {colspan: 10, class: 'muted', text: 'No incidents: no detector signal has matched a playbook.'})));
    }
    $('#incidents-count').textContent = S.incidents.length + ' incidents.';
  }

  function renderIncident(missing) {
    const card = clear($('#incident-card'));
    const rb = clear($('#incident-rules tbody'));
    const tb = clear($('#incident-timeline tbody'));
    const inc = S.incident;
    if (!inc) {
      card.append(el('p', {class: 'muted', text: missing || 'Loading…'}));
      return;
    }
    card.append(el('h1', {}, 'Incident ' + inc.id + ' ', incidentState(inc)));
    const d = el('dl', {class: 'kv wide'});
    const row = (k, v) => d.append(el('dt', {text: k}), el('dd', {}, v));
    row('target', el('code', {text: inc.target}));
    row('vector', vectorText(inc.vector));
    row('source', inc.source);
    row('playbook', inc.playbook + ', step ' + inc.step + ' of ' + inc.steps);
    row('signals', inc.signals + ' (' + inc.step_signals + ' in this step), peak ' + peak(inc));
    if (inc.attack_id) row('attack id', inc.attack_id);
    row('opened', fmtTime(inc.opened_at));
    row('last signal', fmtTime(inc.last_signal_at));
    if (inc.ended_at) row('ended', fmtTime(inc.ended_at));
    card.append(d);
    for (const r of inc.rules || []) {
      rb.append(el('tr', {'data-state': r.state},
        el('td', {class: 'num'}, r.id ? el('a', {href: '#/rules/' + r.id, text: '#' + r.id}) : '–'),
        el('td', {class: 'num', text: String(r.step)}),
        el('td', {}, stateBadge(r.state)),
        el('td', {class: 'rule-text'}, el('code', {text: r.text}), r.error ? el('div', {class: 'error small', text: r.error}) : null),
        el('td', {class: 'small', text: r.expires_at ? fmtTime(r.expires_at) : '–'})));
    }
    if (!(inc.rules || []).length) rb.append(el('tr', {}, el('td', {colspan: 5, class: 'muted', text: 'No rules.'})));
    for (const e of inc.timeline || []) {
      tb.append(el('tr', {}, el('td', {class: 'small', text: fmtTime(e.at)}), el('td', {text: e.kind}), el('td', {text: e.text})));
    }
    if (inc.timeline_omitted) {
      tb.append(el('tr', {}, el('td', {colspan: 3, class: 'muted',
        text: inc.timeline_omitted + ' more entries not kept ([incidents] max_timeline)'})));
    }
  }

  // ---- withdraw ----

  function confirmWithdraw(r) {
    const dlg = $('#confirm');
    $('#confirm-title').textContent = 'Withdraw rule ' + r.id + '?';
    $('#confirm-text').textContent = r.text;
    S.pendingWithdraw = r;
    dlg.showModal();
    $('#confirm-cancel').focus();
  }

  $('#confirm-cancel').addEventListener('click', () => $('#confirm').close());
  $('#confirm-ok').addEventListener('click', async () => {
    const r = S.pendingWithdraw;
    $('#confirm').close();
    if (!r) return;
    S.pendingWithdraw = null;
    try {
      const out = await api('DELETE', '/v1/rules/' + r.id);
      applyRule(out);
      flash('Rule ' + r.id + ' is being withdrawn.');
    } catch (e) {
      flash('Withdraw rule ' + r.id + ': ' + e.message, true);
    }
  });

  // ---- add ----

  const EXAMPLES = {
    flowspec: 'match destination 203.0.113.7/32 protocol udp source-port ==53 then discard',
    rtbh: 'route 203.0.113.7/32 then blackhole',
  };
  const HELP = {
    flowspec: ['The ', el('code', {text: 'match … then …'}), ' text of the CLI (README, flowspec/SYNTAX.md). ' +
      'The same match as an active rule updates that rule.'],
    rtbh: ['The ', el('code', {text: 'route PREFIX then blackhole'}), ' text of the CLI\'s route add: the routers drop all traffic to PREFIX ' +
      '(a /32 or /128 unless the guardrails allow shorter). The same prefix as an active route updates that route.'],
  };

  function prepareAdd() {
    if (!S.status) loadStatus(); // the known sites
    const kind = document.querySelector('input[name=kind]:checked').value;
    $('#add-text').placeholder = EXAMPLES[kind];
    clear($('#add-help')).append(...HELP[kind]);
    $('#add-text').focus();
  }

  for (const radio of document.querySelectorAll('input[name=kind]')) {
    radio.addEventListener('change', () => {
      const t = $('#add-text');
      if (t.value === '' || Object.values(EXAMPLES).includes(t.value)) t.value = '';
      prepareAdd();
      validateSoon();
    });
  }

  function addRequest() {
    const req = {text: $('#add-text').value.trim()};
    const ttl = $('#add-ttl').value.trim();
    if (ttl) req.ttl = ttl;
    const reason = $('#add-reason').value.trim();
    if (reason) req.reason = reason;
    const sites = $('#add-sites').value.split(',').map((s) => s.trim()).filter((s) => s);
    if (sites.length) req.sites = sites;
    return req;
  }

  function clearFeedback() {
    for (const id of ['add-text', 'add-ttl', 'add-sites']) {
      clear($('#' + id + '-feedback'));
      $('#' + id).removeAttribute('aria-invalid');
    }
    $('#add-error').hidden = true;
  }

  // showError puts an API error next to the field it is about; a rule
  // text error underlines the offending word.
  function showError(e) {
    const field = e.field === 'ttl' ? 'add-ttl' : e.field === 'sites' ? 'add-sites' : e.field === 'text' ? 'add-text' : '';
    if (!field) {
      const p = $('#add-error');
      p.textContent = e.message;
      p.hidden = false;
      return;
    }
    $('#' + field).setAttribute('aria-invalid', 'true');
    const fb = clear($('#' + field + '-feedback'));
    if (field === 'add-text') {
      const text = $('#add-text').value;
      const chars = Array.from(text);
      let start = e.column ? e.column - 1 : chars.length;
      // the API's column counts characters of the trimmed text
      start += Array.from(text).length - Array.from(text.trimStart()).length;
      let end = start;
      while (end < chars.length && !/\s/.test(chars[end])) end++;
      const line = el('div', {class: 'errline mono'}, chars.slice(0, start).join(''),
        el('mark', {class: 'bad', text: end > start ? chars.slice(start, end).join('') : ' '}),
        chars.slice(end).join(''));
      fb.append(line, el('div', {class: 'error', id: 'add-text-error', text: e.message}));
      return {start, end};
    }
    fb.append(el('div', {class: 'error', text: e.message}));
    return null;
  }

  let validateSeq = 0;
  function validateSoon() {
    later('validate', validateNow, 350);
  }

  async function validateNow() {
    const req = addRequest();
    const seq = ++validateSeq;
    if (!req.text) {
      clearFeedback();
      return;
    }
    let v;
    try {
      v = await api('POST', '/v1/validate', req);
    } catch (e) {
      if (seq !== validateSeq) return;
      clearFeedback();
      showError(e);
      return;
    }
    if (seq !== validateSeq) return;
    clearFeedback();
    if (!v.valid && v.guardrail) {
      // A guardrail would refuse the rule: say which, at its field.
      const field = v.guardrail.field === 'ttl' ? 'add-ttl' : 'add-text';
      $('#' + field).setAttribute('aria-invalid', 'true');
      $('#' + field + '-feedback').append(el('div', {class: 'error', text: 'guardrail ' + v.guardrail.name + ': ' + v.guardrail.message}));
      return;
    }
    let expires = ', never expires';
    if (v.expires_at) {
      expires = (v.keeps_expiry ? ', keeps its expiry ' : ', expires ') + fmtTime(v.expires_at) + (v.default_ttl ? ' (the default TTL)' : '');
    }
    const fb = $('#add-text-feedback');
    fb.append(el('div', {class: 'ok small'}, '✓ valid ' + v.family + ' rule: ', el('code', {text: v.text}), expires));
    for (const w of v.warnings || []) fb.append(el('div', {class: 'shadow small', text: '⚠ ' + w}));
  }

  for (const id of ['add-text', 'add-ttl', 'add-sites']) $('#' + id).addEventListener('input', validateSoon);

  $('#add-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const req = addRequest();
    if (!req.text) {
      showError({field: 'text', message: 'Type a rule, e.g. ' + EXAMPLES.flowspec});
      return;
    }
    clearTimeout(S.timers.validate);
    validateSeq++;
    const btn = $('#add-submit');
    btn.disabled = true;
    let r;
    try {
      r = await api('POST', '/v1/rules', req);
    } catch (e) {
      clearFeedback();
      const sel = showError(e);
      if (sel) {
        const t = $('#add-text');
        t.focus();
        t.setSelectionRange(sel.start, sel.end);
      }
      return;
    } finally {
      btn.disabled = false;
    }
    clearFeedback();
    $('#add-text').value = '';
    $('#add-reason').value = '';
    applyRule(r);
    flash('Rule ' + r.id + ' stored: ' + r.text);
    location.hash = '#/rules/' + r.id;
  });

  // ---- clocks: countdowns and uptimes tick without a request ----

  setInterval(() => {
    for (const e of document.querySelectorAll('[data-expires]')) e.textContent = leftText(e.dataset.expires);
    for (const e of document.querySelectorAll('[data-since]')) e.textContent = fmtDur((Date.now() - Date.parse(e.dataset.since)) / 1000);
    for (const e of document.querySelectorAll('[data-ago]')) e.textContent = ago(e.dataset.ago);
  }, 1000);

  start();
})();
