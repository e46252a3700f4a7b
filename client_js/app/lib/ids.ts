/** An id for `clientRequestId`: a retried call with the same id is applied once by the server. */
export function requestId(): string {
  return crypto.randomUUID();
}
