// The Import Findings dialog of the Scans page: one report per import,
// checked before it is sent, uploaded with progress, then followed until its
// ingestion ends, also once the dialog is closed (a notification tells the
// end). It tells the pages that list ingestions when one changed.

import { MEDIA, POLL_MS, api, rules, sessionEnded, terminal } from './api.js';
import { $, el, INGESTIONS_CHANGED } from './dom.js';

// changed tells the pages listing ingestions that the one followed was
// created, or ended.
function changed(ended) {
  window.dispatchEvent(new CustomEvent(INGESTIONS_CHANGED, { detail: { id: imp.id, ended } }));
}

const dialog = $('import-dialog');
// One import at a time is tracked; it outlives the dialog.
const imp = { file: null, id: null, state: 'idle', summary: null, timer: null };

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

function showCounts(s, stored) {
  $('import-counts').hidden = !s;
  if (!s) return;
  $('count-total').textContent = s.total;
  $('count-processed').textContent = s.processed;
  $('count-invalid').textContent = s.invalid;
  $('count-stored').textContent = stored === undefined ? '—' : stored;
}

// showBars shows the upload's bar and the ingestion's; the upload's stays
// full once sent, so both phases stay readable.
function showBars(upload, ingestion) {
  $('upload-row').hidden = !upload;
  $('import-progress-row').hidden = !ingestion;
}

function resetDialog() {
  imp.file = null;
  imp.id = null;
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
  location.hash = '#/ingestions/' + encodeURIComponent(imp.id);
});

// upload sends the file with XMLHttpRequest, which (unlike fetch) reports
// upload progress.
function upload() {
  if (!imp.file) return;
  imp.state = 'uploading';
  imp.id = null;
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
      imp.id = body.data.id;
      imp.summary = body.data.attributes.summary;
      changed(false);
      track();
      return;
    }
    if (xhr.status === 401) sessionEnded('Your session ended; sign in again.');
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

// track follows the ingestion until it ends; a failed status check offers
// Retry status, which resumes on the same ingestion without uploading again.
async function track() {
  imp.state = 'tracking';
  clearTimeout(imp.timer);
  setError('');
  setButtons({});
  let ing;
  try {
    ing = (await api('/api/v1/ingestions/' + encodeURIComponent(imp.id))).data.attributes;
  } catch (e) {
    imp.state = 'status-failed';
    setState('The file was accepted as ingestion ' + imp.id + ', but its status could not be read.');
    setError('Status check failed: ' + e.message);
    setButtons({ retryStatus: true });
    finished('The status of the import of ' + imp.file.name + ' could not be read (' + e.message + '); Import Findings offers Retry status.');
    return;
  }
  const s = ing.summary;
  imp.summary = s;
  showCounts(s);
  const bar = $('import-progress');
  $('import-progress-row').hidden = false;
  bar.value = s.total ? Math.round((s.processed / s.total) * 100) : 0;
  if (!terminal(ing.status)) {
    setState('Ingestion ' + imp.id + ' is ' + ing.status + ': ' + s.processed + ' of ' + s.total + ' records processed.');
    imp.timer = setTimeout(track, POLL_MS);
    return;
  }
  if (ing.status === 'completed') {
    imp.state = 'completed';
    const stored = await storedFindings(imp.id);
    showCounts(s, stored.count);
    setState('Import completed: ' + s.total + (s.total === 1 ? ' record, ' : ' records, ') + s.processed + ' processed, ' + s.invalid + ' invalid; ' + stored.text + '.');
    $('import-errors-link').hidden = !(s.invalid > 0);
    setButtons({ other: true });
    finished('Import of ' + imp.file.name + ' completed: ' + s.processed + ' processed, ' + s.invalid + ' invalid; ' + stored.text + '.');
  } else {
    imp.state = 'failed';
    const reason = await failureReason(imp.id);
    setState('The ingestion failed after processing ' + s.processed + ' of ' + s.total + ' records (' + s.invalid + ' invalid).');
    setError('Import failed: ' + reason);
    $('import-errors-link').hidden = false;
    setButtons({ retry: true, other: true });
    finished('Import of ' + imp.file.name + ' failed: ' + reason);
  }
  changed(true);
}

// storedFindings reads how many findings the ingestion stored, as the
// Findings page lists them (filter[ingestion]): the counts of records leave
// the reader to work it out, and to wonder whether it happened.
async function storedFindings(id) {
  try {
    const doc = await api('/api/v1/findings?' + new URLSearchParams({ 'filter[ingestion]': id, 'page[size]': 1, 'fields[findings]': 'uid' }));
    const n = doc.meta.pagination ? doc.meta.pagination.count : doc.data.length;
    return { count: n, text: n + (n === 1 ? ' finding' : ' findings') + ' stored' };
  } catch (e) {
    return { count: undefined, text: 'how many findings were stored could not be read (' + e.message + ')' };
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
