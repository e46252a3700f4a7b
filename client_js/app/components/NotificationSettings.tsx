import { useEffect, useState } from "preact/hooks";
import type { PushEvent } from "../../src/router.gen";
import { act } from "../stores/call";
import { currentPush, disablePush, enablePush, PUSH_EVENTS, pushSupported } from "../pwa";

/** Notifications on this device: on or off, and for which events (sent only when no device has the chat open). */
export function NotificationSettings() {
  const [events, setEvents] = useState<PushEvent[] | null>(null);
  const [checked, setChecked] = useState<PushEvent[]>(PUSH_EVENTS.map((e) => e.event));
  const refresh = () => currentPush().then((s) => { setEvents(s ? s.events : null); if (s) setChecked(s.events); });
  useEffect(() => { void refresh().catch(() => {}); }, []);
  if (!pushSupported()) {
    return <section aria-label="Notifications"><h2>Notifications</h2><p>This browser cannot show notifications.</p></section>;
  }
  const toggle = (event: PushEvent, on: boolean) => {
    const next = on ? [...checked, event] : checked.filter((e) => e !== event);
    setChecked(next);
    if (events) void act("Changing notifications", () => enablePush(next).then(refresh));
  };
  return (
    <section aria-label="Notifications">
      <h2>Notifications</h2>
      <p>{events ? "On for this device" : "Off for this device"}: sent when no device of yours has the chat open.</p>
      <fieldset>
        <legend>Notify me when</legend>
        {PUSH_EVENTS.map(({ event, label }) => (
          <label key={event}>
            <input type="checkbox" checked={checked.includes(event)}
                   onChange={(e) => toggle(event, e.currentTarget.checked)} /> {label}
          </label>
        ))}
      </fieldset>
      {events
        ? <button type="button" onClick={() => act("Turning notifications off", () => disablePush().then(refresh))}>
            Turn off notifications</button>
        : <button type="button" onClick={() => act("Turning notifications on", () => enablePush(checked).then(refresh))}>
            Turn on notifications</button>}
    </section>
  );
}
