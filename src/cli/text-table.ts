/** Rows as an aligned plain-text table with a header line; missing cells stay empty. */
export function textTable(rows: readonly Record<string, unknown>[], columns: readonly string[]): string {
  const cells = [
    columns,
    ...rows.map((row) =>
      columns.map((column) => (row[column] === undefined || row[column] === null ? '' : String(row[column]))),
    ),
  ];
  const widths = columns.map((_, index) => Math.max(...cells.map((line) => line[index]!.length)));
  return `${cells
    .map((line) =>
      line
        .map((cell, index) => cell.padEnd(widths[index]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
