// Imported first by the CLI: libuv sizes its worker pool on first use, and native engine calls share it with
// fs and dns work, so give it room for a few concurrent inferences unless the user chose a size.
import os from 'node:os';

process.env.UV_THREADPOOL_SIZE ??= String(Math.max(8, os.availableParallelism() * 2));
