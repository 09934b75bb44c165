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
//   - the password of a Go MySQL driver DSN, user:password@proto(...):
//     app:s3cret@tcp(db:3306)/x becomes app:***@tcp(db:3306)/x;
//   - the value of a key that names a secret: a key holding password,
//     passwd, passphrase, pwd, secret, token, api_key or apikey,
//     access_key, private_key, credential, authorization or signature (a
//     presigned URL's X-Amz-Signature=, X-Goog-Signature=), or a key that
//     is pass or ends in _pass, -pass or .pass (DB_PASS=, smtp.pass=), in the
//     forms k=v, k:v, k: v, "k":"v" and 'k': 'v' (a quoted value keeps
//     its quotes): password=s3cret, X-Api-Key: abc, {"client_secret":"abc"};
//   - the value of a sig or auth key in the form k=v only (an Azure SAS
//     URL's &sig=, a query's auth=): "auth: " and "sig: " start words of
//     an error message more often than a secret;
//   - a bearer or basic credential of 8 characters or more: "Bearer
//     abcdef.123" becomes "Bearer ***";
//   - the value of a Cookie or Set-Cookie header that holds a name=value
//     pair, to the end of its line or a double quote: "Cookie: session=abc;
//     theme=x" becomes "Cookie: ***";
//   - the body of a PEM private key (RSA, EC, OPENSSH, ENCRYPTED, ...),
//     from its BEGIN line to its END line or the end of the text:
//     "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE
//     KEY-----" becomes "-----BEGIN RSA PRIVATE KEY-----***-----END RSA
//     PRIVATE KEY-----" (a certificate, public, is kept).
//
// What is not a key: an unquoted key word preceded by a letter, digit,
// '_', '.' or '-' is part of a longer word ("bypass=1"), and is not
// masked.
//
// When the value is prose: after a colon and white space ("k: v"), with
// neither the key nor the value quoted, a value of 1 to 12 lower-case
// ASCII letters followed by a space or tab and another letter is taken as
// a word of a sentence and kept: "invalid token: expired at 12:00" and
// "vault: secret: not found" stay as they are; after a key that ends a
// path ("open /etc/passwd: permission denied", ".../serviceaccount/token:
// no such file") such a value is kept whatever follows it. Every other
// value after "k: " is masked: one with a digit, a capital or a symbol
// ("token: s3cret", "token: 17", "X-Api-Key: AbCdEfGh sent"), one longer
// than 12 letters, one that ends the text, the line or a clause
// ("password: hunter", "secret: abc, next"). After "k=", "k = " and "k:"
// (no space) the value is always masked ("secret/app/password=x" too). So
// a short lower-case password followed by more words ("password: hunter
// was refused") passes through.
//
// It is a best effort over free text, not a parser: a secret in a form it
// does not know (a bare word, a custom header name) passes through.
// Masking is idempotent: String(String(s)) == String(s).
package redact

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
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
	pair = regexp.MustCompile(`(?i)((?:\\?["'])?)([a-z0-9_.\-]*(?:` + secretKeys + `)[a-z0-9_.\-]*|(?:[a-z0-9_.\-]*[_.\-])?pass|sig|auth)((?:\\?["'])?)(\s*[=:]\s*)(` +
		`\\"[^"]*\\"|"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|(?:bearer|basic)\s+` + word + `|` + word + `)`)
	// scheme: a credential of at least 8 characters after Bearer (any
	// case) or Basic (capitalized: "basic" is a common word).
	scheme = regexp.MustCompile(`\b((?i:bearer)|Basic)\s+[A-Za-z0-9\-._~+/]{8,}=*`)
	// mysqlDSN: the Go MySQL driver's user ":" password "@" protocol "("
	// (tcp, unix, ...). The user starts the text or follows white space, a
	// quote, '=', '(' or ','; the password runs to the last "@proto(".
	mysqlDSN = regexp.MustCompile(`(?i)(^|[\s"'=(,])([^\s:@/"'(]*):(\S*)@([a-z][a-z0-9]*\()`)
	// cookie: a Cookie or Set-Cookie header whose value holds a name=value
	// pair; the value runs to the end of the line, a double quote or a
	// backslash (an escaped quote).
	cookie = regexp.MustCompile(`(?i)(^|[^a-z0-9_.\-])((?:set-)?cookie\s*:[ \t]*)([^\r\n"\\]*=[^\r\n"\\]*)`)
	// pemKey: a PEM private key's BEGIN line, its body (lazily, to the
	// first private key's END line, whatever its label: RE2 cannot match
	// the BEGIN's) and that END line, or the end of the text when it has
	// none (a truncated error).
	pemKey = regexp.MustCompile(`(-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----)(?s:.)*?(?:(-----END ([A-Z0-9 ]*PRIVATE KEY)-----)|$)`)
)

