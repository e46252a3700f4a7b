import { useEffect, useState } from "preact/hooks";
import { fileAttachments, formatSize, type FileAttachmentInfo } from "../lib/chatsync";
import { fileBlob, saveFile } from "../stores/files";
import { act } from "../stores/call";
import { ImagePreview } from "./ImagePreview";
import { plural } from "../lib/plural";

/** An image attachment, fetched with the token and shown from a blob: URL this view revokes when it goes; a
 * click shows it at full size (ImagePreview). */
function Thumbnail({ file }: { file: FileAttachmentInfo }) {
  const [url, setUrl] = useState<string | null>(null);
  const [failed, setFailed] = useState(false);
  const [preview, setPreview] = useState(false);
  useEffect(() => {
    let made: string | null = null;
    let gone = false;
    fileBlob(file.fileId).then((blob) => {
      if (gone) return;
      made = URL.createObjectURL(blob);
      setUrl(made);
    }, () => { if (!gone) setFailed(true); });
    return () => {
      gone = true;
      if (made) URL.revokeObjectURL(made);
    };
  }, [file.fileId]);
  if (failed) return <FileChip file={file} />;
  return (
    <>
      <button type="button" class="thumb" title={`${file.name} (${formatSize(file.size)})`} aria-haspopup="dialog"
              disabled={!url} onClick={() => setPreview(true)}>
        {url ? <img src={url} alt={file.name} data-file-id={file.fileId} />
             : <span class="thumb-loading">{file.name}</span>}
      </button>
      {preview && url && <ImagePreview file={file} url={url} onClose={() => setPreview(false)} />}
    </>
  );
}

/** Any other file: its name and size; a click saves it. */
function FileChip({ file }: { file: FileAttachmentInfo }) {
  return (
    <button type="button" class="file-chip" data-file-id={file.fileId}
            onClick={() => act("Saving", () => saveFile(file.fileId, file.name))}>
      <span class="file-chip-name">{file.name}</span> <span class="file-chip-size">{formatSize(file.size)}</span>
    </button>
  );
}

/** The files a message carries: images as thumbnails, the rest as chips that save the file. */
export function MessageAttachments({ list }: { list: readonly Record<string, unknown>[] }) {
  const files = fileAttachments(list);
  if (!files.length) return null;
  return (
    <ul class="attachments" aria-label="Attached files">
      {files.map((f) => (
        <li key={f.fileId}>{f.mediaType.startsWith("image/") ? <Thumbnail file={f} /> : <FileChip file={f} />}</li>
      ))}
    </ul>
  );
}

/** "1 attachment", "3 attachments". */
export function attachmentCount(n: number): string {
  return plural(n, "attachment");
}
