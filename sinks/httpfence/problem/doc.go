// Package problem names the RFC 9457 problem details httpfence's
// middleware answers with: the Details body, the type names (MissingKey,
// StaleToken, InFlight, ...; each with its HTTP status) and DefaultBase,
// the prefix of their type URIs (httpfence.Options.ProblemBase).
//
// A client of a fenced service rarely needs it: httpfence.Transport turns a
// stale-token refusal into a *fence.StaleTokenError (errors.As) and waits
// out an in-flight answer (httpfence.ErrInFlight, *httpfence.InFlightError).
// A client that reads the answers itself matches the type's suffix after
// the last "/" against the names here, whatever the service's base.
package problem
