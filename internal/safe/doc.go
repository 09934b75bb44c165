// Package safe holds the small guards every holdfast package needs at its
// edges: Printable, the rule of names (valid UTF-8, no control character);
// IsNil, which tells a nil interface from one holding a nil pointer (a
// (*redis.Client)(nil) passed as a redis.UniversalClient, a nil
// *pgxpool.Pool as a DB), so that constructors refuse it instead of
// panicking at the first call; and JoinCtx, which joins a context's error
// to an error returned after the context ended, so that callers match
// both with errors.Is.
package safe
