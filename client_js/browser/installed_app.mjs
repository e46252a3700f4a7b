// Opens the web app as served by an installed chatsync package (tests/test_package.py): the page renders its
// sign-in form, a person signs in with the owner's token, and the app connects. Prints one JSON line.
//
//   CHATSYNC_URL=http://127.0.0.1:PORT CHATSYNC_TOKEN=... node browser/installed_app.mjs
import { device, launch } from "./app_helpers.mjs";

const url = process.env.CHATSYNC_URL;
const token = process.env.CHATSYNC_TOKEN;

const browser = await launch();
try {
  const { page, problems } = await device(browser, url);
  await page.goto("/");
  const field = page.getByRole("textbox", { name: "Access token" });
  await field.waitFor();
  const heading = await page.getByRole("heading", { level: 1 }).textContent();
  await field.fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  const connection = page.getByRole("status", { name: "Connection" }).getByText(/^(connected|resumed)$/);
  await connection.waitFor();
  console.log(JSON.stringify({ heading, connection: await connection.textContent(), problems }));
} finally {
  await browser.close();
}
