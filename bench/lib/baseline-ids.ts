/** The id of the SQLite baseline's seeded row `i` (a valid UUID, so paths look like the real API's). */
export function seedId(i: number): string {
  return `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
}
