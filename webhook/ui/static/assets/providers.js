// The Providers page: the plan's usage and the tenant's providers.

import { api } from './api.js';
import { $, el, when, showView, pager, readList } from './dom.js';

const list = { page: 1, pages: 1 };

// usageText words the plan's provider usage; limit 0 means unlimited.
export function usageText(p) {
  if (!p.limit) return { text: p.count + (p.count === 1 ? ' provider' : ' providers') + ' (no limit on your plan)', full: false };
  return { text: p.count + ' of ' + p.limit + ' providers on your plan', full: p.count >= p.limit };
}

export function show() {
  showView('providers-view');
  loadUsage();
  loadProviders();
}

export function leave() {}

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
  const q = new URLSearchParams({ 'page[number]': list.page, 'page[size]': 20, sort: 'type,uid' });
  const tbody = $('providers-table').tBodies[0];
  const doc = await readList('/api/v1/providers?' + q, tbody, 'providers-message', (e) => 'Could not list providers: ' + e.message);
  if (!doc) {
    pager('providers-pager', list, 1, loadProviders);
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
  pager('providers-pager', list, doc.meta.pagination ? doc.meta.pagination.pages : 1, loadProviders);
}
