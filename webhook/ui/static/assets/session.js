// The session: who is signed in and what they may do. It is the one state
// the pages share; the server keeps the tokens in an HttpOnly cookie.

import { api, MEDIA, SESSION_ENDED } from './api.js';
import { $, showView } from './dom.js';

const me = { email: '', permissions: [], tenant: '', subscribed: false };
let onSignIn = () => {};

export const can = (perm) => me.permissions.includes(perm);
export const signedIn = () => me.email !== '';
// subscribed says whether the tenant has an active subscription: without
// one the API answers every read but the tenant's own with 402, so the
// pages show one banner instead of asking.
export const subscribed = () => me.subscribed;

// whenSignedIn sets what runs once a user has signed in.
export function whenSignedIn(fn) { onSignIn = fn; }

export function signedOut(message) {
  me.email = '';
  me.permissions = [];
  me.tenant = '';
  me.subscribed = false;
  showBanner();
  $('who').textContent = '';
  $('signout').hidden = true;
  $('nav').hidden = true;
  $('signin-error').textContent = message || '';
  showView('signin-view');
}

window.addEventListener(SESSION_ENDED, (ev) => signedOut(ev.detail));

// load reads who the session is; false when there is none.
export async function load() {
  try {
    const doc = await api('/api/v1/tenant');
    const user = doc.data.attributes.user || {};
    me.email = user.email || '';
    me.permissions = user.permissions || [];
    me.tenant = doc.data.attributes.name || '';
    me.subscribed = !!(doc.data.attributes.subscription && doc.data.attributes.subscription.active);
    showBanner();
    $('who').textContent = me.email;
    $('signout').hidden = false;
    $('nav').hidden = false;
    return true;
  } catch (e) {
    if (e.status !== 401) signedOut('Could not load your account: ' + e.message);
    return false;
  }
}

// showBanner says once, above every page, what a tenant without a
// subscription cannot do, rather than each list repeating the API's 402.
function showBanner() {
  const off = signedIn() && !me.subscribed;
  document.body.classList.toggle('no-subscription', off);
  $('subscription-banner').hidden = !off;
  $('subscription-banner').textContent = off
    ? 'Tenant ' + me.tenant + ' has no active subscription, so reports cannot be imported and there are no findings, scans or providers to show. Whoever manages your Posture tenants can activate one.'
    : '';
}

$('signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('signin-error').textContent = '';
  const body = JSON.stringify({ data: { type: 'tokens', attributes: { email: $('email').value, password: $('password').value } } });
  try {
    await api('/ui/session', { method: 'POST', body, headers: { 'Content-Type': MEDIA } });
  } catch (e) {
    $('signin-error').textContent = 'Sign-in failed: ' + e.message;
    return;
  }
  $('password').value = '';
  if (await load()) onSignIn();
});

$('signout').addEventListener('click', async () => {
  await api('/ui/session', { method: 'DELETE' }).catch(() => {});
  signedOut('You are signed out.');
});
