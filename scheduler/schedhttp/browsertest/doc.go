// Package browsertest drives the admin console (schedhttp) in a real
// headless Chromium with chromedp, against a live scheduler on the real
// Redis. It is a module of its own so that chromedp stays out of the
// holdfast module's dependencies; it has no code besides its test.
//
// Run it with go test in this directory (make test does). It needs
// /usr/bin/chromium (scripts/services.sh installs it) and Redis at
// REDIS_URL (default redis://127.0.0.1:6379/0); HOLDFAST_SKIP_INTEGRATION=1
// skips it. HOLDFAST_WRITE_SCREENSHOT=docs/console.png (a path relative to
// the repository root, or absolute) writes the desktop screenshot there,
// and the phone one beside it (console-phone.png).
package browsertest
