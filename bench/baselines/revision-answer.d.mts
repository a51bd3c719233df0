/** The bytes of a revision answer from its stored row, as the server writes them (revision-answer.mjs). */
export function revisionAnswerText(row: Record<string, unknown> & { source_revision_config: string }): string;
