// The Scans page: the tenant's ingestions, refreshed while any runs, and
// the scans their reports held.

import { POLL_MS, terminal } from './api.js';
import { $, el, when, showView, statusCell, pager, readList, INGESTIONS_CHANGED } from './dom.js';
import { can } from './session.js';

const lists = { ingestions: { page: 1, pages: 1 }, scans: { page: 1, pages: 1 } };
let timer = null;

const shown = () => !$('scans-view').hidden;

export function show() {
  showView('scans-view');
  $('import-open').hidden = !can('manage_ingestions');
  loadIngestions();
  loadScans();
}

export function leave() { clearTimeout(timer); }

async function loadIngestions() {
  const q = new URLSearchParams({ 'page[number]': lists.ingestions.page, 'page[size]': 10, sort: $('ingestions-sort').value });
  if ($('ingestions-status').value) q.set('filter[status]', $('ingestions-status').value);
  const tbody = $('ingestions-table').tBodies[0];
  const doc = await readList('/api/v1/ingestions?' + q, tbody, 'ingestions-message', (e) => (e.status === 403
    ? 'Ingestions are visible to roles with the Manage Ingestions permission.'
    : 'Could not list ingestions: ' + e.message));
  if (!doc) {
    pager('ingestions-pager', lists.ingestions, 1, loadIngestions);
    return;
  }
  $('ingestions-message').textContent = doc.data.length ? '' : 'No ingestions yet.';
  tbody.replaceChildren(...doc.data.map((j) => {
    const a = j.attributes;
    const tr = el('tr');
    // The first block of the UUID is enough to tell ingestions apart on screen.
    const link = el('a', j.id.split('-')[0]);
    link.title = j.id;
    link.setAttribute('aria-label', 'Ingestion ' + j.id);
    link.href = '#/ingestions/' + encodeURIComponent(j.id);
    const idCell = el('td');
    idCell.append(link);
    tr.append(idCell, statusCell(a.status), el('td', a.summary.total), el('td', a.summary.processed),
      el('td', a.summary.invalid), el('td', when(a.requested_at)), el('td', when(a.started_at)), el('td', when(a.completed_at)));
    return tr;
  }));
  pager('ingestions-pager', lists.ingestions, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadIngestions);
  // One refresh chain at a time, however many loads were started.
  clearTimeout(timer);
  if (doc.data.some((j) => !terminal(j.attributes.status))) {
    timer = setTimeout(() => { if (shown()) loadIngestions(); }, POLL_MS * 2);
  }
}

$('ingestions-status').addEventListener('change', () => { lists.ingestions.page = 1; loadIngestions(); });
$('ingestions-sort').addEventListener('change', () => { lists.ingestions.page = 1; loadIngestions(); });

// An ingestion the Import Findings dialog created is listed (and the list
// refreshes while it runs) at once, not only once it ends; its end brings
// its scans.
window.addEventListener(INGESTIONS_CHANGED, (ev) => {
  if (!shown()) return;
  loadIngestions();
  if (ev.detail && ev.detail.ended) loadScans();
});

async function loadScans() {
  const q = new URLSearchParams({ 'page[number]': lists.scans.page, 'page[size]': 10 });
  const tbody = $('scans-table').tBodies[0];
  const doc = await readList('/api/v1/scans?' + q, tbody, 'scans-message', (e) => 'Could not list scans: ' + e.message);
  if (!doc) return;
  $('scans-message').textContent = doc.data.length ? '' : 'No scans yet.';
  tbody.replaceChildren(...doc.data.map((s) => {
    const a = s.attributes;
    const src = el('td');
    src.append(el('span', a.trigger === 'imported' ? 'Imported' : a.trigger, 'badge imported'));
    const ing = el('td');
    if (a.ingestion_id) {
      // An ingestion's page needs Manage Ingestions: without it the
      // ingestion is named, not linked to a page that would only answer 403.
      const link = el(can('manage_ingestions') ? 'a' : 'span', a.ingestion_id.split('-')[0]);
      link.title = a.ingestion_id;
      if (can('manage_ingestions')) link.href = '#/ingestions/' + encodeURIComponent(a.ingestion_id);
      ing.append(link);
    }
    const tr = el('tr');
    tr.append(el('td', a.provider_type), el('td', a.provider_uid), src, el('td', a.finding_count), ing, el('td', when(a.inserted_at)));
    return tr;
  }));
  pager('scans-pager', lists.scans, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadScans);
}
