// Files the CLI reads on the user's behalf (--file, --mask): '-' is standard input, and a file that
// cannot be read is named with the flag that named it, as psql names its -f file, not as Node's errno.

import { readFileSync } from 'node:fs';
import { PgxError } from '../errors.js';

/** What a user reads for the errors a path they typed can give. */
const WHY: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
};

/** The bytes of `file` ('-': standard input), read for `flag`; `hint` says what the flag wants. */
export function readInputFile(flag: string, file: string, hint: string): Buffer {
  try {
    return readFileSync(file === '-' ? 0 : file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    throw new PgxError('INVALID_PARAMETER', `cannot read ${flag} ${file}: ${WHY[code] ?? (err as Error).message}`, { hint, cause: err });
  }
}

/** The name the user knows `file` by. */
export function inputName(file: string): string {
  return file === '-' ? 'standard input' : file;
}
