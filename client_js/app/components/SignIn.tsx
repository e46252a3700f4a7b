import { useStore } from "@nanostores/preact";
import { useState } from "preact/hooks";
import { $signInError, signIn } from "../stores/auth";

/** Signing in by pasting a token. (A device sign-in link, /link#code, is asked about in LinkPrompt instead.) */
export function SignIn() {
  const error = useStore($signInError);
  const [token, setToken] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <main class="sign-in">
      <h1>chatsync</h1>
      <form onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        await signIn(token);
        setBusy(false);
      }}>
        <label for="token">Access token</label>
        <input id="token" type="text" autoComplete="off" spellcheck={false} value={token}
               aria-describedby="token-help" onInput={(e) => setToken(e.currentTarget.value)} />
        <button type="submit" class="primary" disabled={busy}>Sign in</button>
        <p id="token-help" class="hint">
          Paste a token from <code>chatsync users create</code>, or open a sign-in link made on a device that is
          already signed in (Devices → Link a device).
        </p>
        {error && <p class="error" role="alert">{error}</p>}
      </form>
    </main>
  );
}
