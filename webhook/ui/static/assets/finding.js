// A finding's page: its summary and its whole OCSF record, as text.

import { api } from './api.js';
import { $, el, when, showView } from './dom.js';
import { listHash } from './findings.js';

export function show(id) { read(id); }

export function leave() {}

async function read(id) {
  showView('finding-view');
  $('finding-back').href = listHash();
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
