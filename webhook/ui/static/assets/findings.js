// The Findings page: the current state (each account's latest findings, as
// GET /api/v1/findings/latest answers it, what MCP and kubectl posture read
// too) or, switched to it, the whole history; counts of what the list shows
// at a glance; the findings, filtered, a page at a time to any depth.
// The list can also be shown grouped by check (group=check): each check's
// findings of the counted status by severity, the worst first, each check
// opening the list filtered to it.
// The view and the filters live in the URL's fragment
// (#/findings?view=history&group=check&severity=critical…), so a reload or
// a shared link shows the same list: every change goes through the
// fragment, and show() draws the page from it.

import { api, rules } from './api.js';
import { $, el, when, showView, pager, readList } from './dom.js';
import { usageText } from './providers.js';

// The list's filters, the API's filter[…] names, in the order an empty
// result names them. delta exists in the current state only.
const FILTERS = ['severity', 'status_code', 'delta', 'muted', 'check_id', 'region', 'provider_type', 'provider_uid', 'scan', 'ingestion', 'search'];
const FILTER_WORDS = {
  severity: 'severity', status_code: 'status', delta: 'change', muted: 'muted', check_id: 'check', region: 'region',
  provider_type: 'provider', provider_uid: 'account', scan: 'scan', ingestion: 'ingestion', search: 'search',
};
// muted takes true, false or any; its default is the API's: the current
// state leaves muted findings out (false), the history lists them (any).
// Only a value other than the view's default is a filter, in the URL and
// in the requests, so a link means the same in either view.
const MUTED = ['false', 'true', 'any'];
const mutedDefault = (history) => (history ? 'any' : 'false');

// keep says whether a filter's value v is one the view v.history takes.
function keep(name, value, history) {
  if (name === 'delta') return !history;
  if (name === 'muted') return MUTED.includes(value) && value !== mutedDefault(history);
  return true;
}
const DEFAULT_SORT = '-inserted_at';

// cursors[n] is page n's page[cursor], from links.next of page n - 1.
const state = { page: 1, pages: 1, cursors: {} };
// view is what the fragment asks for: { history, group, filters, sort };
// group is 'check' for the grouped view, '' for the list.
let view = { history: false, group: '', filters: {}, sort: DEFAULT_SORT };
// generation tells a load's late answer from the current one's: a filter
// changed meanwhile makes the older answer stale, and it is dropped.
let generation = 0;

// parseHash reads the view and filters from the fragment.
export function parseHash(hash) {
  const i = hash.indexOf('?');
  const q = new URLSearchParams(i < 0 ? '' : hash.slice(i + 1));
  const history = q.get('view') === 'history';
  const filters = {};
  for (const name of FILTERS) {
    const v = (q.get(name) || '').trim();
    if (v && keep(name, v, history)) filters[name] = v;
  }
  const group = q.get('group') === 'check' ? 'check' : '';
  return { history, group, filters, sort: q.get('sort') || DEFAULT_SORT };
}

// hashOf is the fragment of a view: what a link to it holds.
export function hashOf(v) {
  const q = new URLSearchParams();
  if (v.history) q.set('view', 'history');
  if (v.group) q.set('group', v.group);
  for (const name of FILTERS) {
    if (v.filters[name] && keep(name, v.filters[name], v.history)) q.set(name, v.filters[name]);
  }
  if (v.sort && v.sort !== DEFAULT_SORT) q.set('sort', v.sort);
  const s = q.toString();
  return '#/findings' + (s ? '?' + s : '');
}

// go shows v: through the fragment, so the browser's history and a reload
// keep it; the same fragment again (Apply with nothing changed) reloads.
function go(v) {
  const hash = hashOf(v);
  if (location.hash === hash) show();
  else location.hash = hash;
}

// show draws the page from the fragment's query (the router hands it over
// too): the view and the filters it names, none other.
export function show() {
  showView('findings-view');
  view = parseHash(location.hash);
  generation++;
  state.page = 1;
  state.cursors = {};
  drawControls();
  loadOverview();
  loadOptions();
  if (view.group) loadChecks();
  else loadFindings();
}

export function leave() {
  generation++;
}

// listHash is the fragment of the list last shown, with its filters: where
// a finding's page leads back to.
export function listHash() {
  return hashOf(view);
}

function base() {
  return view.history ? '/api/v1/findings' : '/api/v1/findings/latest';
}

