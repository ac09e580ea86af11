/**
 * The multipart form of the routes that take an audio file (transcriptions, translations, separations). Its body is
 * admitted by the upload budget before it is read (services/audio/upload-budget.ts), and the file's bytes go to the
 * upload alone: the decoder takes them from there, so no request keeps them once they are decoded.
 */
import type { z } from 'zod';
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import type { MultipartLimits } from '../http/multipart.js';
import type { HttpRequest } from '../http/request.js';
import { validate } from '../http/validate.js';
import type { Upload } from '../services/audio/upload-budget.js';

/**
 * The form's fields, validated by `schema`; its `file` (required, not empty) is held by `upload`. `largeFields`: fields
 * that may carry more than the usual 64 KiB (clips as data URLs).
 */
export async function readAudioForm<S extends z.ZodType>(
  req: HttpRequest,
  config: Config,
  upload: Upload,
  schema: S,
  largeFields?: MultipartLimits['largeFields'],
): Promise<z.output<S>> {
  const form = await req.multipart({ maxFileBytes: config.maxUploadMb * 1024 * 1024, admit: upload.admit, largeFields });
  const fields = validate(schema, form.fields);
  const file = form.files.file;
  if (!file) throw new ApiError('invalid_request', "Missing required parameter: 'file'", { param: 'file' });
  if (file.data.length === 0) throw new ApiError('invalid_audio', 'the uploaded file is empty', { param: 'file' });
  upload.hold(file.data);
  return fields;
}
