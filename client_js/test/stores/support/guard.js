// The store tests run against the compiled library (client_js/dist/lib, built by tests/test_client_stores_js.py,
// which sets CHATSYNC_STORE_TESTS=1). The conformance suite's `node --test test/` also finds these files; there,
// without a build, they are reported as skipped rather than failing on a missing dist/.
export const STORE_TESTS = process.env.CHATSYNC_STORE_TESTS === '1';
export const skipReason = STORE_TESTS ? false : 'store tests run through tests/test_client_stores_js.py (needs the tsc build)';
export const lib = STORE_TESTS ? await import('../../../dist/lib/index.js') : {};
