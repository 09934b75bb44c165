package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// Issue 32, 5: a usage error echoed the command line, a password in a
// --redis URL and a --token with it.
func TestUsageErrorsMaskSecretsOfTheCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"GroupEchoesItsArgs", []string{"lease", "--redis", "redis://u:pw0rd1@127.0.0.1:1/0", "--token", "tok3n1"},
			`["--redis" "redis://u:***@127.0.0.1:1/0" "--token" "***"]`},
		{"GroupEchoesInlineToken", []string{"fence", "--token=tok3n1", "--pg", "postgres://u:pw0rd1@127.0.0.1:1/x"},
			`["--token=***" "--pg" "postgres://u:***@127.0.0.1:1/x"]`},
		{"GroupEchoesRedisWithoutUser", []string{"fence", "--redis", "redis://:pw0rd1@127.0.0.1:1"}, `"redis://:***@127.0.0.1:1"`},
		{"PositionalArguments", []string{"job", "ls", "redis://:pw0rd1@127.0.0.1:1", "password=pw0rd1"},
			`got 2: ["redis://:***@127.0.0.1:1" "password=***"]`},
		{"BadAdminURL", []string{"job", "ls", "--admin", "ftp://u:pw0rd1@127.0.0.1/"}, `--admin: want an http(s) URL such as http://127.0.0.1:8080/admin/ (the URL is not shown: it holds user info)`},
		{"BadAdminURLWithoutUserInfo", []string{"job", "ls", "--admin", "ftp://127.0.0.1/"}, `--admin "ftp://127.0.0.1/": want an http(s) URL`},
		// A URL that does not parse was quoted in the parser's error, and
		// a password holding a character the parser (and the redactor)
		// stops at was printed whole or in part (a fresh user's trial).
		{"RedisPasswordWithSlash", []string{"lease", "ls", "--redis", "redis://:pw0rd1/x@127.0.0.1:1/0"}, `--redis: not a valid URL`},
		{"RedisPasswordWithQuestionMark", []string{"lease", "ls", "--redis", "redis://:pw0rd1?x@127.0.0.1:1/0"}, `--redis: not a valid URL`},
		{"RedisPasswordWithHash", []string{"lease", "ls", "--redis", "redis://u:x#pw0rd1@127.0.0.1:1/0"}, `--redis: not a valid URL`},
		{"RedisPasswordWithSpace", []string{"lease", "ls", "--redis", "redis://default:pw0rd1 x@127.0.0.1:1/0"}, `--redis: not a valid URL`},
		{"RedisWithoutScheme", []string{"lease", "ls", "--redis", ":pw0rd1@127.0.0.1:1"}, `--redis: not a valid URL`},
		{"ClusterPasswordWithSlash", []string{"lease", "ls", "--redis-cluster", "--redis", "redis://:pw0rd1/x@127.0.0.1:1"}, `--redis (a Cluster): not a valid URL`},
		{"AdminPasswordWithSlash", []string{"job", "ls", "--admin", "http://u:pw0rd1/x@127.0.0.1:1/admin/"}, `--admin: not a valid URL`},
		// A password whose part before '#' reads as a port parses without
		// error, as host "u" with the password in the fragment: the request
		// error printed it, and a Redis URL went to another server (a
		// review of the fix above).
		{"AdminPasswordWithHashAfterDigits", []string{"job", "ls", "--admin", "http://u:8080#pw0rd1@127.0.0.1:1/admin/"}, `--admin: not a valid URL`},
		{"RedisPasswordWithHashAfterDigits", []string{"lease", "ls", "--redis", "redis://:6379#pw0rd1@127.0.0.1:1"}, `--redis: not a valid URL`},
		{"RedisPasswordWithSlashAfterDigits", []string{"lease", "ls", "--redis", "redis://u:6379/pw0rd1@127.0.0.1:1"}, `--redis: not a valid URL`},
		{"RedisBadDatabaseSaysWhy", []string{"lease", "ls", "--redis", "redis://127.0.0.1:1/abc"}, `invalid database number`},
		{"UnknownCommand", []string{"redis://u:pw0rd1@127.0.0.1"}, `unknown command "redis://u:***@127.0.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, tc.args...)
			require.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.NotContains(t, r.stderr, "pw0rd1")
			require.NotContains(t, r.stderr, "tok3n1")
		})
	}
}

// tokenEcho is an admin handler that records the Authorization header
// and answers GET /jobs with no jobs.
type tokenEcho struct {
	mu   sync.Mutex
	seen []string
}

func (e *tokenEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.seen = append(e.seen, r.Header.Get("Authorization"))
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jobs":[]}`))
}

func (e *tokenEcho) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

func (e *tokenEcho) last() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		return ""
	}
	return e.seen[len(e.seen)-1]
}

