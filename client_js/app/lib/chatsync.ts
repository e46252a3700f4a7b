// The one place the app imports the client library (client_js/src): the connection, writes with
// clientRequestId and retries, the live session list and open sessions all come from it.
import type { Session } from "../../src/index";

export {
  createChatsyncClient, errorCode, FileRequestError, fileAttachments, formatSize, newClientRequestId, TOKEN_REVOKED,
  type ChatsyncClient, type ConnectionState, type OpenSession, type SessionList, type SessionListItem,
  type Message, type QueueItem, type RunView, type Session, type Device, type PendingLink, type Decision,
  type ToolCallPreview, type ToolOutcome, type ProviderInfo, type ToolDefinitionInfo, type SessionSettings,
  type ToolDefinition,
  type SessionEvent, type AttachmentInput, type FileAttachmentInfo, type UploadedFile,
} from "../../src/index";

export type BusyPolicy = Session["busyPolicy"];

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
