import { useStore } from "@nanostores/preact";
import { useEffect, useState } from "preact/hooks";
import { $devices, $link, createLink, loadDevices, renameDevice, revokeDevice } from "../stores/devices";
import { act } from "../stores/call";
import type { Device } from "../lib/chatsync";

const when = (ms: number | null) => (ms ? new Date(ms).toLocaleString() : "never");

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
      <button type="button" class="danger" onClick={() => act("Revoking", () => revokeDevice(d.id))}>Revoke</button>
    </li>
  );
}

/** The devices signed in as this user: rename, revoke, and a one-time link that signs in another one. */
export function Devices() {
  const devices = useStore($devices);
  const link = useStore($link);
  useEffect(() => { void act("Loading devices", loadDevices); }, []);
  return (
    <section class="devices" aria-labelledby="devices-heading">
      <h1 id="devices-heading">Devices</h1>
      {devices === null ? <p>Loading…</p> : (
        <ul class="device-list" aria-label="Signed-in devices">
          {devices.map((d) => <DeviceItem key={d.id} d={d} />)}
        </ul>
      )}
      <h2>Link a device</h2>
      <p class="hint">Makes a sign-in link valid for 10 minutes, usable once. Open it on the other device.</p>
      <button type="button" class="primary" onClick={() => act("Making a link", () => createLink())}>Link a device</button>
      {link && (
        <p class="link-out">
          <label>Sign-in link <input readOnly value={link.url} onFocus={(e) => e.currentTarget.select()} /></label>
          <button type="button" onClick={() => navigator.clipboard?.writeText(link.url)}>Copy</button>
          <span class="hint">valid until {new Date(link.expiresAt).toLocaleTimeString()}</span>
        </p>
      )}
    </section>
  );
}
