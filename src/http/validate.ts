/** Schema validation of request input: the first failing field becomes a 400 that names it in `param`. */
import type { z } from 'zod';
import { ApiError } from '../errors.js';

export function validate<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue || issue.path.length === 0) {
    throw new ApiError('invalid_request', `Invalid request: ${issue?.message ?? 'validation failed'}`);
  }
  const param = formatPath(issue.path);
  const message =
    issue.code === 'invalid_type' && issue.input === undefined ? `Missing required parameter: '${param}'` : `Invalid value for '${param}': ${issue.message}`;
  throw new ApiError('invalid_request', message, { param });
}

/** `['chunking_strategy', 'type']` → `chunking_strategy.type`; array indices as `[0]`. */
function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)), '');
}
