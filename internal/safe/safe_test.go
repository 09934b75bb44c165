package safe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/safe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type impl struct{}

func (*impl) Do() {}

type doer interface{ Do() }

func TestIsNil(t *testing.T) {
	t.Parallel()
	var typed *impl
	var iface doer = typed
	var m map[string]int
	for _, tc := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"typed nil pointer in an interface", iface, true},
		{"nil map", m, true},
		{"nil func", (func())(nil), true},
		{"pointer", &impl{}, false},
		{"struct", impl{}, false},
		{"int", 0, false},
	} {
		require.Equal(t, tc.want, safe.IsNil(tc.v), tc.name)
	}
}

func TestJoinCtx(t *testing.T) {
	t.Parallel()
	failed := errors.New("redis: i/o timeout")
	require.Equal(t, failed, safe.JoinCtx(context.Background(), failed), "a live context adds nothing")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := safe.JoinCtx(ctx, failed)
	require.ErrorIs(t, err, failed)
	require.ErrorIs(t, err, context.Canceled)
	already := safe.JoinCtx(ctx, context.Canceled)
	require.Equal(t, context.Canceled, already, "an error matching the context's is kept as it is")
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "daily-settlement", "job:2026-03-08T02:00:00Z:eu", " ", "a|b", "ü€𝄞", "eu-ü"} {
		require.True(t, safe.Printable(s), "%q", s)
	}
	for _, s := range []string{"\x00", "a\nb", "tab\t", "del\x7f", "c1\u0085", "bad\xffutf8", "ü\x00", "é\u009f",
		"eu\u200b", "\u202eue", "\ufeffeu", "a\u2066b\u2069", "soft\u00adhyphen",
		// default-ignorable, outside Cf: the trial's blank job names and a\u034Fb.
		"\u3164", "\u115f", "\u1160", "\uffa0", "a\u034fb", "a\u180bb", "a\u180cb", "a\u180db", "a\u180fb",
		"a\ufe00b", "a\ufe0fb", "a\U000e0100b", "a\u17b4b", "a\u2065b", "a\ufff0b", "a\U000e0001b", "a\U000e0fffb"} {
		require.False(t, safe.Printable(s), "%q", s)
	}
}

func TestBlank(t *testing.T) {
	t.Parallel()
	for _, s := range []string{" ", "   ", "\t", "\u00a0", "\u3000", " \u2003 ", "\u2800", "\u2800\u2800", " \u2800 "} {
		require.True(t, safe.Blank(s), "%q", s)
	}
	for _, s := range []string{"", "a", " a ", "\u200b", "\u2801", "a\u2800"} {
		require.False(t, safe.Blank(s), "%q", s)
	}
}
