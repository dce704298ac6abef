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
  offerImport('');
  // The ingestions are listed only to roles that may read them: another
  // role would get filters, a table and a pager it cannot use.
  $('ingestions-part').hidden = !can('manage_ingestions');
  if (can('manage_ingestions')) loadIngestions();
  loadScans();
}

// unsubscribed shows what the page can without a subscription: Import
// Findings, to roles that may import, with the reason it is not offered.
export function unsubscribed() {
  offerImport('Importing needs an active subscription.');
}

// offerImport shows Import Findings to roles with Manage Ingestions,
// disabled with its reason when one is given.
function offerImport(reason) {
  const button = $('import-open');
  button.hidden = !can('manage_ingestions');
  button.disabled = reason !== '';
  $('import-reason').textContent = reason;
  $('import-reason').hidden = button.hidden || reason === '';
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
  const status = $('ingestions-status');
  // A filter that matches none must not read as if there were none at all.
  $('ingestions-message').textContent = doc.data.length ? ''
    : status.value ? 'No ingestion is ' + status.selectedOptions[0].textContent.toLowerCase() + '; choose All to see every ingestion.'
      : 'No ingestions yet.';
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

// SEVERITY_ORDER lists severities most severe first, for a scan's failures.
const SEVERITY_ORDER = ['fatal', 'critical', 'high', 'medium', 'low', 'informational', 'unknown', 'other'];

// failingText words a scan's FAIL findings: their number, then by severity,
// most severe first.
export function failingText(count, bySeverity) {
  const parts = Object.entries(bySeverity || {}).sort(([a], [b]) => {
    const ia = SEVERITY_ORDER.indexOf(a), ib = SEVERITY_ORDER.indexOf(b);
    return (ia < 0 ? SEVERITY_ORDER.length : ia) - (ib < 0 ? SEVERITY_ORDER.length : ib) || a.localeCompare(b);
  }).map(([severity, n]) => n + '\u00a0' + severity); // "100 critical" never splits at a wrap
  return parts.length ? count + ' (' + parts.join(', ') + ')' : String(count);
}

// SOURCES names how a report came when it was not uploaded.
const SOURCES = { configmap: 'ConfigMap', secret: 'Secret', url: 'URL' };

$('ingestions-status').addEventListener('change', () => { lists.ingestions.page = 1; loadIngestions(); });
$('ingestions-sort').addEventListener('change', () => { lists.ingestions.page = 1; loadIngestions(); });

// An ingestion the Import Findings dialog created is listed (and the list
// refreshes while it runs) at once, not only once it ends; its end brings
// its scans.
window.addEventListener(INGESTIONS_CHANGED, (ev) => {
  if (!shown()) return;
  if (can('manage_ingestions')) loadIngestions();
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
    // The report: its file name, and how it came only where that is not
    // the usual import of an uploaded file.
    const report = el('td', null, 'report');
    report.append(el('span', a.file_name || '—', 'filename-cell'));
    if (a.source && a.source !== 'upload') report.append(' ', el('span', SOURCES[a.source] || a.source, 'badge source'));
    if (a.trigger && a.trigger !== 'imported') report.append(' ', el('span', a.trigger, 'badge source'));
    const found = el('td');
    const link = el('a', a.finding_count);
    // A scan is history: its findings need not all be in the current state.
    link.href = '#/findings?' + new URLSearchParams({ view: 'history', scan: s.id });
    link.setAttribute('aria-label', a.finding_count + ' findings of scan ' + s.id);
    found.append(link);
    const ing = el('td', null, 'ingestion');
    if (a.ingestion_id) {
      // An ingestion's page needs Manage Ingestions: without it the
      // ingestion is named, not linked to a page that would only answer 403.
      const name = el(can('manage_ingestions') ? 'a' : 'span', a.ingestion_id.split('-')[0]);
      name.title = a.ingestion_id;
      if (can('manage_ingestions')) name.href = '#/ingestions/' + encodeURIComponent(a.ingestion_id);
      ing.append(name);
    }
    const tr = el('tr');
    tr.dataset.id = s.id;
    tr.append(el('td', when(a.scanned_at)), el('td', a.provider_type), el('td', a.provider_uid), report,
      el('td', a.uploaded_by || '—', 'uploader'), el('td', failingText(a.fail_count, a.fail_counts), a.fail_count ? 'failing' : ''), found, ing);
    return tr;
  }));
  pager('scans-pager', lists.scans, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadScans);
}
