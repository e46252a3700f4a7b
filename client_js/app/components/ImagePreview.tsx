import { useEffect, useRef } from "preact/hooks";
import { formatSize, type FileAttachmentInfo } from "../lib/chatsync";
import { saveFile } from "../stores/files";
import { act } from "../stores/call";
import "../preview.css";

/**
 * An image attachment at full size in a modal dialog (the browser's own `<dialog>`: focus stays inside, Esc
 * closes it, focus returns to the thumbnail). `url` is the thumbnail's blob: URL — the same bytes.
 */
export function ImagePreview({ file, url, onClose }: { file: FileAttachmentInfo; url: string; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog ref={dialog} class="image-preview" aria-label={file.name} onClose={onClose}
            onClick={(e) => { if (e.target === dialog.current) dialog.current?.close(); }}>
      <img src={url} alt={file.name} />
      <div class="image-preview-bar">
        <span class="image-preview-name">{file.name} · {formatSize(file.size)}</span>
        <button type="button" onClick={() => act("Saving", () => saveFile(file.fileId, file.name))}>Save</button>
        <button type="button" autoFocus onClick={() => dialog.current?.close()}>Close</button>
      </div>
    </dialog>
  );
}
