import { acceptLink, dismissLink, type Current, type LinkPrompt as Prompt } from "../stores/link";

const stayLabel = (current: Current) => (current?.name ? `Stay signed in as ${current.name}` : "Stay signed in");

/** A device sign-in link opened here: names the account it signs in to and asks before spending it. */
export function LinkPrompt({ prompt }: { prompt: Prompt }) {
  if (prompt.step === "checking" || prompt.step === "signing-in") {
    return (
      <main class="sign-in" aria-busy="true">
        <p role="status">{prompt.step === "checking" ? "Checking the sign-in link…" : `Signing in as ${prompt.account}…`}</p>
      </main>
    );
  }
  if (prompt.step === "already") {
    return (
      <main class="sign-in" aria-labelledby="link-heading">
        <h1 id="link-heading">Already signed in</h1>
        <p>
          This browser is already signed in as <strong>{prompt.account}</strong>, the account this link is for. The
          link was not used: it can still sign in another device until {new Date(prompt.expiresAt).toLocaleTimeString()}.
        </p>
        <button type="button" class="primary" autoFocus onClick={dismissLink}>Continue</button>
      </main>
    );
  }
  if (prompt.step === "failed") {
    return (
      <main class="sign-in" aria-labelledby="link-heading">
        <h1 id="link-heading">Sign-in link not used</h1>
        <p role="alert" class="error">{prompt.message}</p>
        <button type="button" class="primary" autoFocus onClick={dismissLink}>{prompt.current?.name ? `Continue as ${prompt.current.name}` : "Continue"}</button>
      </main>
    );
  }
  const { account, deviceName, current } = prompt;
  return (
    <main class="sign-in link-prompt" aria-labelledby="link-heading" aria-describedby="link-what">
      <h1 id="link-heading">{current ? "Switch account?" : "Sign in with a link"}</h1>
      <p id="link-what">
        This link signs this browser in to the account <strong>{account}</strong>
        {deviceName ? <> as the device “{deviceName}”</> : null}.
        {current
          ? <> This browser is signed in as <strong>{current.name ?? "another account"}</strong> now; after switching,
              everything you type here goes to {account}.</>
          : <> Continue only if you meant to sign in as {account}.</>}
      </p>
      <p class="hint">Use links only from a device of your own. A link someone else sent you signs you in to their account.</p>
      <div class="link-choices">
        <button type="button" class="primary" onClick={() => void acceptLink()}>Sign in as {account}</button>
        <button type="button" autoFocus onClick={dismissLink}>{current ? stayLabel(current) : "Cancel"}</button>
      </div>
    </main>
  );
}
