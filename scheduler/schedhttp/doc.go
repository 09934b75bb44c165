// Package schedhttp serves a scheduler's operator actions over HTTP: list
// the jobs, read a job's runs, retry a slot, trigger or backfill runs,
// pause and resume a job (New). It is built on the Scheduler's exported
// operations alone (scheduler.Scheduler.Jobs, Runs, Retry, Trigger,
// Backfill, Pause, Resume), so everything it does a service can do in its
// own handler.
//
// Every request goes through Options.Authorizer, which sees the Action and
// the job; without one every request is refused (403). Answers are JSON,
// errors application/problem+json (RFC 9457) that never carry the
// authorizer's reason or a backend's error text: those go to
// Options.Logger.
package schedhttp
