// The console's only script: keeps a server-rendered page current. The server says (server-sent
// events) when what the page shows has changed; the page then fetches itself and swaps its <main>.
// Without this script every page is complete as served.
(() => {
  const main = document.getElementById('main');
  const url = main?.dataset.live;
  if (!main || !url || !('EventSource' in window)) return;
  let busy = false;
  let again = false;

  /** Whether the person is typing in the page: a refresh then waits until they leave the field. */
  const typing = () => {
    const active = document.activeElement;
    return active && main.contains(active) && ['INPUT', 'TEXTAREA', 'SELECT'].includes(active.tagName);
  };

  async function refresh() {
    if (busy || typing()) {
      again = true;
      return;
    }
    busy = true;
    try {
      const response = await fetch(location.href, { headers: { accept: 'text/html' }, credentials: 'same-origin' });
      if (response.redirected && new URL(response.url).pathname === '/console/sign-in') {
        location.assign(response.url);
        return;
      }
      if (!response.ok) return;
      const next = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById('main');
      if (next) {
        main.innerHTML = next.innerHTML;
        main.dataset.updated = new Date().toISOString();
      }
    } finally {
      busy = false;
      if (again) {
        again = false;
        setTimeout(refresh, 0);
      }
    }
  }

  main.addEventListener('focusout', () => {
    if (!again) return;
    again = false;
    setTimeout(refresh, 0);
  });
  const source = new EventSource(url);
  source.addEventListener('changed', refresh);
})();
