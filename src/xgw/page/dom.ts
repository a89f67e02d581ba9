/** Small DOM helpers the status and control pages share. Text goes in through `textContent` only, never `innerHTML`. */

export function el(tag: string, className = '', text?: string | number | null): HTMLElement {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export const pill = (text: string, tone: 'ok' | 'warn' | 'bad'): HTMLElement => el('span', `pill ${tone}`, text);

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : 'never');