// filterParams are the API's filter[…] parameters for filters, leaving out
// the dimensions named in except (a breakdown by a dimension counts every
// value of it, so that each of its bars can be chosen).
function filterParams(filters, except = []) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (!except.includes(k)) q.set('filter[' + k + ']', v);
  return q;
}

// exportHref is the list's export in format (csv or ocsf): the same
// filters and order, every finding, as a file the browser saves to disk
// as it arrives (a link, which the session lets through without the
// page's header; docs/api.md).
export function exportHref(v, format) {
  const q = filterParams(v.filters);
  q.set('sort', v.sort);
  q.set('format', format);
  return (v.history ? '/api/v1/findings' : '/api/v1/findings/latest') + '/export?' + q;
}

function drawControls() {
  $('findings-export-csv').href = exportHref(view, 'csv');
  $('findings-export-ocsf').href = exportHref(view, 'ocsf');
  for (const r of document.querySelectorAll('input[name="findings-state"]')) r.checked = (r.value === 'history') === view.history;
  $('findings-state-note').textContent = view.history
    ? 'History: every finding ever stored, from every scan.'
    : 'Current state: the findings of each account\'s latest scan.';
  $('findings-delta').hidden = view.history;
  $('findings-clear').hidden = !Object.keys(view.filters).length;
  for (const r of document.querySelectorAll('input[name="findings-layout"]')) r.checked = r.value === (view.group || 'list');
  // The grouped view has no order of findings to choose nor pages.
  $('findings-sort').hidden = !!view.group;
  $('findings-wrap').hidden = !!view.group;
  $('findings-pager').hidden = !!view.group;
  $('checks-wrap').hidden = !view.group;
  const form = $('findings-filters').elements;
  for (const name of FILTERS) {
    const control = form[name];
    const v = view.filters[name] || '';
    // A value from a link that the list does not offer yet (a check the
    // counts have not answered) still shows as chosen.
    if (name === 'muted') {
      control.value = v || mutedDefault(view.history);
      continue;
    }
    if (control.tagName === 'SELECT' && v && ![...control.options].some((o) => o.value === v)) control.append(option(v, v));
    control.value = v;
  }
  form.sort.value = view.sort;
}

function option(value, text) {
  const o = el('option', text);
  o.value = value;
  return o;
}

// The API numbers pages of findings only so deep (rules.max_page_offset
// findings; a deeper page[number] is refused, pointing to links.next): a
// page past that is read by the cursor of the page before it, so Next keeps
// working at any depth and Previous walks back over the cursors kept.
const FINDINGS_PAGE_SIZE = 20;

async function loadFindings() {
  const my = generation;
  const q = filterParams(view.filters);
  q.set('page[size]', FINDINGS_PAGE_SIZE);
  q.set('sort', view.sort);
  const cursor = (state.page - 1) * FINDINGS_PAGE_SIZE > rules.max_page_offset && state.cursors[state.page];
  if (cursor) q.set('page[cursor]', cursor);
  else q.set('page[number]', state.page);
  const tbody = $('findings-table').tBodies[0];
  const doc = await readList(base() + '?' + q, tbody, 'findings-message', (e) => 'Could not list findings: ' + e.message);
  if (my !== generation) return;
  if (!doc) {
    pager('findings-pager', state, 1, loadFindings);
    return;
  }
  const pg = doc.meta.pagination || { count: doc.data.length, pages: 1 };
  const next = doc.links && doc.links.next;
  if (next) state.cursors[state.page + 1] = new URL(next, location.href).searchParams.get('page[cursor]');
  // A search is counted only to the end of the next page: past it count
  // is a lower bound (one more than the findings counted so far).
  $('findings-message').textContent = pg.count === 0
    ? emptyText()
    : pg.count_estimated
      ? 'more than ' + (pg.count - 1) + ' findings'
      : pg.count + (pg.count === 1 ? ' finding' : ' findings');
  tbody.replaceChildren(...doc.data.map(findingRow));
  // A page reached by cursor counts from the first page: a search's count
  // then stops short of it, and a next page is known from links.next.
  pager('findings-pager', state, Math.max(pg.pages, state.page + (next ? 1 : 0)), loadFindings, pg.count_estimated);
}

