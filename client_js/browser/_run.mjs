import { launch } from "./app_helpers.mjs";
import { scenarios } from "./app_scenarios.mjs";
const [name, paramsJson] = process.argv.slice(2);
const browser = await launch();
const t0 = Date.now();
try {
  const r = await scenarios[name]({ browser, url: process.env.U, checkpoint: async (l, d) => console.log((Date.now()-t0)/1000, "checkpoint", l, JSON.stringify(d).slice(0, 300)), ...JSON.parse(paramsJson) });
  console.log("done", JSON.stringify(r).slice(0, 2000));
} catch (e) { console.log("ERR", (Date.now()-t0)/1000, e.message.slice(0, 800)); }
await browser.close();
