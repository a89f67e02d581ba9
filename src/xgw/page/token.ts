/**
 * The pages' way to their token (shared by the chat and the status page): taken from the URL
 * they were opened with (`?token=`) into localStorage and dropped from the URL bar and history.
 * Web storage belongs to this origin (scheme, host and port), so, unlike a cookie, no page or
 * server on another port of this host ever sees it; localStorage rather than sessionStorage so
 * that the chat opens again in a new tab, as it did with a long-lived cookie.
 */
export function pageToken(): string {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    localStorage.setItem('xgw_token', fromUrl);
    url.searchParams.delete('token');
    history.replaceState(null, '', url.pathname + url.search + url.hash);
  }
  return localStorage.getItem('xgw_token') ?? '';
}

/** The element with this id, which the page's HTML has: a missing one is a bug of the page. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`the page has no #${id}`);
  return element as T;
}
