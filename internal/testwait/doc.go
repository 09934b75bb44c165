// Package testwait is how holdfast's tests wait for something to happen:
// on a channel (Done), or by polling a condition with a deadline (Until,
// UntilEvery), never by a bare sleep. Poll is the form for test helpers
// that report instead of failing (a server that does not come up, with
// its log). Every test and test helper of the module waits through it,
// so that a wait's limit, its interval and its failure message read the
// same everywhere.
package testwait
