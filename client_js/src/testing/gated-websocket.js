// A WebSocket class for the live store tests: it records every frame it sends, and a closed gate sends new
// sockets nowhere, so a test can cut a client off the server and let it back.
import WebSocketImpl from 'ws';

/** A WebSocket class that records its instances and can be kept from reaching the server (gate closed). */
export function gatedWebSocket() {
  const rec = { instances: [], sent: [], gate: { open: true }, onSend: null };
  class Gated extends WebSocketImpl {
    constructor(url, protocols) {
      super(rec.gate.open ? url : 'ws://127.0.0.1:9/closed', protocols);
      this.index = rec.instances.push(this) - 1;
    }
    send(data, ...rest) {
      rec.sent.push({ ws: this.index, data: String(data) });
      const r = super.send(data, ...rest);
      rec.onSend?.(this, String(data));
      return r;
    }
  }
  rec.WebSocket = Gated;
  rec.live = () => rec.instances.filter((w) => w.readyState === WebSocketImpl.OPEN);
  rec.frames = () => rec.sent.flatMap(({ ws, data }) => {
    try {
      const msg = JSON.parse(data);
      return (Array.isArray(msg) ? msg : [msg]).map((m) => ({ ws, msg: m }));
    } catch {
      return [];
    }
  });
  return rec;
}
