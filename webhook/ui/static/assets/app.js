// The Posture web UI: one ES module per page, no build step, no
// dependencies (docs/decisions/0006). The pages share nothing but the
// session (session.js); this module routes the URL fragment to the page
// that shows it.
// Rule: every string from the API or the user reaches the page through
// textContent or a form control's value, never through innerHTML.

import { loadRules } from './api.js';
import { showView } from './dom.js';
import * as session from './session.js';
import * as scans from './scans.js';
import * as ingestion from './ingestion.js';
import * as findings from './findings.js';
import * as finding from './finding.js';
import * as providers from './providers.js';
import './import.js';

// routes maps a fragment to its page and the view it shows; the Scans page
// is the default. A page gets its path's parts decoded, and a query (named
// "query": #/findings?scan=…) as it stands, for URLSearchParams to decode.
const routes = [
  [/^#\/ingestions\/([^/]+)$/, ingestion, 'ingestion-view'],
  [/^#\/findings\/([^/]+)$/, finding, 'finding-view'],
  [/^#\/findings(?:\?(?<query>.*))?$/, findings, 'findings-view'],
  [/^#\/providers$/, providers, 'providers-view'],
  [/^/, scans, 'scans-view'],
];

let current = null;

function route() {
  if (current) current.leave();
  current = null;
  if (!session.signedIn()) return;
  for (const [pattern, page, view] of routes) {
    const m = location.hash.match(pattern);
    if (!m) continue;
    if (!session.subscribed()) {
      // Every read but the tenant's own would answer 402: the page shows
      // its title under the one banner that says why, and asks nothing.
      showView(view);
      if (page.unsubscribed) page.unsubscribed();
      return;
    }
    current = page;
    if (m.groups) page.show(m.groups.query);
    else page.show(...m.slice(1).map(decodeURIComponent));
    return;
  }
}

window.addEventListener('hashchange', route);
session.whenSignedIn(route);

document.getElementById('signout').hidden = true;
(async () => {
  try {
    await loadRules();
  } catch (e) {
    session.signedOut('Could not load the server\'s rules: ' + e.message);
    return;
  }
  if (await session.load()) route();
  else if (!session.signedIn()) session.signedOut('');
})();
