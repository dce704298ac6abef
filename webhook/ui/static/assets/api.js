// The REST API as the pages call it: through the session cookie, with the
// header the server requires of it, and the API's own rules, which the
// server hands the UI rather than the UI keeping a copy.

const MEDIA = 'application/vnd.api+json';

export { MEDIA };

// How often a page refreshes what is still running.
export const POLL_MS = 1000;

export class APIError extends Error {
  // source is the error's source ({pointer} into the body sent, or
  // {parameter}), so a form can point at the field the API refused.
  constructor(status, detail, source) {
    super(detail);
    this.status = status;
    this.source = source || {};
  }
}

// The event that says the server ended the session (a 401); the session
// module answers it with the sign-in form.
export const SESSION_ENDED = 'posture:session-ended';

// sessionEnded tells the session module the server refused the session.
export function sessionEnded(message) {
  window.dispatchEvent(new CustomEvent(SESSION_ENDED, { detail: message }));
}

// api calls the REST API with the session cookie. The custom header is the
// session's CSRF defence: the server refuses cookie requests without it.
export async function api(path, opts = {}) {
  let res;
  try {
    res = await fetch(path, {
      ...opts,
      credentials: 'same-origin',
      headers: { Accept: MEDIA, 'X-Posture-UI': '1', ...(opts.headers || {}) },
    });
  } catch (e) {
    throw new APIError(0, 'the server could not be reached (' + e.message + ')');
  }
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (res.status === 401 && !path.startsWith('/ui/session')) {
    sessionEnded('Your session ended; sign in again.');
  }
  if (!res.ok) throw new APIError(res.status, errorDetail(body, res), body && body.errors && body.errors[0] && body.errors[0].source);
  return body;
}

function errorDetail(body, res) {
  const e = body && body.errors && body.errors[0];
  return (e && (e.detail || e.title)) || res.statusText || 'HTTP ' + res.status;
}

// The API's rules, as the server holds them (GET /ui/config): which
// ingestion statuses are terminal, how deep numbered pages go, the ending
// a report's name needs. Read once, before any page shows.
export const rules = { terminal_statuses: [], max_page_offset: 0, report_suffix: '' };

export async function loadRules() {
  Object.assign(rules, await api('/ui/config'));
}

// terminal says whether an ingestion in status has ended for good.
export const terminal = (status) => rules.terminal_statuses.includes(status);
