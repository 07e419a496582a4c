/** Collects what is written to stdout and stderr while `run` runs, without passing it on. */
export async function capturingOutput<T>(run: () => Promise<T>): Promise<{ result: T; output: string }> {
  const chunks: string[] = [];
  const capture = (chunk: unknown): boolean => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
    return true;
  };
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation(capture as typeof process.stdout.write);
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(capture as typeof process.stderr.write);
  try {
    return { result: await run(), output: chunks.join('') };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
}
