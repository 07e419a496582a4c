import type { IncomingMessage, ServerResponse } from 'node:http';

// The AWS JSON 1.1 protocol, as far as the local stand-ins for Secrets Manager and KMS speak it.

/** A request's JSON body as an object; anything else reads as an empty one. */
export async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Answer with a JSON payload: a result, or an error whose `__type` the SDK turns into its exception. */
export function answerJson(response: ServerResponse, status: number, payload: object): void {
  response.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
  response.end(JSON.stringify(payload));
}