// emptyText says that nothing matched, and what was asked: the view and
// each filter with its value.
function emptyText() {
  const where = view.history ? 'in the history' : 'in the current state';
  const used = FILTERS.filter((k) => view.filters[k]).map((k) => FILTER_WORDS[k] + ' ' + view.filters[k]);
  if (!used.length) return view.history ? 'No findings stored yet.' : 'No findings in the current state yet.';
  return 'No findings ' + where + ' match ' + used.join(', ') + '.';
}

// findingRow is one finding's row. The current state's delta ("new",
// "changed") and first_seen_at are shown when the API gives them.
export function findingRow(f) {
  const a = f.attributes;
  const title = el('td', null, 'c-title');
  const link = el('a', a.title || a.uid);
  link.href = '#/findings/' + encodeURIComponent(f.id);
  title.append(link);
  if (a.muted) title.append(' ', muteMark(a.mute));
  const sev = el('td');
  sev.append(el('span', a.severity, 'badge sev-' + a.severity));
  const change = el('td', null, 'c-change');
  if (a.delta) change.append(el('span', a.delta, 'badge delta-' + a.delta));
  if (a.first_seen_at) {
    const since = el('span', 'first seen ' + when(a.first_seen_at), 'since');
    since.title = a.first_seen_at;
    change.append(since);
  }
  if (!a.delta && !a.first_seen_at) change.textContent = '—';
  const tr = el('tr');
  tr.append(sev, el('td', a.status_code), change, el('td', a.check_id, 'c-check'), title, el('td', a.region, 'c-region'),
    el('td', a.resource_uid, 'c-resource'), el('td', when(a.time), 'c-time'));
  return tr;
}

// muteMark is the mark of a muted finding: a badge whose accessible name
// (and tooltip) says which rule muted it and why.
export function muteMark(mute) {
  const m = mute || { rule: '', reason: '' };
  const says = 'Muted by rule ' + m.rule + ': ' + m.reason;
  const mark = el('span', 'muted', 'badge mute-mark');
  mark.setAttribute('role', 'img');
  mark.setAttribute('aria-label', says);
  mark.title = says;
  return mark;
}

// counts reads GET …/counts grouped by `by` under the params given.
async function counts(by, params) {
  params.set('group_by', by);
  return (await api(base() + '/counts?' + params)).data.map((g) => g.attributes);
}

// The Check and Region filters offer the values that exist under the
// other filters, each with its count.
async function loadOptions() {
  const my = generation;
  for (const dim of ['check_id', 'region']) {
    const control = $('findings-filters').elements[dim];
    let rows;
    try {
      rows = await counts(dim, filterParams(view.filters, [dim]));
    } catch (e) {
      continue; // the list says why the API failed; the filter keeps its value
    }
    if (my !== generation) return;
    const chosen = view.filters[dim] || '';
    const opts = rows.filter((r) => r[dim] !== '').map((r) => option(r[dim], r[dim] + ' (' + r.count + ')'));
    if (chosen && !rows.some((r) => r[dim] === chosen)) opts.unshift(option(chosen, chosen + ' (0)'));
    control.replaceChildren(option('', 'Any'), ...opts);
    control.value = chosen;
  }
}

// loadOverview draws the counts of what the list shows as bars, under the
// list's filters: failing findings (or those of the status the list is
// filtered to) by severity, every status, and the provider accounts. A bar
// is a button that filters the list to what it counts.
const PROVIDER_BARS = 8;

