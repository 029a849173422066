/** Reading single values out of beanstalkd YAML replies (`stats`, `stats-job`, `stats-tube`). */

/** The value of `key` in a YAML reply, or null when the key is absent. */
export function yamlField(reply: string, key: string): string | null {
  const m = new RegExp(`\\n${key}: ([^\\n]*)\\n`).exec(reply);
  return m === null ? null : m[1]!;
}

/** The numeric value of `key`; throws when the key is absent. */
export function yamlNumber(reply: string, key: string): number {
  const v = yamlField(reply, key);
  if (v === null) throw new Error(`no ${key} in ${JSON.stringify(reply.slice(0, 300))}`);
  return Number(v);
}
