// The Posture web UI. Plain ES module, no build step, no dependencies.
// Rule: every string from the API or the user reaches the page through
// textContent or a form control's value, never through innerHTML.

const MEDIA = 'application/vnd.api+json';
const POLL_MS = 1000;
// The API's rules, as the server holds them (GET /ui/config): which
// statuses are terminal, how deep numbered pages go, the report's suffix.
const rules = { terminal_statuses: [], max_page_offset: 0, report_suffix: '' };
const terminal = (status) => rules.terminal_statuses.includes(status);

const $ = (id) => document.getElementById(id);
const me = { email: '', permissions: [] };
const listState = {
  jobs: { page: 1, pages: 1 },
  scans: { page: 1, pages: 1 },
  errors: { page: 1, pages: 1 },
  // cursors[n] is page n's page[cursor], from links.next of page n - 1.
  findings: { page: 1, pages: 1, cursors: {} },
  providers: { page: 1, pages: 1 },
};

class APIError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// api calls the REST API with the session cookie. The custom header is the
// session's CSRF defence: the server refuses cookie requests without it.
async function api(path, opts = {}) {
  let res;
  try {
    res = await fetch(path, {
      ...opts,
      credentials: 'same-origin',
      headers: { Accept: MEDIA, 'X-Posture-UI': '1', ...(opts.headers || {}) },
    });
  } catch (e) {
    throw new APIError(0, 'the server could not be reached (' + e.message + ')');
  }
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (res.status === 401 && !path.startsWith('/ui/session')) {
    signedOut('Your session ended; sign in again.');
  }
  if (!res.ok) throw new APIError(res.status, errorDetail(body, res));
  return body;
}

function errorDetail(body, res) {
  const e = body && body.errors && body.errors[0];
  return (e && (e.detail || e.title)) || res.statusText || 'HTTP ' + res.status;
}

function el(tag, text, cls) {
  const n = document.createElement(tag);
  if (text !== undefined && text !== null) n.textContent = String(text);
  if (cls) n.className = cls;
  return n;
}

function when(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

function show(view) {
  for (const id of ['signin-view', 'scans-view', 'job-view', 'findings-view', 'finding-view', 'providers-view']) $(id).hidden = id !== view;
}

// ---- session --------------------------------------------------------------

function signedOut(message) {
  me.email = '';
  me.permissions = [];
  $('who').textContent = '';
  $('signout').hidden = true;
  $('nav').hidden = true;
  $('signin-error').textContent = message || '';
  show('signin-view');
}

async function loadMe() {
  try {
    const doc = await api('/api/v1/tenant');
    const user = doc.data.attributes.user || {};
    me.email = user.email || '';
    me.permissions = user.permissions || [];
    $('who').textContent = me.email;
    $('signout').hidden = false;
    $('nav').hidden = false;
    return true;
  } catch (e) {
    if (e.status !== 401) signedOut('Could not load your account: ' + e.message);
    return false;
  }
}

const can = (perm) => me.permissions.includes(perm);

$('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('signin-error').textContent = '';
  const body = JSON.stringify({ data: { type: 'tokens', attributes: { email: $('email').value, password: $('password').value } } });
  try {
    await api('/ui/session', { method: 'POST', body, headers: { 'Content-Type': MEDIA } });
  } catch (e) {
    $('signin-error').textContent = 'Sign-in failed: ' + e.message;
    return;
  }
  $('password').value = '';
  if (await loadMe()) route();
});

$('signout').addEventListener('click', async () => {
  await api('/ui/session', { method: 'DELETE' }).catch(() => {});
  signedOut('You are signed out.');
});

// ---- routing --------------------------------------------------------------

let viewTimer = null;

