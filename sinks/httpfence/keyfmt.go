package httpfence

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// A signing secret is a write capability, like an owner: fmt and slog show
// the key ids of Key, Signer and Verifier and never a secret byte, whatever
// the verb (%v, %+v, %#v, %s, %q, %x, %d, ...); encoding/json shows a
// Key's id and no secret.

// redacted stands for a secret in fmt and slog output.
const redacted = "[redacted]"

// Format implements fmt.Formatter: every verb prints
// {ID:"<id>" Secret:[redacted]} (%#v: httpfence.Key{ID:"<id>",
// Secret:[redacted]}), never the secret.
func (k Key) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = fmt.Fprintf(f, "httpfence.Key{ID:%s, Secret:%s}", strconv.Quote(k.ID), redacted)
		return
	}
	_, _ = fmt.Fprintf(f, "{ID:%s Secret:%s}", strconv.Quote(k.ID), redacted)
}

// LogValue implements slog.LogValuer: a group of id and secret
// ("[redacted]").
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", k.ID), slog.String("secret", redacted))
}

// MarshalJSON encodes k as {"ID":…,"Secret":"[redacted]"} (encoding/json):
// a configuration dumped as JSON does not carry the secret. Decoding a Key
// from JSON is not affected. A struct that embeds a Key marshals as the Key
// alone (encoding/json calls the promoted method): name the field instead.
func (k Key) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct{ ID, Secret string }{k.ID, redacted})
}

// Format implements fmt.Formatter: every verb prints
// {ID:"<id>" Secret:[redacted]} (%#v: &httpfence.Signer{...}; a nil
// *Signer: <nil>), never the secret. A value receiver, so that a Signer
// value formats as a *Signer does.
func (sg Signer) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = fmt.Fprintf(f, "&httpfence.Signer{ID:%s, Secret:%s}", strconv.Quote(sg.id), redacted)
	default:
		_, _ = fmt.Fprintf(f, "{ID:%s Secret:%s}", strconv.Quote(sg.id), redacted)
	}
}

// LogValue implements slog.LogValuer: a group of id and secret
// ("[redacted]").
func (sg Signer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", sg.id), slog.String("secret", redacted))
}

// ids returns v's key ids, sorted.
func (v Verifier) ids() []string {
	ids := make([]string, 0, len(v.keys))
	for id := range v.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Format implements fmt.Formatter: every verb prints
// {IDs:["<id>" ...] Secrets:[redacted]}, the ids sorted (%#v:
// &httpfence.Verifier{...}; a nil *Verifier: <nil>), never a secret.
// A value receiver, as Signer's.
func (v Verifier) Format(f fmt.State, verb rune) {
	ids := v.ids()
	for i, id := range ids {
		ids[i] = strconv.Quote(id)
	}
	list := "[" + strings.Join(ids, " ") + "]"
	if verb == 'v' && f.Flag('#') {
		_, _ = fmt.Fprintf(f, "&httpfence.Verifier{IDs:%s, Secrets:%s}", list, redacted)
		return
	}
	_, _ = fmt.Fprintf(f, "{IDs:%s Secrets:%s}", list, redacted)
}

// LogValue implements slog.LogValuer: a group of ids (sorted) and secrets
// ("[redacted]").
func (v Verifier) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("ids", v.ids()), slog.String("secrets", redacted))
}
