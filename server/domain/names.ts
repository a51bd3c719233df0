// The URL form of a name is shared with the listener agents, which route by it.
export { dnsSafeName, urlLabel } from '../../shared/dns-safe-name.ts';
