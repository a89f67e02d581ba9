/** A piece of a memory file that search returns: a paragraph, with the heading it is under. */
export interface MemoryChunk {
  text: string;
  /** Line of the file (1-based) where the paragraph starts. */
  line: number;
}

/**
 * Cuts a Markdown memory file into what a search hit should show: each paragraph (lines up to
 * a blank line; a list is one paragraph) prefixed with its nearest heading, so a hit on "Lisbon"
 * under "## Family" says whose. Headings alone are not chunks.
 */
export function chunkMarkdown(text: string): MemoryChunk[] {
  const chunks: MemoryChunk[] = [];
  let heading = '';
  let paragraph: string[] = [];
  let start = 0;
  const flush = () => {
    const body = paragraph.join('\n').trim();
    if (body) chunks.push({ text: heading ? `${heading}\n${body}` : body, line: start });
    paragraph = [];
  };
  text.split('\n').forEach((line, index) => {
    if (/^#{1,6}\s/.test(line)) {
      flush();
      heading = line.replace(/^#+\s*/, '').trim();
    } else if (line.trim() === '') {
      flush();
    } else {
      if (paragraph.length === 0) start = index + 1;
      paragraph.push(line);
    }
  });
  flush();
  return chunks;
}
