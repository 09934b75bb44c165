// Package compat holds the tests of holdfast's stored formats
// (docs/compatibility.md); it has no code of its own.
//
//   - format_test.go: every store writes its format marker on first use and
//     refuses another one (fence.ErrUnknownFormat) before it reads or writes
//     anything else.
//   - golden_test.go: the state each store writes for a fixed workload is
//     kept in testdata (redis_format1.json, postgres_format1.json). The
//     layout of today's state must match it (a change of layout fails until
//     the fixture is written again with -update, which the review sees, and
//     the format version is raised if old builds cannot read it), and the
//     current code must operate on the fixture's state: stale tokens in it
//     are refused, its records read back, its counters only grow.
//   - sidebyside_test.go: a build of an earlier commit and this build share
//     one Redis and one PostgreSQL, both take the same lease and write
//     through redisfence and pgfence, and a stale write from either is
//     refused.
package compat
