// highlight.js ships no types for its per-language modules (only for the core and the whole library).
declare module "highlight.js/lib/languages/*" {
  import type { LanguageFn } from "highlight.js";
  const language: LanguageFn;
  export default language;
}
