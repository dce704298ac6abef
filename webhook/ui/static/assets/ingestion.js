// An ingestion's page: its counts and times, refreshed while it runs and
// the page is visible, and the records it rejected.

import { api, POLL_MS, terminal } from './api.js';
import { $, el, when, showView, pager, readList } from './dom.js';
import { can } from './session.js';

const errors = { page: 1, pages: 1 };
let timer = null;
let current = null;

const shown = () => !$('ingestion-view').hidden;

export function show(id) {
  errors.page = 1;
  // The page reads only what Manage Ingestions allows: another role gets
  // one line saying so, not a summary and a table that could only fail.
  const allowed = can('manage_ingestions');
  $('ingestion-denied').hidden = allowed;
  $('ingestion-part').hidden = !allowed;
  if (!allowed) {
    showView('ingestion-view');
    $('ingestion-id').textContent = id;
    return;
  }
  current = id;
  read(id);
}

export function leave() {
  clearTimeout(timer);
  current = null;
}

async function read(id) {
  clearTimeout(timer);
  showView('ingestion-view');
  $('ingestion-id').textContent = id;
  let ing;
  try {
    ing = (await api('/api/v1/ingestions/' + encodeURIComponent(id))).data.attributes;
  } catch (e) {
    $('ingestion-summary').replaceChildren(el('dd', 'Could not read the ingestion: ' + e.message, 'error'));
    // Nothing of the ingestion shown before may stay as if it were this one's.
    $('ingestion-errors').tBodies[0].replaceChildren();
    $('ingestion-errors-message').textContent = '';
    return;
  }
  const rows = [['Status', ing.status], ['Total', ing.summary.total], ['Processed', ing.summary.processed],
    ['Invalid', ing.summary.invalid], ['Requested', when(ing.requested_at)], ['Started', when(ing.started_at)],
    ['Completed', when(ing.completed_at)]];
  $('ingestion-summary').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', k), el('dd', v)]));
  await loadErrors(id);
  // Live progress while the ingestion runs and the page is visible.
  if (!terminal(ing.status)) {
    timer = setTimeout(() => { if (!document.hidden && shown() && current === id) read(id); }, POLL_MS);
  }
}

// A running ingestion's page stops refreshing while the tab is hidden;
// shown again, it reads the ingestion at once and goes on refreshing while
// it runs.
document.addEventListener('visibilitychange', () => {
  if (document.hidden || current === null || !shown()) return;
  read(current);
});

async function loadErrors(id) {
  const q = new URLSearchParams({ 'page[number]': errors.page, 'page[size]': 50 });
  const tbody = $('ingestion-errors').tBodies[0];
  const doc = await readList('/api/v1/ingestions/' + encodeURIComponent(id) + '/errors?' + q, tbody, 'ingestion-errors-message',
    (e) => 'Could not list rejected records: ' + e.message);
  if (!doc) return;
  $('ingestion-errors-message').textContent = doc.data.length ? '' : 'No record was rejected.';
  tbody.replaceChildren(...doc.data.map((r) => {
    const a = r.attributes;
    const tr = el('tr');
    const value = a.value === undefined || a.value === null ? '' : (typeof a.value === 'string' ? a.value : JSON.stringify(a.value));
    // Each cell carries its column's name: on a narrow screen the rows are
    // drawn as cards, one labelled line per column.
    const cells = [['Record', a.record_index ?? '—', 'record'], ['Finding UID', a.finding_uid || '—', 'long'], ['Code', a.code, 'err-code'],
      ['Reason', a.detail, 'reason'], ['Pointer', a.pointer || '', 'long'], ['Value', value, 'long']];
    tr.append(...cells.map(([label, text, cls]) => {
      const td = el('td', text, cls);
      td.dataset.label = label;
      return td;
    }));
    return tr;
  }));
  pager('errors-pager', errors, doc.meta.pagination ? doc.meta.pagination.pages : 1, () => loadErrors(id));
}