// --token-file reads the token from a file or stdin, so that it stays
// out of ps and the shell history; the environment's HOLDFAST_TOKEN_FILE
// too. Ambiguous or empty sources are usage errors.
func TestTokenFile(t *testing.T) {
	t.Parallel()
	echo := &tokenEcho{}
	srv := httptest.NewServer(echo)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))

	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		stdin string
		code  int
		want  string // the Authorization sent (exit 0) or in stderr
	}{
		{"File", []string{"--token-file", file}, nil, "", exitOK, "Bearer from-file"},
		{"Stdin", []string{"--token-file", "-"}, nil, "from-stdin\r\n", exitOK, "Bearer from-stdin"},
		{"EnvFile", nil, map[string]string{"HOLDFAST_TOKEN_FILE": file}, "", exitOK, "Bearer from-file"},
		{"FlagFileWinsOverEnvToken", []string{"--token-file", file}, map[string]string{"HOLDFAST_TOKEN": "from-env"}, "", exitOK, "Bearer from-file"},
		{"FlagTokenWinsOverEnvFile", []string{"--token", "from-flag"}, map[string]string{"HOLDFAST_TOKEN_FILE": file}, "", exitOK, "Bearer from-flag"},
		{"BothFlags", []string{"--token", "x", "--token-file", file}, nil, "", exitUsage, "not both"},
		{"BothEnv", nil, map[string]string{"HOLDFAST_TOKEN": "x", "HOLDFAST_TOKEN_FILE": file}, "", exitUsage, "both set"},
		{"EmptyFile", []string{"--token-file", empty}, nil, "", exitUsage, "empty"},
		{"EmptyStdin", []string{"--token-file", "-"}, nil, "", exitUsage, "empty"},
		{"NoSuchFile", []string{"--token-file", filepath.Join(dir, "nope")}, nil, "", exitUsage, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			a := &app{stdin: strings.NewReader(tc.stdin), stdout: &out, stderr: &errOut,
				getenv: func(k string) string { return tc.env[k] }}
			before := echo.count()
			code := a.main(t.Context(), append([]string{"job", "ls", "--admin", srv.URL + "/"}, tc.args...))
			require.Equal(t, tc.code, code, "stderr: %s", errOut.String())
			if tc.code != exitOK {
				require.Contains(t, errOut.String(), tc.want)
				require.Equal(t, before, echo.count(), "nothing sent")
				return
			}
			require.Equal(t, tc.want, echo.last())
			require.Empty(t, errOut.String(), "loopback: no warning")
		})
	}
}

// A bearer token over plain http to a host that is not loopback is sent
// in the clear: the command warns on stderr.
func TestPlainHTTPTokenWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		admin, token string
		warn         bool
	}{
		{"http://ops.example.com:8080/admin/", "t", true},
		{"http://10.0.0.7/admin/", "t", true},
		{"http://[2001:db8::1]:8080/", "t", true},
		{"https://ops.example.com/admin/", "t", false},
		{"http://127.0.0.1:8080/admin/", "t", false},
		{"http://127.1.2.3/", "t", false},
		{"http://[::1]:8080/", "t", false},
		{"http://localhost:8080/", "t", false},
		{"http://admin.localhost/", "t", false},
		{"http://ops.example.com/", "", false}, // no token to leak
	} {
		var errOut bytes.Buffer
		a := &app{stderr: &errOut, conn: connFlags{admin: tc.admin, token: tc.token}}
		_, err := a.adminClient()
		require.NoError(t, err)
		if !tc.warn {
			require.Empty(t, errOut.String(), tc.admin)
			continue
		}
		u, _ := url.Parse(tc.admin)
		require.Contains(t, errOut.String(), "holdfast: warning: the bearer token goes unencrypted over plain http to "+u.Host, tc.admin)
	}
}

// Issue 32, 3, end to end: a job failing with a database URL's password
// in its error; `holdfast job runs -o json` and the table, the service's log
// and the admin API show it masked.
func TestRunsShowFailedJobErrorsMasked(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	var logs lockedBuffer
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{
		Name: "payments", Spec: yearly, MaxAttempts: 1,
		Run: func(context.Context, scheduler.Run) error {
			return errors.New("dial postgres://user:s3cret@db.internal/payments: refused")
		},
	}))
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(*http.Request, schedhttp.Action, string) error { return nil }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	admin := []string{"--admin", srv.URL + "/"}
	ok(t, append([]string{"job", "trigger", "payments"}, admin...)...)
	testwait.Until(t, 10*time.Second, "the triggered run failed", func() bool {
		recs, err := s.Runs(context.Background(), "payments", "", time.Time{}, time.Now().Add(time.Hour), 1)
		return err == nil && len(recs) == 1 && recs[0].Status == "failed"
	})
	const want = "dial postgres://user:***@db.internal/payments: refused"
	var page schedhttp.RunsPage
	okJSON(t, &page, append([]string{"job", "runs", "payments", "-o", "json"}, admin...)...)
	require.Len(t, page.Runs, 1)
	require.Equal(t, want, page.Runs[0].Attempts[0].Error)
	slot := page.Runs[0].Slot.UTC().Format(time.RFC3339)
	table := ok(t, append([]string{"job", "runs", "payments", "--slot", slot}, admin...)...)
	require.Contains(t, table, want)
	resp, err := http.Get(srv.URL + "/jobs/payments/runs")
	require.NoError(t, err)
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	for where, text := range map[string]string{"API": body.String(), "log": logs.String()} {
		require.NotContains(t, text, "s3cret", where)
		require.Contains(t, text, "user:***@db.internal", where)
	}
}
