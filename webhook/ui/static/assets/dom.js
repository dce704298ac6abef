// Helpers every page draws with. They hold no state.

import { api } from './api.js';

export const $ = (id) => document.getElementById(id);

// el makes an element whose text, if any, is set as text, never as markup.
export function el(tag, text, cls) {
  const n = document.createElement(tag);
  if (text !== undefined && text !== null) n.textContent = String(text);
  if (cls) n.className = cls;
  return n;
}

export function when(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

// showView shows one section of the page and hides the others.
export function showView(view) {
  for (const s of document.querySelectorAll('main > section')) s.hidden = s.id !== view;
}

export function statusCell(status) {
  const td = el('td');
  td.append(el('span', status, 'badge ' + status));
  return td;
}

// pager draws a list's page controls into the element id for the list
// state (page, pages); reload reads the page chosen. atLeast says total
// counts only the pages known to exist (the API stopped counting:
// count_estimated).
export function pager(id, state, total, reload, atLeast) {
  const p = $(id);
  state.pages = Math.max(1, total);
  p.querySelector('span').textContent = 'Page ' + state.page + ' of ' + (atLeast ? 'at least ' : '') + state.pages;
  p.querySelector('[data-step="-1"]').disabled = state.page <= 1;
  p.querySelector('[data-step="1"]').disabled = state.page >= state.pages;
  p.onclick = (ev) => {
    const step = Number(ev.target.dataset && ev.target.dataset.step);
    if (!step) return;
    state.page = Math.min(state.pages, Math.max(1, state.page + step));
    reload();
  };
}

// readList reads one page of a list for the table body tbody. When it
// cannot, it empties the table, says why in the element messageId
// (failure words the error) and returns null.
export async function readList(path, tbody, messageId, failure) {
  try {
    return await api(path);
  } catch (e) {
    tbody.replaceChildren();
    $(messageId).textContent = failure(e);
    return null;
  }
}

// The event the Import Findings dialog sends when an ingestion it follows
// was created or changed, for a page listing ingestions to read them again.
export const INGESTIONS_CHANGED = 'posture:ingestions-changed';
