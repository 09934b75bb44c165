package httpfence_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

// A signing secret never reaches fmt or slog output: Key, *Signer and
// *Verifier print their key ids and "[redacted]" for every verb.
func TestSigningSecretsDoNotPrint(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdefghijklmnopqrstuvwxyzSECRET")
	key := httpfence.Key{ID: "k1", Secret: secret}
	key2 := httpfence.Key{ID: "k0", Secret: bytes.Repeat([]byte{0xAB}, 32)}
	signer := signerOf(t, key)
	verifier := testVerifier(t, key, key2)
	// The forms a secret could take in output: raw, the byte list of %v,
	// hex, and decimal bytes.
	leaks := func(t *testing.T, out string, secrets ...[]byte) {
		t.Helper()
		for _, s := range secrets {
			require.NotContains(t, out, string(s))
			require.NotContains(t, out, hex.EncodeToString(s))
			require.NotContains(t, out, strings.ToUpper(hex.EncodeToString(s)))
			require.NotContains(t, out, fmt.Sprint([]byte(s))[1:20])
			require.NotContains(t, out, fmt.Sprintf("%#v", []byte(s))[7:20])
		}
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10v"} {
		t.Run(verb, func(t *testing.T) {
			for name, v := range map[string]any{"Key": key, "*Key": &key, "Signer": signer, "Verifier": verifier,
				"Signer value": *signer, "Verifier value": *verifier,
				"[]Key": []httpfence.Key{key}, "struct": struct{ K httpfence.Key }{key}} {
				out := fmt.Sprintf(verb, v)
				leaks(t, out, secret, key2.Secret)
				require.Contains(t, out, "k1", "%s: the key id is shown: %s", name, out)
				require.Contains(t, out, "[redacted]", "%s: %s", name, out)
			}
			// In an unexported field fmt cannot call Format and prints by
			// reflection: a Signer's or Verifier's secret is out of its
			// reach there too (a Key's exported Secret is not: see Key).
			hidden := struct {
				s  httpfence.Signer
				v  httpfence.Verifier
				pv *httpfence.Verifier
			}{*signer, *verifier, verifier}
			leaks(t, fmt.Sprintf(verb, hidden), secret, key2.Secret)
			leaks(t, fmt.Sprintf(verb, &hidden), secret, key2.Secret)
		})
	}
	require.Equal(t, `{ID:"k1" Secret:[redacted]}`, fmt.Sprintf("%+v", key))
	require.Equal(t, `httpfence.Key{ID:"k1", Secret:[redacted]}`, fmt.Sprintf("%#v", key))
	require.Equal(t, `{ID:"k1" Secret:[redacted]}`, fmt.Sprintf("%s", signer))
	require.Equal(t, `{IDs:["k0" "k1"] Secrets:[redacted]}`, fmt.Sprintf("%+v", verifier))
	require.Equal(t, `<nil>`, fmt.Sprintf("%v", (*httpfence.Signer)(nil)))

	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(newHandler(&buf)).Info("keys", "key", key, "keyptr", &key, "signer", signer, "verifier", verifier)
			out := buf.String()
			leaks(t, out, secret, key2.Secret)
			if name == "json" {
				require.Contains(t, out, `"key":{"id":"k1","secret":"[redacted]"}`)
				require.Contains(t, out, `"signer":{"id":"k1","secret":"[redacted]"}`)
				require.Contains(t, out, `"verifier":{"ids":["k0","k1"],"secrets":"[redacted]"}`)
			} else {
				require.Contains(t, out, `key.id=k1 key.secret=[redacted]`)
				require.Contains(t, out, `signer.id=k1 signer.secret=[redacted]`)
				require.Contains(t, out, `verifier.ids="[k0 k1]" verifier.secrets=[redacted]`)
			}
		})
	}

	// encoding/json: a Key alone, behind a pointer, in a configuration
	// struct or a list shows its id and no secret (it printed the secret
	// in base64: a fresh user's trial); a Signer or Verifier shows
	// nothing of its keys. A Key decodes from JSON as before.
	b, err := json.Marshal(map[string]any{"key": key, "keyptr": &key, "config": struct{ Keys []httpfence.Key }{[]httpfence.Key{key, key2}},
		"signer": signer, "verifier": verifier})
	require.NoError(t, err)
	leaks(t, string(b), secret, key2.Secret)
	for _, s := range [][]byte{secret, key2.Secret} {
		require.NotContains(t, string(b), base64.StdEncoding.EncodeToString(s))
	}
	require.Contains(t, string(b), `"key":{"ID":"k1","Secret":"[redacted]"}`)
	require.Contains(t, string(b), `"config":{"Keys":[{"ID":"k1","Secret":"[redacted]"},{"ID":"k0","Secret":"[redacted]"}]}`)
	var decoded httpfence.Key
	require.NoError(t, json.Unmarshal([]byte(`{"ID":"k1","Secret":"`+base64.StdEncoding.EncodeToString(secret)+`"}`), &decoded))
	require.Equal(t, key, decoded)
}
