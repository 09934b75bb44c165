package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// result is what one run of the command printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command with args, as main does, and returns its result.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs the command, requires exit 0 and returns its stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	require.Equal(t, exitOK, r.code, "holdfast %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

// okJSON runs the command with -o json and decodes its stdout into v.
func okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := ok(t, append(args, "-o", "json")...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "stdout: %s", out)
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines (watch's output).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs the command in a goroutine until the returned stop is called
// (it cancels the context and waits), for watch.
func start(t *testing.T, stdout *lockedBuffer, args ...string) (stop func() result) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var errOut lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, &errOut) }()
	return func() result {
		cancel()
		code := <-done
		return result{code: code, stdout: stdout.String(), stderr: errOut.String()}
	}
}

func TestPrintableEscapesControlAndFormatCharacters(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text, ünïcödé, 東京":    "plain text, ünïcödé, 東京",
		"a\tb\nc\rd\x00e\x7ff\u0085": `a\tb\nc\rd\x00e\x7ff\u0085`,
		"\x1b[31mred\x1b[0m":         `\x1b[31mred\x1b[0m`,
		"abc\u202edcba\u200b\ufeff":  `abc\u202edcba\u200b\ufeff`,
		"\xff broken \x9b[2J":        `\xff broken \x9b[2J`,
		"":                           "",
	} {
		require.Equal(t, want, printable(in), "%q", in)
	}
}
