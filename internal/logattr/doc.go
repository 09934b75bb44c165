// Package logattr builds the slog attributes holdfast logs in one shape
// across packages. A time.Duration is logged as its String form ("5s",
// "1.5ms"), not as slog's default, which a JSON handler prints as integer
// nanoseconds ("ttl":5000000000) that an operator must divide by hand.
package logattr
