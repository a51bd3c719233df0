import { readFileSync } from 'node:fs';

/**
 * The console's stylesheet and script, read once at start. The path is written from the `server/`
 * directory up, so it names the same files from the sources (`server/console/`) and from the
 * bundle `npm start` runs (`server/dist/`).
 */
const ASSETS = new URL('../console/assets/', import.meta.url);

export const CONSOLE_CSS = readFileSync(new URL('console.css', ASSETS), 'utf8');
export const CONSOLE_JS = readFileSync(new URL('console.js', ASSETS), 'utf8');
