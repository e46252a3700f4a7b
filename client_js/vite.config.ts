// Builds the web app (client_js/app) into server/web/dist, which chatsync serves at `/` (server/web.py).
// The build runs at setup time (scripts/setup.sh); its output is never committed.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  root: here("./app"),
  base: "/",
  plugins: [preact()],
  build: {
    outDir: here("../server/web/dist"),
    emptyOutDir: true,
    // The page's Content-Security-Policy allows scripts, styles and images from 'self' only: nothing may
    // be inlined into the HTML or turned into a data: URL.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    cssCodeSplit: false,
    sourcemap: false,
    target: "es2022",
    rollupOptions: {
      output: {
        entryFileNames: "assets/[name]-[hash].js",
        chunkFileNames: "assets/[name]-[hash].js",
        assetFileNames: "assets/[name]-[hash][extname]",
      },
    },
  },
});