// word is a bare value: up to white space, one of ,;&"'<>)]} or a
// backslash before a quote (the end of an escaped JSON string).
const word = `(?:[^\s\\,;&"'<>)\]}]|\\[^"'])+`

// secretKeys are the words that make a key name a secret.
const secretKeys = `password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential|authorization|signature`

// String returns s with the secrets it recognizes replaced by Mask (see
// the package documentation). Text without one is returned as it is.
func String(s string) string {
	if strings.Contains(s, "PRIVATE KEY-----") {
		s = pemKey.ReplaceAllString(s, "$1"+Mask+"$3")
	}
	if strings.Contains(s, "://") {
		s = userinfo.ReplaceAllString(s, "$1:"+Mask+"@")
	}
	if strings.Contains(s, "@") {
		s = mysqlDSN.ReplaceAllStringFunc(s, maskDSN)
	}
	if strings.Contains(strings.ToLower(s), "cookie") {
		s = cookie.ReplaceAllString(s, "$1$2"+Mask)
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
// value, unless the key is not one (it ends a path or a longer word) or
// the value is prose (see the package documentation).
func maskPairs(s string) string {
	var b strings.Builder
	last, from := 0, 0
	for from < len(s) {
		m := pair.FindStringSubmatchIndex(s[from:])
		if m == nil {
			break
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += from
			}
		}
		value := s[m[10]:m[11]]
		sep := s[m[8]:m[9]]
		openQuote := m[3] > m[2]
		quoted := openQuote || m[7] > m[6]
		// A key opened by a quote is one, whatever precedes the quote.
		// Past a pair not taken, the scan goes on after its value: a
		// rescan inside it would cost time quadratic in its length.
		if !openQuote && !isKey(s, m[0]) || !quoted && isProse(s, m[0], sep, value, m[11]) || shortKeyWithColon(s[m[4]:m[5]], sep) {
			from = m[1]
			continue
		}
		if b.Cap() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:m[10]]) // up to the value (group 5)
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
		last, from = m[1], m[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isKey reports whether the pair found at start is a key: not the end of
// a longer word (a letter, digit, '_', '.' or '-' before it).
func isKey(s string, start int) bool {
	if start == 0 {
		return true
	}
	c := s[start-1]
	return c != '_' && c != '.' && c != '-' &&
		!('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
}

// shortKeyWithColon reports whether key is sig or auth, keys only in the
// form k=v (a query's sig=, auth=): "auth: ..." and "sig: ..." are left to
// the rest of the text's rules, as words of an error message.
func shortKeyWithColon(key, sep string) bool {
	return strings.Contains(sep, ":") && (strings.EqualFold(key, "sig") || strings.EqualFold(key, "auth"))
}

// maxProse is the longest value isProse takes for a word of a sentence.
const maxProse = 12

// isProse reports whether an unquoted value after "k: " (a colon and white
// space) is a word of a sentence rather than a secret: 1 to maxProse
// lower-case ASCII letters, followed by a space or a tab and a letter, or,
// when the key ends a path ('/' before it, "open /etc/passwd: denied;"),
// by anything.
func isProse(s string, start int, sep, value string, end int) bool {
	if !strings.Contains(sep, ":") || !strings.ContainsAny(sep[len(sep)-1:], " \t") {
		return false
	}
	if len(value) == 0 || len(value) > maxProse {
		return false
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	if start > 0 && s[start-1] == '/' {
		return true
	}
	if end+1 >= len(s) || s[end] != ' ' && s[end] != '\t' {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[end+1:])
	return unicode.IsLetter(r)
}

// maskDSN masks the password of a MySQL DSN, unless the match is part of
// a URL (the userinfo rule's).
func maskDSN(m string) string {
	if strings.Contains(m, "://") {
		return m
	}
	sub := mysqlDSN.FindStringSubmatch(m)
	return sub[1] + sub[2] + ":" + Mask + "@" + sub[4]
}

// maskScheme masks the credential after Bearer or Basic.
func maskScheme(m string) string {
	f := strings.Fields(m)
	if len(f) != 2 {
		return m
	}
	return f[0] + " " + Mask
}