async function loadOverview() {
  const my = generation;
  const bars = (id, rows, cls, choose) => {
    const top = Math.max(1, ...rows.map((r) => r.count));
    $(id).replaceChildren(...rows.map((r) => {
      const row = el(r.filters ? 'button' : 'div', null, 'bar-row');
      row.dataset.value = r.value;
      const bar = el('span', null, 'meter ' + cls(r.value));
      bar.style.width = Math.round((r.count / top) * 100) + '%';
      const track = el('span', null, 'track');
      track.append(bar);
      const label = el('span', r.label || r.value, 'bar-label');
      label.title = r.label || r.value;
      row.append(label, track, el('span', r.count, 'bar-count'));
      if (r.filters) {
        row.type = 'button';
        const on = Object.entries(r.filters).every(([k, v]) => view.filters[k] === v);
        row.setAttribute('aria-pressed', String(on));
        row.addEventListener('click', () => choose(r.filters, on));
      }
      return row;
    }));
  };
  // A bar chosen again takes its filters off.
  const choose = (filters, on) => {
    const next = { ...view.filters };
    for (const [k, v] of Object.entries(filters)) {
      if (on) delete next[k];
      else next[k] = v;
    }
    go({ ...view, filters: next });
  };
  const failed = (id) => (e) => {
    if (my === generation) $(id).replaceChildren(el('p', 'Could not count findings: ' + e.message, 'error'));
  };
  // The usual severities and status codes are drawn, zero included, in
  // their natural order; any other value the API counts (OCSF's fatal,
  // unknown and other severities, a status code such as MUTED) follows,
  // largest first, so that the bars account for every finding counted.
  const fixed = (rows, dim, values) => {
    const got = new Map(rows.map((g) => [g[dim], g.count]));
    const extra = [...got.keys()].filter((v) => !values.includes(v))
      .sort((x, y) => got.get(y) - got.get(x) || String(x).localeCompare(String(y)));
    return [...values, ...extra].map((v) => ({ value: v, count: got.get(v) || 0 }));
  };
  // Severity counts the failing findings unless the list is filtered to
  // another status; a bar filters to its severity and that status.
  const status = view.filters.status_code || 'FAIL';
  $('by-severity-title').textContent = status === 'FAIL' ? 'Failing by severity' : status + ' by severity';
  const sevParams = filterParams(view.filters, ['severity', 'status_code']);
  sevParams.set('filter[status_code]', status);
  counts('severity', sevParams).then((rows) => {
    if (my !== generation) return;
    bars('by-severity', fixed(rows, 'severity', ['critical', 'high', 'medium', 'low', 'informational'])
      .map((r) => ({ ...r, filters: { severity: r.value, status_code: status } })), (v) => 'severity-' + v, choose);
  }, failed('by-severity'));
  counts('status_code', filterParams(view.filters, ['status_code'])).then((rows) => {
    if (my !== generation) return;
    bars('by-status', fixed(rows, 'status_code', ['FAIL', 'PASS', 'MANUAL'])
      .map((r) => ({ ...r, filters: { status_code: r.value } })), (v) => 'status_code-' + v, choose);
  }, failed('by-status'));
  // Providers are open-ended: the largest first, the rest summed up.
  counts('provider_type,provider_uid', filterParams(view.filters, ['provider_type', 'provider_uid'])).then((got) => {
    if (my !== generation) return;
    let rows = got.map((g) => ({
      value: g.provider_type + ' ' + g.provider_uid, label: g.provider_type + ' ' + g.provider_uid, count: g.count,
      filters: { provider_type: g.provider_type, provider_uid: g.provider_uid },
    }));
    rows.sort((x, y) => y.count - x.count || x.value.localeCompare(y.value));
    const rest = rows.slice(PROVIDER_BARS);
    rows = rows.slice(0, PROVIDER_BARS);
    if (rest.length) rows.push({ value: 'other', label: rest.length + ' more', count: rest.reduce((n, r) => n + r.count, 0) });
    bars('by-provider', rows, () => 'provider', choose);
    if (!rows.length) $('by-provider').replaceChildren(el('p', 'No findings counted.', 'muted'));
  }, failed('by-provider'));
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

// The grouped view's severities, worst first: the order its checks are
// ranked in, and its columns. A severity outside them that the API counts
// gets a column after them.
const SEVERITIES = ['fatal', 'critical', 'high', 'medium', 'low', 'informational', 'other', 'unknown'];
// Columns shown even when no check has such findings.
const SEVERITY_COLUMNS = ['critical', 'high', 'medium', 'low', 'informational'];

// rankChecks turns counts grouped by check_id, status_code and severity
// into one row per check: its findings of status by severity (bySeverity),
// their sum (counted) and all its findings (total). Rows are sorted by
// their counts of each severity, worst first (the most critical, then the
// most high, …), then by all their findings, then by check id; a check
// without findings of status comes after every check with some.
export function rankChecks(groups, status) {
  const checks = new Map();
  for (const g of groups) {
    let c = checks.get(g.check_id);
    if (!c) checks.set(g.check_id, c = { check_id: g.check_id, bySeverity: {}, counted: 0, total: 0 });
    c.total += g.count;
    if (g.status_code !== status) continue;
    c.counted += g.count;
    c.bySeverity[g.severity] = (c.bySeverity[g.severity] || 0) + g.count;
  }
  const order = severityOrder(groups);
  const rows = [...checks.values()];
  rows.sort((x, y) => {
    for (const s of order) {
      const d = (y.bySeverity[s] || 0) - (x.bySeverity[s] || 0);
      if (d) return d;
    }
    return y.total - x.total || (x.check_id < y.check_id ? -1 : x.check_id > y.check_id ? 1 : 0);
  });
  return rows;
}

// severityOrder is SEVERITIES followed by any other severity groups name.
function severityOrder(groups) {
  const extra = [...new Set(groups.map((g) => g.severity))].filter((s) => !SEVERITIES.includes(s)).sort();
  return [...SEVERITIES, ...extra];
}

// loadChecks draws the grouped view: GET …/counts grouped by check_id,
// status_code and severity under the list's filters (one request, read
// from the finding summaries, so it costs the number of groups, not of
// findings). It counts the status the list is filtered to, else FAIL.
async function loadChecks() {
  const my = generation;
  const status = view.filters.status_code || 'FAIL';
  const q = filterParams(view.filters);
  q.set('group_by', 'check_id,status_code,severity');
  const table = $('checks-table');
  let doc;
  try {
    doc = await api(base() + '/counts?' + q);
  } catch (e) {
    if (my !== generation) return;
    table.tHead.rows[0].replaceChildren();
    table.tBodies[0].replaceChildren();
    $('findings-message').textContent = 'Could not count findings by check: ' + e.message;
    return;
  }
  if (my !== generation) return;
  const groups = doc.data.map((g) => g.attributes);
  const rows = rankChecks(groups, status);
  const counted = new Set(groups.filter((g) => g.status_code === status).map((g) => g.severity));
  const columns = severityOrder(groups).filter((s) => SEVERITY_COLUMNS.includes(s) || counted.has(s));
  const word = status === 'FAIL' ? 'Failing' : status;
  const head = [el('th', 'Check'), ...columns.map((s) => el('th', s[0].toUpperCase() + s.slice(1), 'num')),
    el('th', word, 'num'), el('th', 'Findings', 'num')];
  for (const th of head) th.scope = 'col';
  table.tHead.rows[0].replaceChildren(...head);
  table.tBodies[0].replaceChildren(...rows.map((c) => {
    const name = el('th', null, 'c-check');
    name.scope = 'row';
    if (c.check_id) {
      // The list of this check's findings under the same filters.
      const link = el('a', c.check_id);
      link.href = hashOf({ ...view, group: '', filters: { ...view.filters, check_id: c.check_id } });
      name.append(link);
    } else {
      // Records without metadata.event_code: the list cannot be filtered
      // to an empty check id, so there is nothing to open.
      name.textContent = '(no check)';
    }
    const tr = el('tr');
    tr.dataset.check = c.check_id;
    tr.append(name, ...columns.map((s) => {
      const n = c.bySeverity[s] || 0;
      return el('td', n, 'num sev-' + s + (n ? '' : ' zero'));
    }), el('td', c.counted, 'num counted' + (c.counted ? '' : ' zero')), el('td', c.total, 'num'));
    return tr;
  }));
  const failing = rows.filter((c) => c.counted).length;
  $('findings-message').textContent = !rows.length
    ? emptyText()
    : rows.length + (rows.length === 1 ? ' check, ' : ' checks, ') + failing + (status === 'FAIL' ? ' failing' : ' with ' + status + ' findings') +
      (doc.meta.count_estimated ? ' (counted among the first ' + doc.meta.total + ' matches of the search)' : '');
}

// fromForm is the view the filter form asks for.
function fromForm() {
  const form = $('findings-filters').elements;
  const filters = {};
  for (const name of FILTERS) {
    const v = form[name].value.trim();
    if (v && keep(name, v, view.history)) filters[name] = v;
  }
  return { ...view, filters, sort: form.sort.value };
}

$('findings-filters').addEventListener('submit', (ev) => {
  ev.preventDefault();
  go(fromForm());
});
$('findings-filters').addEventListener('change', (ev) => {
  if (ev.target.tagName === 'SELECT') go(fromForm());
});
$('findings-clear').addEventListener('click', () => go({ ...view, filters: {} }));
$('findings-layout').addEventListener('change', (ev) => {
  if (ev.target.name === 'findings-layout') go({ ...fromForm(), group: ev.target.value === 'check' ? 'check' : '' });
});
$('findings-state').addEventListener('change', (ev) => {
  if (ev.target.name === 'findings-state') go({ ...fromForm(), history: ev.target.value === 'history' });
});
