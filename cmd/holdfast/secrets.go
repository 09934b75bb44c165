package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/holdfast-go/holdfast/internal/redact"
)

// maxTokenFileBytes bounds what --token-file reads (a token is short; a
// wrong path to a large file should not fill the memory).
const maxTokenFileBytes = 64 << 10

// resolveToken sets a.conn.token from --token-file (a path, or "-" for
// stdin) or HOLDFAST_TOKEN_FILE, so that a bearer token stays out of the
// process list and the shell history, where --token puts it. A flag wins
// over the environment; --token with --token-file, or HOLDFAST_TOKEN with
// HOLDFAST_TOKEN_FILE and neither flag, is a usage error (which one was
// meant?). The file's content is the token, surrounding white space
// (a final newline) trimmed; an empty one is refused.
func (a *app) resolveToken(tokenSet, fileSet bool) error {
	file := a.conn.tokenFile
	switch {
	case fileSet && tokenSet:
		return usagef("give --token or --token-file, not both")
	case tokenSet:
		return nil
	case !fileSet:
		file = a.getenv("HOLDFAST_TOKEN_FILE")
		if file != "" && a.conn.token != "" {
			return usagef("HOLDFAST_TOKEN and HOLDFAST_TOKEN_FILE are both set: unset one, or give --token or --token-file")
		}
	}
	if file == "" {
		return nil
	}
	var r io.Reader
	if file == "-" {
		r = a.stdin
	} else {
		f, err := os.Open(file)
		if err != nil {
			return usagef("--token-file %s: %v", file, err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxTokenFileBytes+1))
	switch {
	case err != nil:
		return usagef("--token-file %s: %v", file, err)
	case len(b) > maxTokenFileBytes:
		return usagef("--token-file %s: over %d bytes, not a token", file, maxTokenFileBytes)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return usagef("--token-file %s: empty", file)
	}
	a.conn.token = token
	return nil
}

// warnPlainToken warns on stderr when a bearer token would go over plain
// http:// to a host that is not loopback: anyone on the path reads it.
func (a *app) warnPlainToken(u *url.URL) {
	if a.conn.token == "" || u.Scheme != "http" || isLoopback(u.Hostname()) {
		return
	}
	fmt.Fprintf(a.stderr, "holdfast: warning: the bearer token goes unencrypted over plain http to %s, which is not a loopback address: use https\n", u.Host)
}

// isLoopback reports whether host is "localhost" or a loopback IP.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secretFlags are the flags whose value is a secret as a whole.
var secretFlags = map[string]bool{"token": true}

// redactArgs returns args as the command may echo them: the value of
// --token (as the next argument or after '=') masked, and every argument
// passed through the default redactor (a password in a --redis or --pg
// URL, password=... in a connection string).
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		name, _, inline := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch {
		case strings.HasPrefix(arg, "-") && secretFlags[name] && inline:
			out[i] = arg[:strings.IndexByte(arg, '=')+1] + redact.Mask
		case i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "=") && secretFlags[strings.TrimLeft(args[i-1], "-")]:
			out[i] = redact.Mask
		default:
			out[i] = redact.String(arg)
		}
	}
	return out
}

// redactText masks what the default redactor recognizes in a message the
// command prints (an error echoing a URL with its password).
func redactText(s string) string { return redact.String(s) }
