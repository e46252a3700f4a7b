import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import {
  $devices, $link, $links, createLink, renameDevice, revokeDevice, revokeLink, watchDevices,
} from "../stores/devices";
import { act } from "../stores/call";
import type { Device, PendingLink } from "../lib/chatsync";
import { NotificationSettings } from "./NotificationSettings";
import { ConfirmButton } from "./ConfirmButton";
import { QrCode } from "./QrCode";

const when = (ms: number | null) => (ms ? new Date(ms).toLocaleString() : "never");
const time = (ms: number) => new Date(ms).toLocaleTimeString();

function DeviceItem({ d }: { d: Device }) {
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(d.name);
  return (
    <li class="device">
      {renaming ? (
        <form onSubmit={(e) => {
          e.preventDefault();
          setRenaming(false);
          void act("Renaming the device", () => renameDevice(d.id, name.trim()));
        }}>
          <input aria-label="Device name" value={name} autoFocus onInput={(e) => setName(e.currentTarget.value)} />
          <button type="submit">Save</button>
        </form>
      ) : (
        <span class="device-name">{d.name}{d.current ? " (this device)" : ""}</span>
      )}
      <span class="device-meta">last used {when(d.lastUsedAt)}</span>
      {!renaming && <button type="button" onClick={() => { setName(d.name); setRenaming(true); }}>Rename</button>}
      <ConfirmButton label="Revoke" question={`Sign “${d.name}” out for good?`} confirm="Yes, revoke"
                     onConfirm={() => void act("Revoking", () => revokeDevice(d.id))} />
    </li>
  );
}

function LinkItem({ l }: { l: PendingLink }) {
  const maker = l.madeBy ? `${l.madeBy.name || "a device"}${l.madeBy.current ? " (this device)" : ""}`
    : "the server (chatsync link)";
  return (
    <li class="device">
      <span class="device-name">{l.deviceName ? `For “${l.deviceName}”` : "For a new device"}</span>
      <span class="device-meta">made {when(l.createdAt)} on {maker}, valid until {time(l.expiresAt)}</span>
      <button type="button" class="danger" onClick={() => act("Revoking the link", () => revokeLink(l.id))}>
        Revoke link
      </button>
    </li>
  );
}

function LinkMaker() {
  const link = useStore($link);
  const [name, setName] = useState("");
  return (
    <section aria-labelledby="link-heading">
      <h2 id="link-heading">Link a device</h2>
      <p class="hint">Makes a sign-in link valid for 10 minutes, usable once: scan its QR code with the other
        device's camera, or open the link there.</p>
      <form class="link-form" onSubmit={(e) => {
        e.preventDefault();
        void act("Making a link", () => createLink(name)).then(() => setName(""));
      }}>
        <label>Device name
          <input value={name} maxLength={200} placeholder="e.g. Phone" onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary">Link a device</button>
      </form>
      {link && (
        <div class="link-out">
          <QrCode text={link.url} label={`QR code of the sign-in link${link.deviceName ? ` for ${link.deviceName}` : ""}`} />
          <p>
            <label>Sign-in link <input readOnly value={link.url} onFocus={(e) => e.currentTarget.select()} /></label>
            <button type="button" onClick={() => navigator.clipboard?.writeText(link.url)}>Copy</button>
          </p>
          <p class="hint">
            {link.deviceName ? `Signs in “${link.deviceName}”. ` : ""}Valid until {time(link.expiresAt)}.
          </p>
        </div>
      )}
    </section>
  );
}

/** The devices signed in as this user: rename, revoke, and one-time links that sign in another one (the
 * pending ones listed, whichever device made them, each revocable). Live while open. */
export function Devices() {
  const devices = useStore($devices);
  const links = useStore($links);
  useEffect(() => watchDevices(), []);
  return (
    <section class="devices" aria-labelledby="devices-heading">
      <h1 id="devices-heading">Devices</h1>
      {devices === null ? <p>Loading…</p> : (
        <ul class="device-list" aria-label="Signed-in devices">
          {devices.map((d) => <DeviceItem key={d.id} d={d} />)}
        </ul>
      )}
      <LinkMaker />
      {links && links.length > 0 && (
        <>
          <h2>Links waiting to be used</h2>
          <p class="hint">Anyone who opens one of these signs in as you. Revoke those you did not mean to share.</p>
          <ul class="device-list" aria-label="Pending sign-in links">
            {links.map((l) => <LinkItem key={l.id} l={l} />)}
          </ul>
        </>
      )}
      <NotificationSettings />
    </section>
  );
}
