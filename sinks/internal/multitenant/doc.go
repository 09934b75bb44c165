// Package multitenant holds the end-to-end test of fence scopes (issue 11,
// part 1): three scheduler replicas run one job with three partitions, and
// every run calls one HTTP endpoint through httpfence.Transport into
// httpfence.Middleware (Redis store and fence, default Resource: the URL
// path) and writes through one pgfence guard resource. Each (job,
// partition) has its own lease and token sequence; the sinks keep one fence
// per (resource, scope), so no healthy holder is refused, while a frozen
// former holder of one partition still is. The package has no code of its
// own: see multitenant_test.go.
package multitenant
