// Package redact masks secrets in text that leaves the process: the error
// of a failed job (stored in the ledger, shown by the admin API, the
// console and the CLI, logged as job_run_finished) and the command line's
// own messages. It is the one default redactor of holdfast
// (scheduler.DefaultRedact exports it).
//
// String masks, case-insensitively:
//
//   - the password of a URL's userinfo, any scheme:
//     postgres://user:s3cret@db/x becomes postgres://user:***@db/x, and
//     redis://:s3cret@cache:6379 becomes redis://:***@cache:6379;
//   - the value of a key that names a secret (a key holding password,
//     passwd, pwd, secret, token, api_key or apikey, access_key,
//     private_key, credential, authorization), in the forms k=v, k: v,
//     "k":"v" and 'k': 'v' (a quoted value keeps its quotes):
//     password=s3cret, X-Api-Key: abc, {"client_secret":"abc"};
//   - a bearer or basic credential of 8 characters or more: "Bearer
//     abcdef.123" becomes "Bearer ***".
//
// It is a best effort over free text, not a parser: a secret in a form it
// does not know (a bare word, a custom header name) passes through, and
// text that only looks like a key-value pair ("token: 42") is masked too.
// Masking is idempotent: String(String(s)) == String(s).
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "***"

var (
	// userinfo: scheme "://" user ":" password "@". The password runs to
	// the last '@' before the path, query, fragment or white space, so a
	// password holding an unescaped '@' is masked whole.
	userinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/?#@]*):[^\s/?#]*@`)
	// pair: an optional quote (or a quote escaped by a backslash, as in
	// JSON inside a JSON string), a key naming a secret, the quote, a
	// separator ('=' or ':'), then the value: a quoted string, an escaped
	// quoted string, a scheme and a credential (Authorization: Bearer x),
	// or a bare word.
	pair = regexp.MustCompile(`(?i)((?:\\?["'])?)([a-z0-9_.\-]*(?:` + secretKeys + `)[a-z0-9_.\-]*)((?:\\?["'])?)(\s*[=:]\s*)(` +
		`\\"[^"]*\\"|"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|(?:bearer|basic)\s+` + word + `|` + word + `)`)
	// scheme: a credential of at least 8 characters after Bearer (any
	// case) or Basic (capitalized: "basic" is a common word).
	scheme = regexp.MustCompile(`\b((?i:bearer)|Basic)\s+[A-Za-z0-9\-._~+/]{8,}=*`)
)

// word is a bare value: up to white space, one of ,;&"'<>)]} or a
// backslash before a quote (the end of an escaped JSON string).
const word = `(?:[^\s\\,;&"'<>)\]}]|\\[^"'])+`

// secretKeys are the words that make a key name a secret.
const secretKeys = `password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential|authorization`

// String returns s with the secrets it recognizes replaced by Mask (see
// the package documentation). Text without one is returned as it is.
func String(s string) string {
	if strings.Contains(s, "://") {
		s = userinfo.ReplaceAllString(s, "$1:"+Mask+"@")
	}
	if strings.ContainsAny(s, "=:") {
		s = maskPairs(s)
	}
	if strings.Contains(s, "Basic") || strings.Contains(strings.ToLower(s), "bearer") {
		s = scheme.ReplaceAllStringFunc(s, maskScheme)
	}
	return s
}

// maskPairs keeps each pair's quotes, key and separator and masks its
// value.
func maskPairs(s string) string {
	found := pair.FindAllStringSubmatchIndex(s, -1)
	if found == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, m := range found {
		b.WriteString(s[last:m[10]]) // up to the value (group 5)
		value := s[m[10]:m[11]]
		switch {
		case strings.HasPrefix(value, `\"`):
			b.WriteString(`\"` + Mask + `\"`)
		case strings.HasPrefix(value, `"`):
			b.WriteString(`"` + Mask + `"`)
		case strings.HasPrefix(value, `'`):
			b.WriteString(`'` + Mask + `'`)
		default:
			if f := strings.Fields(value); len(f) == 2 { // Bearer x
				b.WriteString(f[0] + " ")
			}
			b.WriteString(Mask)
		}
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskScheme masks the credential after Bearer or Basic.
func maskScheme(m string) string {
	f := strings.Fields(m)
	if len(f) != 2 {
		return m
	}
	return f[0] + " " + Mask
}
