// The Mute… dialog of a finding's page: a mute rule pre-filled from the
// finding (its check, account and resource; region, severity and status
// offered unchecked), a required reason and an optional expiry, created
// through POST /api/v1/mute-rules. A refusal names the field the API's
// source.pointer points at; once created, the dialog follows the rule
// until its pass is done and says what it mutes.

import { api, MEDIA, POLL_MS } from './api.js';
import { $, el } from './dom.js';
import { can } from './session.js';

// FIELDS are the rule's match fields the dialog offers, in its order;
// lists are sent as a list of the one value.
const FIELDS = ['checkId', 'account', 'resourceUid', 'region', 'severity', 'statusCode'];
const LISTS = ['severity', 'statusCode'];
const CHECKED = ['checkId', 'account', 'resourceUid'];
// How long the dialog follows a new rule's pass before it stops asking.
const FOLLOW_POLLS = 120;

const dialog = $('mute-dialog');
let finding = null;
let changed = () => {};
// following is the rule the dialog follows; a newer dialog drops it.
let following = null;

// offer shows Mute… for the finding a (attributes) to those who may mute;
// done runs once a rule created here has marked the stored findings.
export function offer(a, done) {
  finding = a;
  changed = done;
  $('mute-open').hidden = !can('mute_findings');
}

function open() {
  const a = finding;
  if (!a) return;
  following = null;
  const values = {
    checkId: a.check_id, account: a.provider_uid, resourceUid: a.resource_uid, region: a.region,
    severity: a.severity, statusCode: a.status_code,
  };
  for (const f of FIELDS) {
    $('mute-' + f).value = values[f] || '';
    $('mute-on-' + f).checked = CHECKED.includes(f) && !!values[f];
  }
  for (const id of ['mute-reason', 'mute-expires', 'mute-name']) $(id).value = '';
  clearError();
  $('mute-result').replaceChildren();
  $('mute-create').disabled = false;
  dialog.showModal();
  $('mute-reason').focus();
}

function clearError() {
  $('mute-error').textContent = '';
  for (const n of dialog.querySelectorAll('[aria-invalid]')) n.removeAttribute('aria-invalid');
}

// fieldOf is the control a JSON pointer into the request points at, and
// the word for it.
function fieldOf(pointer) {
  const p = (pointer || '').split('/').slice(3); // after /data/attributes
  if (p[0] === 'match' && FIELDS.includes(p[1])) return [$('mute-' + p[1]), $('mute-on-' + p[1]).labels[0].textContent];
  if (p[0] === 'match') return [$('mute-on-checkId'), 'Match'];
  const simple = { reason: ['mute-reason', 'Reason'], name: ['mute-name', 'Name'], expires_at: ['mute-expires', 'Expires'] };
  if (simple[p[0]]) return [$(simple[p[0]][0]), simple[p[0]][1]];
  return [null, ''];
}

function refuse(message, pointer) {
  const [control, word] = fieldOf(pointer);
  $('mute-error').textContent = (word ? word + ': ' : '') + message;
  if (control) {
    control.setAttribute('aria-invalid', 'true');
    control.focus();
  }
}

async function create(ev) {
  ev.preventDefault();
  clearError();
  const match = {};
  for (const f of FIELDS) {
    const v = $('mute-' + f).value.trim();
    if (!$('mute-on-' + f).checked || !v) continue;
    match[f] = LISTS.includes(f) ? [v] : v;
  }
  const reason = $('mute-reason').value.trim();
  if (!reason) {
    refuse('say why these findings are accepted; the reason shows beside every mark.', '/data/attributes/reason');
    return;
  }
  const attributes = { match, reason };
  if ($('mute-name').value.trim()) attributes.name = $('mute-name').value.trim();
  // A date means the start of that day, UTC.
  if ($('mute-expires').value) attributes.expires_at = $('mute-expires').value + 'T00:00:00Z';
  $('mute-create').disabled = true;
  let doc;
  try {
    doc = await api('/api/v1/mute-rules', {
      method: 'POST', headers: { 'Content-Type': MEDIA }, body: JSON.stringify({ data: { type: 'mute-rules', attributes } }),
    });
  } catch (e) {
    $('mute-create').disabled = false;
    refuse('the rule was refused: ' + e.message, e.source.pointer);
    return;
  }
  follow(doc.data.attributes.name);
}

// follow reads the rule until its pass has marked the stored findings (or
// it is stalled), saying where it stands.
async function follow(name) {
  following = name;
  for (let i = 0; i < FOLLOW_POLLS && following === name; i++) {
    let r = null;
    try {
      const doc = await api('/api/v1/mute-rules?' + new URLSearchParams({ 'filter[name]': name }));
      r = doc.data[0] && doc.data[0].attributes;
    } catch (e) {
      state(name, 'could not be read: ' + e.message);
    }
    if (following !== name) return;
    if (r && r.ready) {
      state(name, 'ready: ' + r.message);
      changed();
      return;
    }
    if (r) state(name, r.message ? 'not ready yet: ' + r.message : 'created; marking the stored findings…');
    await new Promise((done) => setTimeout(done, POLL_MS));
  }
}

function state(name, text) {
  const p = el('p');
  p.append('Mute rule ', el('code', name, 'rule-name'), ' ', el('span', text, 'rule-state'));
  $('mute-result').replaceChildren(p);
}

$('mute-open').addEventListener('click', open);
$('mute-form').addEventListener('submit', create);
$('mute-close').addEventListener('click', () => {
  following = null;
  dialog.close();
});
dialog.addEventListener('close', () => { following = null; });
