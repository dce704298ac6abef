// The Findings page: counts at a glance, and the findings, filtered, newest
// first, a page at a time to any depth.

import { api, rules } from './api.js';
import { $, el, when, showView, pager, readList } from './dom.js';
import { usageText } from './providers.js';

// cursors[n] is page n's page[cursor], from links.next of page n - 1.
const state = { page: 1, pages: 1, cursors: {} };

// show draws the page; a query (#/findings?scan=…, as the Scans page links
// a scan's findings) sets the filters it names and clears the others.
export function show(query) {
  showView('findings-view');
  if (query !== undefined) {
    const form = $('findings-filters');
    const given = new URLSearchParams(query);
    for (const name of FILTERS) form.elements[name].value = given.get(name) || '';
    resetFindingsPages();
  }
  loadOverview();
  loadFindings();
}

export function leave() {}

// The API numbers pages of findings only so deep (rules.max_page_offset
// findings; a deeper page[number] is refused, pointing to links.next): a
// page past that is read by the cursor of the page before it, so Next keeps
// working at any depth and Previous walks back over the cursors kept.
const FINDINGS_PAGE_SIZE = 20;

// The filters of the form, each the API's filter[name].
const FILTERS = ['severity', 'status_code', 'provider_type', 'check_id', 'region', 'scan', 'ingestion', 'search'];

function resetFindingsPages() {
  state.page = 1;
  state.cursors = {};
}

async function loadFindings() {
  const form = $('findings-filters');
  const q = new URLSearchParams({ 'page[size]': FINDINGS_PAGE_SIZE, sort: form.elements.sort.value });
  const cursor = (state.page - 1) * FINDINGS_PAGE_SIZE > rules.max_page_offset && state.cursors[state.page];
  if (cursor) q.set('page[cursor]', cursor);
  else q.set('page[number]', state.page);
  for (const name of FILTERS) {
    const v = form.elements[name].value.trim();
    if (v) q.set('filter[' + name + ']', v);
  }
  const tbody = $('findings-table').tBodies[0];
  const doc = await readList('/api/v1/findings?' + q, tbody, 'findings-message', (e) => 'Could not list findings: ' + e.message);
  if (!doc) {
    pager('findings-pager', state, 1, loadFindings);
    return;
  }
  const pg = doc.meta.pagination || { count: doc.data.length, pages: 1 };
  const next = doc.links && doc.links.next;
  if (next) state.cursors[state.page + 1] = new URL(next, location.href).searchParams.get('page[cursor]');
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
  pager('findings-pager', state, Math.max(pg.pages, state.page + (next ? 1 : 0)), loadFindings, pg.count_estimated);
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
