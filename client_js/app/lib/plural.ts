/** "1 message", "2 messages": a count with its noun in the right number (`many` for irregular plurals). */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
