package httpfence_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string // "" means invalid
	}{
		{`"abc"`, "abc"},
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{`  "abc"  `, "abc"},
		{`"a\"b"`, `a"b`},
		{`"a\\b"`, `a\b`},
		{`"settle:2026-03-08T02:00:00Z:eu"`, "settle:2026-03-08T02:00:00Z:eu"},
		{`" lead and trail "`, " lead and trail "},
		{`"` + strings.Repeat("k", httpfence.MaxKeyLen) + `"`, strings.Repeat("k", httpfence.MaxKeyLen)},
		{`abc`, ""},             // a token, not a string
		{`""`, ""},              // empty
		{`"abc`, ""},            // unterminated
		{`"abc"x`, ""},          // trailing bytes
		{`"abc";p=1`, ""},       // parameters
		{`"abc", "def"`, ""},    // a list
		{`"a\nb"`, ""},          // only " and \ may be escaped
		{`"a\`, ""},             // escape at the end
		{"\"a\tb\"", ""},        // control byte
		{"\"caf\xc3\xa9\"", ""}, // non-ASCII
		{"\t\"abc\"", ""},       // only SP is trimmed
		{`"` + strings.Repeat("k", httpfence.MaxKeyLen+1) + `"`, ""},
		{``, ""},
	} {
		got, err := httpfence.ParseKey(tc.in)
		if tc.want == "" {
			require.ErrorIs(t, err, httpfence.ErrInvalidKey, "ParseKey(%q)", tc.in)
			continue
		}
		require.NoError(t, err, "ParseKey(%q)", tc.in)
		require.Equal(t, tc.want, got)
	}
}

func TestFormatKey(t *testing.T) {
	t.Parallel()
	v, err := httpfence.FormatKey(`a"b\c`)
	require.NoError(t, err)
	require.Equal(t, `"a\"b\\c"`, v)
	for _, bad := range []string{"", "caf\u00e9", "a\nb", strings.Repeat("k", httpfence.MaxKeyLen+1)} {
		_, err := httpfence.FormatKey(bad)
		require.ErrorIs(t, err, httpfence.ErrInvalidKey, "FormatKey(%q)", bad)
	}
}

func TestParseFencing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		header  http.Header
		token   fence.Token
		owner   string
		scope   string
		present bool
		err     error
	}{
		{"none", http.Header{}, 0, "", "", false, nil},
		{"token and owner", http.Header{"Fencing-Token": {"42"}, "Fencing-Owner": {`"replica-a"`}}, 42, "replica-a", "", true, nil},
		{"zero parses", http.Header{"Fencing-Token": {"0"}, "Fencing-Owner": {`"a"`}}, 0, "a", "", true, nil},
		{"spaces", http.Header{"Fencing-Token": {" 7 "}, "Fencing-Owner": {` "a" `}}, 7, "a", "", true, nil},
		{"leading zero", http.Header{"Fencing-Token": {"042"}, "Fencing-Owner": {`"a"`}}, 0, "", "", false, fence.ErrInvalidToken},
		{"negative", http.Header{"Fencing-Token": {"-1"}, "Fencing-Owner": {`"a"`}}, 0, "", "", false, fence.ErrInvalidToken},
		{"overflow", http.Header{"Fencing-Token": {"18446744073709551616"}, "Fencing-Owner": {`"a"`}}, 0, "", "", false, fence.ErrInvalidToken},
		{"two tokens", http.Header{"Fencing-Token": {"1", "2"}, "Fencing-Owner": {`"a"`}}, 0, "", "", false, fence.ErrInvalidToken},
		{"token without owner", http.Header{"Fencing-Token": {"1"}}, 0, "", "", false, httpfence.ErrInvalidOwner},
		{"owner without token", http.Header{"Fencing-Owner": {`"a"`}}, 0, "", "", false, httpfence.ErrInvalidOwner},
		{"bare owner", http.Header{"Fencing-Token": {"1"}, "Fencing-Owner": {`a`}}, 0, "", "", false, httpfence.ErrInvalidOwner},
		{"empty owner", http.Header{"Fencing-Token": {"1"}, "Fencing-Owner": {`""`}}, 0, "", "", false, httpfence.ErrInvalidOwner},
		{"two owners", http.Header{"Fencing-Token": {"1"}, "Fencing-Owner": {`"a"`, `"b"`}}, 0, "", "", false, httpfence.ErrInvalidOwner},
		{"scope", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`"settle|tenant-a"`}}, 5, "a", "settle|tenant-a", true, nil},
		{"empty scope", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {` "" `}}, 5, "a", "", true, nil},
		{"escaped scope", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`"a\"b"`}}, 5, "a", `a"b`, true, nil},
		{"bare scope", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`job`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"two scopes", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`"x"`, `"y"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"scope without token", http.Header{"Fencing-Scope": {`"x"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string scope", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {` %"job|z%c3%bcrich %25\\" `}}, 5, "a", `job|zürich %\\`, true, nil},
		{"display string upper-case hex", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"z%C3%BC"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string not UTF-8", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"%ff"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		// No lease name holds a control or format character: such a
		// scope can only be forged (a fresh user's trial sent "a\nb").
		{"display string with a newline", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"a%0ab"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string with U+202E", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"a%e2%80%aeb"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string cut escape", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"a%c"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string raw byte", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {"%\"\xc3\xbc\""}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string parameters", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"a";p=1`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"display string unclosed", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"abc`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"long display string", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`%"` + strings.Repeat("%c3%bc", httpfence.MaxScopeLen/2) + `x"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
		{"long scope", http.Header{"Fencing-Token": {"5"}, "Fencing-Owner": {`"a"`}, "Fencing-Scope": {`"` + strings.Repeat("s", httpfence.MaxScopeLen+1) + `"`}}, 0, "", "", false, httpfence.ErrInvalidScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, present, err := httpfence.ParseFencing(tc.header)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.False(t, present)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.present, present)
			require.Equal(t, fence.Holder{Scope: tc.scope, Token: tc.token, Owner: tc.owner}, h)
		})
	}
}

