/**
 * The pages' way to their token (shared by the chat and the status page): taken from the URL
 * they were opened with (`?token=`) into localStorage and dropped from the URL bar and history.
 * Web storage belongs to this origin (scheme, host and port), so, unlike a cookie, no page or
 * server on another port of this host ever sees it; localStorage rather than sessionStorage so
 * that the chat opens again in a new tab, as it did with a long-lived cookie. A script, so it
 * contains no backticks or `${`.
 */
export const PAGE_TOKEN_SCRIPT = String.raw`
function pageToken() {
  var url = new URL(location.href);
  var fromUrl = url.searchParams.get("token");
  if (fromUrl) {
    localStorage.setItem("xgw_token", fromUrl);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return localStorage.getItem("xgw_token") || "";
}
`;
