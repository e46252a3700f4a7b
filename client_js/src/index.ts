/**
 * chatsync's TypeScript client: `createChatsyncClient({url, token})`, then `openSession(id)` for stores and
 * actions of one session and `watchSessions()` for the live list. See client_js/README.md.
 */
export { createChatsyncClient, type ChatsyncClient } from "./client.js";
export { createConnection, type Connection, type ConnectionState } from "./connection.js";
export * from "./closeCodes.js";
export * from "./options.js";
export {
  FileRequestError,
  attachmentOf,
  createFiles,
  fileAttachments,
  filesEndpoint,
  formatSize,
  shownAttachments,
  wireAttachments,
  type AttachmentInput,
  type FileAttachmentInfo,
  type FileRequestOptions,
  type Files,
  type FilesOptions,
  type UploadedFile,
} from "./files.js";
export {
  ConnectionClosedError,
  WRITE_PATHS,
  createRequests,
  errorCode,
  isNoAnswer,
  newClientRequestId,
  type InputOf,
  type MutationPath,
  type OutputOf,
  type QueryPath,
  type Requests,
  type WriteInput,
  type WritePath,
} from "./requests.js";
export { createTranscripts, sessionsEndpoint, type ExportFormat, type Transcripts } from "./transcripts.js";
export { openSession, type OpenSession, type SessionSettings } from "./stores/session.js";
export { followSession, type EventListener, type FollowOptions, type FollowStatus, type SessionFollower } from "./stores/follow.js";
export {
  messageActions, messagesStore, type EditOptions, type MessageActions, type RegenerateOptions, type SendOptions,
} from "./stores/messages.js";
export { queueActions, queueStore, type QueueActions, type SendNowMode } from "./stores/queue.js";
export { decisionsStore, previewsStore, runActions, runStore, type RunActions } from "./stores/run.js";
export { watchSessions, type SessionList, type SessionListOptions, type SessionListStatus } from "./stores/sessions.js";
export * from "./reducers/messages.js";
export * from "./reducers/queue.js";
export * from "./reducers/run.js";
export * from "./reducers/previews.js";
export * from "./reducers/session.js";
export * from "./reducers/sessions.js";
export { assemble, cpLength, cpSliceFrom } from "./reducers/text.js";
// The generated types, the event type lists and the close codes.
export * from "./router.gen.js";