// FuzzParseKey: whatever parses is 1 to MaxKeyLen printable ASCII bytes and
// formats back to text that parses to the same key; whatever FormatKey
// accepts, ParseKey reads back.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b\\c"`, `abc`, `""`, `"abc";p`, `"a\q"`, " \"x\" ", "\"\x7f\"", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := httpfence.ParseKey(s)
		if err == nil {
			if key == "" || len(key) > httpfence.MaxKeyLen {
				t.Fatalf("ParseKey(%q) = %q: bad length", s, key)
			}
			for i := 0; i < len(key); i++ {
				if key[i] < 0x20 || key[i] > 0x7e {
					t.Fatalf("ParseKey(%q) = %q: byte 0x%02x", s, key, key[i])
				}
			}
			v, err := httpfence.FormatKey(key)
			if err != nil {
				t.Fatalf("FormatKey(%q) after ParseKey(%q): %v", key, s, err)
			}
			if back, err := httpfence.ParseKey(v); err != nil || back != key {
				t.Fatalf("round trip %q -> %q -> %q, %v", s, v, back, err)
			}
		} else if !errors.Is(err, httpfence.ErrInvalidKey) {
			t.Fatalf("ParseKey(%q): untyped error %v", s, err)
		}
		// The other direction: any string FormatKey takes round-trips.
		if v, err := httpfence.FormatKey(s); err == nil {
			if back, err := httpfence.ParseKey(v); err != nil || back != s {
				t.Fatalf("FormatKey(%q) = %q parses to %q, %v", s, v, back, err)
			}
		}
	})
}

// FuzzParseFencing: a parsed token is canonical decimal (it formats back to
// the trimmed header text), a parsed owner is a valid key-like string, a
// parsed scope formats back to a value that parses to it; errors are typed.
func FuzzParseFencing(f *testing.F) {
	for _, s := range [][3]string{
		{"1", `"a"`, ""}, {"0", `"a"`, `"job|p"`}, {"18446744073709551615", `"o\"w"`, `""`}, {"01", `"a"`, ""},
		{"1", "a", ""}, {"", "", `"x"`}, {"-1", `""`, ""}, {"1", `"a"`, `"a\\b"`}, {"1", `"a"`, "bare"},
		{"1", `"a"`, `%"z%c3%bc%25"`}, {"1", `"a"`, `%"%C3"`}, {"1", `"a"`, `%"%ff"`}, {"1", `"a"`, `%"a`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, token, owner, scope string) {
		h := http.Header{}
		if token != "" {
			h.Set("Fencing-Token", token)
		}
		if owner != "" {
			h.Set("Fencing-Owner", owner)
		}
		if scope != "" {
			h.Set("Fencing-Scope", scope)
		}
		holder, present, err := httpfence.ParseFencing(h)
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidToken) && !errors.Is(err, httpfence.ErrInvalidOwner) && !errors.Is(err, httpfence.ErrInvalidScope) {
				t.Fatalf("ParseFencing(%q, %q, %q): untyped error %v", token, owner, scope, err)
			}
			return
		}
		if !present {
			if token != "" || owner != "" || scope != "" {
				t.Fatalf("ParseFencing(%q, %q, %q): not present", token, owner, scope)
			}
			return
		}
		if holder.Token.String() != strings.Trim(token, " ") {
			t.Fatalf("token %q parsed to %d", token, holder.Token)
		}
		if back, err := httpfence.ParseKey(owner); err != nil || back != holder.Owner {
			t.Fatalf("owner %q parsed to %q, but as a key to %q, %v", owner, holder.Owner, back, err)
		}
		v, err := httpfence.FormatScope(holder.Scope)
		if err != nil {
			t.Fatalf("scope %q parsed to %q, which FormatScope refuses: %v", scope, holder.Scope, err)
		}
		again, _, err := httpfence.ParseFencing(http.Header{"Fencing-Token": {token}, "Fencing-Owner": {owner}, "Fencing-Scope": {v}})
		if err != nil || again != holder {
			t.Fatalf("scope %q -> %q -> %q -> %+v, %v", scope, holder.Scope, v, again, err)
		}
	})
}

// FuzzFormatScope: FormatScope takes every scope of at most MaxScopeLen
// bytes of valid UTF-8 that a lease name could be (safe.Printable) and
// refuses every other with ErrInvalidScope; what it returns parses back to
// the same scope.
func FuzzFormatScope(f *testing.F) {
	for _, s := range []string{"", "settle|tenant-a", `a"b\c`, "settle|zürich", "100%", "\x00\x7f", "\xff", strings.Repeat("ü", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, scope string) {
		v, err := httpfence.FormatScope(scope)
		if len(scope) > httpfence.MaxScopeLen || !utf8.ValidString(scope) || !safe.Printable(scope) {
			if !errors.Is(err, httpfence.ErrInvalidScope) {
				t.Fatalf("FormatScope(%q) = %q, %v: want ErrInvalidScope", scope, v, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("FormatScope(%q): %v", scope, err)
		}
		h, _, err := httpfence.ParseFencing(http.Header{"Fencing-Token": {"1"}, "Fencing-Owner": {`"o"`}, "Fencing-Scope": {v}})
		if err != nil || h.Scope != scope {
			t.Fatalf("FormatScope(%q) = %q parses to %q, %v", scope, v, h.Scope, err)
		}
	})
}