function route() {
  clearTimeout(viewTimer);
  if (!me.email) return;
  const m = location.hash.match(/^#\/ingestions\/([^/]+)$/);
  const f = location.hash.match(/^#\/findings\/([^/]+)$/);
  if (m) {
    listState.errors.page = 1;
    showJob(decodeURIComponent(m[1]));
  } else if (f) {
    showFinding(decodeURIComponent(f[1]));
  } else if (location.hash === '#/providers') {
    showProviders();
  } else if (location.hash === '#/findings') {
    show('findings-view');
    loadOverview();
    loadFindings();
  } else {
    showScans();
  }
}
window.addEventListener('hashchange', route);
// A running job's page stops refreshing while the tab is hidden; shown
// again, it reads the job at once and goes on refreshing while it runs.
document.addEventListener('visibilitychange', () => {
  const m = location.hash.match(/^#\/ingestions\/([^/]+)$/);
  if (document.hidden || !m || $('job-view').hidden) return;
  clearTimeout(viewTimer);
  showJob(decodeURIComponent(m[1]));
});

// ---- scans page -----------------------------------------------------------

function showScans() {
  show('scans-view');
  $('import-open').hidden = !can('manage_ingestions');
  loadJobs();
  loadScans();
}

// pager draws a list's page controls. atLeast says total counts only the
// pages known to exist (the API stopped counting: count_estimated).
function pager(id, state, total, reload, atLeast) {
  const p = $(id);
  state.pages = Math.max(1, total);
  p.querySelector('span').textContent = 'Page ' + state.page + ' of ' + (atLeast ? 'at least ' : '') + state.pages;
  p.querySelector('[data-step="-1"]').disabled = state.page <= 1;
  p.querySelector('[data-step="1"]').disabled = state.page >= state.pages;
  p.onclick = (ev) => {
    const step = Number(ev.target.dataset && ev.target.dataset.step);
    if (!step) return;
    state.page = Math.min(state.pages, Math.max(1, state.page + step));
    reload();
  };
}

async function loadJobs() {
  const q = new URLSearchParams({ 'page[number]': listState.jobs.page, 'page[size]': 10, sort: $('jobs-sort').value });
  if ($('jobs-status').value) q.set('filter[status]', $('jobs-status').value);
  const tbody = $('jobs-table').tBodies[0];
  let doc;
  try {
    doc = await api('/api/v1/ingestions?' + q);
  } catch (e) {
    tbody.replaceChildren();
    $('jobs-message').textContent = e.status === 403
      ? 'Ingestion jobs are visible to roles with the Manage Ingestions permission.'
      : 'Could not list ingestion jobs: ' + e.message;
    pager('jobs-pager', listState.jobs, 1, loadJobs);
    return;
  }
  $('jobs-message').textContent = doc.data.length ? '' : 'No ingestion jobs yet.';
  tbody.replaceChildren(...doc.data.map((j) => {
    const a = j.attributes;
    const tr = el('tr');
    // The first block of the UUID is enough to tell jobs apart on screen.
    const link = el('a', j.id.split('-')[0]);
    link.title = j.id;
    link.setAttribute('aria-label', 'Job ' + j.id);
    link.href = '#/ingestions/' + encodeURIComponent(j.id);
    const idCell = el('td');
    idCell.append(link);
    tr.append(idCell, statusCell(a.status), el('td', a.summary.total), el('td', a.summary.processed),
      el('td', a.summary.invalid), el('td', when(a.requested_at)), el('td', when(a.started_at)), el('td', when(a.completed_at)));
    return tr;
  }));
  pager('jobs-pager', listState.jobs, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadJobs);
  // One refresh chain at a time, however many loads were started.
  clearTimeout(viewTimer);
  if (doc.data.some((j) => !terminal(j.attributes.status))) {
    viewTimer = setTimeout(() => { if (!$('scans-view').hidden) loadJobs(); }, POLL_MS * 2);
  }
}

function statusCell(status) {
  const td = el('td');
  td.append(el('span', status, 'badge ' + status));
  return td;
}

$('jobs-status').addEventListener('change', () => { listState.jobs.page = 1; loadJobs(); });
$('jobs-sort').addEventListener('change', () => { listState.jobs.page = 1; loadJobs(); });

async function loadScans() {
  const q = new URLSearchParams({ 'page[number]': listState.scans.page, 'page[size]': 10 });
  const tbody = $('scans-table').tBodies[0];
  let doc;
  try {
    doc = await api('/api/v1/scans?' + q);
  } catch (e) {
    tbody.replaceChildren();
    $('scans-message').textContent = 'Could not list scans: ' + e.message;
    return;
  }
  $('scans-message').textContent = doc.data.length ? '' : 'No scans yet.';
  tbody.replaceChildren(...doc.data.map((s) => {
    const a = s.attributes;
    const src = el('td');
    src.append(el('span', a.trigger === 'imported' ? 'Imported' : a.trigger, 'badge imported'));
    const job = el('td');
    if (a.ingestion_id) {
      // A job's page needs Manage Ingestions: without it the job is named,
      // not linked to a page that would only answer 403.
      const link = el(can('manage_ingestions') ? 'a' : 'span', a.ingestion_id.split('-')[0]);
      link.title = a.ingestion_id;
      if (can('manage_ingestions')) link.href = '#/ingestions/' + encodeURIComponent(a.ingestion_id);
      job.append(link);
    }
    const tr = el('tr');
    tr.append(el('td', a.provider_type), el('td', a.provider_uid), src, el('td', a.finding_count), job, el('td', when(a.inserted_at)));
    return tr;
  }));
  pager('scans-pager', listState.scans, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadScans);
}

// ---- job page -------------------------------------------------------------

async function showJob(id) {
  show('job-view');
  $('job-id').textContent = id;
  let job;
  try {
    job = (await api('/api/v1/ingestions/' + encodeURIComponent(id))).data.attributes;
  } catch (e) {
    $('job-summary').replaceChildren(el('dd', 'Could not read the job: ' + e.message, 'error'));
    // Nothing of the job shown before may stay as if it were this one's.
    $('job-errors').tBodies[0].replaceChildren();
    $('job-errors-message').textContent = '';
    return;
  }
  const rows = [['Status', job.status], ['Total', job.summary.total], ['Processed', job.summary.processed],
    ['Invalid', job.summary.invalid], ['Requested', when(job.requested_at)], ['Started', when(job.started_at)],
    ['Completed', when(job.completed_at)]];
  $('job-summary').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', k), el('dd', v)]));
  await loadErrors(id);
  // Live progress while the job runs and the page is visible.
  if (!terminal(job.status)) {
    viewTimer = setTimeout(() => { if (!document.hidden && !$('job-view').hidden) showJob(id); }, POLL_MS);
  }
}

async function loadErrors(id) {
  const q = new URLSearchParams({ 'page[number]': listState.errors.page, 'page[size]': 50 });
  const tbody = $('job-errors').tBodies[0];
  let doc;
  try {
    doc = await api('/api/v1/ingestions/' + encodeURIComponent(id) + '/errors?' + q);
  } catch (e) {
    tbody.replaceChildren();
    $('job-errors-message').textContent = 'Could not list rejected records: ' + e.message;
    return;
  }
  $('job-errors-message').textContent = doc.data.length ? '' : 'No record was rejected.';
  tbody.replaceChildren(...doc.data.map((r) => {
    const a = r.attributes;
    const tr = el('tr');
    const value = a.value === undefined || a.value === null ? '' : (typeof a.value === 'string' ? a.value : JSON.stringify(a.value));
    tr.append(el('td', a.record_index ?? '—'), el('td', a.finding_uid || '—'), el('td', a.code, 'code'),
      el('td', a.detail), el('td', a.pointer || '', 'code'), el('td', value, 'code'));
    return tr;
  }));
  pager('errors-pager', listState.errors, doc.meta.pagination ? doc.meta.pagination.pages : 1, () => loadErrors(id));
}

// ---- findings --------------------------------------------------------------

// The API numbers pages of findings only to 10,000 findings deep (a deeper
// page[number] is refused, pointing to links.next): a page past that is read
// by the cursor of the page before it, so Next keeps working at any depth and
// Previous walks back over the cursors kept.
const FINDINGS_PAGE_SIZE = 20;

function resetFindingsPages() {
  listState.findings.page = 1;
  listState.findings.cursors = {};
}

async function loadFindings() {
  const form = $('findings-filters');
  const st = listState.findings;
  const q = new URLSearchParams({ 'page[size]': FINDINGS_PAGE_SIZE, sort: form.elements.sort.value });
  const cursor = (st.page - 1) * FINDINGS_PAGE_SIZE > rules.max_page_offset && st.cursors[st.page];
  if (cursor) q.set('page[cursor]', cursor);
  else q.set('page[number]', st.page);
  for (const name of ['severity', 'status_code', 'provider_type', 'check_id', 'region', 'scan', 'ingestion', 'search']) {
    const v = form.elements[name].value.trim();
    if (v) q.set('filter[' + name + ']', v);
  }
  const tbody = $('findings-table').tBodies[0];
  let doc;
  try {
    doc = await api('/api/v1/findings?' + q);
  } catch (e) {
    tbody.replaceChildren();
    $('findings-message').textContent = 'Could not list findings: ' + e.message;
    pager('findings-pager', listState.findings, 1, loadFindings);
    return;
  }
  const pg = doc.meta.pagination || { count: doc.data.length, pages: 1 };
  const next = doc.links && doc.links.next;
  if (next) st.cursors[st.page + 1] = new URL(next, location.href).searchParams.get('page[cursor]');
  // A search is counted only to the end of the next page: past it count
  // is a lower bound (one more than the findings counted so far).
  $('findings-message').textContent = pg.count_estimated
    ? 'more than ' + (pg.count - 1) + ' findings'
    : pg.count + (pg.count === 1 ? ' finding' : ' findings');
  tbody.replaceChildren(...doc.data.map((f) => {
    const a = f.attributes;
    const title = el('td');
    const link = el('a', a.title || a.uid);
    link.href = '#/findings/' + encodeURIComponent(f.id);
    title.append(link);
    const sev = el('td');
    sev.append(el('span', a.severity, 'badge sev-' + a.severity));
    const tr = el('tr');
    tr.append(sev, el('td', a.status_code), el('td', a.check_id), title, el('td', a.region), el('td', a.resource_uid), el('td', when(a.time)));
    return tr;
  }));
  // A page reached by cursor counts from the first page: a search's count
  // then stops short of it, and a next page is known from links.next.
  pager('findings-pager', st, Math.max(pg.pages, st.page + (next ? 1 : 0)), loadFindings, pg.count_estimated);
}

// loadOverview draws counts as bars, each group's count as
// GET /api/v1/findings/counts gives it.
const PROVIDER_BARS = 8;

async function loadOverview() {
  const groups = async (by) => (await api('/api/v1/findings/counts?' + new URLSearchParams({ group_by: by }))).data.map((g) => g.attributes);
  const bars = (id, rows, cls) => {
    const top = Math.max(1, ...rows.map((r) => r.count));
    $(id).replaceChildren(...rows.map((r) => {
      const row = el('div', null, 'bar-row');
      row.dataset.value = r.value;
      const bar = el('span', null, 'meter ' + cls(r.value));
      bar.style.width = Math.round((r.count / top) * 100) + '%';
      const track = el('span', null, 'track');
      track.append(bar);
      const label = el('span', r.label || r.value, 'bar-label');
      label.title = r.label || r.value;
      row.append(label, track, el('span', r.count, 'bar-count'));
      return row;
    }));
  };
  // The usual severities and status codes are drawn, zero included, in
  // their natural order; any other value the API counts (OCSF's fatal,
  // unknown and other severities, a status code such as MUTED) follows,
  // largest first, so that the bars account for every finding.
  const fixed = async (id, dim, values) => {
    try {
      const got = new Map((await groups(dim)).map((g) => [g[dim], g.count]));
      const extra = [...got.keys()].filter((v) => !values.includes(v))
        .sort((x, y) => got.get(y) - got.get(x) || String(x).localeCompare(String(y)));
      bars(id, [...values, ...extra].map((v) => ({ value: v, count: got.get(v) || 0 })), (v) => dim + '-' + v);
    } catch (e) {
      $(id).replaceChildren(el('p', 'Could not count findings: ' + e.message, 'error'));
    }
  };
  fixed('by-severity', 'severity', ['critical', 'high', 'medium', 'low', 'informational']);
  fixed('by-status', 'status_code', ['FAIL', 'PASS', 'MANUAL']);
  // Providers are open-ended: the largest first, the rest summed up.
  (async () => {
    let rows;
    try {
      rows = (await groups('provider_type,provider_uid')).map((g) => ({
        value: g.provider_type + ' ' + g.provider_uid, label: g.provider_type + ' ' + g.provider_uid, count: g.count,
      }));
    } catch (e) {
      $('by-provider').replaceChildren(el('p', 'Could not count findings: ' + e.message, 'error'));
      return;
    }
    rows.sort((x, y) => y.count - x.count || x.value.localeCompare(y.value));
    const rest = rows.slice(PROVIDER_BARS);
    rows = rows.slice(0, PROVIDER_BARS);
    if (rest.length) rows.push({ value: 'other', label: rest.length + ' more', count: rest.reduce((n, r) => n + r.count, 0) });
    bars('by-provider', rows, () => 'provider');
    if (!rows.length) $('by-provider').replaceChildren(el('p', 'No findings yet.', 'muted'));
  })();
  try {
    const p = (await api('/api/v1/tenant')).data.attributes.providers;
    $('providers-usage').textContent = usageText(p).text;
    $('providers-bar').hidden = !p.limit;
    $('providers-bar').max = p.limit || 1;
    $('providers-bar').value = p.count;
  } catch (e) {
    $('providers-usage').textContent = 'Could not read provider usage: ' + e.message;
  }
}

$('findings-filters').addEventListener('submit', (ev) => {
  ev.preventDefault();
  resetFindingsPages();
  loadFindings();
});
$('findings-filters').addEventListener('change', (ev) => {
  if (ev.target.tagName === 'SELECT') {
    resetFindingsPages();
    loadFindings();
  }
});

async function showFinding(id) {
  show('finding-view');
  $('finding-title').textContent = '';
  $('finding-summary').replaceChildren();
  $('finding-record').textContent = '';
  let a;
  try {
    a = (await api('/api/v1/findings/' + encodeURIComponent(id) + '?fields[findings]=' + encodeURIComponent('uid,title,severity,status_code,check_id,region,provider_type,provider_uid,resource_uid,scan_id,ingestion_id,time,record'))).data.attributes;
  } catch (e) {
    $('finding-title').textContent = 'Could not read the finding: ' + e.message;
    return;
  }
  $('finding-title').textContent = a.title || a.uid;
  const rows = [['Severity', a.severity], ['Status', a.status_code], ['Check', a.check_id], ['Provider', a.provider_type + ' ' + a.provider_uid],
    ['Region', a.region], ['Resource', a.resource_uid], ['Time', when(a.time)], ['Ingestion', a.ingestion_id], ['UID', a.uid]];
  $('finding-summary').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', k), el('dd', v)]));
  // The record (descriptions are Markdown) is shown as text, not rendered.
  $('finding-record').textContent = JSON.stringify(a.record, null, 2);
}

// ---- providers ------------------------------------------------------------

// usageText words the plan's provider usage; limit 0 means unlimited.
function usageText(p) {
  if (!p.limit) return { text: p.count + (p.count === 1 ? ' provider' : ' providers') + ' (no limit on your plan)', full: false };
  return { text: p.count + ' of ' + p.limit + ' providers on your plan', full: p.count >= p.limit };
}

function showProviders() {
  show('providers-view');
  loadUsage();
  loadProviders();
}

async function loadUsage() {
  const note = $('providers-plan-note');
  const bar = $('providers-plan-bar');
  let p;
  try {
    p = (await api('/api/v1/tenant')).data.attributes.providers;
  } catch (e) {
    $('providers-plan').textContent = 'Could not read provider usage: ' + e.message;
    bar.hidden = true;
    note.textContent = '';
    return;
  }
  const u = usageText(p);
  $('providers-plan').textContent = u.text;
  bar.hidden = !p.limit;
  bar.max = p.limit || 1;
  bar.value = Math.min(p.count, p.limit || 0);
  $('providers-view').classList.toggle('at-limit', u.full);
  if (!p.limit) note.textContent = 'Your plan does not limit how many provider accounts you report on.';
  else if (u.full) note.textContent = 'The limit is reached: a report for an account not listed here fails with provider_limit_exceeded until the plan allows more.';
  else note.textContent = p.remaining + ' more ' + (p.remaining === 1 ? 'account' : 'accounts') + ' can be added before the limit.';
}

async function loadProviders() {
  const q = new URLSearchParams({ 'page[number]': listState.providers.page, 'page[size]': 20, sort: 'type,uid' });
  const tbody = $('providers-table').tBodies[0];
  let doc;
  try {
    doc = await api('/api/v1/providers?' + q);
  } catch (e) {
    tbody.replaceChildren();
    $('providers-message').textContent = 'Could not list providers: ' + e.message;
    pager('providers-pager', listState.providers, 1, loadProviders);
    return;
  }
  const count = doc.meta.pagination ? doc.meta.pagination.count : doc.data.length;
  $('providers-message').textContent = count ? count + (count === 1 ? ' provider' : ' providers') : 'No providers yet: they appear when findings for an account are imported.';
  tbody.replaceChildren(...doc.data.map((pr) => {
    const a = pr.attributes;
    const tr = el('tr');
    tr.dataset.id = pr.id;
    tr.append(el('td', a.type), el('td', a.uid, 'code'), el('td', a.alias || '—'), el('td', a.origin), el('td', when(a.inserted_at)));
    return tr;
  }));
  pager('providers-pager', listState.providers, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadProviders);
}

// ---- Import Findings dialog ----------------------------------------------

const dialog = $('import-dialog');
// One import at a time is tracked; it outlives the dialog.
const imp = { file: null, jobId: null, state: 'idle', summary: null, timer: null };

const REJECTIONS = {
  400: 'The server rejected the file as invalid',
  402: 'Your tenant has no active subscription, so imports are refused',
  403: 'Your role lacks the Manage Ingestions permission',
  413: 'The file is larger than the server accepts',
  429: 'Too many requests were sent; wait a moment and retry',
};

function setButtons({ start = false, retry = false, retryStatus = false, other = false }) {
  // No action at all means an import is being sent or followed: its file
  // cannot be swapped for another until it ends.
  $('import-file').disabled = !(start || retry || retryStatus || other);
  $('import-start').hidden = !start;
  $('import-retry').hidden = !retry;
  $('import-retry-status').hidden = !retryStatus;
  $('import-other').hidden = !other;
}

function setState(text) { $('import-state').textContent = text; }
function setError(text) { $('import-error').textContent = text || ''; }

function showCounts(s) {
  $('import-counts').hidden = !s;
  if (!s) return;
  $('count-total').textContent = s.total;
  $('count-processed').textContent = s.processed;
  $('count-invalid').textContent = s.invalid;
}

// showBars shows the upload's bar and the job's; the upload's stays full
// once sent, so both phases stay readable.
function showBars(upload, job) {
  $('upload-row').hidden = !upload;
  $('import-progress-row').hidden = !job;
}

function resetDialog() {
  imp.file = null;
  imp.jobId = null;
  imp.state = 'idle';
  $('import-file').value = '';
  $('import-file-name').textContent = '';
  showBars(false, false);
  $('import-errors-link').hidden = true;
  setState('');
  setError('');
  showCounts(null);
  setButtons({ start: true });
  $('import-start').disabled = true;
}

// importBusy tells whether an import is being sent or followed.
const importBusy = () => imp.state === 'uploading' || imp.state === 'tracking';

$('import-open').addEventListener('click', () => {
  // An import refused, failed or whose status could not be read stays on
  // the dialog, with its Retry import or Retry status, until another file
  // is chosen: closing the dialog meanwhile must not lose it.
  if (imp.state === 'idle' || imp.state === 'completed') resetDialog();
  dialog.showModal();
});
$('import-close').addEventListener('click', () => dialog.close());

// A modal <dialog> makes the page behind it inert, but Tab past its last
// control still leaves it for the browser's own UI; keep the cycle inside.
dialog.addEventListener('keydown', (ev) => {
  if (ev.key !== 'Tab') return;
  const controls = [...dialog.querySelectorAll('a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])')]
    .filter((n) => !n.disabled && !n.closest('[hidden]') && n.getClientRects().length > 0);
  if (!controls.length) return;
  const first = controls[0];
  const last = controls[controls.length - 1];
  const at = controls.indexOf(document.activeElement);
  if (ev.shiftKey && at <= 0) {
    ev.preventDefault();
    last.focus();
  } else if (!ev.shiftKey && (at === -1 || at === controls.length - 1)) {
    ev.preventDefault();
    first.focus();
  }
});

// chooseFile checks the file before anything is sent: one file, the right
// name, not empty.
function chooseFile(files) {
  if (importBusy()) return;
  setError('');
  $('import-errors-link').hidden = true;
  showCounts(null);
  setState('');
  showBars(false, false);
  imp.file = null;
  $('import-start').disabled = true;
  setButtons({ start: true });
  if (!files || files.length === 0) return;
  if (files.length > 1) {
    setError('Choose one file per import; ' + files.length + ' were given.');
    return;
  }
  const f = files[0];
  $('import-file-name').textContent = f.name;
  if (!f.name.endsWith(rules.report_suffix)) {
    setError('The file name must end in ' + rules.report_suffix + '. Nothing was uploaded.');
    return;
  }
  if (f.size === 0) {
    setError('The file is empty. Nothing was uploaded.');
    return;
  }
  imp.file = f;
  $('import-start').disabled = false;
}

$('import-file').addEventListener('change', (ev) => chooseFile(ev.target.files));
// The whole dialog takes a dropped file, not only the marked zone: a drop
// that misses it by a little must not be lost.
const drop = $('drop');
dialog.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
dialog.addEventListener('dragleave', (ev) => { if (!dialog.contains(ev.relatedTarget)) drop.classList.remove('over'); });
dialog.addEventListener('drop', (ev) => {
  ev.preventDefault();
  drop.classList.remove('over');
  chooseFile(ev.dataTransfer.files);
});
// A file dropped anywhere else would make the browser open it and leave
// the UI, losing any import it was following.
window.addEventListener('dragover', (ev) => ev.preventDefault());
window.addEventListener('drop', (ev) => ev.preventDefault());

$('import-start').addEventListener('click', () => upload());
$('import-retry').addEventListener('click', () => upload());
$('import-retry-status').addEventListener('click', () => track());
$('import-other').addEventListener('click', () => { resetDialog(); $('import-file').click(); });
$('import-errors-link').querySelector('a').addEventListener('click', (ev) => {
  ev.preventDefault();
  dialog.close();
  location.hash = '#/ingestions/' + encodeURIComponent(imp.jobId);
});

// upload sends the file with XMLHttpRequest, which (unlike fetch) reports
// upload progress.
function upload() {
  if (!imp.file) return;
  imp.state = 'uploading';
  imp.jobId = null;
  setError('');
  showCounts(null);
  $('import-errors-link').hidden = true;
  setButtons({});
  setState('Uploading ' + imp.file.name + '…');
  const bar = $('upload-progress');
  showBars(true, false);
  bar.max = imp.file.size;
  bar.value = 0;
  const form = new FormData();
  form.append('file', imp.file, imp.file.name);
  const xhr = new XMLHttpRequest();
  xhr.open('POST', '/api/v1/ingestions');
  xhr.setRequestHeader('Accept', MEDIA);
  xhr.setRequestHeader('X-Posture-UI', '1');
  // Progress counts the whole request body (the multipart framing too).
  xhr.upload.onprogress = (ev) => {
    if (!ev.lengthComputable) return;
    bar.max = ev.total;
    bar.value = ev.loaded;
  };
  xhr.upload.onload = () => { bar.value = bar.max; };
  xhr.onerror = () => rejected(0, 'the upload did not reach the server');
  xhr.onload = () => {
    let body = null;
    try { body = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
    if (xhr.status === 202 && body && body.data) {
      imp.jobId = body.data.id;
      imp.summary = body.data.attributes.summary;
      // The new job is listed (and the list refreshes while it runs), not
      // only once it ends.
      if (!$('scans-view').hidden) loadJobs();
      track();
      return;
    }
    if (xhr.status === 401) signedOut('Your session ended; sign in again.');
    const e = body && body.errors && body.errors[0];
    rejected(xhr.status, (e && e.detail) || xhr.statusText || 'no answer');
  };
  xhr.send(form);
}

function rejected(status, detail) {
  imp.state = 'rejected';
  showBars(false, false);
  const why = REJECTIONS[status] || (status ? 'The server refused the upload (HTTP ' + status + ')' : 'The upload failed');
  setState('');
  setError(why + ': ' + detail);
  setButtons({ retry: true, other: true });
  finished('Import of ' + imp.file.name + ' was not accepted: ' + why + ': ' + detail);
}

// track follows the job until it ends; a failed status check offers Retry
// status, which resumes on the same job without uploading again.
async function track() {
  imp.state = 'tracking';
  clearTimeout(imp.timer);
  setError('');
  setButtons({});
  let job;
  try {
    job = (await api('/api/v1/ingestions/' + encodeURIComponent(imp.jobId))).data.attributes;
  } catch (e) {
    imp.state = 'status-failed';
    setState('The file was accepted as job ' + imp.jobId + ', but its status could not be read.');
    setError('Status check failed: ' + e.message);
    setButtons({ retryStatus: true });
    finished('The status of the import of ' + imp.file.name + ' could not be read (' + e.message + '); Import Findings offers Retry status.');
    return;
  }
  const s = job.summary;
  imp.summary = s;
  showCounts(s);
  const bar = $('import-progress');
  $('import-progress-row').hidden = false;
  bar.value = s.total ? Math.round((s.processed / s.total) * 100) : 0;
  if (!terminal(job.status)) {
    setState('Job ' + imp.jobId + ' is ' + job.status + ': ' + s.processed + ' of ' + s.total + ' records processed.');
    imp.timer = setTimeout(track, POLL_MS);
    return;
  }
  if (job.status === 'completed') {
    imp.state = 'completed';
    setState('Import completed: ' + s.total + ' records, ' + s.processed + ' processed, ' + s.invalid + ' invalid.');
    $('import-errors-link').hidden = !(s.invalid > 0);
    setButtons({ other: true });
    finished('Import of ' + imp.file.name + ' completed: ' + s.processed + ' processed, ' + s.invalid + ' invalid.');
  } else {
    imp.state = 'failed';
    const reason = await failureReason(imp.jobId);
    setState('The job failed after processing ' + s.processed + ' of ' + s.total + ' records (' + s.invalid + ' invalid).');
    setError('Import failed: ' + reason);
    $('import-errors-link').hidden = false;
    setButtons({ retry: true, other: true });
    finished('Import of ' + imp.file.name + ' failed: ' + reason);
  }
  if (!$('scans-view').hidden) {
    loadJobs();
    loadScans();
  }
}

async function failureReason(id) {
  try {
    const doc = await api('/api/v1/ingestions/' + encodeURIComponent(id) + '/errors?page[size]=1');
    const first = doc.data[0];
    return first ? first.attributes.detail : 'the server gave no reason';
  } catch (e) {
    return 'the reason could not be read (' + e.message + ')';
  }
}

// finished notifies in the background when the dialog was closed meanwhile.
function finished(message) {
  if (dialog.open) return;
  const t = el('div', message, 'toast');
  const close = el('button', 'Dismiss');
  close.type = 'button';
  close.addEventListener('click', () => t.remove());
  t.append(close);
  $('toasts').append(t);
}

// ---- start -----------------------------------------------------------------

$('signout').hidden = true;
(async () => {
  try {
    Object.assign(rules, await api('/ui/config'));
  } catch (e) {
    signedOut('Could not load the server\'s rules: ' + e.message);
    return;
  }
  if (await loadMe()) route();
  else if (!me.email) signedOut('');
})();
