// The DNS-safe name is shared with the listener agents, which route by it.
export { dnsSafeName } from '../../shared/dns-safe-name.ts';
