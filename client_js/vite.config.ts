// Builds the web app (client_js/app) into server/web/dist, which chatsync serves at `/` (server/http/web.py).
// The build runs at setup time (scripts/setup.sh); its output is never committed.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  root: here("./app"),
  base: "/",
  plugins: [preact()],
  // `npx vite` (from client_js) serves the app with hot reload and passes the API to a chatsync server
  // started separately (bash scripts/serve.sh, or CHATSYNC_URL).
  server: {
    proxy: Object.fromEntries(["/trpc", "/auth"].map((path) => [path, {
      target: process.env.CHATSYNC_URL ?? "http://127.0.0.1:8787", ws: path === "/trpc", changeOrigin: true,
    }])),
  },
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
