// Package schedhttp serves a scheduler's operators over HTTP: a JSON API
// (list the jobs with their ledger status, read a job's runs across its
// partitions and one slot's attempts, retry a slot, trigger or backfill
// runs, pause and resume a job, list the leases) and a web console over
// that API (New). The API is built on the Scheduler's exported
// operations alone (scheduler.Scheduler.Jobs, JobStatus, Runs, Record,
// Retry, Trigger, Backfill, Pause, Resume) and, for the leases, a
// leasedriver.Inspector, so everything it does a service can do in its own
// handler. Its bodies are the exported types of wire.go (JobJSON, RunJSON,
// ...), which clients decode; GET /openapi.json describes it (OpenAPI
// 3.1).
//
// Every API request goes through Options.Authorizer, which sees the Action
// and the job; without one every API request is refused (403). An
// Authorizer that returns ErrUnauthenticated (no token, or one it does not
// accept) gets a 401 with "WWW-Authenticate: Bearer" (RFC 6750), any other
// error a 403. Actions (the POST routes) are refused before the
// Authorizer when they come from another origin (403: Sec-Fetch-Site or
// Origin, net/http's CrossOriginProtection; Options.TrustedOrigins adds
// origins) or lack "Content-Type: application/json" (415), so that an
// Authorizer that reads a session cookie cannot be driven by a page on
// another site. Answers
// are JSON, errors application/problem+json (RFC 9457) that never carry
// the authorizer's reason or a backend's error text: those go to
// Options.Logger. A problem's type names it (ProblemBase +
// "invalid-request", "unknown-job", "body-too-large", ...: the list is at
// ProblemBase), a 400 about one field of the body or the query names it in
// the problem's "field" member (an unknown member, a value of the wrong
// type, a member given twice: RFC 7493 §2.3), a body over Options.MaxBodyBytes is a 413
// whatever its Content-Type, and a detail quotes at most 64 bytes of any
// input it repeats.
//
// # Console
//
// GET / serves one embedded page (with its script and style under
// /console/, no build step) that asks for a bearer token once, keeps it in
// the tab's sessionStorage and sends it as "Authorization: Bearer" on
// every API call, refreshing every 3 s. It shows the jobs (next fire, last
// success, lag, paused), a grid of each job's 30 newest slots (rows =
// partitions, columns = slots, coloured by status, an empty cell where a
// partition has no record of a slot), a slot's attempts on click, and the
// held leases; its retry, trigger, pause and resume buttons ask confirm()
// and call the API (same-origin fetches with an application/json body,
// {} for pause and resume). The static files carry no data and are served
// without the Authorizer, with a Content-Security-Policy that allows only
// the page's own script and style and forbids framing.
//
// # Pages of runs
//
// GET /jobs/{job}/runs answers at most limit runs (default 100, at most
// 1000), newest slot first, then by partition name; next_cursor, when
// present, gives the next page (pass it as cursor with the same other
// parameters). A status filter reads through the ledger until the page is
// full or the range is exhausted: bound old ranges with from. Without
// partition it lists every partition of the job. GET
// /jobs/{job}/runs/{slot} names one record, so on a job with partitions it
// requires partition (absent: 400 "partition is required for a partitioned
// job"); partition= (present, empty) names the default partition. Retry,
// trigger and backfill of a job with partitions answer the same 400 when
// the body names no partition (404 is for a partition the job does not
// have).
package schedhttp
