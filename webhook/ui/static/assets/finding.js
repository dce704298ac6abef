// A finding's page: its summary; its description, risk and remediation,
// which the server renders from Markdown to sanitized HTML; its related
// URLs and resource; its observations across scans; and its whole OCSF
// record as JSON, folded.

import { api } from './api.js';
import { $, el, when, showView, pager, readList } from './dom.js';
import { listHash, muteMark } from './findings.js';
import * as mute from './mute.js';

const OBSERVATIONS_PAGE = 10;

// shown is the finding the page shows: a read that returns after the page
// moved on to another finding is dropped.
let shown = null;
const observations = { page: 1, pages: 1 };

export function show(id) { read(id); }

export function leave() { shown = null; }

async function read(id) {
  shown = id;
  showView('finding-view');
  $('finding-back').href = listHash();
  $('finding-title').textContent = '';
  for (const part of ['finding-summary', 'finding-description', 'finding-risk', 'finding-remediation', 'finding-references',
    'finding-related', 'finding-resource']) {
    $(part).replaceChildren();
  }
  $('finding-observations').tBodies[0].replaceChildren();
  $('finding-observations-message').textContent = '';
  $('finding-record').textContent = '';
  $('finding-raw').open = false;
  $('mute-open').hidden = true;
  for (const p of document.querySelectorAll('#finding-view .finding-part')) p.hidden = true;
  $('finding-observations-pager').hidden = true;
  let a;
  try {
    a = (await api('/api/v1/findings/' + encodeURIComponent(id))).data.attributes;
  } catch (e) {
    if (shown === id) $('finding-title').textContent = 'Could not read the finding: ' + e.message;
    return;
  }
  if (shown !== id) return;
  $('finding-title').textContent = a.title || a.uid;
  const account = a.account || { provider: a.provider_type, uid: a.provider_uid, name: '' };
  const rows = [['Severity', badge(a.severity, 'sev-' + a.severity)], ['Status', status(a.status_code, a.status)],
    ['Check', a.check_id], ['Account', account.provider + ' ' + account.uid + (account.name ? ' (' + account.name + ')' : '')],
    ['Region', a.region], ['Time', when(a.time)], ['Scan', a.scan_id], ['Ingestion', a.ingestion_id], ['UID', a.uid],
    ['Muted', muted(a)]];
  $('finding-summary').replaceChildren(...definitions(rows));
  // Mute… is for roles with the mute_findings permission; the API refuses
  // the others anyway.
  mute.offer(a, () => { if (shown === id) read(id); });

  // The *_html attributes are the server's sanitized rendering (no
  // script, no handler, links only to http and https); the page's CSP
  // would refuse an inline script or handler as well.
  markdown('finding-description', a.description_html, 'The record has no description.');
  markdown('finding-risk', a.risk_html, 'The record names no risk.');
  const rem = a.remediation || { description_html: '', references: [] };
  markdown('finding-remediation', rem.description_html, 'The record gives no remediation.');
  links('finding-references', rem.references, 'None.');
  links('finding-related', a.related_urls, 'None.');

  const r = a.resource || { uid: a.resource_uid, labels: [] };
  // The uid is what tells resources apart, but the name is what a person
  // recognises: the uid comes last, smaller.
  const uid = el('dd', r.uid || '—', 'secondary');
  $('finding-resource').replaceChildren(...definitions([['Name', r.name || '—'], ['Type', r.type || '—'], ['Region', r.region || '—'],
    ['Partition', r.partition || '—'], ['Labels', (r.labels && r.labels.length) ? r.labels.join(', ') : '—']]), el('dt', 'UID', 'secondary'), uid);

  $('finding-record').textContent = JSON.stringify(a.record, null, 2);
  for (const p of document.querySelectorAll('#finding-view .finding-part')) p.hidden = false;
  observations.page = 1;
  readObservations(id);
}

async function readObservations(id) {
  const tbody = $('finding-observations').tBodies[0];
  const doc = await readList('/api/v1/findings/' + encodeURIComponent(id) + '/observations?' +
    new URLSearchParams({ 'page[number]': observations.page, 'page[size]': OBSERVATIONS_PAGE }), tbody,
  'finding-observations-message', (e) => 'Could not read the finding across scans: ' + e.message);
  if (shown !== id || !doc) return;
  const n = doc.meta.pagination.count;
  $('finding-observations-message').textContent = n === 1 ? 'Seen in 1 scan: this one.' : 'Seen in ' + n + ' scans, newest first.';
  tbody.replaceChildren(...doc.data.map((o) => {
    const tr = el('tr');
    const at = el('td');
    if (o.id === id) {
      at.append(when(o.attributes.time), ' ', el('span', '(this finding)', 'muted'));
      tr.setAttribute('aria-current', 'true');
    } else {
      const link = el('a', when(o.attributes.time));
      link.href = '#/findings/' + encodeURIComponent(o.id);
      at.append(link);
    }
    const st = el('td');
    st.append(status(o.attributes.status_code, o.attributes.status));
    const scan = el('td');
    const toScan = el('a', o.attributes.scan_id, 'code');
    // A scan is history: its findings need not all be in the current state.
    toScan.href = '#/findings?' + new URLSearchParams({ view: 'history', scan: o.attributes.scan_id });
    scan.append(toScan);
    tr.append(at, st, scan);
    return tr;
  }));
  $('finding-observations-pager').hidden = doc.meta.pagination.pages <= 1;
  pager('finding-observations-pager', observations, doc.meta.pagination.pages, () => readObservations(id));
}

// muted is the summary's word on the finding's mark: which rule muted it
// and why, or No.
function muted(a) {
  if (!a.muted) return 'No';
  const m = a.mute || { rule: '', reason: '' };
  const span = el('span', null, 'mute-says');
  span.append(muteMark(m), ' by rule ', el('code', m.rule), ': ', el('span', m.reason));
  return span;
}

function definitions(rows) {
  return rows.flatMap(([k, v]) => {
    const dd = el('dd');
    dd.append(v === undefined || v === null || v === '' ? '—' : v);
    return [el('dt', k), dd];
  });
}

function badge(text, cls) { return el('span', text, 'badge ' + cls); }

function status(code, label) {
  const span = el('span');
  span.append(badge(code, 'status-' + code));
  if (label) span.append(' ', el('span', label, 'muted'));
  return span;
}

// markdown puts the server's sanitized HTML into the element id, or says
// the record has none.
function markdown(id, html, none) {
  if (html) {
    $(id).innerHTML = html;
  } else {
    $(id).replaceChildren(el('p', none, 'muted'));
  }
}

// links lists a report's references: a link only where the server gave
// an href (an http or https URL); anything else, a command to run for
// one, is text.
function links(id, refs, none) {
  const items = (refs || []).map((r) => {
    const li = el('li');
    if (r.href) {
      const a = el('a', r.text);
      a.href = r.href;
      a.target = '_blank';
      a.rel = 'noopener noreferrer nofollow';
      li.append(a);
    } else {
      li.append(el('code', r.text));
    }
    return li;
  });
  $(id).replaceChildren(...(items.length ? items : [el('li', none, 'muted')]));
}
