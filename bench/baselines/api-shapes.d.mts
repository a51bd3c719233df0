/** What the bare baselines do exactly as the server does (api-shapes.mjs); only the lane bench's TypeScript needs these types. */
export function revisionAnswerText(row: Record<string, unknown> & { source_revision_config: string }): string;
export const newRowId: () => string;
